"""`guard bisect`: the search on its own, the range it accepts, and end to end on a throwaway
repository of a small installed engine (pure Python, built into each arm's venv) where one
commit of six makes decode slower."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from guard.bisect import commits_between, first_bad
from tests.conftest import commit_all, git


@pytest.mark.parametrize("count", [1, 2, 3, 6, 7, 16, 33])
def test_first_bad_finds_every_culprit_in_few_runs(count):
    commits = [f"c{i}" for i in range(count)]
    for culprit in range(count):
        asked: list[str] = []

        def is_bad(sha: str, culprit: int = culprit, asked: list[str] = asked) -> bool:
            asked.append(sha)
            return commits.index(sha) >= culprit

        assert first_bad(commits, is_bad) == culprit
        assert asked[0] == commits[-1]  # bad first: a range without a slowdown ends at once
        assert len(asked) == len(set(asked)) <= (count - 1).bit_length() + 1


def test_first_bad_when_bad_is_not_slower():
    asked: list[str] = []
    assert first_bad(["a", "b", "c"], lambda sha: asked.append(sha) or False) is None
    assert asked == ["c"]


def _line(tmp_path: Path) -> tuple[Path, list[str]]:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    shas = []
    for i in range(3):
        (repo / "f.txt").write_text(f"{i}\n")
        shas.append(commit_all(repo, f"commit {i}"))
    return repo, shas


def test_commits_between_is_the_first_parent_line(tmp_path):
    repo, shas = _line(tmp_path)
    git(repo, "checkout", "--quiet", "-b", "side", shas[1])
    (repo / "side.txt").write_text("side\n")
    side = commit_all(repo, "side work")
    git(repo, "checkout", "--quiet", "main")
    git(repo, "merge", "--quiet", "--no-ff", "-m", "merge side", "side")
    merge = git(repo, "rev-parse", "HEAD")
    good, bad, line = commits_between(repo, shas[0], "main")
    assert (good, bad, line) == (shas[0], merge, [shas[1], shas[2], merge])  # the side commit is not searched
    with pytest.raises(Exception, match="not on the first-parent line"):
        commits_between(repo, side, "main")


def _guard(*args: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guard", "bisect", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


@pytest.mark.slow
def test_bad_ranges_are_one_message_and_exit_2(tmp_path):
    repo, shas = _line(tmp_path)
    cases = {
        ("--good", "nope", "--bad", "main"): "'nope' not found",
        ("--good", shas[2], "--bad", shas[0]): "not on the first-parent line",
        ("--good", "main", "--bad", "main"): "the same commit",
        ("--good=-x", "--bad", "main"): "not a valid ref",
    }
    for args, said in cases.items():
        proc = _guard("--repo", str(repo), "--out", str(tmp_path / "out"), *args)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and said in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "bisect.json").exists()


CONFIG = """[workload]
entry = "bench/guard_workload.py:make"
batch_sizes = [1]
steps = 8
warmup_steps = 2
# one timed pass after the warmup steps: the step the bisect looks for is ten times the step
tok_per_s_min_s = 0
warmup_max_s = 0

[build]
method = "venv"
install = "pip install --no-deps --no-build-isolation --no-index ."

[measure]
repeats = 4
allow_few_repeats = true  # the CPU tests' few processes
max_rounds = 2  # the CPU tests' time: one confirmation round at most
# CPU timings of a shared machine scatter by tens of percent; the injected step is ~10x that
threshold_pct = 20
# one round per step: the step is far past any undecided band, so a confirmation round only adds time
confirm = false
"""

# The engine is a package each arm's venv installs, so that every step of the bisect builds the
# commit it measures; the workload in bench/ only drives it. Its step sleeps 2 ms (steady on a
# loaded CPU); the culprit adds 20 ms.
PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "toyengine"
version = "0.1.0"

[tool.setuptools]
py-modules = ["toyengine"]
"""
ENGINE = """import time

STEP_S = 0.002


def decode(last):
    time.sleep(STEP_S)
    return [(t * 7 + 3) % 101 for t in last]
"""
WORKLOAD = """import toyengine


class Workload:
    def setup(self, batch_size):
        self.last = list(range(batch_size))

    def step(self, tokens=None):
        self.last = toyengine.decode(self.last if tokens is None else [int(t) for t in tokens])
        return self.last


def make():
    return Workload()
"""
CULPRIT = 3  # of the six commits after good, the third makes decode slower


