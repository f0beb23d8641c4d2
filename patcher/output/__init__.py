"""Where rlpatch may write, writes that are never seen half-done, and untrusted text shown safely.

Owns the one rule every command that writes follows: rlpatch writes only inside the place the
user named (a tree, an output folder, an output file) and never through a symbolic link that
leaves it. A link met on the way that points back inside the place is followed and reported; one
that leaves it is refused with a one-line `InputError` before anything is written (`places`).
It also owns the atomic file write (a temporary in the same folder, fsync, one rename, the folder
fsynced) that the patch transactions (their undo copies and recovery too), the linter's `-o` and
cache, gen's outputs and the dumps reports share (`durable`): the one durable-write module; and how the text formats
show strings that come from outside (request ids, module names, a hostile script's words, a target
interpreter's errors): escaped, so that they neither forge lines nor reach the terminal as escapes
(`printable`). It imports only the standard library, `rlpatch.errors` and the root package's lazy door
(`rlpatch.lazy_getattr`), so every wing may depend on it.
"""

MAY_IMPORT: tuple[str, ...] = ("errors",)
