"""How long does proving a cached build unchanged take, before it is reused?

Usage: python benchmarks/cache_check.py [--packages transformers torch] [--repeats 5]

Clones this repository to a temporary folder and builds its HEAD as an arm (method "venv")
into a temporary cache, once with nothing installed and once per named package: the install
copies that package from this interpreter's site-packages into the arm's venv, standing in
for an engine's install (an arm that sees torch through --system-site-packages has none of
it in its venv; copying torch in is the worst case, an arm that installs its own torch).
Then it times the check a run makes before reusing the build (`check_build`: every file of
the worktree and the venv hashed, the marker read, git asked for HEAD), `--repeats` times,
and prints the median with the files and bytes checked. The files are in the page cache
(the build just wrote them), as they are on a runner that reuses a build it made.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from guard.checkout import ArmRef, build_arm  # noqa: E402
from guard.checkout._cache import check_build  # noqa: E402
from guard.config import BuildConfig  # noqa: E402
from guard.sandbox import choose_box  # noqa: E402

_COPY = "python -c \"import shutil, sysconfig; shutil.copytree({src!r}, sysconfig.get_path('purelib') + '/{name}')\""


def _size(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]
    return len(files), sum(p.stat().st_size for p in files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", nargs="*", default=["transformers", "torch"])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="guard-cache-check-") as tmp:
        repo = Path(tmp) / "repo"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(repo)], check=True)
        sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()
        print(f"arm: this repository at {sha[:12]}, {sys.executable}")
        for package in ["(nothing)", *args.packages]:
            if package == "(nothing)":
                install = ""
            else:
                spec = importlib.util.find_spec(package)
                if spec is None or spec.origin is None:
                    sys.exit(f"{package} is not importable here; name packages this interpreter has")
                install = _COPY.format(src=str(Path(spec.origin).parent), name=package)
            config = BuildConfig(method="venv", install=install)
            built = build_arm(repo, ArmRef(name="arm", ref="HEAD", sha=sha), config, Path(tmp) / "cache",
                              box=choose_box())
            folder = built.worktree.parent
            timings_s = []
            for _ in range(args.repeats):
                started_s = time.perf_counter()
                stale = check_build(folder, sha)
                timings_s.append(time.perf_counter() - started_s)
                assert stale is None, stale
            tree_files, tree_bytes = _size(built.worktree)
            venv_files, venv_bytes = _size(folder / "venv")
            print(f"venv with {package:>14}: check {statistics.median(timings_s):7.3f} s median of {args.repeats} "
                  f"(min {min(timings_s):.3f}); tree {tree_files} files {tree_bytes / 2**20:.1f} MiB, "
                  f"venv {venv_files} files {venv_bytes / 2**20:.1f} MiB")
            shutil.rmtree(folder)


if __name__ == "__main__":
    main()
