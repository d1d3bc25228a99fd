"""Where a `guard run` spent its time, from its progress log (the stderr tools/h200 keeps): each
stage between the log's own time stamps, and the phases every measured process timed itself
(its progress line, "[3/15] head repeat 2/5 (5.4 s: setup and warmup 1.9, timed passes 1.7,
...)"), summed over the processes. Prints a Markdown table.

    python3 tools/h200/phases_of_log.py docs/measurements/issue-48-gpu/host-only-float32/stderr.txt
"""

from __future__ import annotations

import re
import sys
from datetime import datetime
from pathlib import Path

STAMP = re.compile(r"^\[guard (\d\d:\d\d:\d\d)\] (.*)$")
PROCESS = re.compile(r"\[\d+/\d+\] (\S+) repeat \d+/\d+ \(([\d.]+) s: (.*?)\):")
PHASE = re.compile(r"([a-z][a-z :-]*?) ([\d.]+)(?:, |$)")
# the log's stages, by the line that starts each
STAGES = (("builds", "building"), ("reference process", "reference: a free-running"),
          ("compile fill", "compile caches: one unmeasured"), ("measured processes", "measuring "),
          ("slow processes measured again", "slow processes set aside"),
          ("confirmation rounds", "confirmation round"), ("trace analysis and report", "rounds: "))


def main(path: Path) -> int:
    lines = [m.groups() for line in path.read_text().splitlines() if (m := STAMP.match(line))]
    if not lines:
        print(f"phases_of_log: {path} holds no '[guard HH:MM:SS]' lines", file=sys.stderr)
        return 2
    times = [datetime.strptime(t, "%H:%M:%S") for t, _ in lines]
    stage_s: dict[str, float] = {}
    current = "set-up"
    for (_, text), start, end in zip(lines, times, times[1:] + times[-1:]):
        current = next((name for name, lead in STAGES if lead in text), current)
        stage_s[current] = stage_s.get(current, 0.0) + (end - start).total_seconds()
    phases: dict[str, float] = {}
    processes = 0
    for _, text in lines:
        found = PROCESS.search(text)
        if found is None or "compile caches:" in text:
            continue
        processes += 1
        for name, seconds in PHASE.findall(found.group(3)):
            phases[name] = phases.get(name, 0.0) + float(seconds)
    total = (times[-1] - times[0]).total_seconds()
    print(f"{path}: {total:.0f} s from the first line to the verdict\n")
    print("| stage | s |\n|---|---|")
    for name, seconds in stage_s.items():
        print(f"| {name} | {seconds:.0f} |")
    print(f"\n| phase, summed over the {processes} measured processes | s |\n|---|---|")
    for name, seconds in sorted(phases.items(), key=lambda item: -item[1]):
        print(f"| {name} | {seconds:.1f} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python3 tools/h200/phases_of_log.py STDERR.txt", file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(main(Path(sys.argv[1])))
