"""Upstream version numbers, parsed and ordered as PEP 440 (`packaging.version`) does.

A plain `X.Y.Z` (most releases: `0.9.1`, `26.2.0`) is read here without importing anything: every
`rlpatch lint` start pays for what it imports, and `packaging.version` costs a few milliseconds.
Every other shape (`0.5.10.post1`, `0.20.2rc1`, `0.10.0.dev0+g1234`, `1.0-1`, `1!2.0`, `v0.9`) is
parsed by `packaging.version.Version`, imported on first use, so the two can never disagree on what
a version is. Comparison follows packaging's key: trailing zeros do not count (`0.9 == 0.9.0`),
pre-releases sort before their release and post-releases after it, a local label sorts after the
public version it decorates (`0.9.1 < 0.9.1+local < 0.9.2`).
"""

from __future__ import annotations

from functools import total_ordering

# packaging's pre-release letters (it normalises alpha/beta/c/pre/preview to these) in PEP 440 order.
_PRE_ORDER = {"a": 0, "b": 1, "rc": 2}
_NO_PRE = 3  # a final release sorts after its pre-releases...
_DEV_ONLY = -1  # ...and a dev release without a pre-release before them
_NO_DEV = float("inf")  # a release sorts after its own dev releases


def _strip_trailing_zeros(release: tuple[int, ...]) -> tuple[int, ...]:
    end = len(release)
    while end > 1 and release[end - 1] == 0:
        end -= 1
    return release[:end]


def _local_key(local: str | None) -> tuple:
    """packaging's order of local labels: segment by segment, a word before any number."""
    if local is None:
        return ()  # sorts before every label
    segments = local.replace("-", ".").replace("_", ".").split(".")
    return tuple((1, int(part), "") if part.isdigit() else (0, 0, part.lower()) for part in segments)


@total_ordering
class Version:
    """A parsed version number, immutable. A plain class rather than a dataclass: every `rlpatch lint`
    imports it, and a frozen dataclass costs about a millisecond of start-up to create.

    `pre` is `(0|1|2, n)` for `a|b|rc n`; `local` is the label after `+`, as written."""

    __slots__ = ("text", "release", "pre", "post", "dev", "epoch", "local")
    text: str
    release: tuple[int, ...]
    pre: tuple[int, int] | None
    post: int | None
    dev: int | None
    epoch: int
    local: str | None

    def __init__(self, text: str, release: tuple[int, ...], pre: tuple[int, int] | None = None,
                 post: int | None = None, dev: int | None = None, epoch: int = 0, local: str | None = None) -> None:
        set_field = object.__setattr__  # __setattr__ below refuses every change after this
        set_field(self, "text", text)
        set_field(self, "release", release)
        set_field(self, "pre", pre)
        set_field(self, "post", post)
        set_field(self, "dev", dev)
        set_field(self, "epoch", epoch)
        set_field(self, "local", local)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Version is immutable: cannot set {name}")

    def __reduce__(self) -> tuple:  # pickled back from `lint --jobs` workers; __setattr__ refuses
        return (Version, (self.text, self.release, self.pre, self.post, self.dev, self.epoch, self.local))

    def __repr__(self) -> str:
        return f"Version({self.text!r})"

    @classmethod
    def parse(cls, text: str) -> "Version":
        plain = text.strip()
        parts = plain.split(".")
        if all(part.isascii() and part.isdigit() for part in parts):
            return cls(plain, tuple(int(part) for part in parts))
        return cls._parse_with_packaging(plain)

    @classmethod
    def _parse_with_packaging(cls, text: str) -> "Version":
        from packaging.version import InvalidVersion
        from packaging.version import Version as Pep440Version

        try:
            parsed = Pep440Version(text)
        except InvalidVersion:
            raise ValueError(f"not a version number: {text!r}") from None
        pre = (_PRE_ORDER[parsed.pre[0]], parsed.pre[1]) if parsed.pre is not None else None
        return cls(text, tuple(parsed.release), pre, parsed.post, parsed.dev, parsed.epoch, parsed.local)

    @classmethod
    def maybe(cls, text: str | None) -> "Version | None":
        try:
            return cls.parse(text) if text else None
        except ValueError:
            return None

    def _key(self) -> tuple:
        # packaging.version's comparison key, spelled with plain ints so that both parsers' results
        # compare and hash alike.
        if self.pre is not None:
            pre: tuple[int, int] = self.pre
        elif self.dev is not None and self.post is None:
            pre = (_DEV_ONLY, 0)
        else:
            pre = (_NO_PRE, 0)
        post = self.post if self.post is not None else -1
        dev = self.dev if self.dev is not None else _NO_DEV
        return (self.epoch, _strip_trailing_zeros(self.release), pre, post, dev, _local_key(self.local))

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
        release = self.release + (0, 0)
        return release[0], release[1]

    @property
    def public(self) -> "Version":
        """The version without its local label (`0.9.1+cpu` -> `0.9.1`): what a release gate compares."""
        if self.local is None:
            return self
        return Version(self.text.partition("+")[0], self.release, self.pre, self.post, self.dev, self.epoch)
