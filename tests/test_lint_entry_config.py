"""RL3xx composes the config the launch's entry module really uses (issue 29.2), decided by Hydra itself.

fixtures/lint/entry_config is a small verl-shaped checkout whose entry modules each declare their own
`@hydra.main(config_path, config_name)`. Each of its scripts is run with recording stand-ins for its
real command line, and that command line is composed by Hydra (its own search-path rule,
`compute_search_path_dir`, from the checkout as verl's scripts run): lint must report an RL30x error
if and only if Hydra's compose fails, except where the config is not in the tree (a `pkg://`
package installed elsewhere: one RL002 note, no error) or the entry module is missing (RL004 alone).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("hydra")

from conftest import run_cli
from gen_harness import compose_real, run_with_stand_ins

from rlpatch.lint.hydra_schema import OverrideRecord, lint_overrides
from rlpatch.lint.schema_cache import schema_path
from rlpatch.lint.schema_discovery import SchemaUnknown, locate_config
from rlpatch.upstream.api import read_hydra_main, unpacked_tree

TREE = Path(__file__).resolve().parent.parent / "fixtures" / "lint" / "entry_config"
RL30X_ERRORS = {"RL301", "RL302", "RL303", "RL304", "RL305", "RL306"}
# script -> whether Hydra composes its command line (checked against Hydra below, not assumed)
CASES = {
    "examples/sft.sh": True,
    "examples/sft_bad.sh": False,
    "examples/async_config_path.sh": True,
    "examples/async_own_config.sh": True,
    "examples/searchpath_file.sh": True,
    "recipe/demo/run_demo.sh": True,
}


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLPATCH_CACHE", str(tmp_path / "cache"))


def lint_codes(script: Path, root: Path = TREE) -> list[tuple[str, str, str]]:
    result = run_cli("lint", "--format", "json", "--exit-zero", "--select", "RL0,RL3", "--verl-root", str(root),
                     str(script))
    assert result.exit_code == 0, result.stderr
    return [(f["code"], f["severity"], f["message"]) for f in json.loads(result.stdout)["findings"]]


def hydra_composes(script: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Hydra's own verdict on the script's real command line, run from the checkout."""
    from hydra import compose, initialize_config_dir
    from hydra._internal.utils import compute_search_path_dir
    from hydra.core.global_hydra import GlobalHydra

    (call,) = run_with_stand_ins(script, tmp, sealed=True)
    argv = call.argv[call.argv.index("-m") + 1:]
    module = TREE.joinpath(*argv[0].split(".")).with_suffix(".py")
    declared = read_hydra_main(str(module))
    assert declared is not None
    path, name, overrides = declared.config_path, declared.config_name, []
    for arg in argv[1:]:
        option, _, value = arg.partition("=")
        if option in ("--config-path", "-cp"):
            path = value
        elif option in ("--config-name", "-cn"):
            name = value
        else:
            overrides.append(arg)
    monkeypatch.chdir(TREE)  # verl's scripts run from the checkout: file:// is relative to it
    monkeypatch.syspath_prepend(str(TREE))  # pkg://verl.trainer.config imports from the run's tree
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=compute_search_path_dir(str(module), None, path), version_base=None):
            compose(config_name=(name or "").removesuffix(".yaml"), overrides=overrides)
        return True
    except Exception:  # noqa: BLE001 - any failure of Hydra's is the verdict "does not compose"
        return False
    finally:
        GlobalHydra.instance().clear()
        for loaded in [m for m in sys.modules if m == "verl" or m.startswith("verl.")]:
            del sys.modules[loaded]


