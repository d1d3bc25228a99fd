"""What the command line says when something goes wrong that no message was written for.

A failure the guard knows (GuardError) is its own message. Running out of memory or disk
is the machine's limit, said as such. Anything else is a bug in the guard: one line on
stderr naming the file that keeps the traceback, and exit code 2, never 1 (a regression)."""

from __future__ import annotations

import errno
import os
import platform
import tempfile
import traceback
from pathlib import Path

import guard
from guard._errors import OutputError
from guard._output import write_atomic

BUG_FILE_NAME = "guard-bug.txt"
# The machine, not the guard, is at fault: no space, no permission, a read-only disk
_DISK_ERRNOS = {errno.ENOSPC: "no space left on the disk", errno.EDQUOT: "the disk quota is used up"}
_ACCESS_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS}


def describe_failure(exc: BaseException, command: str, bug_dir: Path | None) -> str:
    """The one line for an exception that is not a GuardError; saves its traceback when it is a bug."""
    if isinstance(exc, OSError) and exc.errno in _DISK_ERRNOS:
        return f"cannot write{_file_of(exc)}: {_DISK_ERRNOS[exc.errno]}; free some space and run again"
    if isinstance(exc, OSError) and exc.errno in _ACCESS_ERRNOS:
        return f"cannot use{_file_of(exc)}: {exc.strerror}; give the guard paths it may read and write"
    if isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM):
        # its frames hold the buffers that filled memory: let them go before anything else
        traceback.clear_frames(exc.__traceback__)
        saved = save_traceback(exc, command, bug_dir)
        return (f"`guard {command}` ran out of memory: an input or a config value asks for more than this machine "
                f"has (a huge file, repeats or steps); check them. {_where(saved)}")
    saved = save_traceback(exc, command, bug_dir)
    what = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    return f"unexpected {what}; this is a bug in the guard, please report it. {_where(saved)}"


def save_traceback(exc: BaseException, command: str, bug_dir: Path | None) -> Path | None:
    """The traceback in `bug_dir`/guard-bug.txt when that folder can take it, else in a temp file."""
    text = (
        f"regression-guard {guard.__version__}, Python {platform.python_version()}, {platform.platform()}\n"
        f"command: guard {command}\n\n" + "".join(traceback.format_exception(exc))
    )
    if bug_dir is not None and bug_dir.is_dir():
        try:
            write_atomic(bug_dir / BUG_FILE_NAME, text)
            return bug_dir / BUG_FILE_NAME
        except OutputError:
            pass
    try:
        fd, name = tempfile.mkstemp(prefix="guard-bug-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError:
        return None
    return Path(name)


def _where(saved: Path | None) -> str:
    return f"The traceback is in {saved}" if saved else "The traceback could not be saved (no writable folder)"


def _file_of(exc: OSError) -> str:
    return f" {exc.filename}" if exc.filename is not None else ""
