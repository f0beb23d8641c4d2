"""`rlpatch.upstream.versions.Version`: the shapes upstream releases, PEP 440 order, immutability."""

from __future__ import annotations

import copy
import pickle
import re

import pytest

from rlpatch.upstream import versions
from rlpatch.upstream.versions import Version


@pytest.mark.parametrize("text, release, pre, post, dev", [
    ("0.9.1", (0, 9, 1), None, None, None),
    ("  26.2.0 ", (26, 2, 0), None, None, None),
    ("v0.9.1", (0, 9, 1), None, None, None),
    ("0.5.10.post1", (0, 5, 10), None, 1, None),
    ("0.20.2rc1", (0, 20, 2), (2, 1), None, None),
    ("0.10.0.dev0+g1234", (0, 10, 0), None, None, 0),
])
def test_parse_reads_every_released_shape(text, release, pre, post, dev):
    version = Version.parse(text)
    assert (version.text, version.release, version.pre, version.post, version.dev) == (text.strip(), release, pre, post, dev)


def test_the_plain_shortcut_agrees_with_the_pattern():
    for text in ("0", "0.9.1", "1.2.3.4", "26.2.0", "010.2"):
        match = re.match(versions._VERSION_PATTERN, text, re.IGNORECASE)
        assert match and Version.parse(text).release == tuple(int(p) for p in match["release"].split("."))


@pytest.mark.parametrize("text", ["", ".", "1..2", "1.2.x", "²", "v", "1.2-foo"])
def test_parse_refuses_what_is_not_a_version(text):
    with pytest.raises(ValueError, match="not a version number"):
        Version.parse(text)
    assert Version.maybe(text) is None


def test_pep440_order_and_comparison_with_text():
    ordered = ["0.9.0.dev0", "0.9.0rc1", "0.9.0", "0.9.0.post1", "0.9.1", "0.10.0"]
    assert sorted(Version.parse(text) for text in reversed(ordered)) == [Version.parse(text) for text in ordered]
    assert Version.parse("0.9.1") == "0.9.1" and Version.parse("0.9") == Version.parse("0.9.0")
    assert Version.parse("0.8.0") < "0.9.0" <= Version.parse("0.9.0") and Version.parse("0.9.1") > "0.9.1rc1"
    assert len({Version.parse("0.9"), Version.parse("0.9.0")}) == 1


def test_immutable_and_copied_whole():
    version = Version.parse("0.9.1rc1")
    with pytest.raises(AttributeError, match="immutable"):
        version.text = "1.0"  # type: ignore[misc]
    for twin in (pickle.loads(pickle.dumps(version)), copy.deepcopy(version), copy.copy(version)):
        assert (twin.text, twin.release, twin.pre) == (version.text, version.release, version.pre) and twin == version
    assert repr(version) == "Version('0.9.1rc1')" and str(version) == "0.9.1rc1"
