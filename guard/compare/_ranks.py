"""Per rank, for an arm of several ranks at one batch size: each rank's own figures, the rank
that was the slowest in most steps (a straggler: the one that finished them last, which the
others waited for; measure/_ranks.py), the ranks that decoded another way than rank 0 (their
describe() differs) and whether every rank generated rank 0's tokens. A step's time, and so
the verdict, is the slowest rank's; how long each rank waited inside a step is the trace's to say.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from guard.measure import BatchRun, Spread, TokenMismatch, spread

# A straggler is the slowest rank in at least this share of the timed steps, over at least
# STRAGGLER_MIN_STEPS of them: by chance alone, 24 of 32 or more happens to one of two ranks
# less than 0.4% of the time, and less often to one of more ranks ...
STRAGGLER_SHARE = 0.75
STRAGGLER_MIN_STEPS = 32
# ... and, where the ranks stamped their steps, one that finished them behind the first rank by
# this share of a step at the median: a rank a few microseconds late every time holds no one back
STRAGGLER_MIN_LAG_PCT = 1.0
# a head straggler that base had too is news when it fell this many times as far behind
STRAGGLER_LAG_FACTOR = 2.0
# describe() fields that differ between ranks by nature, not a rank that decodes another way
RANK_OWN_FIELDS = frozenset({"rank", "local_rank", "device"})
MOST_PATHS = 8
VALUE_CHARS = 64
_FIELD_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


class RankStats(BaseModel):
    rank: int = Field(ge=0)
    gpu_ms_per_step: Spread  # this rank's own mean over its steps, per process
    host_ms_per_step: Spread | None = None  # its host's enqueue time per step (GPU only)
    # per process, the median of how far behind the first rank to finish a step it finished
    finish_lag_us: Spread | None = None
    slowest_steps: int = Field(ge=0)  # timed steps, over the processes, that it finished last
    disagreements: int = Field(default=0, ge=0)  # outputs, over the processes, that differ from rank 0's
    first_disagreement: TokenMismatch | None = None


class RankPath(BaseModel):
    """A rank whose describe() gave `field` another value than rank 0's: it decoded another way
    (on a GPU, e.g. capture_mode "eager" where rank 0 replays a graph). Values are the process's
    words, cut short; shown as data."""

    rank: int = Field(ge=1)
    field: str = Field(pattern=_FIELD_NAME)
    value: str = Field(max_length=VALUE_CHARS)
    rank0_value: str = Field(max_length=VALUE_CHARS)


class ArmRanks(BaseModel):
    world_size: int = Field(ge=2)
    steps: int = Field(ge=0)  # timed steps over the processes: each had one slowest rank
    ranks: list[RankStats]
    paths: list[RankPath] = []
    # decided from the counts above (`straggler_of`, and any disagreement): recomputed when read back
    straggler: int | None = None
    disagree: bool = False

    @property
    def straggler_share(self) -> float:
        if self.straggler is None or not self.steps:
            return 0.0
        return self.ranks[self.straggler].slowest_steps / self.steps

    def first_disagreeing(self) -> RankStats | None:
        return next((r for r in self.ranks if r.disagreements), None)


class RankChange(BaseModel):
    """What the head's ranks did that base's did not, at one batch size: a straggler where base
    had none, another one, or the same one at least STRAGGLER_LAG_FACTOR times as far behind;
    ranks on another path than rank 0 that base's were not on."""

    straggler: int | None = None
    paths: list[RankPath] = []


def rank_change(base: ArmRanks | None, head: ArmRanks | None) -> RankChange | None:
    """None when the head ran as one process, or its ranks did nothing base's did not."""
    if head is None:
        return None
    straggler = head.straggler
    if straggler is not None and base is not None and base.straggler == straggler:
        before, after = _lag(base, straggler), _lag(head, straggler)
        if before is None or after is None or after < STRAGGLER_LAG_FACTOR * before:
            straggler = None
    seen = {(p.rank, p.field, p.value) for p in (base.paths if base is not None else [])}
    paths = [p for p in head.paths if (p.rank, p.field, p.value) not in seen]
    return RankChange(straggler=straggler, paths=paths) if straggler is not None or paths else None


