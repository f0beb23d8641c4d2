"""The run model (`rlpatch.shell.api.Run`) on the shapes of real collection scripts (issue 10)."""

from __future__ import annotations

from pathlib import Path

from rlpatch.shell.api import SourceFile, evaluate_source
from rlpatch.shell.defaults import NEWEST_VERL
from rlpatch.shell.hydra_dict import dict_leaves
from rlpatch.shell.model import Run
from rlpatch.shell.run_reading import read_run

ROLLOUT = "actor_rollout_ref.rollout"
ADDITIONAL = f"{ROLLOUT}.engine_kwargs.vllm.additional_config"


def runs(tmp_path: Path, script: str) -> list[Run]:
    path = tmp_path / "run.sh"
    path.write_text(script, encoding="utf-8")
    evaluation = evaluate_source(SourceFile.read(str(path)))
    return [read_run(launch, str(path), NEWEST_VERL) for launch in evaluation.launches]


def test_dict_value_reader_gives_each_leaf_and_its_offsets() -> None:
    text = '{a: 1, b: {c: [1,2], d: "x,y}"}, e: int(3)}'
    leaves = dict_leaves(text)
    assert leaves is not None
    assert [(leaf.key, leaf.value) for leaf in leaves] == [("a", "1"), ("b.c", "[1,2]"), ("b.d", '"x,y}"'), ("e", "int(3)")]
    assert all(text[leaf.value_start:leaf.value_end] == leaf.value for leaf in leaves)
    assert all(text[leaf.key_start:leaf.key_end] == leaf.key.rsplit(".", 1)[-1] for leaf in leaves)
    for not_a_dict in ("x", "{a:1", "[1,2]", "{a:1}x", '{"a":1}'):
        assert dict_leaves(not_a_dict) is None, not_a_dict


def test_a_dict_value_sets_its_keys(tmp_path: Path) -> None:
    (run,) = runs(tmp_path, f"python3 -m verl.trainer.main_ppo {ROLLOUT}.name=vllm \\\n"
                            f"    '+{ADDITIONAL}={{dump_config_path:\"/d/c.json\",other:1}}'\n")
    setting = run.setting(f"{ADDITIONAL}.dump_config_path")
    assert setting.value == "/d/c.json" and setting.is_set
    assert (setting.span.line, setting.span.column) == (2, 6 + len(f"+{ADDITIONAL}={{dump_config_path:"))
    assert run.setting(f"{ADDITIONAL}.other").as_int() == 1
    assert run.mode == "inference"


def test_later_overrides_win_over_a_dict_leaf_and_back(tmp_path: Path) -> None:
    (run,) = runs(tmp_path, f"python3 -m verl.trainer.main_ppo '++{ROLLOUT}={{n: 2, enforce_eager: True}}' "
                            f"{ROLLOUT}.n=4 '{ROLLOUT}={{enforce_eager: False}}'\n")
    assert run.setting(f"{ROLLOUT}.n").as_int() == 4
    assert run.setting(f"{ROLLOUT}.enforce_eager").as_bool() is False


def test_a_case_whose_catch_all_exits_is_not_a_launch(tmp_path: Path) -> None:
    script = ('case "$BACKEND" in\n  fsdp) TP=2 ;;\n  megatron) TP=4 ;;\n  *) echo "unknown backend"; exit 1 ;;\n'
              "esac\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.tensor_model_parallel_size=$TP\n")
    found = runs(tmp_path, script)
    assert sorted(run.setting(f"{ROLLOUT}.tensor_model_parallel_size").value for run in found) == ["2", "4"]


def test_exit_in_a_sourced_file_ends_the_path(tmp_path: Path) -> None:
    (tmp_path / "common.sh").write_text('if [ "$SIZE" = big ]; then TP=8; else echo "unsupported"; exit 1; fi\n')
    found = runs(tmp_path, 'source "$(dirname "$0")/common.sh"\n'
                           "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.tensor_model_parallel_size=$TP\n")
    assert [run.setting(f"{ROLLOUT}.tensor_model_parallel_size").value for run in found] == ["8"]


def test_exit_in_a_child_script_ends_only_the_child(tmp_path: Path) -> None:
    (tmp_path / "check.sh").write_text("echo checking; exit 0\n")
    found = runs(tmp_path, 'bash "$(dirname "$0")/check.sh"\npython3 -m verl.trainer.main_ppo trainer.nnodes=1\n')
    assert len(found) == 1


def test_a_config_file_key_points_at_its_own_line_when_another_section_shares_its_leaf(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "mine.yaml").write_text(
        "actor:\n"
        "  dump_path: /dumps/actor\n"
        "rollout:\n"
        "  # the same leaf, in another section\n"
        "  dump_path: /dumps/rollout\n"
        "trainer:\n"
        "  nnodes: 1\n", encoding="utf-8")
    (run,) = runs(tmp_path, "python3 -m verl.trainer.main_ppo --config-path config --config-name mine\n")
    lines = {key: (text, span.line) for key, (text, span) in run.config_values.items()}
    assert lines == {"actor.dump_path": ("/dumps/actor", 2), "rollout.dump_path": ("/dumps/rollout", 5),
                     "trainer.nnodes": ("1", 7)}
    assert run.setting("rollout.dump_path").span.line == 5
