"""The lint oracle (issue 29.3): lint's Hydra verdicts are Hydra's own, on the released verl wheels.

For every project fixture that reproduces a Hydra shape (the RL301-RL306 rule cases, the launch scripts
under fixtures/lint/, and fixtures/lint/hydra_oracle/ written for the shapes of issue 29) and every
release the upstream tests cache, the script runs under bash with recording stand-ins (a sealed PATH),
each launch it makes is composed by Hydra's own `compose` against the config of the module it runs, in
the released wheel's tree (tests/hydra_oracle.py), and `rlpatch lint --verl-version <release>` must agree:

- Hydra refuses a launch  <=>  lint reports an error of RL301-RL304 (the message may differ, the verdict not);
- the launch composes: RL305/RL306 report an error exactly when the composed config bears their claim out
  (no rollout backend; the removed synchronous rollout on verl >= 0.7);
- the outcome depends on what the tree does not hold (a `pkg://` package on the search path, an entry
  module the release lacks): lint claims no Hydra refusal.

Cost: one Hydra compose of verl's config is ~0.3 s of CPU (YAML parsing); the file is ~85 composes,
~30 s of CPU warm. tests/corpus_lint_oracle.py runs the same oracle over a verl checkout's scripts.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli
from gen_harness import run_with_stand_ins
from hydra_oracle import COMPOSE_CODES, COMPOSES, FAILS, RUNTIME_CODES, UNKNOWN, Verdict, compose_launch

from rlpatch.lint.engine import rule_classes
from rlpatch.upstream.wheelcache import unpacked_tree

pytestmark = pytest.mark.upstream

VERSIONS = ("0.5.0", "0.8.0", "0.9.1")  # releases the upstream tests already cache
# The rule cases and the shell-construct fixtures are written against the 0.9.1 look-alike tree
# (fixtures/verl_mini): they are composed on 0.9.1 only, which keeps the file's run short (a compose of
# verl's config takes ~0.3 s); the Hydra-shape fixtures run on every release.
NEWEST = ("0.9.1",)
NEWEST_ONLY = ("constructs/",)
LINT_FIXTURES = FIXTURES / "lint"
# fixtures/lint scripts that are no launch of their own (sourced or run by another fixture, or a usage
# message that stops the script before it launches).
NOT_LAUNCHES = {"constructs/inner.sh", "constructs/common.env", "constructs/usage_check.sh"}
# Shapes lint got wrong before issue 29 item 2 (each now passes): strict xfails go here, keyed (case id,
# release), when a shape is found that lint still gets wrong.
KNOWN_WRONG: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class OracleCase:
    id: str
    folder: Path  # copied whole (a launch may read siblings: config/, sourced files)
    script: str  # file name inside the folder
    text: str = ""  # for a rule case: the script's text (written as run.sh)
    versions: tuple[str, ...] = VERSIONS


def _rule_cases() -> list[OracleCase]:
    cases = []
    for cls in rule_classes():
        if cls.code not in COMPOSE_CODES + RUNTIME_CODES:
            continue
        for kind, group in (("valid", cls.VALID), ("invalid", cls.INVALID)):
            cases += [OracleCase(f"{cls.code}-{kind}-{index}", Path(), "run.sh", case.script, NEWEST)
                      for index, case in enumerate(group) if not case.files]
    return cases


def _fixture_cases() -> list[OracleCase]:
    cases = []
    for path in sorted(LINT_FIXTURES.rglob("*.sh")):
        relative = path.relative_to(LINT_FIXTURES).as_posix()
        if relative not in NOT_LAUNCHES:
            versions = NEWEST if relative.startswith(NEWEST_ONLY) else VERSIONS
            cases.append(OracleCase(relative.removesuffix(".sh"), path.parent, path.name, versions=versions))
    return cases


CASES = _rule_cases() + _fixture_cases()


def _params() -> list[object]:
    params = []
    for case in CASES:
        for version in case.versions:
            reason = KNOWN_WRONG.get((case.id, version))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            params.append(pytest.param(case, version, marks=marks, id=f"{case.id}-{version}"))
    return params


def hydra_verdict(script: Path, tmp: Path, version: str) -> Verdict:
    """Hydra's verdict on every launch the script makes: fails if one fails, unknown if one is unknown."""
    calls = run_with_stand_ins(script, tmp / "run", sealed=True)
    assert calls, f"{script.name} launches no module"
    verdicts = [compose_launch(unpacked_tree("verl", version), call.argv) for call in calls]
    for outcome in (FAILS, UNKNOWN):
        for verdict in verdicts:
            if verdict.outcome == outcome:
                return verdict
    return Verdict(COMPOSES, facts=set().union(*(v.facts for v in verdicts)))


