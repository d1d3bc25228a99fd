"""Why a comparison is not valid, as facts: a kind and its figures. The render layer words them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from guard.measure import ClockMisfit

ReasonKind = Literal[
    "arm_no_results",  # the arm finished no repeat: `error` says why
    "arm_failed",  # the arm failed after `repeats_done` repeats
    "arm_changed_between_repeats",  # a fingerprint field (`field`) took other values from repeat to repeat
    "arms_differ",  # the arms ran with another value of a fingerprint field
    "tokens_differ",  # base and head generated other tokens (free-running)
    "not_deterministic",  # one arm's repeats generated other tokens (free-running)
    "too_few_repeats",  # fewer than 2 repeats: no change can be estimated
    "ranks_disagree",  # a rank (`rank`) of one arm generated other tokens than its rank 0
    "clock_refused",  # a process's timings did not fit the passes the guard saw on its own clock (`clock`)
]


class SeenValue(BaseModel):
    value: str  # as the fingerprint recorded it, shown as text
    repeats: list[int] = []  # the repeats that saw it (arm_changed_between_repeats)
    arm: str | None = None  # the arm that ran with it (arms_differ)


class Reason(BaseModel):
    kind: ReasonKind
    batch_size: int | None = None
    arm: str | None = None
    other_arm: str | None = None  # tokens_differ: the head
    repeats_done: int | None = None  # arm_failed
    error: str | None = None  # the arm's own message (text from a process: escaped where shown)
    step: int | None = None  # tokens_differ, not_deterministic: the first step that differs
    sequence: int | None = None
    repeat: int | None = None  # not_deterministic: the repeat that differed from `first_repeat`
    first_repeat: int | None = None
    rank: int | None = None  # ranks_disagree: the first rank whose outputs differ from rank 0's
    field: str | None = None  # fingerprint field, as the fingerprint names it
    seen: list[SeenValue] = []
    clock: ClockMisfit | None = None  # clock_refused: what the process claimed and what the guard saw
