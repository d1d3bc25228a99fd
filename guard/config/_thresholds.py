"""Thresholds written by `guard calibrate`, read back through `measure.thresholds_file`, with
the spreads they were calibrated at, which a run borrows (compare/_borrow.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from guard._errors import ConfigError
from guard._output import write_atomic
from guard.config._models import STEADY_RUNNER, felt_cap_pct, threshold_refusal
from guard.config._sources import MAX_CONFIG_BYTES, Files, FolderFiles
from guard.config._toml import parse_toml

_KEY = "measure.thresholds_file"
_FIX = "write it again with `guard calibrate`"


# The most processes a calibration's spread may count: MAX_REPEATS per side, twice over.
MAX_SPREAD_DOF = 2_000


class CalibratedSpread(BaseModel):
    """One metric's within-side spread at one batch size, from the calibration's A/A: the sd of
    the processes' logarithms x 100 (about percent) and its degrees of freedom."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")

    batch_size: int = Field(ge=1)
    metric: Literal["gpu_ms", "end_to_end_ms", "tok_per_s"]
    sd_pct: float = Field(gt=0, lt=100)
    degrees_of_freedom: int = Field(ge=1, le=MAX_SPREAD_DOF)


class Thresholds(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False)

    gpu_ms_pct: float = Field(gt=0)  # under REFUSED_GPU_MS_PCT
    # what the runner resolves in tok/s and end-to-end ms, up to felt_cap_pct (tok/s a fall under 100%): a run holds
    # them to the larger of this and measure.threshold_pct (rule 5); None: the runner could not tell a
    # change at all, not measured there (end-to-end ms on a CPU), or a file from before it was written
    tok_per_s_pct: float | None = Field(default=None, gt=0)
    end_to_end_ms_pct: float | None = Field(default=None, gt=0)
    # [] : a file written before spreads were kept; the run then decides on its own processes alone
    spreads: list[CalibratedSpread] = []

    @field_validator("gpu_ms_pct")
    @classmethod
    def _guards(cls, value: float) -> float:
        """GPU ms's threshold is the one that always guards: one that would switch the guard off is
        refused. What the user feels may be as coarse as the runner is (rule 5)."""
        problem = threshold_refusal("gpu_ms", value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("tok_per_s_pct", "end_to_end_ms_pct")
    @classmethod
    def _resolvable(cls, value: float | None, info: ValidationInfo) -> float | None:
        metric = info.field_name.removesuffix("_pct")
        cap = felt_cap_pct(metric)
        if value is not None and value > cap:
            felt = "tok/s at one eleventh of itself" if metric == "tok_per_s" else "a step eleven times as long"
            raise ValueError(f"at most {cap:.4g}% ({felt}): past it a runner "
                             f"tells no change at all; {STEADY_RUNNER}, then run `guard calibrate` again")
        return value

    @model_validator(mode="after")
    def _one_spread_each(self) -> Thresholds:
        seen = [(s.batch_size, s.metric) for s in self.spreads]
        twice = next((key for key in seen if seen.count(key) > 1), None)
        if twice is not None:
            raise ValueError(f"batch size {twice[0]}'s {twice[1]} spread is given twice")
        return self


def load_thresholds(path: Path) -> Thresholds:
    """A thresholds file on disk, e.g. the one `guard calibrate` just wrote."""
    return read_thresholds(FolderFiles(folder=path.parent), path.name)


def read_thresholds(files: Files, name: str) -> Thresholds:
    """The thresholds file `name`, from where the config came from (its commit or its folder)."""
    data = files.read(name, _KEY, MAX_CONFIG_BYTES)
    shown = files.shown(name)
    if data is None:
        raise ConfigError(f"{shown}: thresholds file not found; run `guard calibrate` or fix {_KEY}")
    parsed = parse_toml(data, shown, _FIX)
    table = parsed.get("thresholds", {})
    if isinstance(table, dict) and "spread" in parsed:
        table = {**table, "spreads": parsed["spread"]}
    try:
        return Thresholds.model_validate(table)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = [str(p) for p in first["loc"]]
        key = (f"spread[{int(loc[1]) + 1}]" + "".join(f".{p}" for p in loc[2:]) if loc[:1] == ["spreads"]
               and len(loc) > 1 else "thresholds" + "".join(f".{p}" for p in loc))
        why = first["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{shown}: bad or missing '{key}': {why}") from None


def write_thresholds(path: Path, thresholds: Thresholds, comment: str) -> None:
    lines = [f"# {line}" for line in comment.splitlines()]
    lines += [
        "[thresholds]",
        f"gpu_ms_pct = {thresholds.gpu_ms_pct:.3f}",
    ]
    if thresholds.tok_per_s_pct is not None:
        lines.append(f"tok_per_s_pct = {thresholds.tok_per_s_pct:.3f}")
    if thresholds.end_to_end_ms_pct is not None:
        lines.append(f"end_to_end_ms_pct = {thresholds.end_to_end_ms_pct:.3f}")
    for spread in thresholds.spreads:  # what a run borrows at few processes: keep them with the thresholds
        lines += ["", "[[spread]]", f"batch_size = {spread.batch_size}", f'metric = "{spread.metric}"',
                  f"sd_pct = {spread.sd_pct:.6g}", f"degrees_of_freedom = {spread.degrees_of_freedom}"]
    lines.append("")
    write_atomic(path, "\n".join(lines))
