"""The explanation's facts in words: where each slower batch size's time went, the ablation
arms' effects, launch-time and profiler-scale notes, decode that fell out of its graphs."""

from __future__ import annotations

from guard._markdown import code, text
from guard.compare import BatchComparison
from guard.explain import AblationEffect, Cause, LaunchNote, ProfileScale
from guard.report import _figures as figures
from guard.report import _words as words
from guard.report._schema import ArmInfo, Report
from guard.trace import BeforeAfter, LaunchChange, TraceSection

_EDGE = 0.02  # shares this close to 0 or 1 are said as "none" and "all"
_NAME_LIMIT = 60


def cause_sentence(cause: Cause, gpu: bool, sized: bool) -> str:
    """One sentence: where the extra time went. `sized`: name the batch size (more than one)."""
    at = f"At batch size {cause.batch_size}, " if sized else ""
    split = ""
    if cause.kind == "padded_rows" and cause.split is not None:  # all of it busy time: say that share alone
        s = cause.split
        split = f" (profiled: {words.share(s.counts_share + s.durations_share)} of the growth in the kernels)"
    elif cause.split is not None:
        s = cause.split
        # the work the step added is named wherever it added some, whatever part dominates; the
        # sentence of kernels_added names it itself
        what = _added_what(cause)
        counts = (f"{what} added ({_listed(cause, nouns=what != 'kernels')})"
                  if cause.kind != "kernels_added" and _counts(cause) else "kernels added or removed")
        split = (f" (profiled: {words.share(s.idle_share)} idle between kernels, {words.share(s.counts_share)} "
                 f"{counts}, {words.share(s.durations_share)} longer kernels)")
    if cause.kind == "no_cuda_graph":
        main = "the head no longer replays a CUDA graph: decode runs eagerly, kernel by kernel"
    elif cause.kind == "idle_between_kernels" and cause.only_idle:
        main = "the extra time is idle time between kernels; the kernels themselves are not slower"
    elif cause.kind == "idle_between_kernels":
        main = "most of the extra time is idle time between kernels"
    elif cause.kind == "kernels_added" and _added(cause):
        main = f"most of the extra time is in {_added_what(cause)} added: {_added(cause)}"
    elif cause.kind == "padded_rows" and cause.rows is not None:
        before, after = cause.rows
        main = f"padding: each step computes {after} rows where base computed {before}, so its kernels run longer"
    elif cause.kind == "slower_kernels":
        names = ", ".join(code(_short(k.name)) for k in cause.slower_kernels)
        main = "the kernels themselves are slower" + (f": {names}" if names else "")
    elif cause.kind == "host_time" and cause.host is not None:
        host = cause.host
        main = (f"{words.metric('gpu_ms', gpu)} changed {words.pct(host.gpu_ms_pct)} but {words.TOK} fell "
                f"{words.pct(host.tok_per_s_fall_pct).lstrip('+')}: the extra time is on the host, around the "
                "GPU work of each step")
    else:
        main = "no single part of the extra time dominates"
    if cause.host is not None and cause.kind != "host_time":
        main += f", and {words.TOK} fell {words.pct(cause.host.tok_per_s_fall_pct).lstrip('+')}: time on the host too"
    sentence = main + split + "."
    return at + sentence if at else sentence[0].upper() + sentence[1:]


_ADDED = (("kernels_per_step", "kernels"), ("memcpys_per_step", "copies"), ("memsets_per_step", "memsets"))


def _counts(cause: Cause) -> list[tuple[BeforeAfter, str]]:
    """The step's work the cause counts, each sort with its noun. kernels_added states its kernels
    whatever their count: left out beside a count that moved."""
    counts = [(getattr(cause, field), noun) for field, noun in _ADDED if getattr(cause, field) is not None]
    moved = [(k, noun) for k, noun in counts if words.count(k.before or 0) != words.count(k.after or 0)]
    return moved or counts


