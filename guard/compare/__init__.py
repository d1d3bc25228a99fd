"""Comparison and verdict: like-for-like check of output tokens, then timing changes."""

from guard.compare._agreement import MIN_EXCESS, OUTPUT_CHANGE_SHARE, agreement, false_alarm_bound
from guard.compare._agreement_noise import DisagreementNoise, SideDisagreement, disagreement_noise
from guard.compare._compiled import ArmCompiled, CompiledChange, arm_compiled, compiled_change
from guard.compare._fingerprint import IDENTITY_FIELDS, FingerprintCheck, check_fingerprints, check_measurements
from guard.compare._hashes import first_mismatch
from guard.compare._interval import Slowdown, time_ratio
from guard.compare._models import (
    MIX_BATCH, UNDECIDED, UNHELD_SHARE, VERDICT_SEVERITY, Agreement, ArmAgreement, ArmStats, BatchComparison,
    Comparison, MetricKey, RoundsStop, TokenMismatch, Verdict, most_severe,
)
from guard.compare._ranks import (
    STRAGGLER_LAG_FACTOR, STRAGGLER_MIN_LAG_PCT, STRAGGLER_MIN_STEPS, STRAGGLER_SHARE, ArmRanks, RankChange, RankPath,
    RankStats, arm_ranks, rank_change, straggler_of,
)
from guard.compare._reasons import Reason, ReasonKind, SeenValue
from guard.compare._recheck import Discrepancy, arm_discrepancies, decide_again, recheck, same_facts
from guard.compare._set_aside import kept_arm
from guard.compare._rounds import Decide, MeasureRound, RoundsOutcome, decide_in_rounds
from guard.compare._warnings import CredentialKept, RunWarning
from guard.compare._verdict import Rounds, arm_stats, compare, confirm_undecided
# the rule's names, defined with the rule (guard/config/_rule.py), as this stage has always offered them
from guard.config import (
    FAMILIES_PER_LOOK, METRICS, METRICS_PER_LOOK, RULE_VERSION, alpha_per_look, bounds_level, spent,
)

__all__ = [
    "Decide",
    "MeasureRound",
    "RoundsOutcome",
    "decide_in_rounds",
    "METRICS",
    "FAMILIES_PER_LOOK",
    "METRICS_PER_LOOK",
    "RULE_VERSION",
    "MIX_BATCH",
    "STRAGGLER_LAG_FACTOR",
    "STRAGGLER_MIN_LAG_PCT",
    "STRAGGLER_MIN_STEPS",
    "STRAGGLER_SHARE",
    "MIN_EXCESS",
    "OUTPUT_CHANGE_SHARE",
    "UNDECIDED",
    "UNHELD_SHARE",
    "VERDICT_SEVERITY",
    "IDENTITY_FIELDS",
    "Agreement",
    "ArmCompiled",
    "CompiledChange",
    "arm_compiled",
    "compiled_change",
    "ArmAgreement",
    "ArmRanks",
    "ArmStats",
    "arm_stats",
    "arm_discrepancies",
    "BatchComparison",
    "Comparison",
    "DisagreementNoise",
    "Discrepancy",
    "RankChange",
    "RankPath",
    "RankStats",
    "Reason",
    "Rounds",
    "RoundsStop",
    "ReasonKind",
    "SeenValue",
    "FingerprintCheck",
    "RunWarning",
    "CredentialKept",
    "MetricKey",
    "SideDisagreement",
    "Slowdown",
    "TokenMismatch",
    "Verdict",
    "agreement",
    "alpha_per_look",
    "bounds_level",
    "arm_ranks",
    "check_fingerprints",
    "check_measurements",
    "compare",
    "decide_again",
    "disagreement_noise",
    "confirm_undecided",
    "false_alarm_bound",
    "first_mismatch",
    "kept_arm",
    "most_severe",
    "spent",
    "rank_change",
    "recheck",
    "same_facts",
    "straggler_of",
    "time_ratio",
]
