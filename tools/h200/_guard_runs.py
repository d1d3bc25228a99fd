"""What the tools/h200 scripts share: a `guard run` whose report, comment and log are kept,
the figures file each script appends to, and git as a fixed author. Imported by name: a
script run as `python3 tools/h200/NAME.py` has this folder on its path."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path


def run_kept(command: list[str], out: Path, kept: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run `command` (a `guard run` writing into `out`), then keep its report.json, comment.md
    and the tail of its stderr in `kept`; the process and its wall seconds."""
    shutil.rmtree(out, ignore_errors=True)
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    kept.mkdir(parents=True, exist_ok=True)
    (kept / "stderr.txt").write_text(proc.stderr[-30000:])
    for name in ("report.json", "comment.md"):
        if (out / name).exists():
            shutil.copyfile(out / name, kept / name)
    return proc, wall


def lines(path: Path) -> list[dict]:
    """The JSON lines of a figures file; none where it does not exist yet."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def append(path: Path, line: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n")
    print(json.dumps(line), flush=True)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=GPU runs", "-c", "user.email=gpu-runs@example.invalid", *args],
                   cwd=repo, check=True, capture_output=True)
