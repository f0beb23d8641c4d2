"""The output wing's door: where a command may write, and the one atomic, durable write.

- `links_on_the_way(root, path)`, `refuse_links(root, paths)`: the symbolic links between the place
  the user named and a file about to be written; a link out of the place is an `InputError` (exit 2,
  nothing written), a link inside it a `LinkInside` whose `note()` the command prints;
- `is_inside(path, root)`: whether a resolved path stays in a place;
- `atomic_write(path, data, ...)`: temporary, fsync, rename, folder fsync (`fsync_dir` the folder
  sync); `stage` each, then `publish` (or `discard` on failure), for several files published
  together; `atomic_text(path)` for one written piece by piece; `move_over(source, target)` for a
  copy kept aside put back in one rename; `remove_temporaries(path)`, `remove_temporaries_in(folder)`
  for what a killed writer left (`TEMPORARY_SUFFIX` names the temporaries);
- `write_output(path, text)`: an output file the user named, replacing a link instead of writing
  through it; `open_new_log(path)`: a log opened without following a link;
- `shown(text)`, `shown_lines(lines)`: untrusted text escaped for a terminal (text formats only);
  `Note`, a message marked as only informing where it is made (`-q` leaves it out);
- `log_progress(label, total, unit, quiet)`, `Progress`, `progress_wanted(quiet)`: `done/total` lines on a
  stderr that is no terminal (a batch log), every `RLPATCH_PROGRESS_INTERVAL` seconds (`progress`);
- `versioned(document)`, `JSON_VERSION`: the format `version` every JSON document of rlpatch carries (`formats`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlpatch import lazy_getattr
from rlpatch.output.printable import Note, shown, shown_lines

if TYPE_CHECKING:  # the type checker sees every name; at run time the writers load on first use
    from rlpatch.output.durable import (
               TEMPORARY_SUFFIX,
               atomic_text,
               atomic_write,
               discard,
               fsync_dir,
               move_over,
               open_new_log,
               publish,
               remove_temporaries,
               remove_temporaries_in,
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
    **dict.fromkeys(("TEMPORARY_SUFFIX", "atomic_text", "atomic_write", "discard", "fsync_dir", "move_over", "open_new_log",
                     "publish", "remove_temporaries", "remove_temporaries_in", "stage", "write_output"), "durable"),
    **dict.fromkeys(("LinkInside", "is_inside", "links_on_the_way", "refuse_links"), "places"),
    **dict.fromkeys(("Progress", "log_progress", "progress_wanted"), "progress"),
    **dict.fromkeys(("JSON_VERSION", "versioned"), "formats"),
}


__getattr__ = lazy_getattr(globals(), _LAZY)


__all__ = ["JSON_VERSION", "TEMPORARY_SUFFIX", "LinkInside", "Note", "Progress", "atomic_text", "atomic_write", "discard", "fsync_dir",
           "is_inside", "links_on_the_way", "log_progress", "move_over", "open_new_log", "progress_wanted", "publish",
           "refuse_links", "remove_temporaries", "remove_temporaries_in", "shown", "shown_lines", "stage", "versioned",
           "write_output"]
