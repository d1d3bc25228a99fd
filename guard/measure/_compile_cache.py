"""torch.compile's caches shared by the processes of one arm (measure.compile_cache).

Each process of an arm compiles the same graphs: with a cache folder per arm on disk, the
first one compiles (inductor's FX graph and AOTAutograd caches, Triton's kernels, JIT
extensions, the driver's PTX, the interpreter's bytecode) and the later ones, the
confirmation round's too, load what it compiled. Without one, every process compiles
from scratch in its own temp folder.

One folder per arm and per run, never shared between arms and never kept: every process
that writes it runs the arm's own code, and a folder kept for a later run would be one that
an earlier pull request's code had written. When the guard is root, an arm's folder is the
build user's to write only while one of that arm's processes runs; between them it is the
guard's and read-only, so the other arm's processes (the same user) cannot change what the
next process of this one loads. The run's folder lets that user pass, not list what is in
it, and is removed when the run ends. Its name holds the guard's pid and start time, so that
the next run removes the folder of a guard that was killed (SIGKILL runs no clean-up): on a
runner kept between jobs, a compiled engine's caches would otherwise pile up in /tmp."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from guard.sandbox import COMPILE_CACHES, process_start

if TYPE_CHECKING:
    from guard.measure._runner import ArmTarget


# Inductor builds its C++ precompiled headers in torch's default cache folder, under the
# process's own temp folder whatever TORCHINDUCTOR_CACHE_DIR says, and before it looks for
# the compiled kernels on disk: every process would build them again (40-70 s each on a
# 2-core CPU). Off in an arm that shares a cache, unless its environment sets it; it changes
# how the kernels are compiled, not what they compute. The Triton kernels of a GPU need none.
CACHE_DEFAULTS = {"TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS": "0"}


# The interpreter's bytecode, in the arm's folder like the compilers' output. Where the
# runner's interpreter has none (installed without it, or read-only to the build user) and
# PYTHONDONTWRITEBYTECODE is set, every process compiled torch's and transformers' Python
# again: 8.7-9.8 s of each process's start on the H200 (docs/measurements/time-to-verdict.md).
BYTECODE = COMPILE_CACHES["PYTHONPYCACHEPREFIX"]


def compile_cache_environment(folder: Path | None, given: Mapping[str, str]) -> dict[str, str]:
    """`given` (a process's environment) with its compilers, and the interpreter's bytecode,
    pointed at the arm's cache `folder`; as it is without one."""
    if folder is None:
        return dict(given)
    kept = {name: value for name, value in given.items() if name != "PYTHONDONTWRITEBYTECODE"}
    return CACHE_DEFAULTS | kept | {name: str(folder / part) for name, part in COMPILE_CACHES.items()}


_PREFIX = "guard-compile-cache-"


@contextmanager
def compile_caches(arms: Iterable[str]) -> Iterator[dict[str, Path]]:
    """An empty cache folder per arm name, for the block; removed after it, however it ends
    (but a SIGKILL: the next run's remove_abandoned removes that one)."""
    remove_abandoned(Path(tempfile.gettempdir()))
    root = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-{process_start(os.getpid())}-"))
    try:
        root.chmod(0o711)  # the build user passes through to its arm's folder, whose name it is given
        yield {arm: Path(tempfile.mkdtemp(prefix=f"{arm}-", dir=root)) for arm in dict.fromkeys(arms)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def remove_abandoned(parent: Path) -> list[Path]:
    """Remove the run folders in `parent` whose guard no longer runs (its pid and start time no
    longer name a process); the removed. Only folders of this layout, of the guard's own user,
    are touched: a name another user planted in /tmp points the removal nowhere."""
    removed = []
    for entry in parent.glob(f"{_PREFIX}*"):
        pid, _, rest = entry.name.removeprefix(_PREFIX).partition("-")
        start = rest.partition("-")[0]
        if not (pid.isdigit() and start.isdigit()) or str(process_start(int(pid))) == start:
            continue  # not of this layout, or its guard still runs
        try:
            found = entry.lstat()
        except OSError:
            continue
        if stat.S_ISDIR(found.st_mode) and found.st_uid == os.geteuid():
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def filled(folder: Path | None) -> bool:
    """Whether a process compiled into `folder` (anything written there but the bytecode,
    which every process writes, compiled workload or not)."""
    return folder is not None and folder.is_dir() and any(p.name != BYTECODE for p in folder.iterdir())


def to_fill(targets: list[ArmTarget], base: str, reference_ran: bool) -> list[ArmTarget]:
    """The arms whose cache one unmeasured process fills before the measured ones, so that no
    measured process is the one that compiles: on the H200 a process that compiled its CUDA
    graphs itself ran at 0.202 ms per step where every one loading them ran at 0.221, which
    lands on one arm alone when only base's cache was filled (by its reference process).
    Base's reference process says whether the workload compiles (its cache is no longer empty);
    without one, every arm with a cache is filled."""
    shared = [t for t in targets if t.compile_cache is not None]
    if not reference_ran:
        return shared
    by_name = {t.name: t for t in shared}
    if base not in by_name or not filled(by_name[base].compile_cache):
        return []
    return [t for t in shared if t.name != base]


def share_compile_caches(targets: list[ArmTarget], stack: ExitStack) -> list[ArmTarget]:
    """`targets`, each with a cache folder of its own that lasts as long as `stack`; one in a
    container (build.method "docker") compiles in its own scratch, as before."""
    caches = stack.enter_context(compile_caches(t.name for t in targets if t.container is None))
    return [t.model_copy(update={"compile_cache": caches.get(t.name)}) for t in targets]
