"""Where a pair's processes spent their seconds, from the progress.log `guard run` wrote.

Usage: python3 benchmarks/process_phases.py PAIR_FOLDER [PAIR_FOLDER ...]

Prints per folder the range over its measured processes of the whole process and of each
phase the harness timed (import torch, engine, timed passes, start and exit...), and the
reference process's seconds. Then, per arm, its first process beside the median of its later
ones: the seconds of the process, and where it compiled, torch.compile's seconds and the FX
graph cache's hits and misses; and whether the run shared torch.compile's caches between an
arm's processes (measure.compile_cache), so that folders run with it on and off compare
side by side.
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path
from typing import NamedTuple

REPEAT = re.compile(r"\] (\S+) repeat (\d+)/\d+ \(([\d.]+) s(?:: ([^)]*))?\)"
                    r"(?: \[torch\.compile ([\d.]+) s, FX graph cache (\d+) hit (\d+) miss\])?")
PHASE = re.compile(r"([a-z:, ]+?) ([\d.]+)(?:,|$)")
REFERENCE = re.compile(r"reference: \d+ steps per batch size in ([\d.]+) s")
SHARED_CACHES = "compile caches: a folder per arm"


class Process(NamedTuple):
    arm: str
    repeat: int
    total_s: float
    phases: dict[str, float]
    compile_s: float | None
    cache_hits: int | None
    cache_misses: int | None


def processes(log: str) -> list[Process]:
    """Every measured process the log names, in the order they ran."""
    found = []
    for arm, repeat, total, parts, compile_s, hits, misses in REPEAT.findall(log):
        phases = {name.strip(" ,"): float(seconds) for name, seconds in PHASE.findall(parts)}
        found.append(Process(arm, int(repeat), float(total), phases, float(compile_s) if compile_s else None,
                             int(hits) if hits else None, int(misses) if misses else None))
    return found


def phases(log: str) -> tuple[list[float], dict[str, list[float]], float | None]:
    totals, by_phase = [], {}
    for process in processes(log):
        totals.append(process.total_s)
        for name, seconds in process.phases.items():
            by_phase.setdefault(name, []).append(seconds)
    found = REFERENCE.search(log)
    return totals, by_phase, float(found.group(1)) if found else None


def first_and_later(found: list[Process]) -> list[str]:
    """Per arm: its first process, and the median of the later ones."""
    lines = []
    for arm in dict.fromkeys(p.arm for p in found):
        mine = sorted((p for p in found if p.arm == arm), key=lambda p: p.repeat)
        parts = [f"first {_described([mine[0]])}"]
        if len(mine) > 1:
            parts.append(f"later {len(mine) - 1}, median {_described(mine[1:])}")
        lines.append(f"  {arm}: " + "; ".join(parts))
    return lines


def _described(group: list[Process]) -> str:
    text = f"{statistics.median(p.total_s for p in group):.1f} s"
    compiled = [p for p in group if p.compile_s is not None]
    if compiled:
        text += (f" (torch.compile {statistics.median(p.compile_s or 0.0 for p in compiled):.1f} s, "
                 f"FX graph cache {sum(p.cache_hits or 0 for p in compiled)} hit "
                 f"{sum(p.cache_misses or 0 for p in compiled)} miss)")
    return text


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    for folder in argv:
        path = Path(folder) / "progress.log"
        if not path.is_file():
            print(f"process_phases: no progress.log in {folder}", file=sys.stderr)
            return 2
        log = path.read_text()
        totals, by_phase, reference = phases(log)
        if not totals:
            print(f"{folder}: no measured processes in its progress.log")
            continue
        spans = "; ".join(f"{name} {min(v):.1f}-{max(v):.1f}" for name, v in by_phase.items())
        ref = f"; reference process {reference:.1f} s" if reference is not None else ""
        shared = "on" if SHARED_CACHES in log else "off"
        print(f"{folder}: {len(totals)} processes, {min(totals):.1f}-{max(totals):.1f} s each; {spans}{ref}; "
              f"compile cache {shared}")
        print("\n".join(first_and_later(processes(log))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