def _listed(cause: Cause, nouns: bool = True) -> str:
    """'1166 -> 1202 kernels and 33 -> 69 copies'; without `nouns`, '1166 -> 1202'."""
    return " and ".join(f"{words.count(k.before or 0)} -> {words.count(k.after or 0)}" + (f" {noun}" if nouns else "")
                        for k, noun in _counts(cause))


def _added(cause: Cause) -> str:
    """'1166 -> 1202 kernels per step', '33 -> 69 copies per step'; '' where it counts none."""
    return f"{_listed(cause)} per step" if _counts(cause) else ""


def _added_what(cause: Cause) -> str:
    """'kernels' where the cause counts kernels alone, 'work' where it counts copies or memsets."""
    return "kernels" if [noun for _, noun in _counts(cause)] == ["kernels"] else "work"


def slower_kernel_lines(cause: Cause) -> list[str]:
    """For the profiler fold: each slower kernel with its duration before and after."""
    lines = []
    for k in cause.slower_kernels:
        d = k.mean_duration_us
        how = "now as another variant, " if k.variant else ""
        per = f"{words.count(k.kernels_per_step)} per step, " if k.kernels_per_step is not None else ""
        lines.append(f"{code(_short(k.name))}: {per}{how}{words.us(d.before or 0)} -> {words.us(d.after or 0)} us")
    return lines


def fallout_counts(launches: LaunchChange) -> str:
    """'0 of 1 graph launches per step left; 216 kernel launches per step instead of 2'."""
    graphs, kernels = launches.graph_launches_per_step, launches.kernel_launches_per_step
    return (f"{words.count(graphs.after or 0)} of {words.count(graphs.before or 0)} graph launches per step left; "
            f"{words.count(kernels.after or 0)} kernel launches per step instead of {words.count(kernels.before or 0)}")


def fallout_line(batch_size: int, section: TraceSection | None, batch: BatchComparison | None, base: str,
                 head: str) -> str | None:
    """Decode out of its CUDA graphs at `batch_size`, with the launch counts of its profiled
    pass (`section`) and the host's change where `batch` was decided."""
    launches = section.diff.launches if section and section.diff else None
    if launches is None:
        return None
    host = figures.host_change(batch, base, head) if batch else None
    host_text = (f" The host's time to launch a step changed {words.with_interval(host)}, which "
                 f"{words.metric('gpu_ms', True)} leaves out and {words.TOK} carries." if host is not None else "")
    return (f"**Decode fell out of its CUDA graphs at batch size {batch_size}**: {fallout_counts(launches)} "
            f"(profiled pass).{host_text}")


def launch_sentence(note: LaunchNote, gpu: bool) -> str:
    return (f"At batch size {note.batch_size}, timed with the host's launch time included, "
            f"{words.metric('gpu_ms', gpu)} rose {words.with_interval(note.end_to_end)}, past "
            f"the threshold, against {words.with_interval(note.held)} without it: the extra time may be in "
            f"launching the step's work, which only {words.TOK} weighs in the verdict.")


def scale_sentence(scale: ProfileScale) -> str:
    times = f"{scale.ratio:.0f} times" if scale.ratio >= 10 else f"{scale.ratio:.1f} times"
    return (f"The profiled step grew by {words.ms(scale.profiled_ms)} ms, {times} the {words.ms(scale.timed_ms)} ms "
            "the timed pass measured: under the profiler launches and host waits take longer, so read the profile "
            "for the shares and the table for the size.")


def ablation_lines(report: Report) -> list[str]:
    """One line per ablation arm the explanation has effects of, in the order they ran."""
    effects = report.explanation.ablations
    names = list(dict.fromkeys(e.arm for e in effects))
    return [_ablation_line(report.arm(name), [e for e in effects if e.arm == name], report.batch_sizes, report.base)
            for name in names]


