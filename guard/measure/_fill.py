"""One unmeasured process per arm fills its compile cache before the measured processes run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from guard.measure._compile_cache import to_fill
from guard.measure._reference import ReferenceOutcome
from guard.measure._runner import ArmTarget, Harness, HarnessSpec, run_interleaved, run_ranks


def fill_compile_caches(
    targets: list[ArmTarget], first: str, reference_ran: bool, spec: HarnessSpec, reference: ReferenceOutcome,
    runs: Path, timeout_s: float, progress: Callable[[str], None], harness: Harness = run_ranks,
) -> list[str]:
    """Runs one unmeasured process for each arm `to_fill` names (`first`: the arm whose reference
    process ran, which filled its cache), the measured processes' work without the profiler, so
    that every measured process loads what its arm compiled. Its results are kept under
    `runs`/compile-fill and decide nothing; a failure there shows again when measured.
    Returns the names of the arms it filled. `guard run` fills head's, `guard calibrate` its
    second side's (docs/measurements/calibration-compiled-h200/: without it, that side's first
    measured process compiled and made the threshold 19%)."""
    fill = to_fill(targets, first, reference_ran)
    if not fill:
        return []
    unprofiled = spec.model_copy(update={"profile_steps": 0})
    progress(f"compile caches: one unmeasured process for {', '.join(t.name for t in fill)} compiles first, as "
             f"{first}'s reference process did, so that no measured process is the one that compiles")
    run_interleaved(fill, unprofiled, 1, runs / "compile-fill", timeout_s,
                    lambda line: progress(f"compile caches: {line}"),
                    reference=reference.tokens if spec.reference else None, harness=harness)
    return [t.name for t in fill]
