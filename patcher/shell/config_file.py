"""The user's own Hydra config file (`--config-path DIR --config-name NAME`): its values and their lines.

A launch may point verl at a YAML file of its own instead of (or under) its overrides. The run
model reads that file's values (not Hydra's `defaults` list nor its `hydra` block: composing the
whole config is the linter's schema work) so that a size or a backend set there is known, and
points at the line that sets it. A missing or broken file gives no values: reporting it is Hydra's
job when the run starts.
"""

from __future__ import annotations

import os
import re
from typing import Any

from rlpatch.shell.source import MAX_SCRIPT_BYTES, Span, read_regular

ConfigValues = dict[str, tuple[str, Span]]  # dotted key -> (value text, the line that sets it)

# Top-level blocks that are not config values: the composition list and Hydra's own settings.
_NOT_VALUES = ("defaults", "hydra")


def config_file_path(script: str, config_dir: str | None, config_name: str | None) -> str | None:
    """The YAML file `--config-path/--config-name` name (a relative folder is the script's), if any."""
    if not config_dir or not config_name:
        return None
    directory = config_dir if os.path.isabs(config_dir) else os.path.join(os.path.dirname(script), config_dir)
    return os.path.join(directory, config_name + ".yaml")


def read_config_values(path: str) -> ConfigValues:
    """Every leaf value of the config file at `path` by dotted key, with the line that sets it."""
    if not os.path.isfile(path):
        return {}
    try:
        import yaml

        text = read_regular(path, MAX_SCRIPT_BYTES, "a config file").decode("utf-8")  # bounded, regular only
        data = yaml.safe_load(text)
    except Exception:  # noqa: BLE001 - a broken config file is Hydra's error to report
        return {}
    if not isinstance(data, dict):
        return {}
    lines = text.splitlines()
    key_lines = _key_lines(text)
    values: ConfigValues = {}
    for key, value in _flatten(data):
        line = key_lines.get(key) or _leaf_line(lines, key)
        text_value = "null" if value is None else str(value)
        values[key] = (text_value, Span(path, line, 1, line, len(lines[line - 1]) + 1 if line <= len(lines) else 1))
    return values


def _flatten(data: dict, prefix: str = "") -> list[tuple[str, object]]:
    items: list[tuple[str, object]] = []
    for key, value in data.items():
        if not prefix and key in _NOT_VALUES:
            continue
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            items.extend(_flatten(value, dotted + "."))
        else:
            items.append((dotted, value))
    return items


def _key_lines(text: str) -> dict[str, int]:
    """The 1-based line of each key of the file's mappings, by its dotted path from the top
    (`actor.dump_path` and `rollout.dump_path` are two lines, whatever their leaves share). A key
    written twice is the last one, as the loader keeps it."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except Exception:  # noqa: BLE001 - the values loaded, so this does not happen; the leaf search stands in
        return {}
    found: dict[str, int] = {}
    _walk(root, "", found)
    return found


def _walk(node: Any, prefix: str, found: dict[str, int]) -> None:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            continue
        dotted = f"{prefix}{key_node.value}"
        found[dotted] = key_node.start_mark.line + 1
        _walk(value_node, dotted + ".", found)


def _leaf_line(lines: list[str], key: str) -> int:
    """The first line that writes `key`'s last part as a key (line 1 if none): for a key the file's
    structure does not spell (a merged `<<: *anchor` block, a `true:` key read as `True`)."""
    leaf = key.rsplit(".", 1)[-1]
    pattern = re.compile(rf"\s*{re.escape(leaf)}\s*:")
    return next((number for number, line in enumerate(lines, 1) if pattern.match(line)), 1)
