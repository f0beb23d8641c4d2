"""RL301-RL306 machinery on a small verl-shaped config dir (fixtures/verl_mini): no download needed.

The decisive test replays every override both ways: rlpatch's verdict (from the cached snapshot)
must equal hydra-core's own (compose with that override raises or not).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("hydra")

from rlpatch.lint import hydra_schema
from rlpatch.lint.hydra_schema import OverrideRecord, lint_overrides
from rlpatch.lint.schema_discovery import locate_config

MINI = Path(__file__).resolve().parent.parent / "fixtures" / "verl_mini"
HYDRA_ERRORS = ("RL301", "RL302", "RL303", "RL304")


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RLPATCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def codes(overrides: list[str], **kwargs: object) -> list[tuple[str, int | None]]:
    result = lint_overrides([OverrideRecord.from_text(text) for text in overrides], verl_root=MINI, **kwargs)
    assert result.skipped is None
    return [(problem.code, problem.index) for problem in result.problems]


def hydra_rejects(overrides: list[str]) -> bool:
    """hydra-core's verdict: does composing the mini config with these overrides raise?"""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(MINI / "verl/trainer/config"), version_base=None):
            compose(config_name="ppo_trainer", overrides=overrides)
    except Exception:  # noqa: BLE001 - any composition error is a rejection
        return True
    finally:
        GlobalHydra.instance().clear()
    return False


SEMANTIC_CASES = [
    "trainer.nnodes=2",
    "trainer.nnode=2",
    "+trainer.nnodes=2",
    "++trainer.nnodes=2",
    "+trainer.resume_from_path=/ckpt",
    "trainer.resume_from_path=/ckpt",
    "trainer.resume_from_path.sub=1",
    "+trainer.resume_from_path.sub=1",
    "+trainer.logger=[console,wandb]",
    "trainer.logger=[console,wandb]",
    "+trainer.new_key=1",
    "++trainer.new.deep.key=1",
    "+global_profiler.global_tool_config.precision_debugger.config_path=/c.json",
    "global_profiler.global_tool_config.precision_debugger.config_path=/c.json",
    "+global_profiler.save_path=/x",
    "actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=triton",
    "+actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=triton",
    "++actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=/d.json",
    "+actor_rollout_ref.rollout.engine_kwargs.vllm={a:1}",
    "actor_rollout_ref.rollout.engine_kwargs.vllm={a:1}",
    "actor_rollout_ref.actor.fsdp_config={param_offload:true}",
    "actor_rollout_ref.actor.fsdp_config={nope:true}",
    "+actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16",
    "+actor_rollout_ref.actor.fsdp_config={model_dtype:bf16}",
    "actor_rollout_ref.actor.megatron.param_offload=true",
    "~trainer.logger",
    "~trainer.resume_from_path",
    "~trainer.nothing",
    "~trainer.nnodes=1",
    "~trainer.nnodes=3",
    "trainer.logger=console,wandb",
    "data.train_files=~/x",
    "data.train_files=<path>",
    "trainer.nnodes=[1,2",
    "trainer.logger='[console,wandb]'",
    "trainer.n_gpus_per_node.x=1",
    "+trainer.n_gpus_per_node.x=1",
    "hydra.run.dir=/tmp/out",
    "hydra.job.nope=1",
    "foo@bar=1",
    "model_engine=megatron",
    "model_engine=megatrn",
    "actor@actor_rollout_ref.actor=megatron_actor",
]


@pytest.mark.parametrize("override", SEMANTIC_CASES)
def test_verdict_equals_hydra(override: str) -> None:
    found = [code for code, _ in codes([override]) if code in HYDRA_ERRORS]
    assert bool(found) == hydra_rejects([override]), found


def test_overrides_apply_in_order_like_hydra() -> None:
    # The second override only exists because the first added its parent.
    sequence = ["+trainer.extra={}", "++trainer.extra.a=1", "trainer.extra.a=2"]
    assert [c for c in codes(sequence) if c[0] in HYDRA_ERRORS] == []
    assert not hydra_rejects(sequence)


def test_group_override_changes_the_schema() -> None:
    megatron_key = "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"
    assert ("RL304", 0) in codes([megatron_key])
    assert [c for c in codes(["model_engine=megatron", megatron_key]) if c[0] in HYDRA_ERRORS] == []


def test_rollout_name_and_mode() -> None:
    assert ("RL305", None) in codes([])
    assert ("RL305", None) not in codes(["actor_rollout_ref.rollout.name=vllm"])
    assert ("RL306", 1) in codes(["actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.mode=sync"])


