"""The sentence that says a run used values from the command line in place of its config's."""

from __future__ import annotations

from guard.report._schema import Report


def override_note(report: Report) -> str | None:
    if report.overrides is None or not report.overrides.given():
        return None
    given = report.overrides
    parts = []
    if given.repeats is not None:
        parts.append(f"{given.repeats} processes per arm")
    if given.steps is not None:
        parts.append(f"{given.steps} timed steps")
    if given.batch_sizes is not None:
        sizes = given.batch_sizes
        parts.append(f"batch size{'s' if len(sizes) > 1 else ''} {', '.join(str(b) for b in sizes)}")
    if given.threshold_pct is not None:
        parts.append(f"a threshold of {given.threshold_pct:g}% for both metrics")
    quick = "A quick try (--quick), set" if given.allow_few_repeats else "Set"
    return (f"{quick} on the command line in place of the base's config: {', '.join(parts)}. "
            "The verdict holds for these settings, not for the configured measurement.")
