"""Whether a launch's entry module exists in the target verl, and which trainer it runs.

A script names its entry (`python3 -m verl.trainer.main_ppo_sync`, or `verl/trainer/main_ppo.py`),
but whether that module exists, and which trainer class it starts, is the release's to say: verl
0.8.0 shipped `verl.trainer.main_ppo_sync`, whose own `PPOTrainer` (TransferQueue and a replay
buffer) no patch rule touches; 0.9.0 removed it. So the answer is read from the entry module in the
tree the user gave (one `ast` parse of one file, remembered on disk while the file is unchanged), and only without a tree from a table of what the
released wheels ship (`RELEASED_ENTRIES`, listed from the wheels and checked against them by the
upstream tests). A module the table does not cover (a recipe, `verl.experimental...` without a
tree, a release not listed) is not judged: `exists` is None.
"""

from __future__ import annotations

import functools
import os
import re
from typing import TYPE_CHECKING, NamedTuple

from rlpatch.upstream.versions import Version

if TYPE_CHECKING:  # ast loads when a tree's entry module is read: a lint against a release (its table) needs none
    import ast

# The modules directly under `verl/trainer/` of each released wheel (`__init__` and the constants
# module left out): what `python -m verl.trainer.X` can start on that release.
_SFT_05 = ("fsdp_sft_trainer", "main_eval", "main_generation", "main_ppo")
_SFT_06 = _SFT_05 + ("main_generation_server", "sft_trainer")
_LATE = ("main_eval", "main_generation_server", "main_ppo", "sft_trainer", "sft_trainer_ray")
RELEASED_ENTRIES: dict[str, tuple[str, ...]] = {
    "0.5.0": _SFT_05,
    "0.6.0": _SFT_06,
    "0.6.1": _SFT_06,
    "0.7.0": _SFT_06 + ("sft_trainer_ray",),
    "0.7.1": _LATE,
    "0.8.0": _LATE + ("main_ppo_sync",),
    "0.9.0": _LATE + ("main_ppo_v0",),
    "0.9.1": _LATE + ("main_ppo_v0",),
}
# Entry modules of a release that define and start a trainer class of their own (read from the wheels).
RELEASED_OWN_TRAINERS: dict[tuple[str, str], str] = {("0.8.0", "verl.trainer.main_ppo_sync"): "PPOTrainer"}
# The trainers of rlpatch.upstream.trainers, by the class an entry module constructs.
_KNOWN_CLASSES = {"RayPPOTrainer": "v0", "FullyAsyncTrainer": "fully-async"}
_TRAINER_PACKAGE = "verl.trainer."
MAX_ENTRY_BYTES = 4 * 1024 * 1024  # bounded read of the entry module (verl's are under 50 KB)
MEMO_FORMAT = 1  # bump when what `_read_entry_module` derives from a file changes: older memos are then stale
MAX_MEMO_NAME = 255  # bytes of a file name on the usual file systems
# the last `verl/` of the path: a checkout's package is `<checkout>/verl/verl/...`
_SCRIPT_RE = re.compile(r"(?:^|.*/)(verl/(?:[A-Za-z_]\w*/)*[A-Za-z_]\w*)\.py$")


class EntryCheck(NamedTuple):
    """What the target verl says about one entry module."""

    module: str | None  # the dotted verl module (None: not a verl module, e.g. a recipe)
    exists: bool | None  # None: cannot tell (no tree, and a release or module the table does not list)
    against: str  # what it was checked against: "the verl tree ROOT" or "the verl 0.9.1 release"
    instead: tuple[str, ...] = ()  # entry modules of verl.trainer that do exist there (when missing)
    own_trainer: str | None = None  # a trainer class the module defines and starts itself
    runs: str | None = None  # the id of a known trainer the module constructs (rlpatch.upstream.trainers)
    file: str | None = None  # the module's path inside the tree ("verl/trainer/main_ppo_sync.py")

    def missing_text(self) -> str:
        """One line: the module, what it was checked against, and what exists instead."""
        text = f"{self.module} is not in {self.against}"
        if self.instead:
            import difflib  # only when a name is wrong: a clean lint does not pay for it

            closest = difflib.get_close_matches(self.module or "", self.instead, n=1, cutoff=0.0)
            names = ", ".join(sorted(name.removeprefix(_TRAINER_PACKAGE) for name in self.instead))
            text += f": use {closest[0]} (verl.trainer there: {names})"
        return text


def entry_module(entry: str) -> str | None:
    """The dotted verl module of an entry (`verl.trainer.main_ppo` or a path `.../verl/trainer/main_ppo.py`)."""
    if entry.endswith(".py"):
        found = _SCRIPT_RE.match(entry)
        return found.group(1).replace("/", ".") if found else None
    return entry if entry.startswith("verl.") else None


