"""Platform tags: several accepted tags go to pip as repeated --platform options, one cache key."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rlpatch.upstream import wheelcache


def test_several_platform_tags_reach_pip(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RLPATCH_CACHE", str(tmp_path))
    seen: list[list[str]] = []

    def fake_run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        seen.append(command)
        folder = Path(command[command.index("-d") + 1])
        (folder / "demo-1.0-cp311-cp311-manylinux_2_24_x86_64.whl").write_bytes(b"")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_run)  # wheelcache imports it when it downloads
    wheel = wheelcache.wheel_path("demo", "1.0", platform=wheelcache.LINUX_X86_64, python_version="3.11")
    command = seen[0]
    assert [command[i + 1] for i, part in enumerate(command) if part == "--platform"] == list(wheelcache.LINUX_X86_64)
    assert "--only-binary=:all:" in command and command[command.index("--python-version") + 1] == "3.11"
    # The second call is served from the cache, keyed by the same tags.
    assert wheelcache.wheel_path("demo", "1.0", platform=wheelcache.LINUX_X86_64) == wheel
    assert len(seen) == 1


def test_one_platform_tag_keeps_its_old_cache_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RLPATCH_CACHE", str(tmp_path))
    folder = tmp_path / "wheels" / "demo" / "1.0" / "manylinux_2_24_x86_64"
    folder.mkdir(parents=True)
    (folder / "demo-1.0-cp311-cp311-manylinux_2_24_x86_64.whl").write_bytes(b"")
    assert wheelcache.wheel_path("demo", "1.0", platform="manylinux_2_24_x86_64").parent == folder
