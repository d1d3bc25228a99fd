"""Command-line values turned into checked settings; every bad one is a single message."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Any

from guard._errors import ConfigError
from guard.config import MeasureConfig

from ._models import KIND_BY_NAME, RunSettings

INJECTED_OPTIONS = ("idle_us", "split", "long_kv_layers")  # set by the head commits; not workload options


def run_settings(args: argparse.Namespace) -> RunSettings:
    minimum = {"steps": 1, "repeats": 2, "max-rounds": 1, "calibrate-repeats": 2, "sizing-repeats": 1, "batch-size": 1}
    for name, least in minimum.items():
        value = getattr(args, name.replace("-", "_"))
        if value < least:
            raise ConfigError(f"--{name} must be at least {least}, not {value}")
    return RunSettings(
        batch_size=args.batch_size, steps=args.steps, warmup_steps=args.warmup_steps,
        profile_steps=args.profile_steps, profile_repeats=args.profile_repeats, repeats=args.repeats,
        options=workload_options(args.options),
        options_toml=args.options, build=args.build, confirm=not args.no_confirm, alpha=args.alpha,
        confidence=MeasureConfig.model_fields["confidence"].default, timeout_s=args.timeout_s,
        max_rounds=args.max_rounds, tok_per_s_min_s=args.tok_per_s_min_s, warmup_max_s=args.warmup_max_s,
    )


def workload_options(text: str) -> dict[str, Any]:
    try:
        options = tomllib.loads(f"options = {{ {text} }}")["options"]
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--options {text!r}: not a TOML inline-table body ({exc}); e.g. 'layers = 4'") from None
    injected = [k for k in INJECTED_OPTIONS if k in options]
    if injected:
        raise ConfigError(
            f"--options sets {', '.join(injected)}: the head commits inject those by changing the engine's "
            "defaults, and an option would override them; leave them out"
        )
    return options


def planned_pairs(text: str, pairs: int) -> dict[str, int]:
    """--kinds: names, each optionally with its own count (`idle-0.5=5`); the others get --pairs."""
    if pairs < 1:
        raise ConfigError(f"--pairs must be at least 1, not {pairs}")
    planned: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _, count = item.partition("=")
        if name not in KIND_BY_NAME:
            raise ConfigError(f"--kinds: unknown kind {name!r}; choose from {', '.join(KIND_BY_NAME)}")
        if count and not (count.isdigit() and int(count) >= 1):
            raise ConfigError(f"--kinds: {item!r}: a count must be a whole number of 1 or more")
        planned[name] = int(count) if count else pairs
    if not planned:
        raise ConfigError(f"--kinds: name at least one kind of {', '.join(KIND_BY_NAME)}")
    return planned


def idle_grid(text: str) -> list[float]:
    """idle_us values; the idle curve needs two, as the unsplit base is not on it."""
    return _numbers(text, "--idle-grid-us", at_least=2)


def long_kv_grid(text: str) -> list[int]:
    """long_kv_layers values; one is enough, as the base (none) is the curve's first point."""
    values = _numbers(text, "--long-kv-grid", at_least=1)
    if any(v != int(v) for v in values):
        raise ConfigError(f"--long-kv-grid {text!r}: expected whole numbers of layers")
    return [int(v) for v in values]


def _numbers(text: str, flag: str, at_least: int) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: expected comma-separated numbers, e.g. 2,6,12") from None
    if len(values) < at_least or any(v <= 0 for v in values) or len(set(values)) != len(values):
        raise ConfigError(f"{flag} {text!r}: give at least {at_least} different value(s) above 0")
    return sorted(values)


def check_resume(out: Path, settings: RunSettings, resume: bool, jsonl: str) -> None:
    """A folder that holds a run is continued only with --resume and the same settings."""
    stored_path = out / "settings.json"
    if not stored_path.exists() and not (out / jsonl).exists():
        return
    if not resume:
        raise ConfigError(f"{out} holds a validation run already; pass --resume to continue it, or another --out")
    if not stored_path.exists():
        return
    stored = RunSettings.model_validate_json(stored_path.read_text())
    for field in RunSettings.model_fields:
        if getattr(stored, field) != getattr(settings, field):
            raise ConfigError(
                f"{out} was run with {field} = {getattr(stored, field)!r}, not {getattr(settings, field)!r}; "
                "resume with the same settings, or start another --out"
            )