def check_entry(entry: str, version: Version, verl_root: str | None) -> EntryCheck:
    """Whether the entry module exists in `verl_root` (else in the `version` release) and what it runs."""
    module = entry_module(entry)
    if module is None:
        return EntryCheck(None, None, "")
    if verl_root is not None:
        return _check_in_tree(module, verl_root)
    return _check_in_release(module, version)


def entry_file(entry: str, verl_package: str | None, run_dirs: tuple[str, ...] = ()) -> str | None:
    """The source file a launch's entry runs: a `verl.` module inside the `verl_package` folder, any
    other module (`recipe.dapo.main_dapo`) or a script path under the first of `run_dirs` (the
    folders the launch may run from) that holds it. None: not found there."""
    module = entry_module(entry)
    if module is not None and verl_package is not None:
        return _module_file(os.path.dirname(verl_package), module)
    for folder in run_dirs:
        if entry.endswith(".py"):
            path = entry if os.path.isabs(entry) else os.path.join(folder, entry)
            found = path if os.path.isfile(path) else None
        else:
            found = _module_file(folder, entry)
        if found is not None:
            return os.path.normpath(found)
    return None


def _module_file(folder: str, module: str) -> str | None:
    base = os.path.join(folder, *module.split("."))
    for path in (base + ".py", os.path.join(base, "__main__.py")):
        if os.path.isfile(path):
            return path
    return None


def _check_in_tree(module: str, verl_root: str) -> EntryCheck:
    against = f"the verl tree {verl_root}"
    package = _package_dir(verl_root)
    relative = module.split(".")[1:]
    path = os.path.join(package, *relative) + ".py"
    if not os.path.isfile(path) and not os.path.isfile(os.path.join(package, *relative, "__main__.py")):
        entries = trainer_entries(package)
        if not entries:  # no verl/trainer entry module at all: a partial tree (a sparse checkout), cannot tell
            return EntryCheck(module, None, against)
        return EntryCheck(module, False, against, entries if module.startswith(_TRAINER_PACKAGE) else ())
    file = "/".join(["verl", *relative]) + ".py"
    own, runs = read_trainer(path) if os.path.isfile(path) else (None, None)
    return EntryCheck(module, True, against, own_trainer=own, runs=runs, file=file)


def _check_in_release(module: str, version: Version) -> EntryCheck:
    release = str(version)
    listed = RELEASED_ENTRIES.get(release)
    against = f"the verl {release} release"
    if listed is None or not module.startswith(_TRAINER_PACKAGE) or module.count(".") != 2:
        return EntryCheck(module, None, against)
    if module.removeprefix(_TRAINER_PACKAGE) not in listed:
        return EntryCheck(module, False, against, tuple(_TRAINER_PACKAGE + name for name in listed))
    own = RELEASED_OWN_TRAINERS.get((release, module))
    return EntryCheck(module, True, against, own_trainer=own, file=module.replace(".", "/") + ".py")


def _package_dir(verl_root: str) -> str:
    """The `verl` package of a tree given either as its parent (a checkout) or as the package itself."""
    inside = os.path.join(verl_root, "verl")
    return inside if os.path.isdir(inside) else verl_root


def trainer_entries(package: str) -> tuple[str, ...]:
    """The `verl.trainer` entry modules of a `verl` package folder (sorted), as `RELEASED_ENTRIES` lists them."""
    try:
        names = os.listdir(os.path.join(package, "trainer"))
    except OSError:
        return ()
    return tuple(sorted(_TRAINER_PACKAGE + name[:-3] for name in names
                        if name.endswith(".py") and name not in ("__init__.py", "constants_ppo.py")))


class HydraMain(NamedTuple):
    """The arguments of an entry module's `@hydra.main(config_path=..., config_name=...)`, read from its
    source: what `python -m MODULE` composes before `--config-path`/`--config-name` change it. A
    keyword absent, or not a string literal, is None (Hydra's default, or a value only the run knows)."""

    config_path: str | None
    config_name: str | None


class EntryModule(NamedTuple):
    """What one parse of an entry module's source says (see `read_entry_module`)."""

    own_trainer: str | None = None  # a trainer class it defines and constructs
    runs: str | None = None  # the id of a known trainer class it constructs
    hydra_main: HydraMain | None = None  # its @hydra.main (None: it has none, or it could not be read)


def read_trainer(path: str) -> tuple[str | None, str | None]:
    """The trainer an entry module starts: (a class it defines and constructs, the id of a known
    trainer class it constructs); see `read_entry_module`."""
    module = read_entry_module(path)
    return module.own_trainer, module.runs


def read_hydra_main(path: str) -> HydraMain | None:
    """The `@hydra.main` arguments of the entry module at `path` (None: it has none, or it is unreadable)."""
    return read_entry_module(path).hydra_main


def read_entry_module(path: str) -> EntryModule:
    """One bounded read and one `ast` parse of an entry module: the trainer it starts and its
    `@hydra.main` (the RL004 check and the RL3xx family ask for the same file, each by its own path)."""
    return _read_entry_module(os.path.realpath(path))


