"""The comment's line on what dynamo compiled, base against head: each arm's graphs and graph
breaks, where the head's new breaks are and why, recompilations and CUDA graph tree skips where
they differ, and the slower batch sizes the breaks account for. Paths and reasons came from the
arms' processes: each is escaped here."""

from __future__ import annotations

from guard._markdown import code, text
from guard.compare import ArmCompiled, CompiledChange
from guard.explain import CompiledCause
from guard.measure import GraphBreak
from guard.report import _words as words

MAX_BREAKS_NAMED = 2


def compiled_line(change: CompiledChange | None, cause: CompiledCause | None = None) -> str | None:
    """E.g. "Compiled by dynamo by the end of the warmup: base 2 graphs, no graph break; head
    4 graphs, 1 graph break, new at `model.py:14` in `forward` (Call to ...)." None where
    nothing differs."""
    if change is None or not change.differs:
        return None
    parts = [f"base {_arm(change.base, [])}", f"head {_arm(change.head, change.breaks_added)}"]
    line = "Compiled by dynamo by the end of the warmup: " + "; ".join(parts)
    if change.breaks_removed:
        line += f"; head no longer breaks at {_places(change.breaks_removed)}"
    b, h = change.base, change.head
    if b is not None and h is not None and b.recompiles != h.recompiles:
        line += f"; recompilations: base {b.recompiles}, head {h.recompiles}"
    if b is not None and h is not None and b.cudagraph_skips != h.cudagraph_skips and h.cudagraph_skips:
        why = f" ({text(h.cudagraph_skip_reasons[0])})" if h.cudagraph_skip_reasons else ""
        line += f"; inductor skipped CUDA graphs {words.plural(h.cudagraph_skips, 'time')} in head{why}"
    line += "."
    if cause is not None:
        line += (f" More graphs per step account for the time {words.sizes(cause.batch_sizes)} lost: between "
                 "two graphs the GPU waits while the host runs the code dynamo left out.")
    return line


def _arm(arm: ArmCompiled | None, added: list[GraphBreak]) -> str:
    if arm is None:
        return "did not use torch.compile"
    low, high = arm.graphs
    graphs = words.plural(high, "graph") if low == high else f"{low}-{high} graphs"
    if not arm.breaks:
        return f"{graphs}, no graph break"
    said = f"{graphs}, {words.plural(len(arm.breaks), 'graph break')}"
    return f"{said}, new at {_places(added)}" if added else said


def _places(breaks: list[GraphBreak]) -> str:
    named = [_place(b) for b in breaks[:MAX_BREAKS_NAMED]]
    rest = len(breaks) - len(named)
    return ", ".join(named) + (f" and {rest} more" if rest else "")


def _place(found: GraphBreak) -> str:
    where = code(f"{found.path}:{found.line}" if found.line else found.path) if found.path else "an unknown place"
    scope = f" in {code(found.function)}" if found.function else ""
    reason = f" ({text(found.reason)})" if found.reason else ""
    return f"{where}{scope}{reason}"


def compile_cache_note(caches: bool | None, compiled: CompiledChange | None, filled: list[str]) -> str:
    """The method fold's sentence on the compile caches, where an arm used torch.compile; ''
    where none did or the caches were off."""
    if not caches or compiled is None:
        return ""
    said = ""
    if filled:
        names = ", ".join(text(name) for name in filled)
        said = (f"; {names} first ran one unmeasured process that compiled, as base's reference process did for "
                  "base, so that no measured process is the one that compiles")
    return ("torch.compile's caches are in a folder per arm, shared by that arm's processes and rounds, never "
            f"between arms{said}.")