def _ablation_line(arm: ArmInfo, effects: list[AblationEffect], batches: list[BatchComparison], base: str) -> str:
    """'`no-upload` (the head build with `X=0`): at batch size 1, +0.41% against base (-0.10% to
    +0.90%), taking back 85% of the head's +2.80%.'"""
    overrides = ", ".join(code(f"{k}={v}") for k, v in sorted(arm.env.items()))
    built = f"the {text(arm.source)} build" + (f" with {overrides}" if overrides else "")
    clauses = []
    by_size = {b.batch_size: b for b in batches}
    for e in effects:
        clause = f"at batch size {e.batch_size}, {words.pct(e.pct)} against base"
        if (change := figures.ablation_change(batches, base, e)) is not None:
            clause += f" ({words.interval(change)})"
        head = by_size[e.batch_size].gpu_ms_change
        if e.share_of_head is not None and head is not None:
            verb = "reproducing" if e.build == "base" else "taking back"
            clause += f", {verb} {_share(e.share_of_head)} the head's {words.pct(head.pct)}"
        clauses.append(clause)
    return f"{code(arm.name)} ({built}): " + "; ".join(clauses) + "."


def ablation_lead(ablations: list[AblationEffect]) -> str | None:
    """For the summary, each ablation arm's share of the head's slowdown it takes back (or, on
    base's build, reproduces), where it has one: 'Ablation arm `no-upload` takes back 96% of the
    slowdown at batch size 1 and 52% at batch size 2.' None where no arm has a share."""
    effects = [e for e in ablations if e.share_of_head is not None]
    sentences = []
    for name in dict.fromkeys(e.arm for e in effects):
        own = [e for e in effects if e.arm == name]
        verb = "reproduces" if own[0].build == "base" else "takes back"
        shares = [f"{_share(e.share_of_head, of=not i)}{' the slowdown' if not i else ''} at batch size {e.batch_size}"
                  for i, e in enumerate(own) if e.share_of_head is not None]
        sentences.append(f"Ablation arm {code(name)} {verb} {words.listed(shares)}.")
    return " ".join(sentences) or None


def _share(value: float, of: bool = True) -> str:
    """'all of', 'none of', '96% of'; without `of`, the share alone."""
    if value >= 1 - _EDGE:
        shown = "all"
    elif value <= _EDGE:
        shown = "none"
    else:
        shown = words.share(value)
    return f"{shown} of" if of else shown


def _short(name: str) -> str:
    return name if len(name) <= _NAME_LIMIT else name[: _NAME_LIMIT - 3] + "..."


def unheld_notes(batches: list[BatchComparison], base: str, head: str) -> list[str]:
    """A GPU-timed pass whose host was still launching when the hold ran out times the host too."""
    notes = []
    for batch in batches:
        arms = {a.arm: a for a in batch.arms if a.arm in (base, head)}
        if len(arms) < 2 or not any(a.outran_hold for a in arms.values()):
            continue
        shares = ", ".join(f"{text(name)} {words.share(a.unheld_share)}" for name, a in arms.items())
        if all(a.outran_hold for a in arms.values()):
            notes.append(f"At batch size {batch.batch_size}, {shares} of the GPU-timed steps also timed the host's "
                         "launch, in both arms.")
        else:
            slow = text(next(name for name, a in arms.items() if a.outran_hold))
            notes.append(f"At batch size {batch.batch_size}, {shares} of the GPU-timed steps also timed the host's "
                         f"launch: the {slow} arm was not timed like the other.")
    return notes


def host_sentence(batches: list[BatchComparison], base: str, head: str) -> str | None:
    """The host's enqueue time per step, where it was timed: left out of the GPU-timed figures."""
    parts = [f"{words.with_interval(change)} at batch size {b.batch_size}" for b in batches
             if (change := figures.host_change(b, base, head)) is not None]
    if not parts:
        return None
    return (f"{words.HOST[0].upper()}{words.HOST[1:]}, head against base: " + ", ".join(parts)
            + f"; {words.metric('gpu_ms', True)} leaves it out, {words.metric('tok_per_s', True)} carries it.")
