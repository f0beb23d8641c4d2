"""Recognising the command that launches verl, whatever launcher wraps it.

`python3 -m verl.trainer.main_ppo`, `python -m recipe.dapo.main_dapo`, `torchrun ... -m ...`,
`ray job submit --address=... -- python3 -m ...`, `srun ... python3 ...`, `uv run python ...`,
`"${LAUNCH[@]}" -m ...`, `$PYTHON -m ...` and `python3 verl/trainer/main_ppo.py` all reduce to
the same thing: some launcher words, an *entry* (a module run with `-m`, or a script path), then
the Hydra arguments. The words before the entry only matter for where env vars must go (Ray).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

from rlpatch.shell.source import Span

if TYPE_CHECKING:
    from rlpatch.shell.pieces import Value
    from rlpatch.shell.results import Arg

# verl's trainers and recipes: verl.trainer.main_ppo, verl.trainer.main_generation_server,
# recipe.dapo.main_dapo, verl.experimental.fully_async_policy.fully_async_main, ...
ENTRY_MODULE_RE = re.compile(
    r"(?:verl|recipe|examples)(?:\.[A-Za-z_][A-Za-z0-9_]*)*\.(?:main\w*|\w*_main|\w*trainer\w*)"
    # a recipe's entry run from its own folder: `cd recipe/gkd && python3 -m main_gkd`
    r"|(?:[A-Za-z_][A-Za-z0-9_]*\.)*(?:main_\w+|\w+_main)"
)
ENTRY_SCRIPT_RE = re.compile(r"(?:^|/)(?:verl|recipe)/(?:[\w.-]+/)*(?:main\w*|\w*_main)\.py")


class Launch:
    """One command that runs a verl entry point, fully expanded. (A plain class: `rlpatch lint`
    imports it at every cold start, where a dataclass costs about a millisecond to create.)"""

    def __init__(self, entry: str, entry_arg: "Arg", launcher: list["Arg"], args: list["Arg"], command_span: Span,
                 env: dict[str, "Value"] | None = None) -> None:
        self.entry = entry  # module name (`verl.trainer.main_ppo`) or script path
        self.entry_arg = entry_arg
        self.launcher = launcher  # the words before `-m MODULE` / the script
        self.args = args  # everything after the entry: Hydra overrides and options
        self.command_span = command_span
        self.env: dict[str, "Value"] = {} if env is None else env  # exported + `VAR=x cmd` prefixes

    def __repr__(self) -> str:
        return f"Launch({self.entry!r} at {self.command_span.file}:{self.command_span.line})"

    @property
    def ray_submit(self) -> bool:
        texts = [arg.text for arg in self.launcher]
        return any(texts[i:i + 3] == ["ray", "job", "submit"] for i in range(len(texts)))

    def identity(self) -> tuple:
        from rlpatch.shell.pieces import word_text

        env = tuple(sorted((name, word_text(value.first())) for name, value in self.env.items()))
        return (self.command_span, tuple((a.text, a.span) for a in self.args), env)


def find_launch(argv: list["Arg"], command_span: Span, env: "dict[str, Value] | Callable[[], dict[str, Value]]"
                ) -> Launch | None:
    """The verl launch in this argv, or None when the command runs something else. `env` may be a
    function that builds it: most commands are not launches and never need their environment."""
    found = _find_entry(argv)
    if found is None:
        return None
    entry, entry_arg, launcher, args = found
    return Launch(entry, entry_arg, launcher, args, command_span, env() if callable(env) else env)


def _find_entry(argv: list["Arg"]) -> "tuple[str, Arg, list[Arg], list[Arg]] | None":
    for index, arg in enumerate(argv):
        text = arg.text
        if text is None:
            continue
        if text == "-m" and index + 1 < len(argv):
            module = argv[index + 1].text
            if module is not None and ENTRY_MODULE_RE.fullmatch(module):
                return module, argv[index + 1], argv[:index], argv[index + 2:]
        elif text.endswith(".py") and ENTRY_SCRIPT_RE.search(text):
            return text, arg, argv[:index], argv[index + 1:]
    return None
