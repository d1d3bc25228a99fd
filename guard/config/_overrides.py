"""Values given on the command line in place of the config's: a quick local try with fewer
repeats or steps, or a threshold the workflow sets. The report keeps them, so a run made
with them is never read as one made with the config alone."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from guard._errors import ConfigError
from guard.config._models import GuardConfig

# The config key each override replaces, and the flag that sets it, for messages.
_KEYS = {
    "repeats": ("measure", "repeats", "--repeats"),
    "batch_sizes": ("workload", "batch_sizes", "--batch-sizes"),
    "steps": ("workload", "steps", "--steps"),
    "threshold_pct": ("measure", "threshold_pct", "--threshold-pct"),
}


class ConfigOverrides(BaseModel):
    """None: the config's value stands. Bounds are the config's own, checked when applied."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    repeats: int | None = None
    batch_sizes: list[int] | None = None
    steps: int | None = None
    # replaces measure.threshold_pct, measure.end_to_end_threshold_pct and any calibrated thresholds file
    threshold_pct: float | None = None

    def given(self) -> dict[str, Any]:
        """The overrides that were given, by field name."""
        return self.model_dump(exclude_none=True)


def apply_overrides(config: GuardConfig, overrides: ConfigOverrides) -> GuardConfig:
    """`config` with the given values in place, validated as the config file is (ConfigError
    naming the flag when one is out of the config's range)."""
    data = config.model_dump(by_alias=True)
    for name, value in overrides.given().items():
        section, key, _ = _KEYS[name]
        data[section][key] = value
    if overrides.threshold_pct is not None:
        data["measure"]["thresholds_file"] = None  # one threshold for every metric, as given
        data["measure"]["end_to_end_threshold_pct"] = None
    try:
        return GuardConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        problem = first["msg"].removeprefix("Value error, ")
        problem = problem[:1].lower() + problem[1:]  # "Input should be..." reads on after a colon
        given = overrides.given()
        for name, (section, key, flag) in _KEYS.items():
            if tuple(first["loc"][:2]) == (section, key):
                raise ConfigError(f"{flag} {_shown(given[name])}: {problem}") from None
        raise ConfigError(f"the command-line overrides do not make a valid config: {problem}") from None


def _shown(value: Any) -> str:
    """As it was typed: 1,2 for batch sizes."""
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)
