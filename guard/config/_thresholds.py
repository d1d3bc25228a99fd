"""Thresholds written by `guard calibrate`, read back through `measure.thresholds_file`."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from guard._errors import ConfigError
from guard._output import write_atomic


class Thresholds(BaseModel):
    gpu_ms_pct: float = Field(gt=0)
    tok_per_s_pct: float = Field(gt=0)


def load_thresholds(path: Path) -> Thresholds:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: thresholds file not found; run `guard calibrate` or fix measure.thresholds_file"
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); write it again with `guard calibrate`") from None
    try:
        return Thresholds.model_validate(data.get("thresholds", {}))
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{path}: bad or missing 'thresholds.{key}': {first['msg']}") from None


def write_thresholds(path: Path, thresholds: Thresholds, comment: str) -> None:
    lines = [f"# {line}" for line in comment.splitlines()]
    lines += [
        "[thresholds]",
        f"gpu_ms_pct = {thresholds.gpu_ms_pct:.3f}",
        f"tok_per_s_pct = {thresholds.tok_per_s_pct:.3f}",
        "",
    ]
    write_atomic(path, "\n".join(lines))
