"""What dynamo compiled in this process: graphs, graph breaks with where they are and why,
recompilations, and whether inductor's CUDA graph trees recorded graphs or skipped them.

Read from torch's own counters and records after the warmup, so a change that makes the
compiled decode break into more graphs shows even where no line of the diff says so. Runs
inside the arm's environment, loaded by path beside harness/run.py: the standard library
only, and torch's modules only where the workload already imported them (never imported
here). Every read is defensive, since the records' shapes differ between torch releases,
and bounded, since the arm's code runs in this process.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

MAX_BREAKS = 20  # distinct break places kept; the rest are counted
MAX_REASONS = 5  # recompile and CUDA graph skip reasons kept
MAX_TEXT = 200  # characters of a reason or a path
_COUNT = re.compile(r"count\((\d+)\)")  # itertools.count's repr: the next value it gives


def _cut(value: object) -> str:
    """One line of at most MAX_TEXT characters."""
    return " ".join(str(value).split())[:MAX_TEXT]


def _reason(value: object) -> str:
    """A break's reason as its first line: later lines are torch's hints and a link."""
    lines = [line for line in str(value).splitlines() if line.strip()]
    return _cut(lines[0] if lines else "")


def _count(counters: Any, group: str, key: str) -> int:
    try:
        return int(counters[group][key]) if key in counters.get(group, {}) else 0
    except (TypeError, ValueError, AttributeError, KeyError):
        return 0


def _place(filename: str, root: Path) -> tuple[str, bool]:
    """The file relative to the worktree and True, or its name alone and False outside it."""
    try:
        return _cut(Path(filename).resolve().relative_to(root).as_posix()), True
    except (ValueError, OSError, RuntimeError):
        return _cut(Path(filename).name), False


def _frame(reason: Any, root: Path) -> tuple[str, int, str, bool] | None:
    """The innermost frame of a break's user stack in the worktree (else the innermost one):
    (path, line, function, in the worktree)."""
    try:
        stack = list(getattr(reason, "user_stack", None) or [])
    except TypeError:
        return None
    found = None
    for frame in reversed(stack):
        filename, line = getattr(frame, "filename", None), getattr(frame, "lineno", None)
        if not isinstance(filename, str) or not isinstance(line, int):
            continue
        path, inside = _place(filename, root)
        place = (path, line, _cut(getattr(frame, "name", "") or ""), inside)
        if inside:
            return place
        found = found or place
    return found


def _breaks(utils: Any, root: Path) -> tuple[list[dict[str, Any]], int]:
    """Distinct (place, reason) of the structured break records, each with how often it came,
    the first MAX_BREAKS of them, and how many more there were."""
    records = getattr(utils, "graph_break_reasons", None)
    if not isinstance(records, list):
        return [], 0
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for record in list(records):
        frame = _frame(record, root)
        reason = _reason(getattr(record, "reason", ""))
        path, line, function, inside = frame if frame is not None else (None, None, "", False)
        key = (path, line, reason)
        if key in seen:
            seen[key]["count"] += 1
            continue
        seen[key] = {"path": path, "line": line, "function": function, "in_tree": inside, "reason": reason,
                     "count": 1}
    found = list(seen.values())
    return found[:MAX_BREAKS], max(0, len(found) - MAX_BREAKS)


def _metrics(utils: Any) -> list[Any]:
    getter = getattr(utils, "get_compilation_metrics", None)
    try:
        return list(getter()) if callable(getter) else list(getattr(utils, "_compilation_metrics", []) or [])
    except Exception:  # a record that cannot be read is none
        return []


def _reasons(metrics: list[Any], field: str) -> tuple[int, list[str]]:
    """How many compilations name a `field` (a recompile's or a CUDA graph skip's reason), and the first ones."""
    given = [value for m in metrics if isinstance(value := getattr(m, field, None), str) and value]
    return len(given), list(dict.fromkeys(_cut(v) for v in given))[:MAX_REASONS]


def _cudagraphs_recorded(modules: dict[str, Any]) -> int | None:
    """CUDA graphs inductor's cudagraph trees recorded in this thread; None where unknown."""
    trees = modules.get("torch._inductor.cudagraph_trees")
    containers = getattr(getattr(trees, "local", None), "tree_manager_containers", None)
    if not isinstance(containers, dict):
        return None
    recorded, known = 0, False
    for container in list(containers.values()):
        counter = getattr(getattr(container, "tree_manager", None), "graph_counter", None)
        match = _COUNT.fullmatch(repr(counter)) if counter is not None else None
        if match:
            recorded, known = recorded + int(match[1]), True
    return recorded if known else None


def record(root: Path) -> dict[str, Any] | None:
    """What dynamo compiled in this process so far; None where it compiled nothing (or is
    not loaded). Never raises: the record is a diagnostic, the run's figures stand without it."""
    modules = sys.modules
    utils = modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    if counters is None:
        return None
    try:
        # frames: the frames dynamo converted; a fullgraph compile counts none, only its graphs
        frames, graphs = _count(counters, "frames", "total"), _count(counters, "stats", "unique_graphs")
        if not frames and not graphs:
            return None
        breaks, more = _breaks(utils, root.resolve())
        metrics = _metrics(utils)
        recompiles, recompile_reasons = _reasons(metrics, "recompile_reason")
        found: dict[str, Any] = {
            "frames": frames,
            "graphs": graphs,
            "break_count": sum(int(v) for v in dict(counters.get("graph_break", {})).values()),
            "breaks": breaks,
            "breaks_left_out": more,
            "recompiles": recompiles,
            "recompile_reasons": recompile_reasons,
        }
        if "torch._inductor" in modules:
            _, skip_reasons = _reasons(metrics, "cudagraph_skip_reason")
            found |= {"cudagraph_skips": _count(counters, "inductor", "cudagraph_skips"),
                      "cudagraph_skip_reasons": skip_reasons,
                      "cudagraphs_recorded": _cudagraphs_recorded(modules)}
        return found
    except Exception as exc:  # torch's records in a shape this does not know
        return {"frames": 0, "graphs": 0, "error": _cut(f"{type(exc).__name__}: {exc}")}