def _lag(ranks: ArmRanks, rank: int) -> float | None:
    lag = ranks.ranks[rank].finish_lag_us if rank < len(ranks.ranks) else None
    return lag.median if lag is not None else None


def straggler_of(
    slowest_steps: list[int], steps: int, lag_us: list[float | None] | None = None, step_ms: float | None = None,
) -> int | None:
    """The rank slowest in STRAGGLER_SHARE of `steps` or more (STRAGGLER_MIN_STEPS at least),
    its median lag behind the first to finish (`lag_us`, per rank) STRAGGLER_MIN_LAG_PCT of
    `step_ms` or more where both are known."""
    if steps < STRAGGLER_MIN_STEPS:
        return None
    top = max(range(len(slowest_steps)), key=lambda rank: slowest_steps[rank], default=None)
    if top is None or slowest_steps[top] < STRAGGLER_SHARE * steps:
        return None
    lag = lag_us[top] if lag_us else None
    if lag is not None and step_ms and lag / 1e3 < STRAGGLER_MIN_LAG_PCT / 100 * step_ms:
        return None
    return top


def straggler_again(ranks: ArmRanks, step_ms: float) -> int | None:
    """`straggler_of` on an arm's stored figures (`step_ms`: the arm's median step time)."""
    return straggler_of([r.slowest_steps for r in ranks.ranks], ranks.steps,
                        [r.finish_lag_us.median if r.finish_lag_us else None for r in ranks.ranks], step_ms)


def arm_ranks(runs: list[BatchRun]) -> ArmRanks | None:
    """The ranks of an arm's processes at one batch size; None when they ran as one process."""
    if not runs or not all(run.ranks for run in runs):
        return None
    world = len(runs[0].ranks)
    if any(len(run.ranks) != world or len(run.slowest_steps) != world for run in runs):
        return None  # processes of other world sizes: not one arm's ranks
    ranks = []
    for rank in range(world):
        own = [run.ranks[rank] for run in runs]
        host = [r.host_ms_per_step for r in own]
        lag = [r.finish_lag_us for r in own]
        ranks.append(RankStats(
            rank=rank, gpu_ms_per_step=spread([r.gpu_ms_per_step for r in own]),
            host_ms_per_step=spread([h for h in host if h is not None]) if None not in host else None,
            finish_lag_us=spread([v for v in lag if v is not None]) if None not in lag else None,
            slowest_steps=sum(run.slowest_steps[rank] for run in runs),
            disagreements=sum(r.disagreements for r in own),
            first_disagreement=next((r.first_disagreement for r in own if r.first_disagreement), None),
        ))
    found = ArmRanks(world_size=world, steps=sum(sum(run.slowest_steps) for run in runs), ranks=ranks,
                     paths=_paths(runs), disagree=any(r.disagreements for r in ranks))
    step_ms = spread([run.gpu_ms_per_step for run in runs]).median  # the arm's, as its ArmStats has it
    return found.model_copy(update={"straggler": straggler_again(found, step_ms)})


def _paths(runs: list[BatchRun]) -> list[RankPath]:
    """Each (rank, field) whose describe() value differs from rank 0's in some process, once."""
    found: dict[tuple[int, str], RankPath] = {}
    for run in runs:
        lead = run.ranks[0].workload
        for other in run.ranks[1:]:
            for field in sorted(set(lead) | set(other.workload)):
                if field in RANK_OWN_FIELDS or not re.match(_FIELD_NAME, field) or (other.rank, field) in found:
                    continue
                if lead.get(field) != other.workload.get(field) and len(found) < MOST_PATHS:
                    found[(other.rank, field)] = RankPath(
                        rank=other.rank, field=field, value=_cut(other.workload.get(field)),
                        rank0_value=_cut(lead.get(field)))
    return sorted(found.values(), key=lambda p: (p.rank, p.field))


def _cut(value: object) -> str:
    shown = "-" if value is None else str(value)
    return shown if len(shown) <= VALUE_CHARS else shown[: VALUE_CHARS - 3] + "..."
