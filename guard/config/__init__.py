"""The guard's configuration: `guard.toml`, read from the base commit (or a file the caller
names, outside the checkout), and the files it names."""

from guard.config._change import MAX_DIFF_LINES, ConfigChange, config_change, config_paths
from guard.config._load import (
    DEFAULT_CONFIG_NAME, config_uncommitted, load_caller_config, load_commit_config, load_config, parse_config,
)
from guard.config._models import (
    MAX_BATCH_SIZE,
    MAX_CALIBRATED_FELT_PCT,
    MAX_HOST_SECONDS,
    MAX_MIX_SIZES,
    MAX_REPEATS,
    MAX_ROUNDS,
    MIN_REPEATS,
    REFUSED_GPU_MS_PCT,
    REFUSED_TOK_PER_S_PCT,
    STEADY_RUNNER,
    ArmConfig,
    BuildConfig,
    CaptureConfig,
    GuardConfig,
    MeasureConfig,
    Workload,
    WorkloadConfig,
    threshold_refusal,
)
from guard.config._overrides import ConfigOverrides, apply_overrides
from guard.config._entry import check_entry_in_commit
from guard.config._paths import check_entry
from guard.config._rule import (
    FAMILIES_PER_LOOK, FELT_METRICS, METRICS, METRICS_PER_LOOK, RULE_VERSION, AtThreshold, MetricKey, Rule,
    Threshold, ThresholdSource, alpha_per_look, bounds_level, spent,
)
from guard.config._sources import MAX_CONFIG_BYTES, MAX_REFERENCE_BYTES, CommitFiles, Files, FolderFiles
from guard.config._thresholds import CalibratedSpread, Thresholds, load_thresholds, read_thresholds, write_thresholds

__all__ = [
    "AtThreshold",
    "CalibratedSpread",
    "FAMILIES_PER_LOOK",
    "FELT_METRICS",
    "METRICS",
    "METRICS_PER_LOOK",
    "MetricKey",
    "RULE_VERSION",
    "Rule",
    "Threshold",
    "DEFAULT_CONFIG_NAME",
    "MAX_CONFIG_BYTES",
    "MAX_DIFF_LINES",
    "MAX_BATCH_SIZE",
    "MAX_CALIBRATED_FELT_PCT",
    "MAX_HOST_SECONDS",
    "MAX_MIX_SIZES",
    "MAX_REFERENCE_BYTES",
    "MAX_REPEATS",
    "MAX_ROUNDS",
    "MIN_REPEATS",
    "REFUSED_GPU_MS_PCT",
    "REFUSED_TOK_PER_S_PCT",
    "STEADY_RUNNER",
    "ArmConfig",
    "BuildConfig",
    "CaptureConfig",
    "CommitFiles",
    "ConfigOverrides",
    "ConfigChange",
    "Files",
    "FolderFiles",
    "GuardConfig",
    "MeasureConfig",
    "ThresholdSource",
    "Thresholds",
    "Workload",
    "WorkloadConfig",
    "alpha_per_look",
    "apply_overrides",
    "bounds_level",
    "check_entry",
    "check_entry_in_commit",
    "config_uncommitted",
    "config_change",
    "config_paths",
    "load_caller_config",
    "load_commit_config",
    "load_config",
    "load_thresholds",
    "parse_config",
    "read_thresholds",
    "spent",
    "threshold_refusal",
    "write_thresholds",
]
