"""What does an arm's bytecode folder save each process's start, where the runner writes none?

Usage: python benchmarks/bytecode_cache.py [--modules torch transformers torch._dynamo] [--repeats 5]

Times a fresh interpreter importing `--modules` (those this interpreter lacks are left out and
named), in four ways, interleaved in each of `--repeats` rounds:
  none       no bytecode found and none written: PYTHONDONTWRITEBYTECODE=1 and an empty
             PYTHONPYCACHEPREFIX, as every process of an arm ran on a runner whose packages were
             installed without bytecode and which sets PYTHONDONTWRITEBYTECODE;
  first      the same runner's environment through the guard's compile_cache_environment, with
             a new, empty arm folder: the arm's first process, which compiles and writes it;
  later      the same, with the arm folder an earlier process filled: every later process;
  installed  the interpreter's own __pycache__ folders, as they are here.
Prints the median seconds of each and the ratios to `none`.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from guard.measure import compile_cache_environment  # noqa: E402

WAYS = ("none", "first", "later", "installed")


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _seconds(modules: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {', '.join(modules)}"], env=env, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", nargs="+", default=["torch", "transformers", "torch._dynamo"])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.repeats < 1:
        sys.exit("--repeats must be at least 1")
    modules = [m for m in args.modules if _importable(m)]
    if not modules:
        sys.exit(f"none of {', '.join(args.modules)} is importable by {sys.executable}; name modules it has")
    missing = [m for m in args.modules if m not in modules]
    print(f"importing {', '.join(modules)} in a fresh {sys.executable}"
          + (f" ({', '.join(missing)} not installed: left out)" if missing else ""), file=sys.stderr)

    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="guard-bytecode-") as tmp:
        runner = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
        none = runner | {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(Path(tmp, "empty"))}
        shared = Path(tmp, "shared")
        _seconds(modules, compile_cache_environment(shared, none))  # an earlier process of the arm
        for round_ in range(args.repeats):
            fresh = Path(tmp, f"fresh-{round_}")
            envs = {"none": none, "first": compile_cache_environment(fresh, none),
                    "later": compile_cache_environment(shared, none), "installed": runner}
            for way in WAYS:
                seconds[way].append(_seconds(modules, envs[way]))
            print(f"[{round_ + 1}/{args.repeats}] " + ", ".join(f"{w} {seconds[w][-1]:.2f} s" for w in WAYS),
                  file=sys.stderr)

    medians = {way: statistics.median(values) for way, values in seconds.items()}
    print(f"| way | median s ({args.repeats} processes) | range s | / none |")
    print("|---|---|---|---|")
    for way in WAYS:
        values = seconds[way]
        print(f"| {way} | {medians[way]:.2f} | {min(values):.2f}-{max(values):.2f} | "
              f"{medians[way] / medians['none']:.2f} |")


if __name__ == "__main__":
    main()
