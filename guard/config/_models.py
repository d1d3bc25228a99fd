"""Pydantic models of `guard.toml`. Field names here are a public contract (see README)."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# "pkg.module:function" or "path/to/file.py:function"
_ENTRY_RE = re.compile(r"^[^:\s]+:[A-Za-z_][A-Za-z0-9_]*$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REFERENCE_FILE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._/-]*\.json$")


def _distinct_at_least(values: list[int], least: int, too_small: str, what: str) -> list[int]:
    """A list of whole numbers, each `least` or more, none twice."""
    if any(v < least for v in values):
        raise ValueError(too_small)
    if len(set(values)) != len(values):
        raise ValueError(f"{what} must not repeat")
    return values


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WorkloadConfig(_Section):
    entry: str = Field(
        default="bench/guard_workload.py:make",
        description="Entry point returning a workload: 'pkg.module:make' or 'path/file.py:make'.",
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments passed to the entry point."
    )

    @field_validator("options")
    @classmethod
    def _json_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        # they reach the harness as JSON, which has no dates or times
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise ValueError("options must be strings, numbers, booleans, arrays and tables, not dates "
                             "or times (quote a date to pass it as a string)") from None
        return value
    batch_sizes: list[int] = Field(default=[1, 2], min_length=1)
    steps: int = Field(default=256, ge=1, description="Timed decode steps per batch size.")
    warmup_steps: int = Field(default=32, ge=0)
    profile_steps: int = Field(
        default=64, ge=0, description="Steps of the separate profiled pass on a GPU (0: no profiling)."
    )
    profile_repeats: int = Field(
        default=0, ge=0,
        description="Processes per arm and round that run the profiled pass, the first ones (0: every one).",
    )
    reference_file: str | None = Field(
        default=None,
        description="Reference-tokens JSON in the repository (read from the base commit) whose ids force every "
        "step's input; default: a free-running greedy pass of the base build, in its own process.",
    )

    @field_validator("entry")
    @classmethod
    def _entry_shape(cls, value: str) -> str:
        if not _ENTRY_RE.match(value):
            raise ValueError("expected 'pkg.module:function' or 'path/file.py:function'")
        return value

    @field_validator("reference_file")
    @classmethod
    def _reference_path(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not _REFERENCE_FILE_RE.match(value) or ".." in value.split("/"):
            raise ValueError("expected a relative path inside the repository to a .json file, of letters, digits "
                             "and . _ / - (e.g. 'bench/reference-tokens.json')")
        return value

    @field_validator("batch_sizes")
    @classmethod
    def _positive_unique(cls, value: list[int]) -> list[int]:
        return _distinct_at_least(value, 1, "every batch size must be 1 or more", "batch sizes")


class BuildConfig(_Section):
    method: Literal["venv", "none"] = "venv"
    install: str = Field(
        default="pip install --no-deps .",
        description="Shell command run in the arm's worktree with its venv active.",
    )
    python: str | None = Field(
        default=None,
        description="Interpreter the arm venvs are made from; default: the one running the guard.",
    )
    timeout_s: float = Field(default=1800, gt=0)
    pass_env: list[str] = Field(
        default_factory=list,
        description=(
            "Variables the arm's build and workload may see although their names look like secrets "
            "(TOKEN, SECRET, KEY...); all others of that kind are removed. Never name a write token here."
        ),
    )


class MeasureConfig(_Section):
    repeats: int = Field(default=5, ge=2, description="Fresh processes per arm, interleaved.")
    threshold_pct: float = Field(
        default=1.0, gt=0, description="Smallest slowdown, in percent, reported as a regression."
    )
    alpha: float = Field(
        default=0.01, gt=0, lt=0.5, description="Significance level: a change counts only if p < alpha."
    )
    confirm: bool = Field(
        default=True, description="Near the threshold, run one more round of repeats before deciding."
    )
    thresholds_file: str | None = Field(
        default=None,
        description="TOML written by `guard calibrate`; its thresholds replace threshold_pct per metric.",
    )
    confidence: float = Field(default=0.95, gt=0.5, lt=1)
    timeout_s: float = Field(default=1800, gt=0, description="Limit for one harness process.")
    cpus: list[int] = Field(
        default_factory=list,
        description="CPU ids every harness process is pinned to (Linux), e.g. cores near the GPU; "
        "empty: not pinned. The host side of a step then runs on the same cores in every process.",
    )

    @field_validator("cpus")
    @classmethod
    def _cpu_ids(cls, value: list[int]) -> list[int]:
        return _distinct_at_least(value, 0, "CPU ids are 0 or more", "CPU ids")


class CaptureConfig(_Section):
    globs: list[str] = Field(
        default_factory=list,
        description="Files that hold graph capture code, besides those found by CUDA graph API names.",
    )


class ArmConfig(_Section):
    """An ablation arm: base or head built again, run with environment overrides."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    source: Literal["base", "head"] = Field(alias="from")
    env: dict[str, str] = Field(default_factory=dict)
    label: str = Field(default="", description="What the arm is, for the comment's table.")

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value in ("base", "head"):
            raise ValueError("'base' and 'head' are the built-in arms; pick another name")
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        # a process environment cannot hold `=` in a name, nor a NUL anywhere
        bad = [name for name in value if not _ENV_NAME_RE.match(name)]
        if bad:
            raise ValueError(f"environment variable names are letters, digits and _, not starting with a digit: "
                             f"{', '.join(repr(n) for n in bad)}")
        if any("\0" in text for text in value.values()):
            raise ValueError("an environment variable's value cannot hold a NUL character")
        return value


class GuardConfig(_Section):
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    build: BuildConfig = Field(default_factory=BuildConfig)
    measure: MeasureConfig = Field(default_factory=MeasureConfig)
    capture: CaptureConfig = Field(default_factory=CaptureConfig)
    arms: list[ArmConfig] = Field(default_factory=list)
    target_branch: str = Field(default="main", description="Branch whose merge-base with head is the default base.")

    @field_validator("arms")
    @classmethod
    def _unique_arms(cls, value: list[ArmConfig]) -> list[ArmConfig]:
        names = [a.name for a in value]
        if len(set(names)) != len(names):
            raise ValueError("arm names must not repeat")
        return value
