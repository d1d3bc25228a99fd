"""benchmarks/process_phases.py on a progress log the H200 wrote."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAIR = REPO / "docs" / "validation" / "h200-engines" / "pairs" / "compiled-graph-break"


def test_phases_span_every_measured_process_of_the_log() -> None:
    log = (PAIR / "progress.log").read_text()
    totals = [float(t) for t in re.findall(r"\] \[\d+/\d+\] \S+ repeat \d+/\d+ \(([\d.]+) s", log)]
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "process_phases.py"), str(PAIR)],
                          capture_output=True, text=True, check=True)
    assert f"{len(totals)} processes, {min(totals):.1f}-{max(totals):.1f} s each" in proc.stdout
    assert "start and exit " in proc.stdout and "reference process " in proc.stdout


def test_a_folder_without_a_log_is_one_message(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "process_phases.py"), str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "no progress.log" in proc.stderr and "Traceback" not in proc.stderr