def _engine_line(repo: Path) -> tuple[str, list[str]]:
    """Good (the engine and its workload) then six commits on main; the third makes each
    step sleep 20 ms more."""
    (repo / "bench").mkdir(parents=True)
    git(repo, "init", "--quiet", "--initial-branch=main")
    for name, text in {"pyproject.toml": PYPROJECT, "toyengine.py": ENGINE, "bench/guard_workload.py": WORKLOAD,
                       "guard.toml": CONFIG}.items():
        (repo / name).write_text(text)
    good = commit_all(repo, "engine, and guard: a short workload at batch size 1")
    shas = []
    for number in range(1, 7):
        if number == CULPRIT:
            (repo / "toyengine.py").write_text(ENGINE.replace("STEP_S = 0.002", "STEP_S = 0.022"))
            message = "engine: a step that waits on the host"
        else:
            (repo / "NOTES.md").write_text(f"note {number}\n")
            message = f"notes: revision {number}"
        shas.append(commit_all(repo, message))
    return good, shas


@pytest.mark.slow
def test_bisect_finds_the_commit_that_made_decode_slower(tmp_path):
    repo = tmp_path / "engine-repo"
    good, shas = _engine_line(repo)
    out = tmp_path / "bisect"
    proc = _guard("--repo", str(repo), "--good", good, "--bad", "main", "--out", str(out),
                  "--cache-dir", str(tmp_path / "cache"), timeout=900)
    assert proc.returncode == 1, proc.stderr[-3000:]  # found: a regression, as `guard run` exits
    result = json.loads((out / "bisect.json").read_text())
    assert result["outcome"] == "found" and result["commits"] == shas
    assert result["first_bad_sha"] == shas[CULPRIT - 1] and result["last_good_sha"] == shas[CULPRIT - 2]
    assert result["first_bad_subject"] == "engine: a step that waits on the host"
    # bad first, then halves: commits 3 (bad), 1 (good), 2 (good) of six
    steps = result["steps"]
    assert [s["sha"] for s in steps] == [shas[5], shas[2], shas[0], shas[1]]
    assert [s["bad"] for s in steps] == [True, True, False, False]
    for step in steps:
        report = json.loads((out / step["out_dir"] / "report.json").read_text())
        assert [a["sha"] for a in report["arms"]] == [good, step["sha"]]  # paired with good, every time
        assert report["verdict"] == step["verdict"]
        worst = max(b["gpu_ms_change"]["pct"] for b in report["batch_sizes"])
        assert step["worst_gpu_ms_change_pct"] == worst
        if step["bad"]:
            assert worst > 100  # 20 ms more sleep on a step of 2 ms
    assert [s["good_build_reused"] for s in steps] == [False, True, True, True]  # good built once
    for step in steps:  # the chain of measurements, one line per run
        assert f"{step['sha'][:12]}" in proc.stdout and step["verdict"] in proc.stdout
    assert f"first bad commit: {shas[CULPRIT - 1]}" in proc.stdout


@pytest.mark.slow
def test_a_step_that_cannot_be_compared_stops_the_bisect(tmp_path):
    repo = tmp_path / "engine-repo"
    good, _ = _engine_line(repo)
    (repo / "pyproject.toml").write_text("[project\n")  # pip cannot read it: the build fails
    broken = commit_all(repo, "build: a pyproject.toml pip cannot read")
    out = tmp_path / "bisect"
    proc = _guard("--repo", str(repo), "--good", good, "--bad", broken, "--out", str(out),
                  "--cache-dir", str(tmp_path / "cache"), timeout=600)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("guard: error: step 1: ")
    assert "could not be compared with good (verdict invalid)" in proc.stderr
    result = json.loads((out / "bisect.json").read_text())
    assert result["outcome"] == "stopped" and result["first_bad_sha"] is None
    assert [(s["sha"], s["verdict"]) for s in result["steps"]] == [(broken, "invalid")]
    report = json.loads((out / result["steps"][0]["out_dir"] / "report.json").read_text())
    assert [a["status"] for a in report["arms"]] == ["ok", "build_failed"]
