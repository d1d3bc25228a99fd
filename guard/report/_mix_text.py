"""The batch-size mix in words: capture coverage against useful work base -> head, the head's
change over the mix split into its parts, the evidence each part came from, and the run's record."""

from __future__ import annotations

from guard._markdown import code, text
from guard.explain import MixAttribution, MixPart
from guard.measure import ArmMix, MixReport
from guard.report import _words as words
from guard.report._schema import CapturePolicy, Report


def mix_arms(mix: MixReport | None, base: str, head: str) -> tuple[ArmMix, ArmMix] | None:
    arms = {a.arm: a for a in mix.arms} if mix is not None else {}
    if base not in arms or head not in arms:
        return None
    return arms[base], arms[head]


def _share(value: float | None) -> str:
    return "-" if value is None else words.share(value)


def coverage_rows(pair: tuple[ArmMix, ArmMix], gpu: bool) -> list[list[str]]:
    """Capture coverage, useful-work coverage, padding waste, imbalance p90, ms per real token,
    of base's mix and head's."""
    base, head = pair

    def p90(arm: ArmMix) -> str:
        return f"{arm.imbalance.p90:.2f}" if arm.imbalance is not None else "-"

    return [
        ["capture coverage (steps replayed from a graph)", _share(base.capture_coverage),
         _share(head.capture_coverage)],
        ["useful-work coverage (real rows of those computed)", _share(base.useful_work_coverage),
         _share(head.useful_work_coverage)],
        ["padding waste", _share(base.padding_waste), _share(head.padding_waste)],
        ["expert imbalance I, p90", p90(base), p90(head)],
        [words.per_real_token(gpu), words.ms(base.gpu_ms_per_real_token), words.ms(head.gpu_ms_per_real_token)],
    ]


def mix_sentence(found: MixAttribution, gpu: bool, decided: tuple[float, float] | None = None) -> str:
    """The mix's change and what carries it, in one sentence. `decided`: base's and head's
    geometric means the compare stage decided the mix on, shown with its change where it did."""
    if found.change is not None and decided is not None:
        before, after = (words.mean_ms(v) for v in decided)
        moved = f"{words.pct(found.change.pct)}; between the processes, {words.interval(found.change)}"
    else:  # not decided: the split's own figures, the mix's means of each arm's steps
        before, after = words.ms(found.base_ms_per_step), words.ms(found.head_ms_per_step)
        moved = words.pct(found.pct)
    change = f"Over the batch-size mix, {words.metric('gpu_ms', gpu)} went {before} -> {after} ({moved})"
    if found.cause is None:
        return f"{change}: not slower past the threshold, so no cause is named."
    if found.cause == "mixed_evidence":
        trace = found.trace
        seen = ""
        if trace is not None:
            seen = (f" ({words.share(trace.idle_share)} idle between kernels)" if "graph_replay" in found.candidates
                    and found.candidates[0] != "graph_replay" else f" ({words.share(trace.busy_share)} busy time)")
        first = found.part(found.candidates[0])
        return (f"{change}; the evidence is mixed: the coverage figures point to {words.MIX_PART_SHORT[first.kind]} "
                f"({words.share(first.share)}), the profiler traces the other way{seen}, so the candidates are "
                f"{_listed(found.candidates)}.")
    if found.cause == "mixed":
        named = ", ".join(f"{words.MIX_PART_SHORT[k]} {words.share(found.part(k).share)}" for k in found.candidates)
        return f"{change}; no part carries most of the growth: {named}."
    part = found.part(found.cause)
    return f"{change}; {words.MIX_PART[part.kind]} carries {words.share(part.share)} of the growth."


def mix_lead(found: MixAttribution) -> str:
    """What carries the mix's slowdown, short: the clause its sentence above the fold ends with."""
    if found.cause == "mixed_evidence":
        return f"the evidence is mixed: {_listed(found.candidates, ' or ')}"
    if found.cause == "mixed":
        named = ", ".join(f"{words.MIX_PART_SHORT[k]} {words.share(found.part(k).share)}" for k in found.candidates)
        return f"no part carries most of it: {named}"
    assert found.cause is not None
    part = found.part(found.cause)
    return f"{words.MIX_PART_SHORT[part.kind]} carries {words.share(part.share)} of the growth"


def _listed(kinds: list, last: str = " and ") -> str:  # type: ignore[type-arg]  # type: ignore[type-arg]
    names = [words.MIX_PART_SHORT[k] for k in kinds]
    return last.join(names) if len(names) < 3 else ", ".join(names[:-1]) + last + names[-1]


