"""The output wing's door: where a command may write, and the one atomic, durable write.

- `links_on_the_way(root, path)`, `refuse_links(root, paths)`: the symbolic links between the place
  the user named and a file about to be written; a link out of the place is an `InputError` (exit 2,
  nothing written), a link inside it a `LinkInside` whose `note()` the command prints;
- `is_inside(path, root)`: whether a resolved path stays in a place;
- `atomic_write(path, data, ...)`: temporary, fsync, rename, folder fsync (`TEMPORARY_SUFFIX` names
  the temporaries, `fsync_dir` the folder sync); `stage` + `os.replace` (+ `discard` on failure)
  for several files published together; `atomic_text(path)` for one written piece by piece;
- `write_output(path, text)`: an output file the user named, replacing a link instead of writing
  through it; `open_new_log(path)`: a log opened without following a link;
- `shown(text)`, `shown_lines(lines)`: untrusted text escaped for a terminal (text formats only);
- `log_progress(label, total, unit, quiet)`, `Progress`, `progress_wanted(quiet)`: `done/total` lines on a
  stderr that is no terminal (a batch log), every `RLPATCH_PROGRESS_INTERVAL` seconds (`progress`);
- `versioned(document)`, `JSON_VERSION`: the format `version` every JSON document of rlpatch carries (`formats`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlpatch.output.printable import shown, shown_lines

if TYPE_CHECKING:  # the type checker sees every name; at run time the writers load on first use
    from rlpatch.output.durable import (
               TEMPORARY_SUFFIX,
               atomic_text,
               atomic_write,
               discard,
               fsync_dir,
               open_new_log,
               stage,
               write_output,
    )
    from rlpatch.output.formats import JSON_VERSION, versioned
    from rlpatch.output.places import LinkInside, is_inside, links_on_the_way, refuse_links
    from rlpatch.output.progress import Progress, log_progress, progress_wanted

# Where each name that loads on first use lives. `rlpatch lint` shows text (`shown`) and writes
# only for `-o`: the durable writes bring tempfile and pathlib (shutil, random, bz2, lzma), a few
# milliseconds of a pre-commit hook's cold start.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("TEMPORARY_SUFFIX", "atomic_text", "atomic_write", "discard", "fsync_dir", "open_new_log", "stage",
                     "write_output"), "durable"),
    **dict.fromkeys(("LinkInside", "is_inside", "links_on_the_way", "refuse_links"), "places"),
    **dict.fromkeys(("Progress", "log_progress", "progress_wanted"), "progress"),
    **dict.fromkeys(("JSON_VERSION", "versioned"), "formats"),
}


def __getattr__(name: str) -> Any:
    """Load a name of `_LAZY` from its module on first use (PEP 562), then keep it here."""
    try:
        module_name = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(f"rlpatch.output.{module_name}"), name)
    globals()[name] = value
    return value


__all__ = ["JSON_VERSION", "TEMPORARY_SUFFIX", "LinkInside", "Progress", "atomic_text", "atomic_write", "discard", "fsync_dir",
           "is_inside", "links_on_the_way", "log_progress", "open_new_log", "progress_wanted", "refuse_links", "shown",
           "shown_lines", "stage", "versioned", "write_output"]
