"""The chain of measurements, as `guard bisect` prints it."""

from __future__ import annotations

from guard.bisect._models import BisectResult


def chain_text(result: BisectResult) -> str:
    lines = [f"good {result.good_sha[:12]}, bad {result.bad_sha[:12]}: {len(result.commits)} commit(s), "
             f"{len(result.steps)} run(s)"]
    for step in result.steps:
        change = ("no GPU ms figure" if step.worst_gpu_ms_change_pct is None else
                  f"{step.worst_gpu_ms_change_pct:+.1f}% GPU ms per step at batch size {step.worst_batch_size}")
        side = "bad" if step.bad else "good"
        lines.append(f"  {step.number}. commit {step.position}/{len(result.commits)} {step.sha[:12]} "
                     f"{step.subject[:60]!r}: {change} vs good -> {step.verdict} ({side})")
    if result.outcome == "found":
        lines.append(f"first bad commit: {result.first_bad_sha} {result.first_bad_subject!r}")
    elif result.outcome == "bad_not_slower":
        lines.append(f"bad {result.bad_sha[:12]} is not slower than good: no commit to blame")
    return "\n".join(lines) + "\n"
