"""`guard bisect`: each step runs the guard's own pipeline with good as base and the step's
commit as head, in one cache, so good is built once and every build is kept for the next run.
The service's bisect (guard.service._bisect) runs the same search with its own measuring
command for a step: `search_commits` takes how a step is measured."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Callable

from guard._errors import GuardError
from guard._git import commit_subject
from guard._output import check_out_dir, write_atomic
from guard.bisect._commits import commits_between
from guard.bisect._models import BisectResult, BisectStep
from guard.bisect._search import first_bad
from guard.checkout import default_cache_dir
from guard.config import GuardConfig
from guard.pipeline import run_guard
from guard.report import Report

BISECT_FILE = "bisect.json"
STEPS_DIR = "steps"

Progress = Callable[[str], None]
# a commit after good -> its paired run against good, with report.json written in the folder given
Measure = Callable[[str, Path], Report]


class BisectStepInvalid(GuardError):
    """A step's run could not compare its commit with good: the search cannot say which side it is."""


def run_bisect(
    repo: Path,
    good: str,
    bad: str,
    config: GuardConfig | None,
    out_dir: Path,
    cache_dir: Path | None = None,
    progress: Progress = lambda _: None,
    config_dir: Path | None = None,
) -> BisectResult:
    """`config` None: guard.toml as the good commit holds it, for every step (as `guard run` reads
    the base's). Writes bisect.json into `out_dir`, also when a step stops the search."""
    repo, out_dir = repo.resolve(), out_dir.resolve()
    check_out_dir(out_dir)
    good_sha, bad_sha, commits = commits_between(repo, good, bad)
    cache_dir = cache_dir or default_cache_dir(repo)

    def measure(sha: str, step_dir: Path) -> Report:
        return run_guard(repo, good_sha, sha, config, step_dir, cache_dir, progress, config_dir=config_dir)

    return search_commits(repo, good_sha, bad_sha, commits, out_dir, measure, progress)


def search_commits(
    repo: Path,
    good_sha: str,
    bad_sha: str,
    commits: list[str],
    out_dir: Path,
    measure: Measure,
    progress: Progress = lambda _: None,
    measured: Sequence[BisectStep] = (),
    on_step: Callable[[BisectStep], None] = lambda _: None,
) -> BisectResult:
    """The binary search over `commits` (commits_between's), each step measured by `measure` in
    its own folder under `out_dir`. `measured`: the steps an earlier try of this same bisect ran,
    taken again as they are when the search asks for their commits; `on_step` sees each new one."""
    progress(f"bisecting {len(commits)} commit(s) after {good_sha[:12]} up to {bad_sha[:12]}, first parent only")
    earlier = {step.sha: step for step in measured}
    steps: list[BisectStep] = []

    def result(found: int | None, stopped: bool = False) -> BisectResult:
        outcome = "stopped" if stopped else "bad_not_slower" if found is None else "found"
        done = BisectResult(good_sha=good_sha, bad_sha=bad_sha, commits=commits, steps=steps, outcome=outcome)
        if found is not None:
            done.first_bad_sha = commits[found]
            done.first_bad_subject = commit_subject(repo, commits[found])
            done.last_good_sha = commits[found - 1] if found else good_sha
        write_atomic(out_dir / BISECT_FILE, done.model_dump_json(indent=2) + "\n")
        return done

    def is_bad(sha: str) -> bool:
        if sha in earlier and earlier[sha].verdict != "invalid":
            steps.append(earlier[sha])
            progress(f"step {steps[-1].number}: {sha[:12]} measured by an earlier try: {steps[-1].verdict}")
            return steps[-1].bad
        number = len(steps) + 1
        step_dir = Path(STEPS_DIR) / f"{number:02d}-{sha[:12]}"
        progress(f"step {number}: {sha[:12]} against good {good_sha[:12]}")
        report = measure(sha, out_dir / step_dir)
        steps.append(_step(report, number, commits.index(sha) + 1, step_dir))
        on_step(steps[-1])
        if report.verdict == "invalid":
            result(None, stopped=True)  # what was measured before stopping stays on disk
            raise BisectStepInvalid(
                f"step {number}: {sha[:12]} could not be compared with good (verdict invalid); see "
                f"{out_dir / step_dir / 'report.json'} for why, then bisect a range that avoids it"
            )
        return steps[-1].bad

    return result(first_bad(commits, is_bad))


def _step(report: Report, number: int, position: int, step_dir: Path) -> BisectStep:
    head = next(a for a in report.arms if a.name == report.head)
    base = next(a for a in report.arms if a.name == report.base)
    changes = [(b.gpu_ms_change.pct, b.batch_size) for b in report.batch_sizes if b.gpu_ms_change is not None]
    worst = max(changes, default=(None, None))
    return BisectStep(
        number=number, sha=head.sha, subject=head.subject, position=position, verdict=report.verdict,
        bad=report.verdict == "regression", worst_gpu_ms_change_pct=worst[0], worst_batch_size=worst[1],
        threshold_pct=report.rule.gpu_ms.pct, good_build_reused=base.build_reused, out_dir=str(step_dir),
    )
