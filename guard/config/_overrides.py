"""Values given on the command line in place of the config's: a quick local try with fewer
repeats or steps, or a threshold the workflow sets. The report keeps them, so a run made
with them is never read as one made with the config alone."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from guard._errors import ConfigError
from guard.config._models import FEWEST_REPEATS, MIN_REPEATS, GuardConfig

# The config key each override replaces, and the flag that sets it, for messages.
_KEYS = {
    "repeats": ("measure", "repeats", "--repeats"),
    "batch_sizes": ("workload", "batch_sizes", "--batch-sizes"),
    "steps": ("workload", "steps", "--steps"),
    "threshold_pct": ("measure", "threshold_pct", "--threshold-pct"),
    "allow_few_repeats": ("measure", "allow_few_repeats", "--quick"),
}
# --quick: what a first try on one's own machine needs, where the flags do not say otherwise
QUICK_REPEATS = 2
QUICK_STEPS = 32


class ConfigOverrides(BaseModel):
    """None: the config's value stands. Bounds are the config's own, checked when applied."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    repeats: int | None = None
    batch_sizes: list[int] | None = None
    steps: int | None = None
    # replaces measure.threshold_pct, measure.end_to_end_threshold_pct and any calibrated thresholds file
    threshold_pct: float | None = None
    # --quick: fewer processes than the rule needs near the threshold are allowed (no key without)
    allow_few_repeats: bool | None = Field(default=None, exclude_if=lambda value: value is None)

    @classmethod
    def quick(cls, repeats: int | None = None, steps: int | None = None, **given: Any) -> ConfigOverrides:
        """A quick try: QUICK_REPEATS processes per arm and QUICK_STEPS timed steps unless given,
        few repeats allowed."""
        return cls(repeats=repeats or QUICK_REPEATS, steps=steps or QUICK_STEPS, allow_few_repeats=True, **given)

    def given(self) -> dict[str, Any]:
        """The overrides that were given, by field name."""
        return self.model_dump(exclude_none=True)


def apply_overrides(config: GuardConfig, overrides: ConfigOverrides) -> GuardConfig:
    """`config` with the given values in place, validated as the config file is (ConfigError
    naming the flag when one is out of the config's range)."""
    if (overrides.repeats is not None and FEWEST_REPEATS <= overrides.repeats < MIN_REPEATS
            and not overrides.allow_few_repeats
            and not config.measure.allow_few_repeats):
        raise ConfigError(f"--repeats {overrides.repeats} is under {MIN_REPEATS} processes per arm, too few for the "
                          "decision rule to decide a change near the threshold: add --quick for a quick try (the "
                          "comment then says the verdict holds for these settings alone)")
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
