"""The validation suite's padding pair: size 3 of a mix padded to 4, its expected figures worked
out from the mix's shares, and a whole pair on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from guard.config import load_config
from validation._models import RunSettings
from validation._padding import PADDING_MIX, expected_figures, padding_settings
from validation._repo import write_config

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_the_expected_padding_is_a_quarter_of_size_3s_rows_at_its_share() -> None:
    assert PADDING_MIX == {1: 0.5, 3: 0.3, 4: 0.2}
    # 10 steps: five of 1, three of 3 (each 4 rows computed), two of 4
    waste, useful = expected_figures(10)
    assert waste == pytest.approx(3 / (5 + 3 * 4 + 2 * 4)) and useful == pytest.approx(22 / 25)
    # 7 steps: 3.5, 2.1 and 1.4 steps; the largest remainders take the one left: 1 gets it
    waste, _ = expected_figures(7)
    assert waste == pytest.approx(2 / (4 + 2 * 4 + 1 * 4))


def test_the_padding_config_is_the_suites_with_the_capture_policy_and_the_mix(tmp_path: Path) -> None:
    suite = RunSettings(
        batch_size=1, steps=10, warmup_steps=2, profile_steps=4, profile_repeats=1, repeats=3, options={},
        options_toml="layers = 1", build="none", confirm=True, alpha=0.02, confidence=0.95, timeout_s=60,
    )
    path = tmp_path / "padding.toml"
    write_config(path, padding_settings(suite), None, batch_mix=PADDING_MIX, purpose="the padding pair")
    config = load_config(path)
    assert config.workload.batch_mix == PADDING_MIX and config.workload.steps == 10
    assert config.workload.options == {"capture_batch_sizes": [1, 2, 4, 8], "fallback": True, "layers": 1}
    # the suite's measurement settings, but no confirmation round: the figures checked are exact
    assert config.measure.repeats == 3 and config.measure.alpha == 0.02 and config.measure.confirm is False
    plain = tmp_path / "plain.toml"
    write_config(plain, suite, None)
    assert load_config(plain).workload.batch_mix is None and load_config(plain).measure.confirm is True


@pytest.mark.slow
def test_the_padding_pair_states_the_padding_it_was_given_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "validation", "injected", "--padding", "--out", str(out),
         "--workdir", str(tmp_path / "work"),
         "--steps", "10", "--warmup-steps", "2", "--repeats", "2", "--build", "none",
         "--tok-per-s-min-s", "0", "--warmup-max-s", "0",  # one timed pass: the padding is the point
         "--options", "layers = 1, max_len = 96"], capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    check = json.loads((out / "padding.json").read_text())
    assert check["failures"] == [] and "padding pair" in proc.stdout + proc.stderr
    assert check["head_padded_to"] == 4 and check["head_size_waste"] == 0.25 and check["base_waste"] == 0
    assert check["head_waste"] == pytest.approx(3 / 25) and check["timer"] == "perf_counter"
