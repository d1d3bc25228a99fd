"""A workload of several ranks, in words: where a rank of the head finished most steps last
(a straggler) or decoded another way than its rank 0, and base's ranks did not; each rank's
own figures in a table; how a step's time comes from the ranks."""

from __future__ import annotations

from guard._markdown import code
from guard.compare import ArmRanks, BatchComparison, RankPath
from guard.report import _words as words
from guard.report._schema import Report


def rank_sentences(batches: list[BatchComparison], base: str, head: str) -> list[str]:
    """One sentence per batch size and finding of the head's ranks that base's did not share
    (compare's `rank_change`)."""
    lines = []
    for batch in batches:
        change = batch.rank_change
        arms = {a.arm: a.ranks for a in batch.arms}
        now, before = arms.get(head), arms.get(base)
        if change is None or now is None:
            continue
        at = f"At batch size {batch.batch_size}"
        if change.straggler is not None:
            lines.append(f"{at}, rank {change.straggler} of {now.world_size} finished {_share(now)} of head's timed "
                         f"steps last{_behind(now, change.straggler)}, the others waiting for it "
                         f"({_base_straggler(before, change.straggler)}); a step takes as long as its slowest rank.")
        for rank in sorted({p.rank for p in change.paths}):
            said = ", ".join(_path(p) for p in change.paths if p.rank == rank)
            lines.append(f"{at}, rank {rank} of head decoded another way than its rank 0: {said}.")
    return lines


def _behind(ranks: ArmRanks, rank: int) -> str:
    lag = ranks.ranks[rank].finish_lag_us
    return f", {words.ms(lag.median / 1e3)} ms behind the first at the median" if lag is not None else ""


def _base_straggler(before: ArmRanks | None, rank: int) -> str:
    if before is None or before.straggler is None:
        return "base: no rank in most"
    if before.straggler == rank:
        return f"base: rank {rank} too, in {_share(before)}{_behind(before, rank)}"
    return f"base: rank {before.straggler}, in {_share(before)}"


def rank_table(report: Report) -> tuple[list[str], list[list[str]]] | None:
    """Header and rows: each rank of base and head, per batch size; None for one process."""
    gpu = report.gpu_timed()
    rows = []
    for batch in report.batch_sizes:
        for arm in sorted(batch.arms, key=lambda a: (a.arm != report.base, a.arm != report.head)):
            if arm.ranks is None or arm.arm not in (report.base, report.head):
                continue
            role = "base" if arm.arm == report.base else "head"
            rows += [[role, str(batch.batch_size), str(r.rank),
                      f"{words.ms(r.gpu_ms_per_step.median)} ({words.ms(r.gpu_ms_per_step.min)}-"
                      f"{words.ms(r.gpu_ms_per_step.max)})",
                      words.share(r.slowest_steps / arm.ranks.steps) if arm.ranks.steps else "-",
                      words.ms(r.finish_lag_us.median / 1e3) if r.finish_lag_us is not None else "-"]
                     for r in arm.ranks.ranks]
    if not rows:
        return None
    return ["arm", "batch size", "rank", f"its own {words.metric('gpu_ms', gpu)} (range)", "last to finish in",
            "ms behind the first to finish (median)"], rows


def ranks_method(world: int) -> str | None:
    """How the figures of `world` ranks were taken, in a sentence."""
    if world == 1:
        return None
    return (f"On {world} ranks, a process each, started together for every repeat: a step's time is its slowest "
            f"rank's, a process's {words.TOK} its slowest rank's, and every rank's outputs must be rank 0's.")


def _share(ranks: ArmRanks) -> str:
    return words.share(ranks.straggler_share)


def _path(path: RankPath) -> str:
    return f"{code(path.field)} {code(path.value)} (rank 0: {code(path.rank0_value)})"

