"""Disagreements with the reference, counted by the guard from a process's own tokens.

A measured process runs the pull request's code, so what it says of itself is data: it
reports the ids it generated, and the guard compares them with the reference it wrote.
"""

from __future__ import annotations

from guard.measure._models import BatchRun, ReferenceTokens, RepeatResult, TokenMismatch


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
    """The result with each forced run's disagreements counted against `reference`."""
    runs: list[BatchRun] = []
    for run in result.runs:
        rows = reference.rows_for(run.batch_size)
        if not run.forced or rows is None:
            runs.append(run.model_copy(update={"disagreements": None, "compared": 0, "first_disagreement": None}))
            continue
        count, compared, first = count_disagreements(run.tokens, rows)
        runs.append(run.model_copy(update={"disagreements": count, "compared": compared, "first_disagreement": first}))
    mix = result.mix
    if mix is not None:
        unforced = not mix.forced or reference.mix is None
        count, compared, first = (None, 0, None) if unforced else count_disagreements(mix.tokens, reference.mix or [])
        mix = mix.model_copy(update={"disagreements": count, "compared": compared, "first_disagreement": first})
    return result.model_copy(update={"runs": runs, "mix": mix})
