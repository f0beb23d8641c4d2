"""Upstream facts: what is installed where, and which version it is.

Owns version parsing (`versions`), the released-wheel cache used by tests and `--verl-version`
(`wheelcache`), locating installed packages without importing them (`envprobe`; `target_probe` is the
one script run inside a target interpreter, for the linter, the patch commands and doctor), the tree a
patch command acts on (`targets`: `Target`, `Package`, `imported_target`) and the run-time switches
rlpatch's patches add to a tree (`switches`: read by the inserted code and by the linter
alike). Everything here is plain data about upstream trees; it imports nothing but the standard library,
`rlpatch.errors`, the root package's lazy door (`rlpatch.lazy_getattr`) and the output wing's durable
write (for its caches), so every wing but `output` may depend on it.
"""

MAY_IMPORT: tuple[str, ...] = ("errors", "output")
