"""The cache-poisoning attack, rerun: does a workload that rewrites the cached base hide the
next pull request's regression?

Usage: python benchmarks/cache_poisoning.py [--guard PATH] [--user NAME]

Makes the git repository tests/poisoning.py builds (tests/test_pipeline.py's workload) and two pull
requests off main: `attack`, whose workload rewrites every other cached worktree it finds
beside its own so the base does twenty times the work per step, and `feature`, a real
regression (twice the work per step). Runs `guard run` on `attack`, then on `feature`, then
on `feature` again, all on one cache, with the guard importable from PATH (default: this
checkout; give another checkout to compare), and prints each run's verdict, the change in
GPU ms per step at each batch size, and whether each arm's build was reused. Run as root,
the arms' code runs as build.user (--user; "" runs it as root, the guard's own user).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.poisoning import make_poisoning_repo, write_poisoning_config  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--guard", type=Path, default=ROOT, help="checkout whose guard package is run")
    parser.add_argument("--user", default=None, help="build.user for the runs (default: the config's default)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="guard-poisoning-") as tmp_name:
        tmp = Path(tmp_name)
        tmp.chmod(0o755)  # run as root, build.user runs the arms' code and must reach the repository
        engine = make_poisoning_repo(tmp)
        config = write_poisoning_config(tmp / "guard.toml", None if args.user is None else json.dumps(args.user))
        env = os.environ | {"PYTHONPATH": str(args.guard.resolve())}
        print(f"guard from {args.guard.resolve()}")
        for run, head in enumerate(["attack", "feature", "feature"], start=1):
            out = tmp / f"out-{run}"
            proc = subprocess.run(
                [sys.executable, "-m", "guard", "run", "--repo", str(engine), "--head", head, "--out", str(out),
                 "--config", str(config), "--cache-dir", str(tmp / "cache")],
                capture_output=True, text=True, env=env, cwd=tmp,
            )
            report = json.loads((out / "report.json").read_text())
            changes = ", ".join(
                f"bs {b['batch_size']} {b['gpu_ms_change']['pct']:+.0f}%" for b in report["batch_sizes"]
            )
            reused = ", ".join(f"{a['name']} {'reused' if a['build_reused'] else 'built'}" for a in report["arms"])
            print(f"run {run}, head {head}: exit {proc.returncode}, verdict {report['verdict']}; GPU ms/step "
                  f"{changes}; {reused}")
            for line in proc.stderr.splitlines():
                if "rebuilding" in line:
                    print(f"    {line}")


if __name__ == "__main__":
    main()
