"""Each process's tok/s beside its host time, from committed runs.tar.gz files: where a
compiled engine's tok/s spread comes from.

    python3 tools/h200/tok_per_s_runs.py docs/validation/h200-engines/pairs/*/runs.tar.gz

Per process and batch size: tok/s, its wall ms per step (1000 / tok/s at batch size 1), the
CUDA-event time of the end-to-end pass, the held pass's host enqueue ms per step (median, first
and second half of the pass), its tok/s windows where the harness recorded them, GPU ms per step.
Standard library only.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import tarfile
from pathlib import Path

PROCESS = re.compile(r"(?:^|/)((?:base|head)-\d+)\.json$")


def rows(archive: Path) -> list[str]:
    out = []
    with tarfile.open(archive) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            found = PROCESS.search(member.name)
            handle = tar.extractfile(member) if found and member.isfile() else None
            if handle is None:
                continue
            for run in json.load(handle).get("runs", []):
                host = run.get("host_ms") or [0.0]
                half = len(host) // 2 or 1
                windows = run.get("tok_per_s_windows") or []
                spread = (f"{len(windows)} windows {min(windows):.0f}-{max(windows):.0f}" if windows
                          else "no windows")
                out.append(
                    f"{archive.parent.name:24s} {found.group(1):7s} bs {run['batch_size']:<3d} "
                    f"tok/s {run['tok_per_s']:7.0f}  wall ms/step {run['batch_size'] * 1000 / run['tok_per_s']:6.3f}  "
                    f"e2e {run.get('end_to_end_gpu_ms_per_step') or 0:6.3f}  host ms {statistics.median(host):.3f} "
                    f"({statistics.median(host[:half]):.3f} | {statistics.median(host[half:]):.3f})  "
                    f"GPU ms {run['gpu_ms_per_step']:.3f}  {spread}")
    return out


def main(paths: list[str]) -> int:
    if not paths:
        print(f"usage: {__doc__.strip().splitlines()[3].strip()}", file=sys.stderr)
        return 2
    for path in paths:
        print("\n".join(rows(Path(path))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