def lint_errors(script: Path, version: str) -> dict[str, list[str]]:
    """code -> messages of the errors `rlpatch lint --verl-version VERSION` reports on the script."""
    result = run_cli("lint", "--format", "json", "--exit-zero", "--verl-version", version, str(script))
    assert result.exit_code == 0, result.stderr
    errors: dict[str, list[str]] = {}
    for finding in json.loads(result.stdout)["findings"]:
        if finding["severity"] == "error":
            errors.setdefault(finding["code"], []).append(f"{finding['line']}:{finding['column']} {finding['message']}")
    return errors


def disagreement(verdict: Verdict, errors: dict[str, list[str]]) -> str:
    """'' when lint's Hydra verdicts are Hydra's; else what differs."""
    refusals = {code: errors[code] for code in COMPOSE_CODES if code in errors}
    runtime = {code for code in RUNTIME_CODES if code in errors}
    if verdict.outcome == FAILS and not refusals:
        return f"Hydra refuses ({verdict.entry}: {verdict.detail}), lint reports no RL301-RL304 error"
    if verdict.outcome in (COMPOSES, UNKNOWN) and refusals:
        why = "Hydra composes" if verdict.outcome == COMPOSES else f"Hydra's verdict is unknown ({verdict.detail})"
        return f"{why}, lint reports {refusals}"
    if verdict.outcome == COMPOSES and runtime != verdict.facts:
        return f"the composed config bears out {sorted(verdict.facts)}, lint reports {sorted(runtime)}"
    return ""


@pytest.mark.parametrize("case,version", _params())
def test_lint_verdict_is_hydras(tmp_path: Path, case: OracleCase, version: str) -> None:
    scripts = tmp_path / "scripts"
    if case.text:
        scripts.mkdir()
        (scripts / case.script).write_text(case.text)
    else:
        shutil.copytree(case.folder, scripts)
    script = scripts / case.script
    verdict = hydra_verdict(script, tmp_path, version)
    problem = disagreement(verdict, lint_errors(script, version))
    assert not problem, problem


# ---- the oracle has teeth -------------------------------------------------------------------------------
def test_a_wrong_verdict_is_reported() -> None:
    refused = Verdict(FAILS, "ConfigCompositionException: Could not override 'x'", "verl.trainer.main_ppo")
    assert "lint reports no RL301-RL304 error" in disagreement(refused, {"RL305": ["1:1 m"]})
    assert disagreement(refused, {"RL302": ["2:5 m"]}) == ""
    assert "Hydra composes, lint reports" in disagreement(Verdict(COMPOSES), {"RL303": ["2:5 m"]})
    assert "unknown" in disagreement(Verdict(UNKNOWN, "hydra.searchpath pkg://x"), {"RL302": ["2:5 m"]})
    assert "bears out ['RL305']" in disagreement(Verdict(COMPOSES, facts={"RL305"}), {})
    assert disagreement(Verdict(COMPOSES, facts={"RL306"}), {"RL306": ["2:36 m"]}) == ""


def test_hydra_itself_decides(tmp_path: Path) -> None:
    """The verdicts come from Hydra on the release's tree: a key sft_trainer_engine lacks fails, the
    fully-async Megatron config (its `--config-path=config` beside the module, `file://` search path)
    composes, an absent `pkg://` package is unknown."""
    folder = LINT_FIXTURES / "hydra_oracle"
    assert hydra_verdict(folder / "sft_trainer_bad_key.sh", tmp_path / "a", "0.9.1").outcome == FAILS
    assert hydra_verdict(folder / "sft_trainer.sh", tmp_path / "b", "0.9.1").outcome == COMPOSES
    assert hydra_verdict(folder / "fully_async_config_path.sh", tmp_path / "c", "0.9.1").outcome == COMPOSES
    absent = hydra_verdict(folder / "searchpath_absent.sh", tmp_path / "d", "0.9.1")
    assert absent.outcome == UNKNOWN and "absent_plugin" in absent.detail
    assert hydra_verdict(folder / "sft_trainer.sh", tmp_path / "e", "0.5.0").outcome == UNKNOWN  # no such module
