"""Where a pair's processes spent their seconds, from the progress.log `guard run` wrote.

Usage: python3 benchmarks/process_phases.py PAIR_FOLDER [PAIR_FOLDER ...]

Prints per folder the range over its measured processes of the whole process and of each
phase the harness timed (import torch, engine, timed passes, start and exit...), and the
reference process's seconds.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPEAT = re.compile(r"repeat \d+/\d+ \(([\d.]+) s: ([^)]*)\)")
PHASE = re.compile(r"([a-z:, ]+?) ([\d.]+)(?:,|$)")
REFERENCE = re.compile(r"reference: \d+ steps per batch size in ([\d.]+) s")


def phases(log: str) -> tuple[list[float], dict[str, list[float]], float | None]:
    totals, by_phase = [], {}
    for total, parts in REPEAT.findall(log):
        totals.append(float(total))
        for name, seconds in PHASE.findall(parts):
            by_phase.setdefault(name.strip(" ,"), []).append(float(seconds))
    found = REFERENCE.search(log)
    return totals, by_phase, float(found.group(1)) if found else None


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    for folder in argv:
        path = Path(folder) / "progress.log"
        if not path.is_file():
            print(f"process_phases: no progress.log in {folder}", file=sys.stderr)
            return 2
        totals, by_phase, reference = phases(path.read_text())
        if not totals:
            print(f"{folder}: no measured processes in its progress.log")
            continue
        spans = "; ".join(f"{name} {min(v):.1f}-{max(v):.1f}" for name, v in by_phase.items())
        ref = f"; reference process {reference:.1f} s" if reference is not None else ""
        print(f"{folder}: {len(totals)} processes, {min(totals):.1f}-{max(totals):.1f} s each; {spans}{ref}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
