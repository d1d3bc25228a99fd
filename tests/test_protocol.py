"""The harness protocol version: one definition, checked on both sides of the JSON exchange."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import guard.measure._runner as runner
from guard.harness import HARNESS_SCRIPT, PROTOCOL_VERSION
from guard.measure import ArmTarget
from guard.measure._runner import RunFailed, run_harness
from guard.sandbox import choose_box
from tests.test_harness import engine_spec


def test_the_harness_refuses_a_spec_of_another_protocol(tmp_path: Path) -> None:
    spec = tmp_path / "run.spec.json"
    out = tmp_path / "run.json"
    spec.write_text(json.dumps(engine_spec(protocol=PROTOCOL_VERSION + 1)))
    proc = subprocess.run([sys.executable, str(HARNESS_SCRIPT), str(spec), str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    result = json.loads(out.read_text())
    assert proc.returncode == 3
    assert result["protocol"] == PROTOCOL_VERSION
    assert result["error"]["type"] == "ProtocolMismatch"
    assert f"protocol {PROTOCOL_VERSION + 1} and this harness {PROTOCOL_VERSION}" in result["error"]["message"]
    assert "runs" not in result  # refused before the workload was loaded


def test_the_guard_sends_its_protocol_and_the_harness_answers_in_it(tmp_path: Path) -> None:
    target = ArmTarget(name="base", python=Path(sys.executable),
                       box=choose_box(), worktree=Path(engine_spec()["root"]), env={})
    data = run_harness(target, engine_spec(batch_sizes=[1], steps=2, warmup_steps=1), "ok", tmp_path, 120)
    assert json.loads((tmp_path / "ok.spec.json").read_text())["protocol"] == PROTOCOL_VERSION
    assert data["protocol"] == PROTOCOL_VERSION and data["runs"]


def test_the_guard_refuses_an_answer_in_another_protocol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a harness of another install: it answers, without an error, in protocol 0
    worktree = tmp_path / "tree"
    worktree.mkdir(mode=0o755)  # the build user (when the tests run as root) works in it
    other = worktree / "old_run.py"
    other.write_text("import json, sys\n"
                     "json.dump({'protocol': 0, 'arm': 'base', 'repeat': 0, 'environment': {}, 'runs': []},"
                     " open(sys.argv[2], 'w'))\n")
    monkeypatch.setattr(runner, "HARNESS_SCRIPT", other)
    target = ArmTarget(box=choose_box(), name="base", python=Path(sys.executable), worktree=worktree, env={})
    with pytest.raises(RunFailed) as failed:
        run_harness(target, engine_spec(), "old", tmp_path, 60)
    assert f"protocol 0, the guard reads {PROTOCOL_VERSION}" in failed.value.message
    assert "reinstall the guard" in failed.value.message
