"""`rlpatch lint / detect / rule` from the outside: formats, selection, exit codes, suppressions, config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

RLPATCH = [sys.executable, "-c", "from rlpatch.cli import main; main()"]
BAD = ("python3 -m verl.trainer.main_ppo \\\n"
       "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=d.json \\\n"
       "    actor_rollout_ref.rollout.name=vllm \\\n"
       "    actor_rollout_ref.rollout.enforce_eager=False\n")


def rlpatch(*args: str, cwd: Path | None = None, stdin: str | None = None, env: dict | None = None):
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run(RLPATCH + list(args), cwd=cwd, input=stdin, capture_output=True, text=True, timeout=60,
                          env=full_env)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "bad.sh").write_text(BAD)
    (tmp_path / "scripts" / "d.json").write_text('{"task": "statistics", "dump_path": "/tmp/d", "level": "mix"}\n')
    (tmp_path / "scripts" / "clean.sh").write_text("python3 -m verl.trainer.main_ppo trainer.nnodes=1\n")
    return tmp_path


def test_concise_and_exit_codes(repo: Path) -> None:
    code, out, err = rlpatch("lint", "scripts/bad.sh", cwd=repo)
    assert code == 1 and err == ""
    assert out.splitlines()[0] == ("scripts/bad.sh:4:45: RL101 [E] actor_rollout_ref.rollout.enforce_eager must be "
                                   "True (graph mode cannot dump: msprobe only sees eager forward calls); found "
                                   "actor_rollout_ref.rollout.enforce_eager=False")
    assert rlpatch("lint", "scripts/clean.sh", cwd=repo)[0] == 0
    assert rlpatch("lint", "--exit-zero", "scripts/bad.sh", cwd=repo)[0] == 0
    assert rlpatch("lint", "--ignore", "RL101", "scripts/bad.sh", cwd=repo)[0] == 0
    assert rlpatch("lint", "--select", "RL4,RL0", "scripts/bad.sh", cwd=repo)[0] == 0
    assert rlpatch("lint", "--select", "RL999", "scripts/bad.sh", cwd=repo)[0] == 2


def test_fail_on_warning(repo: Path) -> None:
    (repo / "w.sh").write_text("python3 -m verl.trainer.main_ppo \\\n    # comment\n    trainer.nnodes=1\n")
    assert rlpatch("lint", "w.sh", cwd=repo)[0] == 0
    assert rlpatch("lint", "--fail-on", "W", "w.sh", cwd=repo)[0] == 1
    assert rlpatch("lint", "--fail-on", "error", "w.sh", cwd=repo)[0] == 0


def test_json_contract(repo: Path) -> None:
    code, out, _ = rlpatch("lint", "--format", "json", "scripts/bad.sh", "scripts/clean.sh", cwd=repo)
    findings = json.loads(out)["findings"]
    assert code == 1 and isinstance(findings, list) and findings
    for finding in findings:
        assert set(finding) == {"code", "severity", "message", "file", "line", "column", "end_line", "end_column", "url",
                                "fix"}
        assert finding["severity"] in ("error", "warning", "info")
    first = findings[0]
    assert (first["code"], first["file"], first["line"], first["column"], first["end_line"], first["end_column"]) == (
        "RL101", "scripts/bad.sh", 4, 45, 4, 50)


def test_full_and_github(repo: Path) -> None:
    out = rlpatch("lint", "--format", "full", "scripts/bad.sh", cwd=repo)[1]
    assert "   4 |     actor_rollout_ref.rollout.enforce_eager=False" in out
    assert "       | " + " " * 44 + "^^^^^" in out
    gh = rlpatch("lint", "--format", "github", "scripts/bad.sh", cwd=repo)[1]
    assert gh.startswith("::error file=scripts/bad.sh,line=4,col=45,endLine=4,endColumn=50,title=rlpatch (RL101)::RL101 ")


# A structural schema for the parts of SARIF 2.1.0 that rlpatch emits, written from the OASIS
# specification's required properties: the fast check. The official OASIS schema is checked in
# tests/test_sarif_official_schema.py (marker upstream: taken from a released wheel at test time).
# Set RLPATCH_SARIF_SCHEMA=/path/to/sarif-schema-2.1.0.json to validate against a local copy here too.
SARIF_SUBSET = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "$schema": {"type": "string", "format": "uri"},
        "runs": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["tool"],
            "properties": {
                "tool": {"type": "object", "required": ["driver"], "properties": {"driver": {
                    "type": "object", "required": ["name"],
                    "properties": {"name": {"type": "string"}, "rules": {"type": "array", "items": {
                        "type": "object", "required": ["id"],
                        "properties": {"id": {"type": "string"},
                                       "shortDescription": {"$ref": "#/$defs/message"},
                                       "fullDescription": {"$ref": "#/$defs/message"},
                                       "help": {"$ref": "#/$defs/message"},
                                       "defaultConfiguration": {"type": "object", "properties": {
                                           "level": {"enum": ["none", "note", "warning", "error"]}}}}}}}}}},
                "columnKind": {"enum": ["utf16CodeUnits", "unicodeCodePoints"]},
                "originalUriBaseIds": {"type": "object", "additionalProperties": {
                    "type": "object", "properties": {"uri": {"type": "string", "format": "uri"}}}},
                "invocations": {"type": "array", "items": {"type": "object", "required": ["executionSuccessful"]}},
                "results": {"type": "array", "items": {
                    "type": "object", "required": ["message"],
                    "properties": {
                        "ruleId": {"type": "string"},
                        "ruleIndex": {"type": "integer", "minimum": -1},
                        "level": {"enum": ["none", "note", "warning", "error"]},
                        "message": {"$ref": "#/$defs/message"},
                        "locations": {"type": "array", "items": {"$ref": "#/$defs/location"}},
                        "relatedLocations": {"type": "array", "items": {"$ref": "#/$defs/location"}},
                    }}},
            }}},
    },
    "$defs": {
        "message": {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}],
                    "properties": {"text": {"type": "string"}}},
        "location": {"type": "object", "properties": {
            "id": {"type": "integer", "minimum": -1},
            "physicalLocation": {"type": "object", "required": ["artifactLocation"], "properties": {
                "artifactLocation": {"type": "object", "properties": {"uri": {"type": "string", "format": "uri-reference"},
                                                                     "uriBaseId": {"type": "string"}}},
                "region": {"type": "object", "properties": {
                    "startLine": {"type": "integer", "minimum": 1}, "startColumn": {"type": "integer", "minimum": 1},
                    "endLine": {"type": "integer", "minimum": 1}, "endColumn": {"type": "integer", "minimum": 1}}},
            }}}},
    },
}


def test_sarif_validates_and_uses_repo_relative_uris(repo: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    (repo / "scripts" / "sub").mkdir()
    code, out, err = rlpatch("lint", "--format", "sarif", "bad.sh", "missing.sh", cwd=repo / "scripts")
    assert code == 2 and "missing.sh: no such file" in err
    log = json.loads(out)
    jsonschema.validate(log, SARIF_SUBSET)
    official = os.environ.get("RLPATCH_SARIF_SCHEMA")
    if official:
        jsonschema.validate(log, json.loads(Path(official).read_text()))
    run = log["runs"][0]
    uris = {loc["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"] for loc in r["locations"]}
    assert uris == {"scripts/bad.sh"}  # relative to the git top level, not to the cwd
    assert run["invocations"][0]["executionSuccessful"] is False
    result = run["results"][0]
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == result["ruleId"] == "RL101"


def test_stdin_and_extra_overrides(repo: Path) -> None:
    code, out, _ = rlpatch("lint", "--format", "json", "-", cwd=repo, stdin=BAD)
    assert code == 1 and json.loads(out)["findings"][0]["file"] == "-"
    script = repo / "fwd.sh"
    script.write_text('python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm "$@"\n')
    extra = ["--", "+actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=d.json",
             "actor_rollout_ref.rollout.enforce_eager=False"]
    code, out, _ = rlpatch("lint", "--format", "json", "--select", "RL101", "fwd.sh", *extra, cwd=repo)
    (finding,) = json.loads(out)["findings"]
    assert code == 1 and (finding["line"], finding["column"]) == (1, 71)  # the "$@" that forwards it


def test_mode_env_and_use_env(repo: Path) -> None:
    script = repo / "env.sh"
    script.write_text("python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=$NGPUS "
                      "actor_rollout_ref.rollout.tensor_model_parallel_size=3\n")
    assert rlpatch("lint", "--select", "RL401", "env.sh", cwd=repo)[0] == 0  # unknown: not guessed
    assert rlpatch("lint", "--select", "RL401", "--env", "NGPUS=8", "env.sh", cwd=repo)[0] == 1
    assert rlpatch("lint", "--select", "RL401", "--use-env", "env.sh", cwd=repo, env={"NGPUS": "8"})[0] == 1
    assert rlpatch("lint", "--select", "RL401", "env.sh", cwd=repo, env={"NGPUS": "8"})[0] == 0
    clean = repo / "scripts" / "clean.sh"
    assert rlpatch("lint", "--select", "RL2", str(clean), cwd=repo)[0] == 0
    assert rlpatch("lint", "--select", "RL2", "--mode", "consistency", str(clean), cwd=repo)[0] == 1


def test_directive_suppressions(repo: Path) -> None:
    script = repo / "s.sh"
    script.write_text("# rlpatch: disable=RL101\n" + BAD)
    assert rlpatch("lint", "s.sh", cwd=repo)[0] == 0
    script.write_text("# rlpatch: disable=RL102\n" + BAD)
    assert rlpatch("lint", "s.sh", cwd=repo)[0] == 1
    script.write_text("#!/bin/bash\n# rlpatch: disable-file=RL1\nset -e\n" + BAD)
    assert rlpatch("lint", "s.sh", cwd=repo)[0] == 0
    script.write_text("set -e\n# rlpatch: disable-file=RL101\n" + BAD)  # after the first command: ignored
    assert rlpatch("lint", "s.sh", cwd=repo)[0] == 1
    # the directive before the command that uses a variable also covers the variable's assignment
    script.write_text("EAGER=False\n# rlpatch: disable=RL101\n" + BAD.replace("enforce_eager=False", "enforce_eager=$EAGER"))
    assert rlpatch("lint", "s.sh", cwd=repo)[0] == 0


def test_same_line_suppressions_and_rl005(repo: Path) -> None:
    """The same-line form silences the command it ends; only real comments are directives; RL005 names
    an unknown code and a code that silences nothing (a warning: the exit stays 0)."""
    script = repo / "s.sh"
    script.write_text(BAD.rstrip("\n") + "  # rlpatch: disable=RL101\n")
    assert rlpatch("lint", "s.sh", cwd=repo)[0] == 0
    quoted = BAD.rstrip("\n") + " data.note='# rlpatch: disable=RL101'\n"  # inside a quoted value: no directive
    script.write_text(quoted)
    assert rlpatch("lint", "--select", "RL101", "s.sh", cwd=repo)[0] == 1
    script.write_text("# rlpatch: disable=RL101,RL999\n" + BAD)
    code, out = rlpatch("lint", "--format", "json", "s.sh", cwd=repo)[:2]
    (finding,) = [f for f in json.loads(out)["findings"] if f["code"] == "RL005"]
    assert code == 0 and (finding["line"], finding["column"]) == (1, 26)
    assert "unknown rule code 'RL999'" in finding["message"]
    script.write_text("# rlpatch: disable=RL101,RL003\n" + BAD)
    (finding,) = [f for f in json.loads(rlpatch("lint", "--format", "json", "s.sh", cwd=repo)[1])["findings"] if f["code"] == "RL005"]
    assert finding["column"] == 26 and "unused suppression: RL003" in finding["message"]
    assert rlpatch("lint", "--format", "json", "--select", "RL005,RL101", "s.sh", cwd=repo)[1].strip() == '{\n  "version": 1,\n  "findings": []\n}'


TP3 = "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.tensor_model_parallel_size=3\n"  # RL401


def test_exclude_gitignore_per_file_ignores_and_extend_select(tmp_path: Path) -> None:
    """[tool.rlpatch] as ruff's: exclude (walks; named files only with --force-exclude), .gitignore in a
    work tree, per-file-ignores, extend-select, and --config FILE."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name in ("build/a.sh", "old/b.sh", "scripts/c.sh", "scripts/d_old.sh", "scripts/e.sh"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(TP3)
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "pyproject.toml").write_text('[tool.rlpatch]\nexclude = ["old", "*_old.sh"]\n'
                                             'per-file-ignores = { "scripts/c.sh" = ["RL4"] }\n')

    def files(*args: str) -> list[str]:
        out = rlpatch("lint", "--format", "json", *args, cwd=tmp_path)[1]
        return sorted({f["file"] for f in json.loads(out)["findings"]})

    assert files(".") == ["scripts/e.sh"]
    assert files("--no-respect-gitignore", ".") == ["build/a.sh", "scripts/e.sh"]
    assert files("old/b.sh") == ["old/b.sh"]  # named: linted, as ruff does
    assert files("--force-exclude", "old/b.sh", "scripts/e.sh") == ["scripts/e.sh"]
    subprocess.run(["git", "-C", str(tmp_path), "add", "-f", "build/a.sh"], check=True)
    assert files(".") == ["build/a.sh", "scripts/e.sh"]  # a tracked file is never ignored
    (tmp_path / "only.toml").write_text('select = ["RL1"]\nextend-select = ["RL401"]\n')
    assert files("--config", "only.toml", "old/b.sh") == ["old/b.sh"]  # another file's settings: nothing excluded
    settings = rlpatch("lint", "--config", "only.toml", "--show-settings", "old/b.sh", cwd=tmp_path)[1]
    assert "config file: only.toml\n" in settings and "select: RL1,RL401\n" in settings
    (tmp_path / "bad.toml").write_text('per-file-ignores = { "x" = ["RL999"] }\n')
    code, _, err = rlpatch("lint", "--config", "bad.toml", "scripts/e.sh", cwd=tmp_path)
    assert code == 2 and err == "rlpatch: error: bad.toml per-file-ignores: unknown rule code or prefix: RL999\n"
    code, _, err = rlpatch("lint", "--config", "missing.toml", "scripts/e.sh", cwd=tmp_path)
    assert code == 2 and err == "rlpatch: error: --config missing.toml: no such file\n"
    assert rlpatch("lint", "--config", "only.toml", "--no-config", "scripts/e.sh", cwd=tmp_path)[0] == 2