def part_lines(found: MixAttribution, gpu: bool, means: bool = True) -> list[str]:
    """Each part: its ms per step over the mix, its share of the growth, the sizes it came from.
    `means`: a size's figure is each process's mean over its steps (schema 12 on); before, a median."""
    unit = words.metric_short("gpu_ms", gpu)
    lines = []
    for part in found.parts:
        lines.append(f"{words.MIX_PART[part.kind]}: {words.ms_delta(part.ms_per_step)} {unit} per step"
                     f"{_share_of(part)}{_from_sizes(part)}")
    if abs(found.unsplit_ms) >= 0.0005:
        how = ("the sizes' medians over processes against the whole mix's" if means
               else "per-size medians against the whole mix's means")
        lines.append(f"not split ({how}): {words.ms_delta(found.unsplit_ms)} {unit} per step")
    return lines


def _share_of(part: MixPart) -> str:
    return f", {words.share(part.share)} of the growth" if part.share > 0 else ""


def _from_sizes(part: MixPart) -> str:
    return f" ({words.sizes(part.batch_sizes)})" if part.batch_sizes else ""


def size_rows(found: MixAttribution, gpu: bool) -> list[list[str]]:
    """Per size: its share, the path and rows each arm computed, step time base -> head."""
    rows = []
    for s in found.sizes:
        imbalance = "-" if s.imbalance == (None, None) else " -> ".join(
            "-" if i is None else f"{i:.2f}" for i in s.imbalance)
        rows.append([str(s.batch_size), words.share(s.share), f"{s.path[0]} -> {s.path[1]}",
                     f"{s.padded_to[0]} -> {s.padded_to[1]}", imbalance,
                     f"{words.ms(s.gpu_ms_per_step[0])} -> {words.ms(s.gpu_ms_per_step[1])}"])
    return rows


def size_header(gpu: bool) -> list[str]:
    return ["batch size", "share", "path", "rows computed", "imbalance I", words.metric("gpu_ms", gpu)]


def evidence_line(found: MixAttribution, base: str, head: str, gpu: bool) -> str:
    """How rows were priced and what the traces said."""
    unit = words.metric_short("gpu_ms", gpu)
    roles = {base: "base", head: "head"}
    priced = "; ".join(
        f"{roles.get(c.arm, text(c.arm))}'s {c.path} path {words.ms(c.ms_per_row)} {unit} per row "
        + (f"(slope over {', '.join(str(r) for r in c.padded_to)} rows)" if c.method == "slope" else
           f"(one size, {c.padded_to[0]} rows)")
        for c in found.row_costs)
    line = f"A computed row is priced from each arm's own sizes: {priced}." if priced else ""
    trace = found.trace
    if trace is not None:
        where = "the mix's own profiled pass" if trace.source == "mix" else \
            f"the profiled {words.sizes(trace.batch_sizes)}, by share"
        faint = "" if trace.material else ", too little beside the mix's change to weigh against it"
        line += (f" The paired traces ({where}): idle time {words.ms_delta(trace.idle_ms)} and busy time "
                 f"{words.ms_delta(trace.busy_ms)} {unit} per step{faint}.")
    return line.strip()


def record_lines(report: Report) -> list[str]:
    """The record: revisions and runtime, GPU and driver, model and precision, batch
    distribution, capture policy per arm."""
    base, head = report.arm(report.base), report.arm(report.head)
    env = report.environment
    runtime = ", ".join(x for x in (f"torch {env.torch}" if env.torch else None,
                                    f"CUDA {env.cuda}" if env.cuda else None) if x)
    lines = [f"runtime revision: base {code(words.short_sha(base.sha))}, head {code(words.short_sha(head.sha))}"
             + (f"; {text(runtime)}" if runtime else "")]
    lines.append("GPU and driver: " + (text(f"{env.gpu}, driver {env.driver or 'unknown'}") if env.gpu
                                       else "none (CPU)"))
    record = report.record
    if record is not None:
        lines.append(f"model and precision: {text(record.model or 'unknown')}, {text(record.precision or 'unknown')}")
        if record.batch_distribution:
            shares = ", ".join(f"{b.batch_size}: {words.share(b.share)}" for b in record.batch_distribution)
            source = f" ({text(report.mix.source)}, seed {report.mix.seed})" if report.mix is not None else ""
            lines.append(f"batch distribution{source}: {shares}")
        else:
            lines.append(f"batch distribution: {words.sizes(report.workload.batch_sizes)}, each its own pass")
        roles = {report.base: "base", report.head: "head"}
        lines += [f"capture policy, {roles.get(p.arm) or text(p.arm)}: {_policy(p)}" for p in record.capture]
    return lines


def _policy(p: CapturePolicy) -> str:
    said = []
    if p.mode is not None:
        said.append(f"mode {text(p.mode)}")
    if p.cuda_graphs is not None:
        said.append("CUDA graphs" if p.cuda_graphs else "no CUDA graphs")
    if p.captured_sizes is not None:
        said.append(f"captured sizes {', '.join(str(s) for s in p.captured_sizes) or 'none'}")
    if p.fallback is not None:
        said.append("other sizes eagerly at their own shape (fallback)" if p.fallback else
                    "other sizes padded up to a captured one (no fallback)")
    if p.moe_dispatch is not None:
        said.append(f"MoE dispatch {text(p.moe_dispatch)}")
    return "; ".join(said) or "not said"
