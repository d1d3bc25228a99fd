"""benchmarks/long_kv_probe.py refuses, with one message and exit code 2, what it cannot do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "long_kv_probe.py"


def _probe(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "probe"), *extra],
                          capture_output=True, text=True, timeout=120)


def test_settings_that_are_not_integers_are_named(tmp_path: Path) -> None:
    proc = _probe(tmp_path, "--settings", "0,two")
    assert proc.returncode == 2
    assert "--settings takes integers separated by commas, not '0,two'" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "probe").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_without_a_gpu_it_says_so_and_measures_nothing(tmp_path: Path) -> None:
    proc = _probe(tmp_path, "--settings", "0,1")
    assert proc.returncode == 2 and "needs a CUDA GPU" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "probe").exists()
