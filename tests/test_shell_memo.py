"""The evaluator's memo (expansions and argv shared across a script's paths) never changes a result.

Each script below expands the same words with different values: on different paths of an `if` or
a `case`, in a loop, in a function called twice, after `${X:=default}` assigns, with `set --` and
`shift` changing "$@". Evaluating it with the memo and with the memo switched off must give the
same launches (every argument's pieces and positions), the same environment and the same unknowns.
"""

from __future__ import annotations

import pytest

from rlpatch.shell import words as words_module
from rlpatch.shell.api import SourceFile, parse_file
from rlpatch.shell.evaluator import Evaluator, Options
from rlpatch.shell.pieces import word_text

LAUNCH = "python3 -m verl.trainer.main_ppo"

SCRIPTS = {
    "if-paths": f"""
if [ "$BACKEND" = megatron ]; then S=megatron; TP=4; else S=fsdp; TP=2; fi
N=$((TP * 2))
{LAUNCH} actor_rollout_ref.actor.strategy=$S trainer.n_gpus_per_node=$N x="${{S}}_$TP"
""",
    "case-paths": f"""
case "$MODE" in
  a) export DUMP=1; V=one ;;
  b) V=two ;;
  *) V=three ;;
esac
ARGS=(k1=$V "k2=${{V}}x")
{LAUNCH} "${{ARGS[@]}}" k3=${{V:-none}} k4=${{#ARGS[@]}}
""",
    "loop-and-function": f"""
run() {{ {LAUNCH} trainer.experiment_name=$1 trainer.nnodes=${{2:-1}} "$@"; }}
for name in a b c; do
  run "$name" 2
  run "$name"
done
""",
    "assign-default": f"""
f() {{ echo "${{X:=first}}"; {LAUNCH} key=$X; X=second; }}
f
f
unset X
f
for i in 1 2; do unset Y; echo "${{Y:=again}}"; {LAUNCH} loop=$Y; done
""",
    "positional": f"""
set -- one two three
{LAUNCH} a=$1 all="$*" n=$#
shift
{LAUNCH} a=$1 all="$*" n=$#
set -- four
{LAUNCH} a=$1 all="$*" n=$#
""",
    "arrays-append": f"""
A=(x=1)
if [ -n "$EXTRA" ]; then A+=(y=2); fi
A[3]=z=3
B="${{A[*]}}"
{LAUNCH} "${{A[@]}}" b="$B" first=${{A[0]}}
""",
    "prefix-env": f"""
if [ -z "$FAST" ]; then export SLOW=1; fi
VLLM_X=1 {LAUNCH} k=${{SLOW:-0}}
{LAUNCH} k=${{SLOW:-0}}
""",
}


def _evaluate(text: str, args: list[str]) -> tuple:
    source = SourceFile("run.sh", text)
    evaluation = Evaluator(Options(env={"HOME": "/home/u"}, args=args)).evaluate(source, parse_file(source))
    launches = tuple(
        (launch.command_span, tuple((a.word, a.span) for a in launch.launcher + launch.args),
         tuple(sorted((name, value.first(), value.exported) for name, value in launch.env.items())))
        for launch in evaluation.launches
    )
    return launches, tuple((u.what, u.span) for u in evaluation.unknowns), evaluation.paths


@pytest.mark.parametrize("name", sorted(SCRIPTS))
@pytest.mark.parametrize("args", [[], ["extra=1", "more=2"]])
def test_memo_changes_no_result(name: str, args: list[str], monkeypatch) -> None:
    text = SCRIPTS[name]
    remembered = _evaluate(text, args)
    monkeypatch.setattr(words_module.Expander, "remembered", lambda self, key, expand, memo=None: expand())
    assert _evaluate(text, args) == remembered
    assert remembered[0], "the script must launch verl"


def test_paths_keep_their_own_values() -> None:
    source = SourceFile("run.sh", SCRIPTS["if-paths"])
    evaluation = Evaluator(Options()).evaluate(source, parse_file(source))
    seen = {tuple(word_text(a.word) for a in launch.args) for launch in evaluation.launches}
    assert seen == {("actor_rollout_ref.actor.strategy=megatron", "trainer.n_gpus_per_node=8", "x=megatron_4"),
                    ("actor_rollout_ref.actor.strategy=fsdp", "trainer.n_gpus_per_node=4", "x=fsdp_2")}


def test_assign_default_is_not_replayed() -> None:
    # `${X:=first}` assigns: the first call prints it and launches key=first; the second sees
    # X=second; after `unset X` the default assigns again.
    source = SourceFile("run.sh", SCRIPTS["assign-default"])
    evaluation = Evaluator(Options()).evaluate(source, parse_file(source))
    keys = [word_text(launch.args[0].word) for launch in evaluation.launches]
    # The third `f` launch is the first's duplicate; the loop's second `${Y:=again}` reads what the
    # first read (Y unset) and must assign again, not replay a remembered result.
    assert keys == ["key=first", "key=second", "loop=again"]
