"""Comparison and verdict: like-for-like check of output tokens, then timing changes."""

from guard.compare._fingerprint import FingerprintCheck, check_fingerprints, check_measurements
from guard.compare._hashes import first_mismatch
from guard.compare._models import ArmStats, BatchComparison, Comparison, TokenMismatch, Verdict
from guard.compare._verdict import compare, confirm_near_threshold

__all__ = [
    "ArmStats",
    "BatchComparison",
    "Comparison",
    "FingerprintCheck",
    "TokenMismatch",
    "Verdict",
    "check_fingerprints",
    "check_measurements",
    "compare",
    "confirm_near_threshold",
    "first_mismatch",
]
