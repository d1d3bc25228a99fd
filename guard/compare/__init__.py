"""Comparison and verdict: like-for-like check of output tokens, then timing changes."""

from guard.compare._agreement import MIN_EXCESS, OUTPUT_CHANGE_SHARE, agreement, false_alarm_bound
from guard.compare._fingerprint import FingerprintCheck, check_fingerprints, check_measurements
from guard.compare._hashes import first_mismatch
from guard.compare._models import (
    UNHELD_SHARE, Agreement, ArmAgreement, ArmStats, BatchComparison, Comparison, TokenMismatch, Verdict,
)
from guard.compare._recheck import Discrepancy, StatedRule, decide_again, recheck
from guard.compare._verdict import compare, confirm_near_threshold, most_severe

__all__ = [
    "MIN_EXCESS",
    "OUTPUT_CHANGE_SHARE",
    "UNHELD_SHARE",
    "Agreement",
    "ArmAgreement",
    "ArmStats",
    "BatchComparison",
    "Comparison",
    "Discrepancy",
    "FingerprintCheck",
    "StatedRule",
    "TokenMismatch",
    "Verdict",
    "agreement",
    "check_fingerprints",
    "check_measurements",
    "compare",
    "decide_again",
    "confirm_near_threshold",
    "false_alarm_bound",
    "first_mismatch",
    "most_severe",
    "recheck",
]
