"""The guard's configuration: `guard.toml` at the target repository's root."""

from guard.config._load import DEFAULT_CONFIG_NAME, load_config
from guard.config._thresholds import Thresholds, load_thresholds, write_thresholds
from guard.config._models import (
    ArmConfig,
    BuildConfig,
    CaptureConfig,
    GuardConfig,
    MeasureConfig,
    WorkloadConfig,
)

__all__ = [
    "DEFAULT_CONFIG_NAME",
    "ArmConfig",
    "BuildConfig",
    "CaptureConfig",
    "GuardConfig",
    "MeasureConfig",
    "Thresholds",
    "WorkloadConfig",
    "load_config",
    "load_thresholds",
    "write_thresholds",
]
