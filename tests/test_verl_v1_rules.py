"""The v1-trainer rules and the trainer verdict of verify/status (issue 9), on fixtures and real wheels.

Apply, compile, verify, idempotence, `git apply` / `patch -p1` of the diff and byte-exact revert of
the whole consistency set (these two rules included) on 0.9.0 and 0.9.1 are in
tests/test_cli_consistency.py; this file adds what is particular to the v1 trainer.
"""

from __future__ import annotations

import json
import re

import libcst as cst
import pytest
from conftest import run_cli, snapshot

from rlpatch.patch import edits
from rlpatch.rules import verl_request_id_v1
from rlpatch.rules.verl_request_id_v1 import VerlRequestIdV1
from rlpatch.upstream import trainers
from rlpatch.upstream.versions import Version

V1_RULES = "verl-prompts-only-v1,verl-request-id-v1"
# The set as it was before the v1 rules: every rule of the v0 and fully-async trainers.
OLD_SET = ("verl-prompts-only,verl-prompts-only-async,verl-debug-metrics,verl-rollout-corr,verl-request-id,"
           "verl-request-id-async,verl-engine-fsdp,verl-engine-megatron")
ENGINE_WORKERS = "verl/workers/engine_workers.py"
AGENT_LOOP_TQ = "verl/trainer/ppo/v1/agent_loop_tq.py"


def _json(*args: str) -> dict:
    result = run_cli(*args, "--format", "json")
    assert result.stdout, result.stderr
    return {"exit_code": result.exit_code, **json.loads(result.stdout)["targets"][0]}


def _verdict(payload: dict) -> dict[str, str]:
    return {entry["trainer"]: entry["state"] for entry in payload["trainers"]}


# ------------------------------------------------------------------------------------------------
# The trainer verdict, on rule reports
# ------------------------------------------------------------------------------------------------


def _report(rule_id: str, state: str, *trainer_ids: str) -> dict:
    return {"id": rule_id, "state": state, "trainers": list(trainer_ids)}


def test_a_trainer_is_complete_only_with_its_own_rule_applied() -> None:
    shared = [_report("metrics", "applied", "v0", "v1", "fully-async")]
    reports = [*shared, _report("v0-trim", "applied", "v0"), _report("v1-trim", "absent", "v1")]
    verdict = trainers.coverage(reports, Version.maybe("0.9.1"))
    assert verdict["v0"].state == "complete"
    assert verdict["v1"].state == "incomplete" and verdict["v1"].missing == ("v1-trim (absent)",)
    # No rule of the set for the fully-async trainer: never "complete" by default.
    assert verdict["fully-async"].state == "incomplete"
    line = trainers.describe(verdict, Version.maybe("0.9.1"))
    assert line.startswith("complete for RayPPOTrainer.fit; not for v1 PPOTrainer (default): v1-trim (absent)")


def test_a_trainer_the_release_does_not_ship_is_absent() -> None:
    reports = [_report("v0-trim", "applied", "v0"), _report("v1-trim", "not-applicable", "v1")]
    verdict = trainers.coverage(reports, Version.maybe("0.8.0"))
    assert verdict["v1"].state == "absent" and verdict["v0"].state == "complete"
    assert trainers.default_trainer(Version.maybe("0.8.0")) == "v0"
    assert trainers.default_trainer(Version.maybe("0.9.0")) == "v1"


def test_padding_rows_get_their_request_id_blanked() -> None:
    padding = next(case for case in verl_request_id_v1.VerlRequestIdV1.VALID if case.path == verl_request_id_v1.PADDING)
    module = cst.parse_module(padding.source)
    patched = edits.insert(module, VerlRequestIdV1().insertions(verl_request_id_v1.PADDING, module)).code
    assert 'template_sample["uid"] = pad_uid\n    if "request_id" in template_sample:\n' in patched


