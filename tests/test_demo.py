"""`guard demo` end to end on the CPU: throwaway repo, two venv builds, interleaved runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from guard.demo import make_demo_repo
from guard.report import SCHEMA_VERSION
from tests.conftest import git


def test_demo_repo_head_changes_only_capture(tmp_path: Path) -> None:
    base_sha, head = make_demo_repo(tmp_path / "repo")
    repo = tmp_path / "repo"
    assert git(repo, "rev-parse", "main") == base_sha
    diff = git(repo, "diff", f"main...{head}")
    changed = git(repo, "diff", "--name-only", f"main...{head}").splitlines()
    assert changed == ["refengine/engine.py"]
    assert '-CAPTURE_MODE = "step"' in diff and '+CAPTURE_MODE = "layer"' in diff
    assert "+CAPTURE_BATCH_SIZES = (4,)" in diff


@pytest.mark.slow
def test_demo_end_to_end_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable, "-m", "guard", "demo", "--out", str(out), "--workdir", str(tmp_path / "work"),
            "--steps", "10", "--warmup-steps", "2", "--repeats", "4", "--options", "layers = 2, max_len = 128",
            "--max-rounds", "1",  # a CPU's undecided batch size would take rounds until the time budget
            "--tok-per-s-min-s", "0", "--warmup-max-s", "0",  # one pass each: the pipeline is the point
        ],
        capture_output=True, text=True, timeout=900,
    )
    report = json.loads((out / "report.json").read_text())
    comment = (out / "comment.md").read_text()
    assert proc.stdout.strip() == comment.strip()  # the demo prints the comment it wrote
    # the interval rule, over the one round asked for (test_rounds runs the later rounds in-process)
    assert report["schema_version"] == SCHEMA_VERSION and report["rule"]["looks"] == 1
    # every process was forced with base's reference, and on a CPU in float32 each reproduced it
    assert report["hash_match"] is None and report["workload"]["reference"].startswith("base ")
    for batch in report["batch_sizes"]:
        agreement = batch["agreement"]
        assert agreement["exact"] is True and agreement["unforced"] == []
        assert {a["arm"] for a in agreement["arms"]} == {"base", "head", "head-unpadded"}
        assert all(d == 0 for a in agreement["arms"] for d in a["disagreements"])
    assert [a["status"] for a in report["arms"]] == ["ok", "ok", "ok"]
    assert [a["build_method"] for a in report["arms"]] == ["venv", "venv", "venv"]
    # Head pads batch size 1 up to 4 on the CPU too: more work per step, whatever the load
    bs1 = report["batch_sizes"][0]
    assert bs1["batch_size"] == 1
    assert bs1["gpu_ms_change"]["pct"] > 10, bs1["gpu_ms_change"]
    # The verdict is where each batch size's bounds put it. At 4 processes per arm each bound may
    # err 0.125%, so a shared CPU whose processes scatter (3x outliers under load) can leave even
    # +40% undecided. CPU ms per step decides; tok/s, informing only, still counts a slowdown
    # whose whole interval is past the threshold. A regression exits 1, an undecided run 4.
    threshold, tok_threshold = report["rule"]["gpu_ms"]["pct"], report["rule"]["tok_per_s"]["pct"]
    for batch in report["batch_sizes"]:
        past = {"gpu_ms": batch["gpu_ms_bounds"]["ci_low_pct"] > threshold,
                "tok_per_s": batch["tok_per_s_bounds"]["ci_high_pct"] < -tok_threshold}
        assert (batch["verdict"] == "regression") == any(past.values()), batch
        if batch["verdict"] == "regression":
            assert past[batch["decided_by"]], batch
    if any(b["verdict"] == "regression" for b in report["batch_sizes"]):
        assert report["verdict"] == "regression" and proc.returncode == 1, proc.stderr
    else:
        assert report["verdict"] in ("at_threshold", "inconclusive") and proc.returncode == 4, proc.stderr
    described = report["workload"]["described"]["1"]
    assert described["run_batch"] == 4 and described["device"] == "cpu"
    assert "engine: capture decode piecewise" in comment
    assert "CPU only" in comment
    title = comment.splitlines()[1]
    assert "GPU" not in title  # the title claims no GPU time
    assert "CPU ms per step" in comment and not re.search(r"GPU (ms|time)", comment)  # nor does the comment
    assert f"({threshold:g}% in CPU ms per step, " in comment  # nor the rule's account
    assert "[12/12]" in proc.stderr  # progress for each process: base, head, the ablation arm
    ablation = next(a for a in report["arms"] if a["name"] == "head-unpadded")
    assert ablation["source"] == "head" and ablation["sha"] == report["arms"][1]["sha"]
    assert ablation["env"] == {"REFENGINE_CAPTURE_BATCH_SIZES": "1,2"}
    assert "same build, graphs at batch sizes 1 and 2 (no padding)" in comment
    unpadded = next(a for a in bs1["arms"] if a["arm"] == "head-unpadded")
    head_arm = next(a for a in bs1["arms"] if a["arm"] == "head")
    # without padding the head build runs batch size 1 as base does: clearly faster than head
    assert unpadded["gpu_ms_per_step"]["median"] < head_arm["gpu_ms_per_step"]["median"]


@pytest.mark.parametrize("flag", ["--tok-per-s-min-s", "--warmup-max-s"])
@pytest.mark.parametrize("value", ["-1", "nan", "601", "soon"])
def test_a_bad_pass_length_is_one_message_and_exit_2(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from guard.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["demo", flag, value])
    assert exited.value.code == 2
    assert f"expected seconds from 0 to 600, e.g. 0.2; got {value!r}" in capsys.readouterr().err
