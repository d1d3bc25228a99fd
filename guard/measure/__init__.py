"""Measurement: run the harness for each arm in fresh processes, interleaved, and summarise."""

from guard.measure._compile_cache import (
    compile_cache_environment, compile_caches, filled, share_compile_caches, to_fill,
)
from guard.measure._mix import (
    MIX_BATCH, ArmMix, Imbalance, ImbalanceBucket, MixReport, MixSize, imbalance_of, mix_report, usable_mix_runs,
)
from guard.measure._compiled import DynamoRecord, GraphBreak
from guard.measure._noise import RepeatsNeeded, RunnerNoise, runner_noise
from guard.measure._models import (
    REFERENCE_FORMAT, ArmMeasurement, BatchRun, CacheOutcomes, ClockMisfit, CompileStats, HostUsage, MarginFloor,
    MarginMismatch, MixRun, RankRun, ReferenceTokens, RepeatResult, SourceLabel, StepInfo, TokenMismatch, TopLogits,
    WindowHost,
)
from guard.measure._margins import MARGIN_FLOOR_ULPS, margin_ulps, ulp
from guard.measure._ranks import RanksDiffer, merge_ranks, rank_mix_trace_paths, rank_trace_paths, slowest_rank_times
from guard.measure._reference import (
    ReferenceOutcome, parse_mix_file, parse_reference_file, make_reference, prepare_reference, rows_needed,
    with_mix_file, write_reference,
)
from guard.measure._runner import ArmTarget, Harness, HarnessSpec, RunFailed, check_cpus, run_interleaved, run_ranks
from guard.measure._budget import RoundsBudget
from guard.measure._fill import fill_compile_caches
from guard.measure._schedule import interleave
from guard.measure._slow import (
    RATE_CONFIDENCE, SET_ASIDE_SHARE, SLOW_MIN_PCT, SLOW_SIGMAS, SlowMetric, SlowProcess, SlowProcesses,
    find_slow_processes, processes_of, set_aside, slow_in, slow_processes,
)
from guard.measure._stats import (
    BORROW_CHECK_ALPHA, MOST_REPEATS, PASS_RATE, SPREAD_LIMIT_CONFIDENCE, Change, PriorSpread, Spread,
    detectable_change_pct, rate_interval, geometric_mean, relative_change, repeats_to_decide, repeats_to_rule_out,
    smallest_caught_pct, caught_at_spread, spread,
)

__all__ = [
    "DynamoRecord",
    "GraphBreak",
    "RoundsBudget",
    "ArmMix",
    "Imbalance",
    "ImbalanceBucket",
    "MixReport",
    "MixRun",
    "MixSize",
    "StepInfo",
    "imbalance_of",
    "mix_report",
    "MIX_BATCH",
    "usable_mix_runs",
    "parse_mix_file",
    "with_mix_file",
    "BORROW_CHECK_ALPHA",
    "MOST_REPEATS",
    "PASS_RATE",
    "RATE_CONFIDENCE",
    "SLOW_MIN_PCT",
    "SLOW_SIGMAS",
    "SPREAD_LIMIT_CONFIDENCE",
    "ArmMeasurement",
    "ClockMisfit",
    "ArmTarget",
    "REFERENCE_FORMAT",
    "ReferenceTokens",
    "TokenMismatch",
    "TopLogits",
    "MarginFloor",
    "MarginMismatch",
    "MARGIN_FLOOR_ULPS",
    "margin_ulps",
    "ulp",
    "WindowHost",
    "BatchRun",
    "CacheOutcomes",
    "CompileStats",
    "Change",
    "PriorSpread",
    "Harness",
    "HarnessSpec",
    "HostUsage",
    "RankRun",
    "RanksDiffer",
    "ReferenceOutcome",
    "RepeatResult",
    "RepeatsNeeded",
    "RunnerNoise",
    "SlowMetric",
    "SlowProcess",
    "SlowProcesses",
    "SourceLabel",
    "Spread",
    "check_cpus",
    "compile_cache_environment",
    "compile_caches",
    "share_compile_caches",
    "fill_compile_caches",
    "filled",
    "to_fill",
    "interleave",
    "parse_reference_file",
    "make_reference",
    "merge_ranks",
    "prepare_reference",
    "rate_interval",
    "relative_change",
    "repeats_to_decide",
    "repeats_to_rule_out",
    "detectable_change_pct",
    "smallest_caught_pct",
    "caught_at_spread",
    "find_slow_processes",
    "processes_of",
    "runner_noise",
    "slow_in",
    "set_aside",
    "SET_ASIDE_SHARE",
    "slow_processes",
    "slowest_rank_times",
    "rank_mix_trace_paths",
    "rank_trace_paths",
    "rows_needed",
    "run_interleaved",
    "run_ranks",
    "RunFailed",
    "spread",
    "geometric_mean",
    "write_reference",
]