def test_pyproject_config_discovery(repo: Path) -> None:
    (repo / "pyproject.toml").write_text('[tool.rlpatch]\nignore = ["RL101"]\n')
    assert rlpatch("lint", "scripts/bad.sh", cwd=repo)[0] == 0
    assert rlpatch("lint", "--no-config", "scripts/bad.sh", cwd=repo)[0] == 1
    (repo / "scripts" / "pyproject.toml").write_text('[project]\nname = "x"\n')  # no [tool.rlpatch]: keep walking
    assert rlpatch("lint", "scripts/bad.sh", cwd=repo)[0] == 0
    (repo / "scripts" / "pyproject.toml").write_text('[tool.rlpatch]\nfail-on = "I"\nselect = ["RL1"]\n')
    assert rlpatch("lint", "scripts/clean.sh", cwd=repo)[0] == 0
    assert rlpatch("lint", "scripts/bad.sh", cwd=repo)[0] == 1
    (repo / "scripts" / "pyproject.toml").write_text('[tool.rlpatch]\nbogus = 1\n')
    code, _, err = rlpatch("lint", "scripts/bad.sh", cwd=repo)
    assert code == 2 and "unknown [tool.rlpatch] key(s): bogus" in err


def test_verl_root_picks_the_skip_key(repo: Path) -> None:
    root = repo / "verl08"
    (root / "verl" / "version").mkdir(parents=True)
    (root / "verl" / "version" / "version").write_text("0.8.0\n")
    (repo / "skip.sh").write_text("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.skip.enable=True\n")
    args = ["lint", "--select", "RL209", "--mode", "consistency", "skip.sh"]
    assert rlpatch(*args, cwd=repo)[0] == 0
    assert rlpatch(*args, "--verl-root", str(root), cwd=repo)[0] == 1
    assert rlpatch(*args, "--verl-version", "0.8.0", cwd=repo)[0] == 1
    assert rlpatch(*args, "--verl-root", str(repo / "scripts"), cwd=repo)[0] == 2


