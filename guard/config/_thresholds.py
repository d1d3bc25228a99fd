"""Thresholds written by `guard calibrate`, read back through `measure.thresholds_file`."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from guard._errors import ConfigError
from guard._output import write_atomic
from guard.config._models import threshold_refusal
from guard.config._sources import MAX_CONFIG_BYTES, Files, FolderFiles
from guard.config._toml import parse_toml

_KEY = "measure.thresholds_file"
_FIX = "write it again with `guard calibrate`"


class Thresholds(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False)

    gpu_ms_pct: float = Field(gt=0)  # under REFUSED_GPU_MS_PCT
    tok_per_s_pct: float = Field(gt=0)  # under REFUSED_TOK_PER_S_PCT
    # under REFUSED_END_TO_END_PCT; None: a file written before it was calibrated (GPU ms's is used)
    end_to_end_ms_pct: float | None = Field(default=None, gt=0)

    @field_validator("gpu_ms_pct", "tok_per_s_pct", "end_to_end_ms_pct")
    @classmethod
    def _guards(cls, value: float | None, info: ValidationInfo) -> float | None:
        metric = {"gpu_ms_pct": "gpu_ms", "tok_per_s_pct": "tok_per_s"}.get(info.field_name or "", "end_to_end_ms")
        problem = value is not None and threshold_refusal(metric, value)  # type: ignore[arg-type]
        if problem:
            raise ValueError(problem)
        return value


def load_thresholds(path: Path) -> Thresholds:
    """A thresholds file on disk, e.g. the one `guard calibrate` just wrote."""
    return read_thresholds(FolderFiles(folder=path.parent), path.name)


def read_thresholds(files: Files, name: str) -> Thresholds:
    """The thresholds file `name`, from where the config came from (its commit or its folder)."""
    data = files.read(name, _KEY, MAX_CONFIG_BYTES)
    shown = files.shown(name)
    if data is None:
        raise ConfigError(f"{shown}: thresholds file not found; run `guard calibrate` or fix {_KEY}")
    table = parse_toml(data, shown, _FIX).get("thresholds", {})
    try:
        return Thresholds.model_validate(table)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        why = first["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{shown}: bad or missing 'thresholds.{key}': {why}") from None


def write_thresholds(path: Path, thresholds: Thresholds, comment: str) -> None:
    lines = [f"# {line}" for line in comment.splitlines()]
    lines += [
        "[thresholds]",
        f"gpu_ms_pct = {thresholds.gpu_ms_pct:.3f}",
        f"tok_per_s_pct = {thresholds.tok_per_s_pct:.3f}",
    ]
    if thresholds.end_to_end_ms_pct is not None:
        lines.append(f"end_to_end_ms_pct = {thresholds.end_to_end_ms_pct:.3f}")
    lines.append("")
    write_atomic(path, "\n".join(lines))
