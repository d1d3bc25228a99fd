"""Read and validate a config file; turn every failure into one ConfigError message."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from guard._errors import ConfigError
from guard.config._models import GuardConfig

DEFAULT_CONFIG_NAME = "guard.toml"


def load_config(path: Path | None, *, required: bool = False) -> GuardConfig:
    """Load `path`; a missing optional file gives the defaults."""
    if path is None or not path.exists():
        if required and path is not None:
            raise ConfigError(f"{path}: config file not found; pass an existing file to --config")
        return GuardConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text; save the file as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the syntax") from None
    return parse_config(data, source=str(path))


def parse_config(data: dict[str, Any], *, source: str = "config") -> GuardConfig:
    try:
        return GuardConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, data, source)) from None


def _describe(exc: ValidationError, data: dict[str, Any], source: str) -> str:
    """One line per problem: the dotted key, the value found, what was expected."""
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            section = ".".join(str(p) for p in err["loc"][:-1]) or "top level"
            lines.append(f"{source}: unknown key '{key}' in {section}; check its spelling (README lists the keys)")
            continue
        found = _lookup(data, err["loc"])
        expected = err["msg"].removeprefix("Value error, ")
        lines.append(f"{source}: bad value for '{key}': {found!r}; expected: {expected}")
    return "\n".join(lines)


def _lookup(data: Any, loc: tuple[Any, ...]) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return "<missing>"
    return data