def test_rules_command_names_the_trainer_of_every_rule() -> None:
    rows = json.loads(run_cli("rules", "--format", "json").stdout)["rules"]
    assert all(row["trainer"] for row in rows)
    by_id = {row["id"]: row for row in rows}
    assert by_id["verl-prompts-only-v1"]["trainers"] == ["v1"]
    assert by_id["verl-prompts-only"]["trainers"] == ["v0"]
    assert "runs under: v1 PPOTrainer (trainer.use_v1=True" in run_cli("rules").stdout


# ------------------------------------------------------------------------------------------------
# Real releases
# ------------------------------------------------------------------------------------------------


@pytest.mark.upstream
@pytest.mark.parametrize("version", ["0.9.0", "0.9.1"])
def test_the_old_set_is_not_complete_for_the_default_trainer(verl_tree, version: str) -> None:
    # The case: the pre-0.9 set says `applied`, yet with verl's defaults the trim never runs.
    tree = verl_tree(version)
    root = ["--verl-root", str(tree)]
    assert run_cli("apply", *root, "--rules", OLD_SET).exit_code == 0
    before = _json("verify", *root, "--mode", "consistency")
    assert before["exit_code"] == 1
    assert _verdict(before) == {"v1": "incomplete", "v0": "complete", "fully-async": "complete"}
    text = run_cli("status", *root, "--mode", "consistency").stdout
    assert "trainers: complete for RayPPOTrainer.fit, FullyAsyncTrainer; not for v1 PPOTrainer (default): " \
           "verl-prompts-only-v1 (absent), verl-request-id-v1 (absent)" in text
    assert re.search(r"verl-prompts-only-v1 +absent +\[v1 PPOTrainer\] +verl/workers/engine_workers.py", text)
    assert re.search(r"verl-debug-metrics +applied +\[every trainer\]", text)

    assert run_cli("apply", *root, "--mode", "consistency").exit_code == 0
    after = _json("verify", *root, "--mode", "consistency")
    assert after["exit_code"] == 0 and set(_verdict(after).values()) == {"complete"}
    assert "trainers: complete for v1 PPOTrainer (default), RayPPOTrainer.fit, FullyAsyncTrainer" in \
        run_cli("verify", *root, "--mode", "consistency").stdout


@pytest.mark.upstream
def test_no_v1_trainer_in_0_8_0(verl_tree) -> None:
    tree = verl_tree("0.8.0")
    pristine = snapshot(tree)
    payload = _json("apply", "--verl-root", str(tree), "--rules", V1_RULES)
    assert payload["exit_code"] == 1 and snapshot(tree) == pristine  # nothing of them can take effect: refused
    assert {rule["state"] for rule in payload["rules"]} == {"not-applicable"}
    assert all("verl 0.8.0: no v1 trainer in this release" in rule["message"] for rule in payload["rules"])
    whole = _json("status", "--verl-root", str(tree), "--mode", "consistency")
    assert _verdict(whole)["v1"] == "absent"


@pytest.mark.upstream
@pytest.mark.parametrize(
    "path,old,new,expected",
    [
        (ENGINE_WORKERS, "def compute_log_prob(", "def compute_logprob(",
         "class ActorRolloutRefWorker: expected exactly one method compute_log_prob"),
        (ENGINE_WORKERS, "output = self.actor.infer_batch(data)", "output = self.actor.run_batch(data)",
         "ActorRolloutRefWorker.compute_log_prob: expected exactly one `output = self.actor.infer_batch(data)`"),
        (AGENT_LOOP_TQ, "class AgentLoopWorkerTQ(", "class AgentLoopWorkerKV(",
         "expected exactly one top-level class AgentLoopWorkerTQ"),
        ("verl/trainer/ppo/padding_utils.py", "def upsample_batch_to_divisible_size(", "def upsample_batch(",
         "expected exactly one top-level function upsample_batch_to_divisible_size"),
    ],
    ids=["method-renamed", "call-renamed", "class-renamed", "function-renamed"],
)
def test_drifted_v1_anchor_refuses_and_writes_nothing(verl_tree, path: str, old: str, new: str, expected: str) -> None:
    tree = verl_tree("0.9.1")
    target = tree / path
    text = target.read_text()
    assert text.count(old) == 1
    target.write_text(text.replace(old, new))
    before = snapshot(tree)
    result = run_cli("apply", "--verl-root", str(tree), "--mode", "consistency")
    assert result.exit_code == 1
    assert expected in result.stderr and path in result.stderr and "nothing was written" in result.stderr
    assert snapshot(tree) == before  # zero bytes written, every other rule's file included


