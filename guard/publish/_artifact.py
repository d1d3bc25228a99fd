"""The files the action uploads as its artifact, gathered into a folder of their own first.

The upload follows symbolic links, and the traces folder is one the pull request's processes
could write in: a link left there (by a process that outlived its group, after the guard
sealed the folder) would have the upload read a file of the runner's and publish it. So the
upload reads a copy: report.json, comment.md, the picture (or a record's record.json, bmf.json and
pyperf.json) and the traces, each opened without
following a link, kept only when it is a regular file of the guard's own user (what the guard
wrote or sealed), copied into a new folder nobody else may write."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from guard.export import RECORD_EXPORTS
from guard.publish._errors import PublishError
from guard.record import RECORD_FILE
from guard.report import CHART_FILE

# a run's report, comment and picture; a record's figures (`guard record`)
TOP_FILES = ("report.json", "comment.md", CHART_FILE, RECORD_FILE, *RECORD_EXPORTS.values())
TRACES = Path("runs") / "traces"
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO must not block the copy


def gather_artifact(out_dir: Path, into: Path) -> tuple[list[str], int]:
    """Copies into the new folder `into`; the paths copied (relative to it) and how many
    entries were left out (links, folders, devices, another user's files)."""
    try:
        into.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        raise PublishError(f"--into {into} exists already; give a folder that does not, so that only what "
                           "this run gathers is uploaded") from None
    except OSError as exc:
        raise PublishError(f"cannot make --into {into}: {exc.strerror}") from None
    wanted = [Path(name) for name in TOP_FILES]
    traces = out_dir / TRACES
    if traces.is_dir() and not traces.is_symlink():
        wanted += sorted(TRACES / entry.name for entry in os.scandir(traces) if entry.name.endswith(".json.gz"))
    copied, left_out = [], 0
    for relative in wanted:
        if _copy_own_file(out_dir / relative, into / relative):
            copied.append(str(relative))
        elif os.path.lexists(out_dir / relative):
            left_out += 1
    return copied, left_out


def _copy_own_file(source: Path, target: Path) -> bool:
    try:
        fd = os.open(source, _READ)
    except OSError:  # gone, or a link (ELOOP): not copied
        return False
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        os.close(fd)
        return False
    with os.fdopen(fd, "rb") as src:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), "wb") as dst:
            shutil.copyfileobj(src, dst)
    return True
