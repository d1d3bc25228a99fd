"""The machine a harness process ran on: Python, torch, CUDA, the GPU and its driver, the CPUs
it may use, and the GPU's state (harness/_fingerprint.py).

Standard library only; torch is handed in, and pynvml read where it is installed.
"""

from __future__ import annotations

import os
import platform
import socket
from typing import Any

from ._fingerprint import gpu_fingerprint


def environment(torch: Any) -> dict[str, Any]:
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu": platform.processor() or platform.machine(),
        "torch": getattr(torch, "__version__", None),
        "cuda": getattr(getattr(torch, "version", None), "cuda", None),
        "gpu": None,
        "gpu_capability": None,
        "driver": None,
        "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }
    if torch is not None and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        env["gpu_capability"] = "sm_%d%d" % torch.cuda.get_device_capability()
        env["driver"] = _driver_version()
    return env


def _driver_version() -> str | None:
    try:
        import pynvml  # nvidia-ml-py; optional in the arm's environment

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
            return version.decode() if isinstance(version, bytes) else version
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None



def fingerprint(torch: Any) -> dict[str, Any]:
    """The GPU's state now; never fails the run."""
    try:
        return gpu_fingerprint(torch)
    except Exception as exc:
        return {"available": False, "reason": f"fingerprint not collected ({type(exc).__name__}: {exc})"}
