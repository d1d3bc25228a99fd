"""`guard explain`: a committed report whose explanation an earlier explain stage wrote, made
again from its own figures, accepted by the check `guard comment` makes; its verdict never
changed, and figures that do not hold up refused as `guard comment` refuses them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from guard.report import UnfoundedReport, read_report

REPO_ROOT = Path(__file__).resolve().parents[1]
# The H200 run of the removed fallback: its batch size 6 is blamed on the padded rows the mix
# records there; an explain stage that did not read the mix named its longer kernels instead.
FALLBACK = REPO_ROOT / "docs" / "examples" / "h200-fallback-821e099" / "report.json"


def _as_run(tmp_path: Path, **headline: str) -> Path:
    """The report as such an earlier stage wrote it: batch size 6's cause its longer kernels."""
    data = json.loads(FALLBACK.read_text())
    (cause,) = [c for c in data["explanation"]["causes"] if c["batch_size"] == 6]
    assert cause["kind"] == "padded_rows" and cause["rows"] == [6, 8]  # the committed report: the current stage's
    cause["kind"] = "slower_kernels"
    del cause["rows"]
    data["explanation"]["headline"] |= {"cause": "slower_kernels"} | headline
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def _explain(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guard", "explain", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)


@pytest.mark.slow
def test_a_report_explained_by_an_earlier_stage_is_made_again_and_then_accepted(tmp_path: Path) -> None:
    stale = _as_run(tmp_path)
    with pytest.raises(UnfoundedReport, match=r"explanation\.causes"):
        read_report(stale)  # as `guard comment` reads it
    fresh = tmp_path / "fresh" / "report.json"
    proc = _explain(str(stale), "--out", str(fresh))
    assert proc.returncode == 0, proc.stderr
    assert "explanation.causes[0].kind: slower_kernels -> padded_rows" in proc.stderr
    assert "explanation.headline.cause: slower_kernels -> padded_rows" in proc.stderr
    assert "verdict regression as it was" in proc.stderr
    # the same bytes the current guard writes of the example as committed (its rule nested, as schema 13
    # keeps it), and nothing else of it touched
    expected = tmp_path / "expected" / "report.json"
    untouched = _explain(str(FALLBACK), "--out", str(expected))
    assert untouched.returncode == 0 and "0 fact(s) of the explanation changed" in untouched.stderr
    assert fresh.read_text() == expected.read_text()
    assert read_report(fresh).verdict == "regression"
    assert json.loads(stale.read_text())["explanation"]["causes"][0]["kind"] == "slower_kernels"

    in_place = _explain(str(stale))  # without --out the report itself is replaced
    assert in_place.returncode == 0, in_place.stderr
    assert stale.read_text() == expected.read_text()
    again = _explain(str(stale))
    assert again.returncode == 0 and "left as it was" in again.stderr and "changed:" not in again.stderr


def test_an_explanation_that_states_another_verdict_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    stale = _as_run(tmp_path, verdict="pass")  # the report's verdict, decided from its numbers: regression
    before = stale.read_text()
    out = tmp_path / "out.json"
    proc = _explain(str(stale), "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "states the verdict pass in its explanation, but its decided verdict is regression" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists() and stale.read_text() == before


def test_figures_that_do_not_give_the_verdict_are_refused_as_guard_comment_refuses_them(tmp_path: Path) -> None:
    data = json.loads(_as_run(tmp_path).read_text())
    data["batch_sizes"][0]["verdict"] = "regression"  # batch size 1: its numbers give a pass
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    proc = _explain(str(edited))
    assert proc.returncode == 2, proc.stderr
    assert "states verdicts its own numbers do not give" in proc.stderr and "Traceback" not in proc.stderr
    assert json.loads(edited.read_text()) == data
    missing = _explain(str(tmp_path / "none.json"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr
