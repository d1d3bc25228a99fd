"""Like-for-like checks on the generated tokens."""

from __future__ import annotations

from guard.compare._models import TokenMismatch


def first_mismatch(expected: list[list[int]], found: list[list[int]]) -> TokenMismatch | None:
    """The first step (1-based) and sequence at which two token records differ."""
    for step, (row_e, row_f) in enumerate(zip(expected, found), start=1):
        for sequence, (tok_e, tok_f) in enumerate(zip(row_e, row_f)):
            if tok_e != tok_f:
                return TokenMismatch(step=step, sequence=sequence, expected=tok_e, found=tok_f)
        if len(row_e) != len(row_f):
            # one side has more sequences; -1 marks the side with no token there
            sequence = min(len(row_e), len(row_f))
            return TokenMismatch(
                step=step,
                sequence=sequence,
                expected=row_e[sequence] if sequence < len(row_e) else -1,
                found=row_f[sequence] if sequence < len(row_f) else -1,
            )
    if len(expected) != len(found):
        step = min(len(expected), len(found)) + 1
        return TokenMismatch(step=step, sequence=0, expected=-1, found=-1)
    return None
