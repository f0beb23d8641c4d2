"""RL005: a suppression comment that names an unknown code, or silences nothing.

## What it does

Reports a code in a `# rlpatch: disable=CODES` or `# rlpatch: disable-file=CODES` comment that is no
rule's code or prefix (`RL999`), a code that silenced no finding of the command (or file) it covers,
and a comment that covers nothing: a `disable-file` after the first command, a `disable` with no
command after it.

## Why

A suppression is written once and then read for years. A typo (`RL10` for `RL101`, `RL999`) silences
nothing while looking as if it did; a suppression left behind after the script was fixed hides the
next real problem of the same rule on that command; a `disable-file` below the first command is
ignored. ruff reports the same (`RUF100`, unused `noqa`), and ShellCheck users expect a directive to
do what it says.

## Use instead

Remove the code (or the whole comment) that silences nothing; write the code of the rule that really
reports the command (`rlpatch lint --format full` shows it); move a `disable-file` above the first
command.

## Exceptions

A code whose rules did not check this script (not selected with `--select`, or of a mode the script
does not run) is never called unused: it may well silence something in the run it was written for.
Suppressions that cover RL005 itself (`RL005`, `RL0`, `ALL`) are never called unused either. This
rule's own findings can be silenced like any other, with `# rlpatch: disable=RL005`.
"""

from __future__ import annotations

from rlpatch.lint.rule import Case, FileContext, LintRule

_LAUNCH = "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.tensor_model_parallel_size=3\n"
_OWN_CODE = "RL005"


class UnusedSuppression(LintRule):
    code = _OWN_CODE
    severity = "warning"
    summary = "a suppression comment names an unknown code or silences nothing"
    after_others = True
    cases_need_every_rule = True

    VALID = [
        Case("# rlpatch: disable=RL401\n" + _LAUNCH, note="silences RL401 on the next command"),
        Case(_LAUNCH.rstrip("\n") + "  # rlpatch: disable=RL4\n", note="the same-line form, with a prefix"),
        Case("# rlpatch: disable=RL201\n" + _LAUNCH, note="RL201 checks consistency runs only: not called unused"),
        Case("# rlpatch: disable-file=ALL\n" + _LAUNCH),
    ]
    INVALID = [
        Case("# rlpatch: disable=RL999\n" + _LAUNCH, expect=[(1, 20)], note="no such rule"),
        Case("# rlpatch: disable=RL401,RL003\n" + _LAUNCH, expect=[(1, 26)],
             note="RL003 reports nothing on this command"),
        Case(_LAUNCH + "# rlpatch: disable-file=RL401\n", expect=[(2, 1)], note="after the first command: ignored"),
    ]

    def check_file(self, ctx: FileContext) -> None:
        suppressions = ctx.suppressions
        if suppressions is None or not suppressions.directives:
            return
        for finding in ctx.findings:  # marks the directive codes that silence something
            suppressions.silences(finding)
        for directive in suppressions.directives:
            if not directive.effective:
                where = "a disable-file after the first command" if directive.kind == "file" else "no command follows it"
                ctx.report(f"this suppression silences nothing: {where}", at=directive.span)
                continue
            for entry in directive.codes:
                if not entry.known:
                    ctx.report(f"unknown rule code {entry.code!r} in a suppression: it silences nothing", at=entry.span)
                elif entry.code not in directive.used and _can_judge(entry.code, suppressions.known_codes,
                                                                     ctx.checked_codes):
                    scope = "this file" if directive.kind == "file" else "the command it covers"
                    ctx.report(f"unused suppression: {entry.code} reports nothing on {scope}", at=entry.span)



def _can_judge(selector: str, known_codes: tuple[str, ...], checked_codes: frozenset[str]) -> bool:
    """Only a code whose rules all checked this script can be called unused (see Exceptions)."""
    if selector == "ALL" or _OWN_CODE.startswith(selector):
        return False
    covered = [code for code in known_codes if code.startswith(selector)]
    return bool(covered) and all(code in checked_codes for code in covered)
