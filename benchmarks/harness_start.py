"""How long one harness process takes for a workload that does not use torch, with the
harness of a given revision beside this checkout's, side by side in one run.

Usage: python3 benchmarks/harness_start.py [--before REV] [--processes N]

The harness folder (guard/harness, self-contained: it is what a container mounts) of REV
(default ff42c78, the last one that imported torch in every process) is copied out of git
into a temporary folder, and both harnesses run the same pure-Python workload (batch sizes 1
and 2, 2 warmup + 8 steps), N processes each, alternating, so that the machine's load falls
on both alike. A third column runs this checkout's harness on the same workload with
`import torch` at its top: what a workload that uses torch still pays, and should.

Prints each column's median and range of wall seconds per process and its "import" phase,
then the ratio of the medians (before / now). Figures in docs/measurements/harness-start.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKLOAD = """
{imports}

class W:
    def setup(self, batch_size):
        self.batch, self.position = batch_size, 0

    def step(self, tokens=None):
        self.position += 1
        sum(i * i for i in range(2000))
        return [(self.position * 7 + row) % 101 for row in range(self.batch)]


def make():
    return W()
"""


def harness_of(rev: str, into: Path) -> Path:
    """guard/harness as it was at `rev`, unpacked under `into`; its run.py."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, "guard/harness"],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into)  # this repository's own archive
    return into / "guard" / "harness" / "run.py"


def one(script: Path, root: Path, entry: str, work: Path) -> tuple[float, float]:
    spec = {"entry": entry, "root": str(root), "batch_sizes": [1, 2], "steps": 8, "warmup_steps": 2,
            "arm": "base", "repeat": 0}
    (work / "spec.json").write_text(json.dumps(spec))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(script), str(work / "spec.json"), str(work / "out.json")],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"harness_start: {script} failed (exit {proc.returncode}): {proc.stderr[-800:]}")
    timings = json.loads((work / "out.json").read_text())["timings_s"]
    return wall, timings.get("import", timings.get("import torch", 0.0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="ff42c78", help="revision whose harness is the 'before' column")
    parser.add_argument("--processes", type=int, default=7, help="processes per column (default 7)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        before = harness_of(args.before, work / "before")
        now = ROOT / "guard" / "harness" / "run.py"
        (work / "plain.py").write_text(WORKLOAD.format(imports=""))
        (work / "with_torch.py").write_text(WORKLOAD.format(imports="import torch  # noqa: F401"))
        columns = {f"before ({args.before})": (before, "plain.py:make"), "now": (now, "plain.py:make"),
                   "now, a workload importing torch": (now, "with_torch.py:make")}
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in columns}
        one(now, work, "with_torch.py:make", work)  # torch's files into the page cache, for every column alike
        for k in range(args.processes):
            for name, (script, entry) in columns.items():
                figures[name].append(one(script, work, entry, work))
            print(f"harness_start: round {k + 1}/{args.processes} done", file=sys.stderr)
    print(f"harness process for a pure-Python workload, {args.processes} processes per column, alternating")
    print(f"{'column':36} {'wall s median (range)':>26} {'import phase s median':>22}")
    for name, values in figures.items():
        walls = [w for w, _ in values]
        imports = [i for _, i in values]
        print(f"{name:36} {statistics.median(walls):>8.3f} ({min(walls):.3f}-{max(walls):.3f}) "
              f"{statistics.median(imports):>22.3f}")
    ratio = statistics.median(w for w, _ in figures[f"before ({args.before})"]) / statistics.median(
        w for w, _ in figures["now"])
    print(f"before / now, median wall seconds: {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
