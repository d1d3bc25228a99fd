"""Every name, unit and number format the guard writes: one spelling each, CPU-aware. The
comment, the job summary, the commit status and the annotations take their words from here."""

from __future__ import annotations

import math

from guard.compare import MIX_BATCH, MetricKey, ReasonKind, RoundsStop, Slowdown, Verdict, time_ratio
from guard.explain import CauseKind, MixPartKind, RankCauseKind
from guard.measure import Change
from guard.sandbox import Isolation

# A step is timed with CUDA events on a GPU and by the host's clock on a CPU: a CPU run never says GPU.
_STEP = {True: "GPU ms per step", False: "CPU ms per step"}
_STEP_SHORT = {True: "GPU ms", False: "CPU ms"}
TOK = "tokens per second"
TOK_SHORT = "tok/s"
HOST = "host ms per step"
END_TO_END = "end-to-end ms per step"  # the unheld pass's CUDA events: the step as the user feels it (GPU only)
LARGE_RATIO = 2.0  # a slowdown of this ratio of step times or more is written as one: '3.7x'


VERDICT = {"at_threshold": "at threshold"}  # how a verdict is written; the rest as they are

CAUSE: dict[CauseKind, str] = {
    "no_cuda_graph": "no CUDA graph",
    "idle_between_kernels": "idle time between kernels",
    "kernels_added": "kernels added",
    "slower_kernels": "slower kernels",
    "host_time": "host time",
    "mixed": "no single cause",
    "padded_rows": "padded rows",
}
# what the ranks' profiled pass found, as the title names it
RANK_CAUSE: dict[RankCauseKind, str] = {
    "communication_not_overlapped": "communication no longer overlapped",
    "rank_held_back": "one rank held back the others",
}


# The parts of the head's change over the batch-size mix
MIX_PART: dict[MixPartKind, str] = {
    "graph_replay": "graph replay against eager (launch and host time)",
    "padding": "padding (rows computed that no request asked for)",
    "imbalance": "expert capacity waste under imbalance",
    "kernel_time": "kernel time at equal shapes",
}
MIX_PART_SHORT: dict[MixPartKind, str] = {
    "graph_replay": "graph replay against eager",
    "padding": "padding",
    "imbalance": "expert capacity waste",
    "kernel_time": "kernel time at equal shapes",
}
MIX_SECTION = "Capture coverage and useful work"
RECORD = "Record of the run"


def per_real_token(gpu: bool) -> str:
    """'GPU ms per real token' (CPU: 'CPU ms per real token')."""
    return f"{_STEP_SHORT[gpu]} per real token"


def metric(key: MetricKey, gpu: bool) -> str:
    """'GPU ms per step' (CPU: 'CPU ms per step'), 'end-to-end ms per step', 'tokens per second' or
    'host instructions per step'."""
    return {"gpu_ms": _STEP[gpu], "end_to_end_ms": END_TO_END, "instructions": INSTRUCTIONS}.get(key, TOK)


def metric_short(key: MetricKey, gpu: bool) -> str:
    return {"gpu_ms": _STEP_SHORT[gpu], "end_to_end_ms": "end-to-end ms", "instructions": "instructions"}.get(
        key, TOK_SHORT)


def large(change: Change, key: MetricKey) -> bool:
    """A slowdown of LARGE_RATIO or more, as a ratio of step times."""
    return time_ratio(Slowdown.of(change, key).pct, key) >= LARGE_RATIO


def slower(change: Change, key: MetricKey) -> str:
    """How much slower, as the title says it: '3.7x' (step times) when `large`, else '25.2%'
    (tok/s: its own fall)."""
    if large(change, key):
        return f"{time_ratio(Slowdown.of(change, key).pct, key):.1f}x"
    return pct(abs(change.pct), 1).lstrip("+")


def faster(change: Change, key: MetricKey) -> str:
    """How much faster, as the title says it: '2.1x' where a step takes half the time or less
    (LARGE_RATIO the other way), else '33.0%' (the figure's own change)."""
    speedup = 1 / time_ratio(Slowdown.of(change, key).pct, key)
    if speedup >= LARGE_RATIO:
        return f"{speedup:.1f}x"
    return pct(abs(change.pct), 1).lstrip("+")


def verdict(value: Verdict | str) -> str:
    return VERDICT.get(value, value)


# A percent past this (a ratio of 1,000) is written as "over" it: a bound at a few processes can
# run to the cap of the arithmetic (e^700), a figure that says no more than its order
SHOWN_PCT_LIMIT = 100_000.0


def pct(value: float, digits: int = 2) -> str:
    """A signed percentage: '+3.21%'; a zero never shows a sign; past SHOWN_PCT_LIMIT, 'over +100,000%'."""
    if abs(value) > SHOWN_PCT_LIMIT:
        return f"over {'+' if value > 0 else '-'}{SHOWN_PCT_LIMIT:,.0f}%"
    shown = f"{value:+.{digits}f}"
    return f"{'0.' + '0' * digits if float(shown) == 0 else shown}%" if digits else f"{shown}%"


def interval(change: Change) -> str:
    """'+2.10% to +4.30%'."""
    return f"{pct(change.ci_low_pct)} to {pct(change.ci_high_pct)}"


def with_interval(change: Change) -> str:
    """'+3.21% (+2.10% to +4.30%)'."""
    return f"{pct(change.pct)} ({interval(change)})"


