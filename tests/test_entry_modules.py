"""The entry module a launch starts: whether the target verl has it, and which trainer it runs (issue 28, item 3).

verl 0.8.0's `verl.trainer.main_ppo_sync` starts a `PPOTrainer` of its own that no rule patches;
0.9.0 removed the module. The unit tests use `fixtures/verl_sync_trainer` (an 0.8.0 look-alike) and
the release table; the upstream tests check the table and the reading against the real wheels.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli

from rlpatch.shell.api import OWN_TRAINER, script_runs
from rlpatch.upstream.api import Version, check_entry
from rlpatch.upstream.entries import (
    RELEASED_ENTRIES,
    RELEASED_OWN_TRAINERS,
    entry_module,
    read_trainer,
    trainer_entries,
)

SYNC_ROOT = FIXTURES / "verl_sync_trainer"
SYNC_SCRIPT = FIXTURES / "gen" / "sync_trainer.sh"
CONSISTENCY = ("export DUMP_ON=1 PROMPTS_ONLY=1\n"
               "python3 -m verl.trainer.main_ppo_sync actor_rollout_ref.rollout.name=vllm \\\n"
               "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=/d/i.json\n")


@pytest.mark.parametrize(("entry", "module"), [
    ("verl.trainer.main_ppo_sync", "verl.trainer.main_ppo_sync"),
    ("verl/trainer/main_ppo.py", "verl.trainer.main_ppo"),
    ("/opt/src/verl/verl/trainer/main_ppo_v0.py", "verl.trainer.main_ppo_v0"),
    ("recipe.dapo.main_dapo", None),
    ("recipe/dapo/main_dapo.py", None),
])
def test_entry_module_names(entry: str, module: str | None) -> None:
    assert entry_module(entry) == module


def test_tree_entry_that_starts_its_own_trainer() -> None:
    check = check_entry("verl.trainer.main_ppo_sync", Version.parse("0.9.1"), str(SYNC_ROOT))
    assert (check.exists, check.own_trainer, check.file) == (True, "PPOTrainer", "verl/trainer/main_ppo_sync.py")
    assert check.against == f"the verl tree {SYNC_ROOT}"
    plain = check_entry("verl/trainer/main_ppo.py", Version.parse("0.8.0"), str(SYNC_ROOT))
    assert (plain.exists, plain.own_trainer, plain.runs) == (True, None, "v0")


def test_tree_without_the_entry_names_what_it_has() -> None:
    check = check_entry("verl.trainer.main_ppo_v0", Version.parse("0.8.0"), str(SYNC_ROOT))
    assert check.exists is False
    assert check.instead == ("verl.trainer.main_ppo", "verl.trainer.main_ppo_sync")
    assert check.missing_text().startswith(f"verl.trainer.main_ppo_v0 is not in the verl tree {SYNC_ROOT}: use "
                                           "verl.trainer.main_ppo ")


def test_partial_tree_cannot_tell() -> None:
    """A tree with no verl/trainer entry module at all (a fixture, a sparse checkout) says nothing."""
    check = check_entry("verl.trainer.main_ppo", Version.parse("0.9.1"), str(FIXTURES / "verl_trainers"))
    assert check.exists is None


def test_release_table_without_a_tree() -> None:
    gone = check_entry("verl.trainer.main_ppo_sync", Version.parse("0.9.1"), None)
    assert gone.exists is False and gone.against == "the verl 0.9.1 release"
    assert "use verl.trainer.main_ppo (verl.trainer there: main_eval, main_generation_server, main_ppo, main_ppo_v0," \
        in gone.missing_text()
    there = check_entry("verl.trainer.main_ppo_sync", Version.parse("0.8.0"), None)
    assert (there.exists, there.own_trainer) == (True, "PPOTrainer")
    # a release, a package or a depth the table does not list: not judged
    for entry, version in (("verl.trainer.main_ppo_sync", "0.10.0"), ("recipe.dapo.main_dapo", "0.9.1"),
                           ("verl.experimental.fully_async_policy.fully_async_main", "0.5.0")):
        assert check_entry(entry, Version.parse(version), None).exists is None


def test_read_trainer_of_the_fixture_modules() -> None:
    trainer = SYNC_ROOT / "verl" / "trainer"
    assert read_trainer(str(trainer / "main_ppo_sync.py")) == ("PPOTrainer", None)
    assert read_trainer(str(trainer / "main_ppo.py")) == (None, "v0")
    assert read_trainer(str(trainer / "no_such_module.py")) == (None, None)


def test_run_trainer_from_the_entry_module() -> None:
    on_tree = script_runs(str(SYNC_SCRIPT), Version.parse("0.8.0"), verl_root=str(SYNC_ROOT)).runs[0]
    trainer, why, _ = on_tree.trainer()
    assert trainer == OWN_TRAINER and why.startswith("PPOTrainer defined in verl/trainer/main_ppo_sync.py")
    gone = script_runs(str(SYNC_SCRIPT), Version.parse("0.9.1")).runs[0]
    trainer, why, _ = gone.trainer()
    assert trainer is None and why.startswith("the entry module does not exist: verl.trainer.main_ppo_sync is not in "
                                              "the verl 0.9.1 release")


def test_detect_names_the_own_trainer_and_the_missing_entry() -> None:
    own = run_cli("detect", "--format", "json", "--verl-root", str(SYNC_ROOT), str(SYNC_SCRIPT))
    assert own.exit_code == 0, own.stderr
    payload = json.loads(own.stdout)
    assert (payload["trainer"], payload["entry_exists"]) == (OWN_TRAINER, True)
    text = run_cli("detect", str(SYNC_SCRIPT))  # the assumed newest release: 0.9.1, without main_ppo_sync
    assert "  trainer:         none (the entry module does not exist: verl.trainer.main_ppo_sync is not in the " \
        "verl 0.9.1 release: use verl.trainer.main_ppo" in text.stdout


def test_lint_rl607_on_the_own_trainer_and_rl004_on_a_missing_entry(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(CONSISTENCY)
    own = run_cli("lint", "--select", "RL004,RL607", "--verl-root", str(SYNC_ROOT), str(script))
    assert "RL607 [E] consistency run on PPOTrainer of verl/trainer/main_ppo_sync.py" in own.stdout
    assert "RL004" not in own.stdout
    script.write_text(CONSISTENCY.replace("main_ppo_sync", "main_ppo_v0"))
    gone = run_cli("lint", "--select", "RL004,RL607", "--verl-root", str(SYNC_ROOT), str(script))
    assert "RL004 [E] the launched entry module does not exist: verl.trainer.main_ppo_v0 is not in" in gone.stdout
    assert "RL607" not in gone.stdout
    assert "RL004" not in run_cli("lint", "--select", "RL004", str(script)).stdout  # no target verl named


def test_gen_refuses_a_consistency_run_of_the_own_trainer(tmp_path: Path) -> None:
    script = tmp_path / "sync_trainer.sh"
    script.write_text(SYNC_SCRIPT.read_text())
    result = run_cli("gen", "consistency", str(script), "--verl-root", str(SYNC_ROOT))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "verl.trainer.main_ppo_sync starts its own PPOTrainer" in lines[0]
    assert "launch verl.trainer.main_ppo instead" in lines[0] and "(nothing written)" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sync_trainer.sh"]


def test_gen_refuses_an_entry_module_the_tree_lacks(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(SYNC_SCRIPT.read_text().replace("main_ppo_sync", "main_ppo_v0"))
    result = run_cli("gen", "training", str(script), "--verl-root", str(SYNC_ROOT))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"rlpatch: error: {script}:8: entry module verl.trainer.main_ppo_v0 is not in the verl tree {SYNC_ROOT}: use "
        "verl.trainer.main_ppo (verl.trainer there: main_ppo, main_ppo_sync) (nothing written)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]


# ---- against the real released wheels -------------------------------------------------------------
@pytest.mark.upstream
@pytest.mark.parametrize("release", sorted(RELEASED_ENTRIES))
def test_release_table_is_what_the_wheel_ships(release: str) -> None:
    from rlpatch.upstream.api import unpacked_tree

    package = unpacked_tree("verl", release) / "verl"
    assert trainer_entries(str(package)) == tuple(sorted("verl.trainer." + n for n in RELEASED_ENTRIES[release]))
    own = {(release, f"verl.trainer.{path.stem}"): read_trainer(str(path))[0]
           for path in sorted((package / "trainer").glob("main_*.py"))}
    assert {key: name for key, name in own.items() if name} == \
        {key: name for key, name in RELEASED_OWN_TRAINERS.items() if key[0] == release}


@pytest.mark.upstream
def test_real_080_and_091_trees(tmp_path: Path) -> None:
    from rlpatch.upstream.api import unpacked_tree

    tree_080, tree_091 = unpacked_tree("verl", "0.8.0"), unpacked_tree("verl", "0.9.1")
    own = json.loads(run_cli("detect", "--format", "json", "--verl-root", str(tree_080), str(SYNC_SCRIPT)).stdout)
    assert (own["trainer"], own["entry_exists"]) == (OWN_TRAINER, True)
    assert own["trainer_reason"].startswith("PPOTrainer defined in verl/trainer/main_ppo_sync.py")
    gone = json.loads(run_cli("detect", "--format", "json", "--verl-root", str(tree_091), str(SYNC_SCRIPT)).stdout)
    assert (gone["trainer"], gone["entry_exists"]) == (None, False)
    # main_ppo: RayPPOTrainer on 0.8.0; on 0.9.1 it picks by trainer.use_v1 (v1 by default), main_ppo_v0 is v0
    script = tmp_path / "run.sh"
    for root, release, entry, trainer in (
            (tree_080, "0.8.0", "verl.trainer.main_ppo", "v0"), (tree_091, "0.9.1", "verl.trainer.main_ppo", "v1"),
            (tree_091, "0.9.1", "verl.trainer.main_ppo_v0", "v0"),
            (tree_091, "0.9.1", "verl.experimental.fully_async_policy.fully_async_main", "fully-async")):
        script.write_text(SYNC_SCRIPT.read_text().replace("verl.trainer.main_ppo_sync", entry))
        runs = script_runs(str(script), Version.parse(release), verl_root=str(root)).runs
        assert runs[0].trainer()[0] == trainer, (release, entry)


@pytest.mark.upstream
def test_gen_on_the_released_091_refuses_main_ppo_sync(tmp_path: Path) -> None:
    script = tmp_path / "sync_trainer.sh"
    script.write_text(SYNC_SCRIPT.read_text())
    result = run_cli("gen", "consistency", str(script), "--verl-version", "0.9.1")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"rlpatch: error: {script}:8: entry module verl.trainer.main_ppo_sync is not in the verl 0.9.1 release: use "
        "verl.trainer.main_ppo (verl.trainer there: main_eval, main_generation_server, main_ppo, main_ppo_v0, "
        "sft_trainer, sft_trainer_ray) (nothing written)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sync_trainer.sh"]
    refused = run_cli("gen", "consistency", str(script), "--verl-version", "0.8.0")
    assert refused.exit_code == 2 and "starts its own PPOTrainer" in refused.stderr



def test_read_hydra_main_from_source(tmp_path: Path) -> None:
    """The @hydra.main arguments an entry module declares (what RL3xx composes), from its source."""
    from rlpatch.upstream.api import HydraMain, read_hydra_main

    cases = {
        "import hydra\n\n@hydra.main(config_path='config', config_name='sft_trainer_engine', version_base=None)\n"
        "def main(cfg):\n    pass\n": HydraMain("config", "sft_trainer_engine"),
        "from hydra import main\n\n@main('conf', 'run')\ndef run(cfg):\n    pass\n": HydraMain("conf", "run"),
        "import hydra\nNAME = 'x'\n\n@hydra.main(config_name=NAME)\ndef main(cfg):\n    pass\n": HydraMain(None, None),
        "def main():\n    pass\n": None,
        "def broken(:\n": None,
    }
    for index, (source, expected) in enumerate(cases.items()):
        path = tmp_path / f"entry{index}.py"
        path.write_text(source)
        assert read_hydra_main(str(path)) == expected, source


def test_entry_module_reading_is_remembered_until_the_file_changes(tmp_path: Path, monkeypatch) -> None:
    """The parse of an entry module is kept on disk (a warm lint imports no `ast`), keyed by the file's
    size and modification time: the memo is what a later read returns, and an edited file is parsed again."""
    from rlpatch.upstream import entries

    monkeypatch.setenv("RLPATCH_CACHE", str(tmp_path / "cache"))
    read = entries._read_entry_module.__wrapped__  # past the in-process lru_cache: each call reads the disk
    path = tmp_path / "main_ppo.py"
    path.write_text("import hydra\n\n@hydra.main(config_path='config', config_name='ppo_trainer')\ndef main(cfg):\n    pass\n")
    first = read(str(path))
    assert first.hydra_main == entries.HydraMain("config", "ppo_trainer")
    memos = list((tmp_path / "cache" / "entries").iterdir())
    assert len(memos) == 1 and json.loads(memos[0].read_text())["module"] == [None, None, ["config", "ppo_trainer"]]

    saved = json.loads(memos[0].read_text())  # a memo saying something else, for the same file: it is what is read
    saved["module"][2] = ["elsewhere", "other"]
    memos[0].write_text(json.dumps(saved))
    assert read(str(path)).hydra_main == entries.HydraMain("elsewhere", "other")

    path.write_text("import hydra\n\n@hydra.main(config_path='conf', config_name='sft')\ndef main(cfg):\n    pass\n")
    assert read(str(path)).hydra_main == entries.HydraMain("conf", "sft")  # another size: parsed again
    memos[0].write_text("not json")
    assert read(str(path)).hydra_main == entries.HydraMain("conf", "sft")  # an unreadable memo: parsed again
