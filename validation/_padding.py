"""A padding injection of known size: the head deletes the engine's eager fallback, so batch
size 3 of a batch-size mix pads up to the graph of 4: one extra row in every four it computes,
at that size's share of the steps. What the report's mix must then say is worked out from the
mix's shares alone (the schedule holds each size in its share, exact to one step), and the
padded step must cost what a step of 4 rows costs on the same path."""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import BaseModel

from guard._errors import GitError
from guard._git import run_git
from guard.config import load_config
from guard.demo._scenarios import FALLBACK_LINES
from guard.harness._mix import apportion
from guard.pipeline import Progress, run_guard
from guard.report import Report

from ._models import RunSettings
from ._repo import BASE_BRANCH, ENGINE_FILE, _commit_change, write_config

PADDING_BRANCH = "validate/padding-3-to-4"
# 3 falls between the captured 2 and 4; 1 and 4 have graphs of their own on both sides
PADDING_MIX = {1: 0.5, 3: 0.3, 4: 0.2}
PADDED_SIZE, PADDED_TO = 3, 4
CAPTURE_POLICY = "capture_batch_sizes = [1, 2, 4, 8], fallback = true"
# a padded step of 3 rows computes 4 on the graph of 4: within this of a step of 4 (a GPU's figure)
SAME_WORK_PCT = 10.0
TOLERANCE = 1e-9


class PaddingCheck(BaseModel):
    """The padding pair's expected figures beside the report's, and whether they agree."""

    timed_steps: int
    expected_size_waste: float  # at size 3: 1 - 3/4
    expected_waste: float  # over the mix: the padded rows over every computed row
    expected_useful: float
    head_size_waste: float | None
    head_padded_to: int | None
    head_waste: float | None
    head_useful: float | None
    base_waste: float | None
    # head's GPU ms per step at size 3 over its size 4, minus one, in percent (GPU: the same graph)
    padded_step_vs_size4_pct: float | None
    timer: str | None
    failures: list[str]

    @property
    def met(self) -> bool:
        return not self.failures


def padding_branch(repo: Path) -> str:
    """The head whose one commit deletes the fallback lines; made on first use."""
    def change(text: str) -> str:
        for line in FALLBACK_LINES:
            if text.count(line) != 1:
                raise GitError(f"{ENGINE_FILE} no longer holds the fallback line {line.strip()!r:.60}; update "
                                 "guard/demo/_scenarios.py")
            text = text.replace(line, "")
        return text

    if run_git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{PADDING_BRANCH}").returncode != 0:
        _commit_change(repo, PADDING_BRANCH, ENGINE_FILE, change, "engine: remove the eager fallback; sizes "
                       "without a graph pad up to the next captured one")
    return PADDING_BRANCH


def padding_settings(settings: RunSettings) -> RunSettings:
    """The suite's settings with the capture policy the fallback lines need in front of its options."""
    options = ", ".join(filter(None, [CAPTURE_POLICY, settings.options_toml]))
    # the figures checked are exact, not decided by a round more
    return settings.model_copy(update={"options_toml": options, "confirm": False})


def expected_figures(steps: int) -> tuple[float, float]:
    """(padding waste, useful-work coverage) of the head over `steps` timed steps of PADDING_MIX."""
    counts = apportion(PADDING_MIX, steps)
    real = sum(size * n for size, n in counts.items())
    computed = real + (PADDED_TO - PADDED_SIZE) * counts[PADDED_SIZE]
    return 1 - real / computed, real / computed


def check_padding(report: Report) -> PaddingCheck:
    """The report's mix against the figures the injection must give."""
    failures: list[str] = []
    mix = report.mix
    arms = {a.arm: a for a in mix.arms} if mix else {}
    head, base = arms.get(report.head), arms.get(report.base)
    steps = mix.steps if mix else report.workload.steps
    waste, useful = expected_figures(steps)
    size_waste = 1 - PADDED_SIZE / PADDED_TO
    if head is None or base is None:
        failures.append("the report has no mix figures for both arms")
    head_sizes = {s.batch_size: s for s in head.sizes} if head else {}
    padded = head_sizes.get(PADDED_SIZE)
    if head is not None:
        if padded is None or padded.padded_to != PADDED_TO or not _close(padded.padding_waste, size_waste):
            failures.append(f"head's size {PADDED_SIZE}: padded_to {padded.padded_to if padded else None} and "
                            f"padding waste {padded.padding_waste if padded else None}, "
                            f"not {PADDED_TO} and {size_waste}")
        if not _close(head.padding_waste, waste) or not _close(head.useful_work_coverage, useful):
            failures.append(f"head's padding waste {head.padding_waste} and useful work {head.useful_work_coverage}, "
                            f"not {waste:.6f} and {useful:.6f} as the shares give")
    if base is not None and not _close(base.padding_waste, 0.0):
        failures.append(f"base pads ({base.padding_waste}): its fallback should run size {PADDED_SIZE} at its shape")
    vs_four = None
    four = head_sizes.get(PADDED_TO)
    if padded is not None and four is not None and four.gpu_ms_per_step > 0:
        vs_four = (padded.gpu_ms_per_step / four.gpu_ms_per_step - 1) * 100
        if head is not None and head.timer == "cuda_event" and abs(vs_four) > SAME_WORK_PCT:
            failures.append(f"head's padded size {PADDED_SIZE} costs {vs_four:+.1f}% against its size {PADDED_TO}, "
                            f"more than the {SAME_WORK_PCT:g}% the same graph allows")
    return PaddingCheck(
        timed_steps=steps, expected_size_waste=size_waste, expected_waste=waste, expected_useful=useful,
        head_size_waste=padded.padding_waste if padded else None, head_padded_to=padded.padded_to if padded else None,
        head_waste=head.padding_waste if head else None, head_useful=head.useful_work_coverage if head else None,
        base_waste=base.padding_waste if base else None, padded_step_vs_size4_pct=vs_four,
        timer=head.timer if head else None, failures=failures,
    )


def run_padding_pair(repo: Path, settings: RunSettings, config: Path, out_dir: Path,
                     progress: Progress) -> PaddingCheck:
    """One `guard run` of base against the padding head, with `config` written for it; checked."""
    write_config(config, padding_settings(settings), None, batch_mix=PADDING_MIX, purpose="--padding, the padding pair")
    branch = padding_branch(repo)
    report = run_guard(repo, BASE_BRANCH, branch, load_config(config), out_dir, progress=progress,
                       config_dir=config.parent)
    return check_padding(report)


def _close(value: float | None, expected: float) -> bool:
    return value is not None and math.isclose(value, expected, abs_tol=TOLERANCE)