def threshold(value: float) -> str:
    """'1%', '0.5%'."""
    return f"{value:g}%"


def level(confidence: float) -> str:
    """'99.75%': the level of an interval."""
    return f"{confidence * 100:.4g}%"


def ms(value: float) -> str:
    return f"{value:.3f}"


def mean_ms(value: float) -> str:
    """A mean step time as the table shows it: 3 decimals, more under 1 ms so that 4 digits
    show (0.09440), enough for the change beside it to be read from the two figures."""
    return f"{value:.{max(3, 3 - math.floor(math.log10(value)))}f}" if 0 < value < math.inf else ms(value)


def ms_delta(value: float) -> str:
    """A signed change of milliseconds; never '-0.000'."""
    shown = f"{value:+.3f}"
    return "0.000" if shown in ("+0.000", "-0.000") else shown


def us(value: float) -> str:
    return f"{value:.3f}"


def rate(value: float) -> str:
    """tok/s: a tenth from 100 up, hundredths under it."""
    return f"{value:.1f}" if value >= 100 else f"{value:.2f}"


def share(fraction: float) -> str:
    """0.05 -> '5%', 0.0013 -> '0.1%': a whole percent, or a tenth under 1%."""
    value = fraction * 100
    return f"{value:.0f}%" if value >= 1 or value == 0 else f"{value:.1f}%"


def count(value: float) -> str:
    """Counts per step are means: whole where they are, else one decimal."""
    return f"{value:.0f}" if abs(value - round(value)) < 0.05 else f"{value:.1f}"


def instructions(value: float) -> str:
    """Instructions per step, in thousands or millions: 1234567 -> '1.23 M'."""
    return f"{value / 1e6:.2f} M" if value >= 1e6 else f"{value / 1e3:.1f} k"


INSTRUCTIONS = "host instructions per step"  # user-mode, the main thread's


def sizes(batch_sizes: list[int]) -> str:
    """'batch size 1', 'batch sizes 1, 2'."""
    listed = ", ".join(str(b) for b in batch_sizes)
    return f"batch size{'s' if len(batch_sizes) != 1 else ''} {listed}"


def size(batch_size: int | None) -> str:
    """'batch size 2', or 'the batch-size mix' for the mix's comparison."""
    return "the batch-size mix" if batch_size == MIX_BATCH else f"batch size {batch_size}"


def at_size(batch_size: int | None) -> str:
    """'at batch size 2', or 'over the batch-size mix'."""
    return "over the batch-size mix" if batch_size == MIX_BATCH else f"at batch size {batch_size}"


def listed(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def short_sha(sha: str) -> str:
    return sha[:8]


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else many or word + 's'}"


def swept_sentence(by_arm: list[tuple[str, int]]) -> str:
    """What the arms' code left running after its processes ended, and the guard killed."""
    counts = ", ".join(f"{name} {plural(count, 'process', 'processes')}" for name, count in by_arm)
    return (f"Processes the arms' code left running, killed by the guard as the step that started them ended: "
            f"{counts}. None ran on into a later step; the step's log says so too.")


def unboxed_sentence(isolation: Isolation) -> str | None:
    """What the kernel did not give the pull request's processes on this host; None where it held them."""
    if isolation.boxed():
        return None
    missing = [part for part, had in (("a cgroup of their own", isolation.cgroup),
                                      ("PID, IPC and mount namespaces of their own", isolation.namespaces)) if not had]
    chosen = f' (build.isolation = "{isolation.requested}")' if isolation.requested != "kernel" else ""
    return (f"The pull request's processes ran without {' or '.join(missing)}{chosen}: what they left running "
            "or in the shared temp folders was found by following parents and owners, which a determined process "
            "can outrun.")


def temp_removed_sentence(by_arm: list[tuple[str, int]]) -> str:
    """What the arms' code left in the folders every user may write, and the guard removed."""
    counts = ", ".join(f"{name} {plural(count, 'file or folder', 'files or folders')}" for name, count in by_arm)
    return (f"Files the arms' code left where every user may write (/tmp, /dev/shm and the like), removed by "
            f"the guard as the step that wrote them ended: {counts}. No later step found them; the step's log "
            "says so too.")


# Why a run took no further round, in a short phrase beside its processes.
ROUNDS_STOPPED: dict[RoundsStop, str] = {
    "decided": "until every batch size was decided",
    "budget": "stopped at the time budget",
    "max_rounds": "stopped at the most rounds allowed",
    "futile": "stopped where the rounds left could not measure what would decide it",
}


# What each invalid reason is, in a few words, for the title and the status line.
REASON_SHORT: dict[ReasonKind, str] = {
    "arm_no_results": "the {arm} arm gave no results",
    "arm_failed": "the workload failed on the {arm} arm",
    "arm_changed_between_repeats": "the {arm} arm's {field} changed between repeats",
    "arms_differ": "the arms ran with a different {field}",
    "tokens_differ": "output tokens differ between base and head {at_size}",
    "not_deterministic": "the workload is not deterministic on the {arm} arm ({size})",
    "too_few_repeats": "the {arm} arm finished fewer than 2 repeats",
    "ranks_disagree": "the {arm} arm's ranks generated other tokens (batch size {batch_size})",
    "clock_refused": "the {arm} arm's timings did not fit the guard's clock",
}
