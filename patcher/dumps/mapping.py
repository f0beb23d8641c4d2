"""rlpatch's FSDP name mapping: a training dump.json msprobe's `--backend fsdp` matching can read.

msprobe 26.2.0 `compare --consistent_check --backend fsdp` keys a training row by what follows the
last `_fsdp_wrapped_module.` of its name (FSDP1 paths, verl `strategy=fsdp`), an inference row by
what follows `layers.N.`. FSDP2 (`fully_shard`, verl `strategy=fsdp2`) keeps plain HF paths
(`Module.model.layers.0.self_attn.q_proj...`), so none of its rows match; none of msprobe's
mapping flags helps in consistency mode (`-dm` fails with `KeyError: 'compare_key'`, `-cm`/`-lm`
are accepted and ignored). So rlpatch writes a copy of the training dump.json whose names are the
FSDP1 paths of the same modules (`Module._fsdp_wrapped_module.model.layers.0._fsdp_wrapped_module.
self_attn.q_proj...`), with one symlink per tensor file under the copy's `dump_tensor_data/`
(tensor dumps: msprobe takes a row's name from its `data_name` and reads the file next to the
dump.json it is given).

Both FSDP forms also leave out the wrapped root (`Module._fsdp_wrapped_module.Qwen2ForCausalLM.
forward.0`, FSDP1 only: FSDP2 and vLLM do not dump the model given to `start`): msprobe keys it
like the inference body (`Module.model.Qwen2Model`), a pair of different modules whose outputs
(logits against hidden states) differ in shape, an error row in every compare.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any, TextIO

from rlpatch.dumps.jsonstream import events
from rlpatch.output.api import atomic_text

WRAPPER = "_fsdp_wrapped_module."
FOLDER = "train_fsdp_names"
TENSOR_DIR = "dump_tensor_data"
_LAYER = re.compile(r"(layers\.\d+\.)(?!_fsdp_wrapped_module\.)")
_ROOT = re.compile(r"^Module\._fsdp_wrapped_module\.[A-Za-z0-9_]+\.forward\.\d+$")


def fsdp1_name(name: str) -> str:
    """The FSDP1 path of a module dump name: the root and every decoder layer wrapped."""
    if not name.startswith("Module.") or WRAPPER in name:
        return name
    return _LAYER.sub(r"\1" + WRAPPER, "Module." + WRAPPER + name[len("Module."):])


def is_wrapped_root(name: str) -> bool:
    """`Module._fsdp_wrapped_module.Qwen2ForCausalLM.forward.0`: FSDP1's wrapped model itself."""
    return _ROOT.match(name) is not None


def mapped_name(name: str) -> str | None:
    """A dump name's name in the mapped copy (None: left out); it depends on the name alone, so the
    copy is written entry by entry without a table of every name."""
    new = fsdp1_name(name)
    return None if is_wrapped_root(new) else new


def mapped_names(names: list[str]) -> dict[str, str | None]:
    """Each dump name and its name in the mapped copy (None: left out); only the names that change."""
    return {name: new for name in names if (new := mapped_name(name)) != name}


def map_training_dump(train_json: str, out: str) -> str | None:
    """Write `{out}/train_fsdp_names/dump.json` (and its tensor links) when the training dump needs
    the mapping; returns its path, or None when msprobe can read the dump as it is.

    The dump is streamed one module entry at a time (a real model's dump.json runs to hundreds of
    MB): up to the first name that changes, then once more to write the renamed copy piece by piece;
    no table of names is kept (a name's new name depends on it alone)."""
    if not _starts_object(train_json):
        return None  # not msprobe's one object: msprobe reads (and reports) it as it is
    with open(train_json, encoding="utf-8") as handle:  # stops at the first name that changes
        if not any(inner is not None and mapped_name(inner) != inner for _, _, inner, _ in events(handle, "data")):
            return None
    folder = os.path.join(out, FOLDER)
    os.makedirs(folder, exist_ok=True)
    source_dir = os.path.join(os.path.dirname(os.path.abspath(train_json)), TENSOR_DIR)
    target_dir = os.path.join(folder, TENSOR_DIR)
    if os.path.isdir(source_dir):
        os.makedirs(target_dir, exist_ok=True)
    path = os.path.join(folder, "dump.json")
    with open(train_json, encoding="utf-8") as handle, atomic_text(path) as copy:
        _write_mapped(events(handle, "data"), copy, source_dir, target_dir,
                      os.path.join(os.path.abspath(folder), TENSOR_DIR))
    _map_stack(os.path.join(os.path.dirname(train_json), "stack.json"), os.path.join(folder, "stack.json"))
    return path


