"""The harness protocol version: one definition, checked on both sides of the JSON exchange."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def test_the_spec_the_guard_writes_is_the_spec_the_harness_reads(tmp_path: Path) -> None:
    from guard.harness._protocol import Spec, read_spec
    from guard.measure import HarnessSpec

    given = HarnessSpec(batch_sizes=[1, 4], batch_mix={1: 0.5, 4: 0.5}, world_size=2, reference="ref.json")
    target = ArmTarget(box=choose_box(), name="head", python=Path(sys.executable), worktree=tmp_path, cpus=[0])
    payload = runner._payload(target, given.model_dump(), 3, tmp_path / "traces")
    spec = read_spec(json.dumps(payload))
    assert spec == Spec(entry=given.entry, root=str(tmp_path), batch_sizes=[1, 4], steps=given.steps,
                        warmup_steps=given.warmup_steps, arm="head", repeat=3, tok_per_s_min_s=given.tok_per_s_min_s,
                        warmup_max_s=given.warmup_max_s, profile_steps=given.profile_steps,
                        trace_dir=str(tmp_path / "traces"), cpus=[0], reference="ref.json",
                        batch_mix={1: 0.5, 4: 0.5}, world_size=2)


@pytest.mark.parametrize(("change", "says"), [
    ({"steps": "8"}, "the spec's steps must be int, not '8'"),
    ({"batch_sizes": [1, True]}, "the spec's batch_sizes[1] must be int, not True"),
    ({"mode": "timed"}, "the spec's mode must be"),
    ({"warmup": 3}, "unknown keys ['warmup'] and lacks []"),
    ({"entry": None}, "the spec's entry must be str, not None"),
])
def test_the_harness_says_which_key_of_a_spec_is_wrong(change: dict[str, Any], says: str) -> None:
    from guard.harness._protocol import SpecError, read_spec

    with pytest.raises(SpecError, match=re.escape(says)):
        read_spec(json.dumps(engine_spec() | change))
    assert read_spec(json.dumps(engine_spec())).batch_sizes == [1, 2]


def test_the_guard_reads_every_field_the_harness_writes_under_the_protocol_s_names() -> None:
    """_protocol.py names what the harness writes; the guard's models read those names (the
    rest it reads from the answer before its model: the protocol, the error, the rank)."""
    from dataclasses import fields

    from guard.harness import _protocol as wire
    from guard.measure._models import BatchRun, MixRun, RepeatResult

    for written, read in ((wire.BatchRun, BatchRun), (wire.MixRun, MixRun)):
        assert {f.name for f in fields(written)} <= set(read.model_fields)
    unread = {"protocol", "pid", "started_at", "finished_at", "failed_at", "accepts_tokens", "error", "rank"}
    assert {f.name for f in fields(wire.Result)} - unread <= set(RepeatResult.model_fields)
