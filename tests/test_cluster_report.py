"""The `--ray` report and the per-node command line, on made-up node answers (no Ray needed)."""

from __future__ import annotations

import click

from rlpatch.cluster.options import node_argv, ray_options
from rlpatch.cluster.report import Outcome, differences, summary_lines


def node(node_id: str, state: str = "applied", version: str = "0.9.1", status: str = "ok", message: str = "") -> dict:
    target = {"package": "verl", "root": f"/srv/{node_id}", "version": version, "state": state,
              "rules": [{"id": "verl-engine-fsdp", "state": state, "files": [], "message": message}]}
    return {"node_id": node_id * 4, "hostname": f"host-{node_id}", "ip": "10.0.0.1", "executable": "/usr/bin/python3",
            "python": "3.11.7", "ray": "2.60.0", "rlpatch": "0.1.0", "status": status,
            "exit_code": 0 if status == "ok" else 1, "result": {"targets": [target]}}


def test_the_node_that_differs_is_named_with_what_differs():
    found = differences({"a": {"verl version": "0.9.1"}, "b": {"verl version": "0.9.1"}, "c": {"verl version": "0.8.0"}})
    assert found == {"c": {"verl version": ["0.8.0", "0.9.1"]}}


def test_verify_fails_when_a_node_differs_or_fails():
    same = Outcome("verify", "head:6379", [node("aaa"), node("bbb")], [])
    assert same.exit_code == 0 and not same.differs
    other_version = Outcome("verify", "head:6379", [node("aaa"), node("bbb"), node("ccc", version="0.8.0")], [])
    assert other_version.exit_code == 1
    assert any(line.startswith("differs: node cccccccccccc") and "verl version=0.8.0 (most nodes: 0.9.1)" in line
               for line in summary_lines(other_version))
    unpatched = Outcome("verify", "head:6379", [node("aaa"), node("bbb"), node("ccc", "absent", status="failed")], [])
    lines = summary_lines(unpatched)
    assert lines[0] == "failed on 1 node(s): cccccccccccc (host-ccc, 10.0.0.1) (verl at /srv/ccc: absent)"


def test_status_reports_but_fails_only_when_a_node_cannot_answer():
    assert Outcome("status", "a:1", [node("aaa"), node("bbb", "absent")], []).exit_code == 0
    dead = {"NodeID": "dddd", "NodeManagerHostname": "host-d", "NodeManagerAddress": "10.0.0.4", "Alive": False}
    assert Outcome("status", "a:1", [node("aaa")], [dead]).exit_code == 1
    timed_out = dict(node("bbb"), status="timeout", result=None, error="no answer within 5 s")
    assert Outcome("status", "a:1", [node("aaa"), timed_out], []).exit_code == 1


def test_apply_names_the_nodes_it_changed():
    outcome = Outcome("apply", "a:1", [node("aaa", message="applied now"), node("bbb", message="already applied")], [])
    assert outcome.changed() == ["aaaaaaaaaaaa"]
    assert "changed: 1 node(s): aaaaaaaaaaaa (host-aaa, 10.0.0.1)" in summary_lines(outcome)


def test_node_argv_keeps_the_options_and_drops_ray():
    @click.command("verify")
    @click.option("--verl-root")
    @click.option("--backend", default="all")
    @click.option("--force", is_flag=True)
    @click.option("--format", "output_format", default="text")
    @ray_options
    def command(**options):
        ctx = click.get_current_context()
        click.echo(" ".join(node_argv(ctx)))

    from click.testing import CliRunner

    result = CliRunner().invoke(command, ["--verl-root", "/srv/x", "--force", "--ray", "auto", "--ray-timeout", "9",
                                          "--backend", "fsdp"])
    assert result.output.strip() == "verify --verl-root /srv/x --backend fsdp --force --format json"


def test_a_node_whose_command_errs_is_named_with_its_error():
    erring = dict(node("bbb"), status="error", exit_code=2, result=None,
                  error="rlpatch: error: no tree of verl found for /usr/bin/python3")
    outcome = Outcome("verify", "a:1", [node("aaa"), erring], [])
    assert outcome.exit_code == 1
    assert ("error on 1 node(s): bbbbbbbbbbbb (host-bbb, 10.0.0.1): rlpatch: error: no tree of verl found for "
            "/usr/bin/python3") in summary_lines(outcome)
