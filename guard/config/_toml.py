"""TOML from bytes the guard did not write: strict UTF-8, bounded nesting, one message per failure."""

from __future__ import annotations

import tomllib
from typing import Any

from guard._errors import ConfigError

# tables and arrays inside each other; a guard config needs three or four levels
MAX_DEPTH = 32


def parse_toml(data: bytes, shown: str, fix: str) -> dict[str, Any]:
    """The document in `data`; `shown` names it in messages, `fix` says what to do about a bad one."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{shown}: not UTF-8 text; save the file as UTF-8") from None
    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{shown}: not valid TOML ({exc}); {fix}") from None
    except RecursionError:
        raise ConfigError(f"{shown}: nested too deeply to read, more than any config needs; {fix}") from None
    if depth(parsed) > MAX_DEPTH:
        raise ConfigError(
            f"{shown}: tables or arrays nested more than {MAX_DEPTH} deep, more than any config needs; {fix}"
        )
    return parsed


def depth(value: Any) -> int:
    """How deep tables and arrays nest in `value`, counted without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
        else:
            continue
        deepest = max(deepest, level + 1)
        if deepest > MAX_DEPTH:
            break
    return deepest
