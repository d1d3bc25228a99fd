"""benchmarks/host_pinning.py on a CPU: both arms run, the pinned one on the CPUs asked for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPT = REPO_ROOT / "benchmarks" / "host_pinning.py"


@pytest.mark.slow
def test_pinned_and_unpinned_side_by_side(tmp_path: Path) -> None:
    usable = sorted(os.sched_getaffinity(0))
    out = tmp_path / "pinning.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--cpus", str(usable[-1]), "--repeats", "2", "--steps", "8",
         "--warmup-steps", "1", "--options", "layers = 2", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["arms"]["pinned"]["cpus"] == [usable[-1]] and report["arms"]["unpinned"]["cpus"] == usable
    for arm in report["arms"].values():
        assert len(arm["tok_per_s"]["values"]) == 2 and arm["timer"] == "perf_counter"
    unpinned, pinned = (report["arms"][n]["tok_per_s"]["sd_pct"] for n in ("unpinned", "pinned"))
    assert report["sd_ratio_pinned_over_unpinned"]["tok_per_s"] == (pinned / unpinned if unpinned else None)
    assert "sd pinned / unpinned: tok_per_s" in proc.stdout

    bad = subprocess.run([sys.executable, str(SCRIPT), "--cpus", str(max(usable) + 1000)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "measure.cpus lists CPU(s)" in bad.stderr and "Traceback" not in bad.stderr
