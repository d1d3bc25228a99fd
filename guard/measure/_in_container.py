"""One harness process in the arm's container (build.method "docker").

What goes in, read-only: the harness's folder, the spec, the reference tokens when forced.
What comes out: the result file and the traces, from a fresh folder that is the only
thing the container may write besides its tmpfs, copied out as bounded regular files and
the folder then removed. Paths in the spec are the container's; the trace paths in the
result are mapped back to the copies the guard made, and a trace the result names that
was not copied stays a path the guard refuses (see _runner._check_traces)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from pathlib import Path
from typing import IO, Any

from guard._types import MAX_TRACE_BYTES
from guard.harness import HARNESS_SCRIPT
from guard.sandbox import Box, Container, Mount, pr_environment, run_container
from guard.sandbox._container import SCRATCH

IN_DIR = "/guard/in"
OUT_DIR = "/guard/out"
_HARNESS_DIR = "/guard/harness"
_HARNESS_INSIDE = f"{_HARNESS_DIR}/{HARNESS_SCRIPT.name}"
_TRACE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")
# A result holds timings and one token id per row and step: a few MB at the most
MAX_RESULT_BYTES = 256 << 20
MAX_TRACES = 256
# host paths that mean nothing in the image, whose own ENV says where things are there
_HOST_LAYOUT = frozenset({"PATH", "HOME", "TMPDIR", "USER", "LOGNAME", "LD_LIBRARY_PATH", "PYTHONPATH",
                          "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONPYCACHEPREFIX", "XDG_CACHE_HOME",
                          "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                          "PIP_CERT", "PIP_FIND_LINKS", "PIP_CONFIG_FILE"})


def container_environment(pass_env: list[str], extra: dict[str, str]) -> dict[str, str]:
    """The harness's allowlisted environment, less the host's paths, with the container's scratch."""
    env = {name: value for name, value in pr_environment(pass_env).items() if name not in _HOST_LAYOUT}
    return env | extra | {"HOME": SCRATCH, "TMPDIR": SCRATCH, "PYTHONUNBUFFERED": "1",
                          "PYTHONDONTWRITEBYTECODE": "1"}


def run_in_container(
    sandbox: Box,
    container: Container,
    payload: dict[str, Any],
    box: Path,
    result_path: Path,
    trace_dir: Path,
    log: IO[bytes],
    timeout_s: float,
    env: dict[str, str],
    cpus: list[int],
) -> int | None:
    """Run the harness on `payload` in `container`, one of the run's `sandbox`, with `box` as its
    scratch on the host; the exit code (None: timed out). The result lands at `result_path`,
    traces in `trace_dir`."""
    shutil.rmtree(box, ignore_errors=True)
    box.mkdir(mode=0o700, parents=True)
    inputs, outputs = box / "in", box / "out"
    inputs.mkdir(mode=0o755)
    outputs.mkdir()
    (outputs / "traces").mkdir()
    _give_to(container.user, [outputs, outputs / "traces"])
    # the harness's folder, for the modules beside its script (they are loaded by path)
    mounts = [Mount(HARNESS_SCRIPT.parent, _HARNESS_DIR), Mount(outputs, OUT_DIR, writable=True)]
    inside = payload | {"root": container.workdir, "trace_dir": f"{OUT_DIR}/traces"}
    if payload.get("reference"):
        shutil.copyfile(payload["reference"], inputs / "reference.json")
        os.chmod(inputs / "reference.json", 0o644)
        inside["reference"] = f"{IN_DIR}/reference.json"
        mounts.append(Mount(inputs / "reference.json", f"{IN_DIR}/reference.json"))
    (inputs / "spec.json").write_text(json.dumps(inside, indent=2))
    os.chmod(inputs / "spec.json", 0o644)
    mounts.append(Mount(inputs / "spec.json", f"{IN_DIR}/spec.json"))
    argv = [container.python, _HARNESS_INSIDE, f"{IN_DIR}/spec.json", f"{OUT_DIR}/result.json"]
    try:
        exit_code = run_container(sandbox.containers, container, argv, mounts=mounts, env=env, log=log,
                                  timeout_s=timeout_s, cpuset=cpus)
        copied = _copy_traces(outputs / "traces", trace_dir)
        _copy_result(outputs / "result.json", result_path, copied)
    finally:
        shutil.rmtree(box, ignore_errors=True)
    return exit_code


def _give_to(user: str, folders: list[Path]) -> None:
    """Let the container's user write `folders`: as theirs when the guard may chown, else by mode."""
    uid, _, gid = user.partition(":")
    for folder in folders:
        try:
            os.chown(folder, int(uid), int(gid or uid))
            os.chmod(folder, 0o700)
        except PermissionError:
            os.chmod(folder, 0o777)  # inside a 0700 folder of the guard's: no other host user reaches it


def _copy_traces(found: Path, trace_dir: Path) -> dict[str, Path]:
    """Copy out the regular files of `found` with plain names; inside path -> copy."""
    copied: dict[str, Path] = {}
    trace_dir.mkdir(parents=True, exist_ok=True)
    for entry in sorted(os.scandir(found), key=lambda e: e.name)[:MAX_TRACES]:
        if not _TRACE_NAME.match(entry.name):
            continue
        target = trace_dir / entry.name
        if _copy_file(Path(entry.path), target, MAX_TRACE_BYTES):
            copied[f"{OUT_DIR}/traces/{entry.name}"] = target
    return copied


def _copy_result(found: Path, result_path: Path, traces: dict[str, Path]) -> None:
    result_path.unlink(missing_ok=True)
    if not _copy_file(found, result_path, MAX_RESULT_BYTES):
        return
    try:
        data = json.loads(result_path.read_bytes())
    except (ValueError, RecursionError):
        return  # left as it came, for the reader to refuse
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list):
        return
    for run in runs:
        if isinstance(run, dict) and isinstance(run.get("trace"), str):
            # a trace that was not copied out keeps its inside path, which the guard refuses
            run["trace"] = str(traces.get(run["trace"], run["trace"]))
    result_path.write_text(json.dumps(data))


def _copy_file(source: Path, target: Path, limit_bytes: int) -> bool:
    """Copy `source` when it is a regular file (never a link) of at most `limit_bytes`."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_size > limit_bytes:
            return False
        target.unlink(missing_ok=True)
        with target.open("xb") as copy:
            left = limit_bytes
            while left > 0 and (block := file.read(min(left, 1 << 20))):
                copy.write(block)
                left -= len(block)
    return True