def test_detect_json_contract(repo: Path) -> None:
    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "lint" / "consistency"
    code, out, _ = rlpatch("detect", "--format", "json", str(fixtures / "fsdp_vllm.sh"))
    obj = json.loads(out)
    assert code == 0 and obj["version"] == 1
    for key in ("file", "entry", "mode", "rollout_backend", "train_backend", "world_size", "overrides", "env", "unknown"):
        assert key in obj
    assert (obj["entry"], obj["mode"], obj["rollout_backend"], obj["train_backend"], obj["world_size"]) == (
        "verl.trainer.main_ppo", "consistency", "vllm", "fsdp", 8)
    assert obj["env"]["DUMP_PHASE"] == "log_prob"
    assert obj["overrides"][0] == {"text": "algorithm.adv_estimator=grpo", "key": "algorithm.adv_estimator",
                                   "value": "grpo", "line": 16, "column": 5, "file": str(fixtures / "fsdp_vllm.sh")}
    code, out, _ = rlpatch("detect", "--format", "json", "scripts/clean.sh", "scripts/bad.sh", cwd=repo)
    both = json.loads(out)
    assert both["version"] == 1 and [o["mode"] for o in both["scripts"]] == ["none", "inference"]
    code, out, _ = rlpatch("detect", "--format", "json", "-", cwd=repo, stdin="echo hi\n")
    assert json.loads(out)["entry"] is None and json.loads(out)["mode"] == "none"
    assert "mode:            inference" in rlpatch("detect", "scripts/bad.sh", cwd=repo)[1]


def test_rule_docs() -> None:
    code, out, _ = rlpatch("rule", "RL201")
    assert code == 0 and out.startswith("RL201 (E, consistency): ")
    assert "\nExample\n" in out and "\nUse instead\n" in out and "tensor_model_parallel_size=8" in out
    code, out, _ = rlpatch("rule")
    from rlpatch.lint.engine import rule_classes

    assert code == 0 and len(out.splitlines()) == len(rule_classes()) and out.startswith("RL001 E  ")
    code, _, err = rlpatch("rule", "RL999")
    assert code == 2 and err.startswith("rlpatch: error: unknown rule code: RL999")
