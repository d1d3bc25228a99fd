"""The warnings a report carries about how its run went, as facts: a kind and its values. The
GPU's come from the fingerprints (compare/_fingerprint.py), the checkout's from the pipeline;
the report words them (guard/report/_warning_text.py). A report before schema 13 kept each
as its sentence, which is read as it is."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class CredentialKept(BaseModel):
    """The checkout keeps a credential in .git/config (under `keys`), which the pull request's code can read."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["credential_kept"] = "credential_kept"
    keys: list[str]


class NoFingerprint(BaseModel):
    """Repeats of an arm without a GPU fingerprint, while other repeats have one."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["no_fingerprint"] = "no_fingerprint"
    arm: str
    repeats: list[int]  # 1-based, in order
    every: bool  # every repeat of the arm
    reason: str  # why the first of them has none


class _OfRepeat(BaseModel):
    """A warning about one repeat of an arm (1-based, as the comment numbers it)."""

    model_config = ConfigDict(frozen=True)
    arm: str
    repeat: int


class ClocksHeld(_OfRepeat):
    """At the start or end of the repeat, NVML named reasons (not idle ones) holding the clocks back."""

    kind: Literal["clocks_held"] = "clocks_held"
    phase: Literal["start", "end"]
    reasons: list[str]


class SmClockFell(_OfRepeat):
    """The SM clock at the end fell past compare/_fingerprint.py's SM_CLOCK_DROP_FRACTION below the start's."""

    kind: Literal["sm_clock_fell"] = "sm_clock_fell"
    start_mhz: int
    end_mhz: int


class HeldDown(_OfRepeat):
    """The power limit or the temperature held the clocks down for `held_s` of the repeat's `run_s`."""

    kind: Literal["held_down"] = "held_down"
    by: Literal["power", "thermal"]
    held_s: float
    run_s: float


class GpuProcess(BaseModel):
    model_config = ConfigDict(frozen=True)
    pid: int
    used_memory_mib: float | None = None


class OtherProcesses(_OfRepeat):
    """Processes other than the harness were on the GPU at the repeat's start or end."""

    kind: Literal["other_processes"] = "other_processes"
    processes: list[GpuProcess]


class PersistenceOff(_OfRepeat):
    """Persistence mode was off at the repeat's start or end."""

    kind: Literal["persistence_off"] = "persistence_off"


RunWarning = Annotated[
    CredentialKept | NoFingerprint | ClocksHeld | SmClockFell | HeldDown | OtherProcesses | PersistenceOff,
    Field(discriminator="kind"),
]
