"""The method fold's sentences on the calibrated spreads a run borrowed (compare/_borrow.py),
made from each batch size's `borrowed` checks."""

from __future__ import annotations

from guard.compare import BatchComparison
from guard.measure import BORROW_CHECK_ALPHA
from guard.report import _words as words


def _where(metric: str, batches: list[BatchComparison], gpu: bool) -> str:
    label = words.metric(metric, gpu)  # type: ignore[arg-type]
    return f"{label} at {words.sizes([b.batch_size for b in batches])}"


def borrowed_note(decided: list[BatchComparison], gpu: bool) -> str:
    """Of the `decided` batch sizes (the mix too), one sentence for the spreads pooled in and
    one for those the run's own spread refused; '' where the thresholds file kept no spreads."""
    checks = [(b, c) for b in decided for c in b.borrowed]
    if not checks:
        return ""
    used: dict[str, list[BatchComparison]] = {}
    refused: dict[str, list[tuple[BatchComparison, float, float]]] = {}
    for batch, check in checks:
        if check.borrowed:
            used.setdefault(check.metric, []).append(batch)
        else:
            refused.setdefault(check.metric, []).append((batch, check.run_sd_pct, check.limit_sd_pct))
    sentences = []
    if used:
        dof = sorted({c.calibrated_dof for _, c in checks if c.borrowed})
        sentences.append(
            "The bounds of " + "; ".join(_where(m, bs, gpu) for m, bs in used.items())
            + " pool this run's spread with the calibrated one (Student's t on "
            + " or ".join(str(d) for d in dof) + " more degrees of freedom than the run's own), as this run's "
            f"spread was not past it (an F test at {BORROW_CHECK_ALPHA:.0%}).")
    if refused:
        worst = max((r for rows in refused.values() for r in rows), key=lambda r: r[1] / r[2])
        sentences.append(
            "Not borrowed, as this run's spread was past the calibrated one: "
            + "; ".join(_where(m, [r[0] for r in rows], gpu) for m, rows in refused.items())
            + f" (sd {worst[1]:.2f}% against at most {worst[2]:.2f}%): "
            "these decided on their own processes alone. The runner is noisier than when it was calibrated: "
            "calibrate it again.")
    return " ".join(sentences)
