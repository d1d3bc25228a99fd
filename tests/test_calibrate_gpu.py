"""`guard calibrate` on a GPU: the reference engine against itself, with its gap figures."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from guard.calibrate import PROFILED_PER_SIDE
from guard.config._models import WorkloadConfig
from guard.demo._repo import make_demo_repo


@pytest.mark.gpu
@pytest.mark.slow
def test_calibrate_reports_gap_figures_from_each_sides_profiled_processes(tmp_path: Path) -> None:
    repo = tmp_path / "engine"
    make_demo_repo(repo, steps=32, warmup_steps=4, repeats=4, options_toml="layers = 4")
    out = tmp_path / "thr.toml"
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "calibrate", "--repo", str(repo), "--ref", "main", "--out", str(out)],
        capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    number = r"[0-9.]+(-[0-9.]+)?"
    # the config's default profiled processes per side (of 4), both sides
    per_side = max(WorkloadConfig.model_fields["profile_repeats"].default, PROFILED_PER_SIDE)
    for batch_size in (1, 2):
        line = re.search(rf"bs {batch_size}: over {2 * per_side} profiled processes, median gap {number} us, "
                         rf"idle ({number}) ms per step, largest 1% of gaps {number} ms per step\.", text)
        assert line, text
        assert float(line.group(2).split("-")[0]) > 0  # a graph of this engine has gaps between kernels
    assert "could not be read" not in text
    traces = sorted(p.name for p in (tmp_path / "thr-runs").rglob("*.trace.json.gz"))
    assert len(traces) == 2 * per_side * 2, traces  # sides x profiled processes x batch sizes
