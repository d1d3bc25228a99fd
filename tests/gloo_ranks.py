"""Several ranks of torch.distributed on this CPU: one real process per rank, joined over
gloo on loopback, as a launcher starts them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ranks(
    script: Path, world_size: int, *args: str, timeout_s: float = 120
) -> list[subprocess.CompletedProcess[str]]:
    """`python script *args` once per rank, all at once, with the variables torch.distributed's
    env:// rendezvous reads; every process's outcome, in rank order."""
    port = str(free_port())
    procs = []
    for rank in range(world_size):
        env = os.environ | {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
                            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "PYTHONPATH": str(REPO_ROOT)}
        procs.append(subprocess.Popen([sys.executable, str(script), *args], env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    done = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout_s)
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return done