def _starts_object(path: str) -> bool:
    """Whether the first character that is not whitespace is `{` (msprobe's dump is one object)."""
    with open(path, encoding="utf-8") as handle:
        while True:
            char = handle.read(1)
            if not char or char not in " \t\r\n":  # "" (the end) is in every string: test it first
                return char == "{"


def _write_mapped(found: Iterator[tuple[str, str, str | None, Any]], copy: TextIO, source_dir: str, target_dir: str, new_data_dir: str) -> None:
    """The copy of the dump, member by member: `data` renamed, `dump_data_dir` pointing at the links."""
    copy.write("{")
    separator, inner_separator = "", ""
    for kind, key, inner, value in found:
        if kind == "open":
            copy.write(f"{separator}{json.dumps(key)}: {{")
            separator, inner_separator = ", ", ""
        elif kind == "close":
            copy.write("}")
        elif inner is not None:
            new = mapped_name(inner)
            if new is None:
                continue
            files: dict[str, str] = {}
            entry = _renamed_files(value, inner, new, files) if new != inner else value
            copy.write(f"{inner_separator}{json.dumps(new)}: {json.dumps(entry)}")
            inner_separator = ", "
            _link_tensors(source_dir, target_dir, files, [_data_names(entry)])
        else:
            if key == "dump_data_dir" and isinstance(value, str):
                value = new_data_dir
            copy.write(f"{separator}{json.dumps(key)}: {json.dumps(value)}")
            separator = ", "
    copy.write("}")


def _renamed_files(value: Any, old: str, new: str, files: dict[str, str]) -> Any:
    """The entry with every `data_name` that starts with the old name renamed; `files` gets new -> old."""
    if isinstance(value, dict):
        result = {key: _renamed_files(item, old, new, files) for key, item in value.items()}
        name = value.get("data_name")
        if isinstance(name, str) and name.startswith(old + "."):
            result["data_name"] = new + name[len(old):]
            files[result["data_name"]] = name
        return result
    if isinstance(value, list):
        return [_renamed_files(item, old, new, files) for item in value]
    return value


def _data_names(value: Any) -> list[str]:
    if isinstance(value, dict):
        own = [value["data_name"]] if isinstance(value.get("data_name"), str) else []
        return own + [name for item in value.values() for name in _data_names(item)]
    if isinstance(value, list):
        return [name for item in value for name in _data_names(item)]
    return []


def _link_tensors(source_dir: str, target_dir: str, renamed: dict[str, str], kept: list[list[str]]) -> None:
    """One symlink per tensor file the mapped dump names (msprobe follows links, with a warning)."""
    if not os.path.isdir(source_dir):
        return
    for names in kept:
        for name in names:
            source = os.path.join(source_dir, renamed.get(name, name))
            target = os.path.join(target_dir, name)
            if os.path.isfile(source) and not os.path.lexists(target):
                os.symlink(os.path.abspath(source), target)


def _stack_name(name: object) -> object | None:
    return mapped_name(name) if isinstance(name, str) else name


def _map_stack(source: str, target: str) -> None:
    """stack.json (`{"0": [[names...], [frames...]]}`) with the names mapped, so the stack column stays;
    streamed member by member like the dump (it grows with the dump). Unreadable: no stack column."""
    try:
        if not os.path.isfile(source) or not _starts_object(source):
            return
        with open(source, encoding="utf-8") as handle, atomic_text(target) as copy:
            copy.write("{")
            for index, (_, key, _, value) in enumerate(events(handle, "\0")):  # no nested member
                if isinstance(value, list) and value and isinstance(value[0], list):
                    value[0] = [new for name in value[0] if (new := _stack_name(name)) is not None]
                copy.write(f"{', ' if index else ''}{json.dumps(key)}: {json.dumps(value)}")
            copy.write("}")
    except (OSError, ValueError, RecursionError):
        return
