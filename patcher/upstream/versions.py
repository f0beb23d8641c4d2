"""Upstream version numbers: parsed and compared without importing `packaging`.

Handles the shapes the supported projects release: `0.9.1`, `0.5.10.post1`, `0.20.2rc1`,
`0.4.3.post4`, `26.2.0`, `0.10.0.dev0+g1234`. Pre-releases sort before their release, post-releases
after it, as PEP 440 says.
"""

from __future__ import annotations

import re
from functools import total_ordering

# Compiled on first use (a millisecond of every cold start otherwise): the plain `X.Y.Z` of most
# versions never needs it.
_VERSION_PATTERN = (
    r"^\s*v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre_l>a|b|rc|alpha|beta|c)[-_.]?(?P<pre_n>\d*))?"
    r"(?:[-_.]?post[-_.]?(?P<post>\d*))?"
    r"(?:[-_.]?dev[-_.]?(?P<dev>\d*))?"
    r"(?:\+(?P<local>[a-z0-9.]+))?\s*$"
)
_PRE_ORDER = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2}


@total_ordering
class Version:
    """A parsed version number, immutable. A plain class rather than a dataclass: every `rlpatch lint`
    imports it, and a frozen dataclass costs about a millisecond of start-up to create."""

    __slots__ = ("text", "release", "pre", "post", "dev")
    text: str
    release: tuple[int, ...]
    pre: tuple[int, int] | None
    post: int | None
    dev: int | None

    def __init__(self, text: str, release: tuple[int, ...], pre: tuple[int, int] | None = None,
                 post: int | None = None, dev: int | None = None) -> None:
        set_field = object.__setattr__  # __setattr__ below refuses every change after this
        set_field(self, "text", text)
        set_field(self, "release", release)
        set_field(self, "pre", pre)
        set_field(self, "post", post)
        set_field(self, "dev", dev)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Version is immutable: cannot set {name}")

    def __reduce__(self) -> tuple:  # pickled back from `lint --jobs` workers; __setattr__ refuses
        return (Version, (self.text, self.release, self.pre, self.post, self.dev))

    def __repr__(self) -> str:
        return f"Version({self.text!r})"

    @classmethod
    def parse(cls, text: str) -> "Version":
        plain = text.strip()
        parts = plain.split(".")
        if all(part.isascii() and part.isdigit() for part in parts):
            return cls(plain, tuple(int(part) for part in parts))
        match = re.match(_VERSION_PATTERN, text, re.IGNORECASE)
        if not match:
            raise ValueError(f"not a version number: {text!r}")
        release = tuple(int(part) for part in match["release"].split("."))
        pre = (_PRE_ORDER[match["pre_l"].lower()], int(match["pre_n"] or 0)) if match["pre_l"] else None
        post = int(match["post"] or 0) if match["post"] is not None else None
        dev = int(match["dev"] or 0) if match["dev"] is not None else None
        return cls(text.strip(), release, pre, post, dev)

    @classmethod
    def maybe(cls, text: str | None) -> "Version | None":
        try:
            return cls.parse(text) if text else None
        except ValueError:
            return None

    def _key(self) -> tuple:
        release = self.release + (0,) * (4 - len(self.release))
        # dev-only releases sort before pre-releases of the same version (PEP 440).
        pre = self.pre if self.pre is not None else ((-1, 0) if self.dev is not None and self.post is None else (9, 0))
        post = self.post if self.post is not None else -1
        dev = self.dev if self.dev is not None else 1 << 30
        return (release, pre, post, dev)

    def __lt__(self, other: object) -> bool:
        if isinstance(other, str):
            other = Version.parse(other)
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = Version.maybe(other)
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return self.text

    @property
    def minor(self) -> tuple[int, int]:
        return (self.release + (0, 0))[:2]