@functools.lru_cache(maxsize=32)
def _read_entry_module(path: str) -> EntryModule:
    """`read_entry_module` of a real path, from the memo on disk while the file is unchanged (its size
    and modification time): importing `ast` and parsing verl's `main_ppo` were a tenth of a one-script
    lint's cold start, for an answer that changes only when the file does."""
    try:
        stat = os.stat(path)
    except OSError:
        return EntryModule()
    # What the answer depends on: the file, and the table of known trainer classes it is read with.
    stamp = [MEMO_FORMAT, stat.st_size, stat.st_mtime_ns, sorted(map(list, _KNOWN_CLASSES.items()))]
    memo = _memo_file(path)
    remembered = _read_memo(memo, stamp) if memo is not None else None
    if remembered is not None:
        return remembered
    module = _parse_entry_module(path)
    if memo is not None and module != EntryModule():  # an unreadable file is read again next time
        _write_memo(memo, stamp, module)
    return module


def _memo_file(path: str) -> str | None:
    """The memo of the entry module at real `path`: one small file named by the path itself (`%` and
    `/` escaped, so no two paths share a name), under rlpatch's cache; None for a path too long to name a file."""
    from rlpatch.upstream.wheelcache import cache_dir

    name = path.replace("%", "%25").replace("/", "%2F") + ".json"
    return None if len(name.encode()) > MAX_MEMO_NAME else os.path.join(cache_dir(), "entries", name)


def _read_memo(memo: str, stamp: list[object]) -> EntryModule | None:
    import json

    try:
        with open(memo, encoding="utf-8") as handle:
            saved = json.load(handle)
        if saved["stamp"] != stamp:
            return None
        own, runs, hydra = saved["module"]
        return EntryModule(own, runs, None if hydra is None else HydraMain(*hydra))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent, stale or unreadable: parsed again


def _write_memo(memo: str, stamp: list[object], module: EntryModule) -> None:
    """Written whole or not at all (a concurrent reader never sees half a memo); a cache that cannot be
    written only costs the next lint the parse."""
    import json

    from rlpatch.output.api import atomic_write  # a cache miss only: a warm lint writes nothing

    data = {"stamp": stamp, "module": [module.own_trainer, module.runs, module.hydra_main]}
    try:
        atomic_write(memo, json.dumps(data).encode("utf-8"), follow_link=False)
    except OSError:
        pass


def _parse_entry_module(path: str) -> EntryModule:
    """One bounded read and one `ast` parse of the entry module at `path`. A trainer class is one with a
    `fit` method; a module that constructs none (verl 0.9's `main_ppo` picks one at run time by
    `trainer.use_v1`) starts no known one. An unreadable module gives an empty answer: it fails at
    start-up anyway."""
    import ast

    try:
        with open(path, "rb") as handle:
            source = handle.read(MAX_ENTRY_BYTES + 1)
        if len(source) > MAX_ENTRY_BYTES:  # not a verl entry module (they are a few KB): no verdict
            return EntryModule()
        tree = ast.parse(source.decode("utf-8"), filename=path)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return EntryModule()
    own = {node.name for node in tree.body if isinstance(node, ast.ClassDef) and any(
        isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "fit" for item in node.body)}
    constructed = {name for node in ast.walk(tree) if isinstance(node, ast.Call)
                   for name in (_called_class(node.func),) if name is not None}
    started = sorted(own & constructed)
    known = sorted(_KNOWN_CLASSES[name] for name in constructed if name in _KNOWN_CLASSES)
    return EntryModule(started[0] if started else None, known[0] if len(known) == 1 else None, _hydra_main(tree))


def _hydra_main(tree: ast.Module) -> HydraMain | None:
    """The first top-level function decorated with `@hydra.main(...)` (or `@main(...)` imported from hydra)."""
    import ast

    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and _is_hydra_main(decorator.func):
                keywords = {k.arg: k.value for k in decorator.keywords if k.arg}
                positional = dict(zip(("config_path", "config_name"), decorator.args, strict=False))
                return HydraMain(_literal(keywords.get("config_path", positional.get("config_path"))),
                                 _literal(keywords.get("config_name", positional.get("config_name"))))
    return None


def _is_hydra_main(func: ast.expr) -> bool:
    import ast

    if isinstance(func, ast.Attribute):
        return func.attr == "main" and isinstance(func.value, ast.Name) and func.value.id == "hydra"
    return isinstance(func, ast.Name) and func.id in ("main", "hydra_main")


def _literal(node: ast.expr | None) -> str | None:
    import ast

    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _called_class(func: ast.expr) -> str | None:
    """`Name(...)`, or a Ray actor's `Name.remote(...)`."""
    import ast

    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and func.attr == "remote" and isinstance(func.value, ast.Name):
        return func.value.id
    return None