@pytest.mark.parametrize("relative", sorted(CASES))
def test_verdict_is_hydras(relative: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = TREE / relative
    errors = [c for c, severity, _ in lint_codes(script) if c in RL30X_ERRORS and severity == "error"]
    composes = hydra_composes(script, tmp_path, monkeypatch)
    assert composes is CASES[relative]
    assert (errors == []) is composes, errors


def test_sft_entry_composes_its_own_config() -> None:
    """`engine.*` exists in sft_trainer_engine, not in ppo_trainer: the error names the SFT config's miss."""
    ((code, _, message),) = lint_codes(TREE / "examples" / "sft_bad.sh")
    assert code == "RL302" and "actor_rollout_ref.actor.strategy" in message


def test_pkg_searchpath_absent_is_one_note() -> None:
    findings = lint_codes(TREE / "examples" / "searchpath_pkg_absent.sh")
    assert [(c, s) for c, s, _ in findings] == [("RL002", "info")]
    assert "pkg://verl_addon.config" in findings[0][2] and "RL301-RL306 skipped" in findings[0][2]


def test_missing_entry_is_rl004_alone() -> None:
    assert [c for c, _, _ in lint_codes(TREE / "examples" / "missing_entry.sh")] == ["RL004"]


def test_config_path_is_relative_to_the_module() -> None:
    """Hydra's rule: a relative --config-path is the declaring module's folder's, not the script's."""
    source = locate_config(verl_root=TREE, entry="verl.experimental.async_demo.async_main", config_path="config",
                           config_name="async_megatron_trainer.yaml", base_dir=TREE / "examples")
    assert source.config_dir == (TREE / "verl" / "experimental" / "async_demo" / "config").resolve()
    assert source.search_dirs == ((TREE / "verl" / "trainer" / "config").resolve(),)  # its file://, from the checkout
    # a folder that is not there beside the module: Hydra stops ("Primary config directory not found")
    result = lint_overrides([OverrideRecord.from_text("trainer.nnodes=2")], verl_root=TREE, config_path="conf",
                            entry="verl.trainer.sft_trainer", base_dir=TREE / "examples")
    assert [p.code for p in result.problems] == ["RL302"] and "does not exist" in result.problems[0].message


def test_recipe_entry_found_above_the_script() -> None:
    source = locate_config(verl_root=TREE, entry="recipe.demo.main_demo", base_dir=TREE / "recipe" / "demo")
    assert (source.config_dir, source.config_name) == ((TREE / "recipe" / "demo" / "config").resolve(), "demo_trainer")
    with pytest.raises(SchemaUnknown, match="recipe.absent.main"):
        locate_config(verl_root=TREE, entry="recipe.absent.main", base_dir=TREE / "examples")


def test_script_searchpath_replaces_the_primary_one() -> None:
    """As Hydra: a command-line hydra.searchpath replaces the primary config's own, so ppo_trainer is
    no longer found from the experimental config."""
    result = lint_overrides([OverrideRecord.from_text("hydra.searchpath=[file://extra_conf]")], verl_root=TREE,
                            entry="verl.experimental.async_demo.async_main", base_dir=TREE / "examples")
    assert result.skipped is None
    assert [p.code for p in result.problems] == ["RL302"] and "ppo_trainer" in result.problems[0].message


def test_cache_key_follows_the_entry() -> None:
    ppo = locate_config(verl_root=TREE, entry="verl.trainer.main_ppo")
    sft = locate_config(verl_root=TREE, entry="verl.trainer.sft_trainer")
    assert ppo.config_name == "ppo_trainer" and sft.config_name == "sft_trainer_engine"
    assert schema_path(ppo, ()) != schema_path(sft, ())


SFT_SCRIPT = """python3 -m verl.trainer.sft_trainer \\
    data.train_batch_size=256 \\
    data.micro_batch_size_per_gpu=4 \\
    model.path=Qwen/Qwen2.5-0.5B-Instruct \\
    engine.ulysses_sequence_parallel_size=2 \\
    optim.lr=1e-4 \\
    trainer.total_epochs=2 \\
    trainer.logger=console
"""


@pytest.mark.upstream
@pytest.mark.parametrize("version", ["0.9.1"])
def test_sft_script_on_released_verl(version: str, tmp_path: Path) -> None:
    """An SFT-shaped script (as verl's examples/sft/gsm8k ones) composes against sft_trainer's config:
    Hydra accepts its command line, and lint reports no RL302/RL303 (it reported "Could not override
    'engine'" against ppo_trainer before)."""
    script = tmp_path / "run_sft.sh"
    script.write_text(SFT_SCRIPT)
    (call,) = run_with_stand_ins(script, tmp_path / "run", sealed=True)
    args = call.argv[call.argv.index("-m") + 2:]
    compose_real(version, args, entry="verl.trainer.sft_trainer")  # raises if Hydra rejects it
    codes = [c for c, severity, _ in lint_codes(script, unpacked_tree("verl", version)) if severity == "error"]
    assert codes == []
    bad = tmp_path / "run_sft_bad.sh"
    bad.write_text(SFT_SCRIPT.replace("optim.lr", "engine.no_such_key=1 \\\n    optim.lr"))
    assert [c for c, _, _ in lint_codes(bad, unpacked_tree("verl", version)) if c in RL30X_ERRORS] == ["RL302"]
