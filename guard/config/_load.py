"""Read and validate a config; turn every failure into one ConfigError message.

`guard run` reads `guard.toml` from the base commit (`load_commit_config`), never from the
work tree, which in CI is the pull request's head. A caller may name a file of its own
(`load_caller_config`); it must lie outside the checkout, where the pull request cannot put it.
"""

from __future__ import annotations

import difflib
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from guard import DEFAULT_CONFIG_NAME
from guard._errors import ConfigError
from guard.config._models import GuardConfig
from guard.config._sources import MAX_CONFIG_BYTES, CommitFiles, read_regular_file, refuse_inside_checkout
from guard.config._toml import parse_toml

_FIX = "fix the syntax"


def load_config(path: Path | None, *, required: bool = False) -> GuardConfig:
    """Load `path`; a missing optional file gives the defaults."""
    data = None if path is None else read_regular_file(path, "config", MAX_CONFIG_BYTES)
    if data is None:
        if required and path is not None:
            raise ConfigError(f"{path}: config file not found; pass an existing file to --config")
        return GuardConfig()
    return parse_config(parse_toml(data, str(path), _FIX), source=str(path))


def load_commit_config(repo: Path, sha: str) -> GuardConfig:
    """`guard.toml` as the commit `sha` holds it; none there gives the defaults."""
    files = CommitFiles(repo=repo, sha=sha)
    data = files.read(DEFAULT_CONFIG_NAME, "config", MAX_CONFIG_BYTES)
    if data is None:
        return GuardConfig()
    shown = files.shown(DEFAULT_CONFIG_NAME)
    return parse_config(parse_toml(data, shown, _FIX), source=shown)


def config_uncommitted(repo: Path, head: str) -> bool:
    """The work tree holds a guard.toml the head commit does not (a new file, or an edit), which
    `guard run` does not use: its config is the base commit's. A link is not followed."""
    here = repo / DEFAULT_CONFIG_NAME
    if here.is_symlink():
        return False
    try:
        found = read_regular_file(here, "config", MAX_CONFIG_BYTES)
        return found is not None and found != CommitFiles(repo=repo, sha=head).read(
            DEFAULT_CONFIG_NAME, "config", MAX_CONFIG_BYTES)
    except ConfigError:
        return False  # an oversized file, or not a file: the config is the base commit's either way


def load_caller_config(path: Path, repo: Path) -> GuardConfig:
    """The file a caller passed with --config, from outside the repository's work tree."""
    refuse_inside_checkout(path, repo, f"--config {path}")
    return load_config(path, required=True)


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
            lines.append(f"{source}: unknown key '{key}' in {section}; {_did_you_mean(err['loc'])}")
            continue
        expected = err["msg"].removeprefix("Value error, ")
        if not err["loc"]:  # a rule between sections: its message names the keys
            lines.append(f"{source}: {expected}")
            continue
        found = _lookup(data, err["loc"])
        lines.append(f"{source}: bad value for '{key}': {_shown(found)}; expected: {expected}")
    return "\n".join(lines)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _lookup(data: Any, loc: tuple[Any, ...]) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return "<missing>"
    return data


def _did_you_mean(loc: tuple[Any, ...]) -> str:
    """'did you mean 'repeats'?' where a key of the section is close to the one written, else
    the section's keys."""
    known = _keys_at(loc[:-1])
    if not known:
        return "check its spelling"
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    return f"the keys there are {', '.join(known)}"


def _keys_at(path: tuple[Any, ...]) -> list[str]:
    """The keys the config takes at `path` (section names, from the top), [] where none is known."""
    model: type[BaseModel] | None = GuardConfig
    for part in path:
        field = model.model_fields.get(str(part)) if model is not None else None
        if field is None:
            return []
        model = _model_of(field.annotation)
    return sorted(model.model_fields) if model is not None else []


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, through `X | None`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        return next((m for a in get_args(annotation) if (m := _model_of(a)) is not None), None)
    return None
