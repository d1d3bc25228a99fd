"""Disagreements with the reference, counted by the guard from a process's own tokens.

A measured process runs the pull request's code, so what it says of itself is data: it
reports the ids it generated, and the guard compares them with the reference it wrote.
"""

from __future__ import annotations

from guard.measure._margins import confident_disagreements, floor_for
from guard.measure._models import BatchRun, ReferenceTokens, RepeatResult, TokenMismatch, TopLogits

# every figure the guard counts, none counted: what a process says of them is never kept
UNCOUNTED = {"disagreements": None, "compared": 0, "first_disagreement": None, "margin_floor": None,
              "confident_disagreements": None, "confident_compared": 0, "first_confident": None}


def count_disagreements(tokens: list[list[int]], rows: list[list[int]]) -> tuple[int, int, TokenMismatch | None]:
    """(step, sequence) outputs that differ from the reference rows: how many, of how many, and
    the first (step counted from 1). Rows beyond the shorter record are not compared."""
    count, compared, first = 0, 0, None
    for step, (row, ref) in enumerate(zip(tokens, rows), start=1):
        compared += len(ref)
        for sequence, expected in enumerate(ref):
            found = row[sequence] if sequence < len(row) else -1
            if found != expected:
                count += 1
                if first is None:
                    first = TokenMismatch(step=step, sequence=sequence, expected=expected, found=found)
    return count, compared, first


def with_disagreements(result: RepeatResult, reference: ReferenceTokens) -> RepeatResult:
    """The result with each forced run's disagreements, and the mix's, counted against
    `reference`, and where the reference has their top logits, those at confident outputs apart."""
    runs: list[BatchRun] = []
    for run in result.runs:
        rows = reference.rows_for(run.batch_size)
        if not run.forced or rows is None:
            runs.append(run.model_copy(update=UNCOUNTED))
            continue
        runs.append(run.model_copy(update=_counted(run.tokens, rows, reference.top_for(run.batch_size),
                                                   reference.top_logits)))
    mix = result.mix
    if mix is not None:
        unforced = not mix.forced or reference.mix is None
        top = reference.top_logits.mix if reference.top_logits is not None else None
        mix = mix.model_copy(update=UNCOUNTED if unforced else _counted(mix.tokens, reference.mix or [], top,
                                                                        reference.top_logits))
    return result.model_copy(update={"runs": runs, "mix": mix})


def _counted(tokens: list[list[int]], rows: list[list[int]], top: list[list[tuple[float, float]]] | None,
             logits: TopLogits | None) -> dict[str, object]:
    """One forced pass's figures: its disagreements with `rows`, and with `top`, the reference's
    top logits of the same outputs, those at confident outputs."""
    count, compared, first = count_disagreements(tokens, rows)
    counted = UNCOUNTED | {"disagreements": count, "compared": compared, "first_disagreement": first}
    if top is not None and logits is not None:
        floor = floor_for(logits)
        confident, confident_compared, first_confident = confident_disagreements(tokens, rows, top, floor)
        counted |= {"margin_floor": floor, "confident_disagreements": confident,
                    "confident_compared": confident_compared, "first_confident": first_confident}
    return counted
