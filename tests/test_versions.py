"""`rlpatch.upstream.versions.Version`: the shapes upstream releases, PEP 440 order, immutability."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys

import packaging.version
import pytest

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


def test_the_plain_shortcut_agrees_with_packaging():
    for text in ("0", "0.9.1", "1.2.3.4", "26.2.0", "010.2"):
        assert Version.parse(text).release == packaging.version.Version(text).release


# The edges the hand-written parser got wrong (issue 22): what packaging.version says is the answer.
@pytest.mark.parametrize("text, release, post, epoch, local", [
    ("1.0-1", (1, 0), 1, 0, None),  # an implicit post-release
    ("1!2.0", (2, 0), None, 1, None),  # an epoch
    ("0.9.1+local", (0, 9, 1), None, 0, "local"),
    ("0.9.1+Ubuntu-1.2", (0, 9, 1), None, 0, "ubuntu.1.2"),
    ("2.13.0+cpu", (2, 13, 0), None, 0, "cpu"),
])
def test_edges_follow_packaging(text, release, post, epoch, local):
    version = Version.parse(text)
    assert (version.release, version.post, version.epoch, version.local) == (release, post, epoch, local)


def test_local_labels_and_epochs_order_as_packaging_does():
    assert Version.parse("0.9.1+local") != Version.parse("0.9.1") and Version.parse("0.9.1+local") != "0.9.1"
    assert Version.parse("0.9.1") < "0.9.1+local" < "0.9.2" and Version.parse("0.9.1+local").public == "0.9.1"
    assert Version.parse("1!0.1") > "9.9" and Version.parse("1.0-1") == "1.0.post1"
    assert Version.parse("0.9.1+a") < "0.9.1+1" < "0.9.1+1.a" and Version.parse("0.9.1+CPU") == "0.9.1+cpu"


ORDER_SAMPLE = ["1.0.dev0", "1.0a1.dev2", "1.0a1", "1.0b1.post1", "1.0rc1", "1.0", "1.0+abc", "1.0+abc.5",
                "1.0+5", "1.0.post1.dev1", "1.0.post1", "1.0.1", "1.1", "1!0.1", "v2", "2.0.0.0"]


def test_order_equality_and_hash_agree_with_packaging_pairwise():
    for left in ORDER_SAMPLE:
        for right in ORDER_SAMPLE:
            ours, theirs = (Version.parse(left), Version.parse(right)), (packaging.version.Version(left),
                                                                          packaging.version.Version(right))
            assert (ours[0] < ours[1], ours[0] == ours[1]) == (theirs[0] < theirs[1], theirs[0] == theirs[1]), (left, right)
            if ours[0] == ours[1]:
                assert hash(ours[0]) == hash(ours[1])


def test_plain_versions_do_not_import_packaging():
    # `rlpatch lint`'s cold start: a plain X.Y.Z never pays for importing packaging.
    code = ("import sys; from rlpatch.upstream.versions import Version; "
            "Version.parse('0.9.1') < Version.parse('0.10'); print('packaging' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


@pytest.mark.parametrize("text", ["", ".", "1..2", "1.2.x", "²", "v", "1.2-foo", "1.0+", "1.0+a..b", "01!"])
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