# ------------------------------------------------------------------------------------------------
# Which trainer a launch selects (rlpatch detect)
# ------------------------------------------------------------------------------------------------

_LAUNCH = "python3 -m {entry} actor_rollout_ref.rollout.name=vllm{extra}\n"


@pytest.mark.parametrize(
    "entry,extra,version,expected",
    [
        ("verl.trainer.main_ppo", "", "0.9.1", ("v1", "trainer.use_v1 defaults to true on verl 0.9.1")),
        ("verl.trainer.main_ppo", " trainer.use_v1=False", "0.9.0", ("v0", "trainer.use_v1=False")),
        ("verl.trainer.main_ppo", " trainer.use_v1=$FLAG", "0.9.1", (None, "trainer.use_v1=<unknown>")),
        ("verl.trainer.main_ppo", "", "0.8.0", ("v0", "verl 0.8.0 has no v1 trainer")),
        ("verl.trainer.main_ppo", "", "0.7.1", ("v0", "verl 0.7.1; legacy workers (trainer.use_legacy_worker_impl")),
        ("verl.experimental.fully_async_policy.fully_async_main", "", "0.9.1",
         ("fully-async", "entry verl.experimental.fully_async_policy.fully_async_main")),
    ],
    ids=["0.9-default", "use_v1-false", "unknown", "0.8", "0.7-legacy", "fully-async"],
)
def test_detect_shows_the_trainer(tmp_path, entry: str, extra: str, version: str, expected: tuple) -> None:
    script = tmp_path / "run.sh"
    script.write_text(_LAUNCH.format(entry=entry, extra=extra))
    result = run_cli("detect", "--format", "json", "--verl-version", version, str(script))
    payload = json.loads(result.stdout)
    assert payload["trainer"] == expected[0] and payload["trainer_reason"].startswith(expected[1])
    text = run_cli("detect", "--verl-version", version, str(script)).stdout
    assert "  trainer:         " in text


@pytest.mark.upstream
def test_lint_requires_a_covered_trainer_on_a_real_release(verl_tree, tmp_path, fixture_tree) -> None:
    tree = verl_tree("0.9.1")
    assert run_cli("apply", "--verl-root", str(tree), "--rules", OLD_SET).exit_code == 0
    # the rollout side is in place, so RL605 speaks of the verl tree only
    vllm_ascend = fixture_tree("vllm_ascend_runner")
    assert run_cli("apply", "--mode", "consistency", "--vllm-ascend-root", str(vllm_ascend)).exit_code == 0
    script = tmp_path / "run.sh"
    launch = ("export DUMP_ON=1 PROMPTS_ONLY=1\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm "
              "+actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=d.json{}\n")

    def findings(extra: str) -> list[str]:
        script.write_text(launch.format(extra))
        result = run_cli("lint", "--format", "json", "--select", "RL605,RL607", "--verl-root", str(tree),
                         "--vllm-ascend-root", str(vllm_ascend), str(script))
        return [f"{finding['code']}: {finding['message']}" for finding in json.loads(result.stdout)["findings"]]

    default = findings("")
    assert [finding[:5] for finding in default] == ["RL605", "RL607"]
    assert "v1 PPOTrainer (trainer.use_v1 defaults to true on verl 0.9.1)" in default[1]
    assert "or select the covered RayPPOTrainer with trainer.use_v1=False" in default[1]
    assert findings(" trainer.use_v1=False") == []  # the RayPPOTrainer is covered: neither rule fires
    assert run_cli("apply", "--verl-root", str(tree), "--mode", "consistency").exit_code == 0
    assert findings("") == []
