"""Comparison and verdict: like-for-like check of output tokens, then timing changes."""

from guard.compare._hashes import first_mismatch
from guard.compare._models import ArmStats, BatchComparison, Comparison, TokenMismatch, Verdict
from guard.compare._verdict import compare

__all__ = [
    "ArmStats",
    "BatchComparison",
    "Comparison",
    "TokenMismatch",
    "Verdict",
    "compare",
    "first_mismatch",
]
