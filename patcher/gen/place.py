"""Where the new text goes in a copy of the original script, found with the front end only.

Two insertions, every other byte unchanged:
- the *block* (header comment, `RLPATCH_GEN_DIR`, the `export`s and the `RLPATCH_GEN_OVERRIDES`
  array, each element with its reason) goes after the shebang and the leading `set` lines;
- one word, `"${RLPATCH_GEN_OVERRIDES[@]}"`, goes at the end of each verl launch command (the last
  value of a key wins in Hydra), found from the `Launch`'s command span. A launch that runs in
  another script (`bash other.sh args`) gets the word at the end of the call in this script that
  reaches it, which works only when the other script forwards `"$@"`: every candidate call is
  tried and the front end says whether the word reached verl.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlpatch.errors import InputError
from rlpatch.shell.api import Evaluation, Launch, Options, SourceFile, Span, evaluate_source

ARRAY = "RLPATCH_GEN_OVERRIDES"
WORD = '"${' + ARRAY + '[@]}"'
_INCLUDES = ("bash", "sh", "source", ".")


@dataclass(frozen=True)
class Insertion:
    offset: int  # character offset in the original text
    text: str


def span_offsets(source: SourceFile, span: Span) -> tuple[int, int]:
    """Character offsets of a span of `source` (lines and columns are 1-based)."""
    starts = [0]
    for index, char in enumerate(source.text):
        if char == "\n":
            starts.append(index + 1)
    return starts[span.line - 1] + span.column - 1, starts[span.end_line - 1] + span.end_column - 1


def apply(text: str, insertions: list[Insertion]) -> str:
    for insertion in sorted(insertions, key=lambda i: i.offset, reverse=True):
        text = text[:insertion.offset] + insertion.text + text[insertion.offset:]
    return text


def block_offset(source: SourceFile, parsed) -> int:
    """After the shebang and the leading `set` commands (and comments among them): the point
    where environment switches are exported, before anything the script computes."""
    offset = len(source.text.split("\n", 1)[0]) + 1 if source.text.startswith("#!") else 0
    for node in parsed.tree.root_node.named_children:
        if node.type == "comment":
            continue
        if node.type == "command" and _command_name(node) in ("set", "shopt"):
            offset = source.char_offset(node.end_byte)
            newline = source.text.find("\n", offset)
            offset = len(source.text) if newline < 0 else newline + 1
            continue
        break
    return min(offset, len(source.text))


def written_by_gen(parsed) -> bool:
    """Whether the script already assigns gen's overrides array (it is a generated script)."""
    stack = [parsed.tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "variable_assignment":
            name = node.child_by_field_name("name")
            if name is not None and name.text == ARRAY.encode():
                return True
        stack.extend(node.named_children)
    return False


def _command_name(node) -> str | None:
    name = node.child_by_field_name("name")
    return name.text.decode("utf-8", "replace") if name is not None else None


def _include_ends(source: SourceFile, parsed) -> list[int]:
    """End offsets of every `bash FILE ...` / `source FILE ...` command of the script."""
    ends, stack = [], [parsed.tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "command" and _command_name(node) in _INCLUDES:
            ends.append(source.char_offset(node.end_byte))
        stack.extend(node.named_children)
    return sorted(ends)


def _probe_reaches(source: SourceFile, text: str, options: Options, marker: str) -> set[Span]:
    """Evaluate `text` (the script with a marker argument inserted) and return the command spans of
    the launches whose last argument is the marker."""
    probe = SourceFile(source.path, text)
    evaluation = evaluate_source(probe, options)
    return {launch.command_span for launch in evaluation.launches if launch.args and launch.args[-1].text == marker}


def launch_insertions(source: SourceFile, parsed, evaluation: Evaluation, options: Options) -> list[Insertion]:
    """Where `WORD` goes so that it ends every verl launch of the script (InputError when one cannot be reached)."""
    here = {launch.command_span for launch in evaluation.launches if launch.command_span.file == source.path}
    elsewhere = {launch.command_span: launch for launch in evaluation.launches if launch.command_span.file != source.path}
    insertions = {span_offsets(source, span)[1] for span in here}
    if elsewhere:
        insertions |= _forwarding_calls(source, parsed, options, elsewhere)
    return [Insertion(offset, " " + WORD) for offset in sorted(insertions)]


def _forwarding_calls(source: SourceFile, parsed, options: Options, launches: dict[Span, Launch]) -> set[int]:
    marker = "rlpatch.gen.marker=1"
    chosen: set[int] = set()
    reached: set[Span] = set()
    for end in _include_ends(source, parsed):
        spans = _probe_reaches(source, apply(source.text, [Insertion(end, " " + marker)]), options, marker)
        spans &= set(launches)
        if spans - reached:
            chosen.add(end)
            reached |= spans
    missing = [launches[span] for span in launches if span not in reached]
    if missing:
        launch = missing[0]
        raise InputError(f"the verl launch at {launch.command_span} is in another script that does not forward "
                         f'"$@" from {source.path}: gen cannot append overrides to it without editing that script')
    return chosen


def command_start(source: SourceFile, launch: Launch) -> int | None:
    """Where a `NAME=value ` prefix goes for a launch of this script (None when it is elsewhere)."""
    if launch.command_span.file != source.path:
        return None
    return span_offsets(source, launch.command_span)[0]
