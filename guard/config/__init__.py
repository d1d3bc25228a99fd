"""The guard's configuration: `guard.toml` at the target repository's root."""

from guard.config._load import DEFAULT_CONFIG_NAME, load_config
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
    "WorkloadConfig",
    "load_config",
]