def test_a_moved_key_is_told_its_new_spelling() -> None:
    """Issue 10.6: not the nearest unrelated key, nor a `+`: the key verl moved it to (0.9.0)."""
    records = [OverrideRecord.from_text(text) for text in
               ["actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.skip.enable=False"]]
    (problem,) = [p for p in lint_overrides(records, verl_root=MINI).problems if p.code == "RL302"]
    assert "write 'skip.rollout.enable' here" in problem.message and "did you mean" not in problem.message


def test_spans_point_inside_the_token() -> None:
    result = lint_overrides([OverrideRecord.from_text("data.train_files=~/x")], verl_root=MINI)
    (problem,) = [p for p in result.problems if p.code == "RL301"]
    assert (problem.start, problem.end) == (17, 18)
    result = lint_overrides([OverrideRecord.from_text("trainer.nnode=2")], verl_root=MINI)
    (problem,) = [p for p in result.problems if p.code == "RL302"]
    assert (problem.start, problem.end) == (0, len("trainer.nnode"))
    assert "did you mean 'trainer.nnodes'" in problem.message


def test_warm_cache_imports_no_hydra(private_cache: Path) -> None:
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from rlpatch.lint.hydra_schema import lint_overrides, OverrideRecord as R\n"
        f"r = lint_overrides([R.from_text('trainer.nnode=2'), R.from_text('model_engine=megatron')], verl_root={str(MINI)!r})\n"
        "print(sorted(p.code for p in r.problems), 'hydra' in sys.modules)\n"
    )
    env = {**__import__("os").environ, "RLPATCH_CACHE": str(private_cache)}
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    second = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert first.stdout.split("]")[0] == second.stdout.split("]")[0]
    assert first.stdout.strip().endswith("True")
    assert second.stdout.strip().endswith("False")


def test_cache_follows_edits(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "tree"
    shutil.copytree(MINI, root)
    config = root / "verl/trainer/config/rollout/rollout.yaml"
    assert ("RL302", 0) in codes_at(root, ["actor_rollout_ref.rollout.brand_new=1"])
    config.write_text(config.read_text() + "brand_new: 0\n")
    assert codes_at(root, ["actor_rollout_ref.rollout.brand_new=1"]) == [("RL305", None)]


def codes_at(root: Path, overrides: list[str]) -> list[tuple[str, int | None]]:
    result = lint_overrides([OverrideRecord.from_text(t) for t in overrides], verl_root=root)
    return [(p.code, p.index) for p in result.problems]


def test_skipped_without_verl(tmp_path: Path) -> None:
    result = lint_overrides([OverrideRecord.from_text("a=~/x")], verl_root=tmp_path)
    assert result.skipped is not None and "no verl tree" in result.skipped
    assert result.problems == []


def test_skipped_without_hydra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hydra_schema, "hydra_available", lambda: False)
    result = lint_overrides([OverrideRecord.from_text("a=1")], verl_root=MINI)
    assert result.skipped is not None and result.problems == []


def test_config_path_and_name(tmp_path: Path) -> None:
    """An absolute --config-path replaces the entry module's config folder on Hydra's search path: the
    user's config reaches verl's through its own hydra.searchpath (pkg:// read from the tree), else
    its `ppo_trainer` default is not found, as Hydra says."""
    custom = tmp_path / "conf"
    custom.mkdir()
    body = "defaults:\n  - ppo_trainer\n  - _self_\n\nmy_extra: 1\n"
    (custom / "my_run.yaml").write_text("hydra:\n  searchpath:\n    - pkg://verl.trainer.config\n" + body)
    source = locate_config(verl_root=MINI, config_path=custom, config_name="my_run.yaml")
    assert source.config_name == "my_run"
    assert source.search_dirs == ((MINI / "verl" / "trainer" / "config").resolve(),)
    result = lint_overrides([OverrideRecord.from_text("my_extra=2"), OverrideRecord.from_text("trainer.nnodes=2")],
                            verl_root=MINI, config_path=custom, config_name="my_run")
    assert [p.code for p in result.problems] == ["RL305"]
    (custom / "alone.yaml").write_text(body)
    result = lint_overrides([OverrideRecord.from_text("my_extra=2")], verl_root=MINI, config_path=custom,
                            config_name="alone")
    assert [p.code for p in result.problems] == ["RL302"] and "ppo_trainer" in result.problems[0].message


def test_record_from_text() -> None:
    record = OverrideRecord.from_text("++a.b=c=d")
    assert (record.prefix, record.key, record.value) == ("++", "a.b", "c=d")
    assert OverrideRecord.from_text("~a").value is None
