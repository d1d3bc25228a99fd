"""Files the guard writes for others to read (report.json, comment.md, thresholds, the bug
file): each is written whole or not at all, so a reader never finds half of one."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

from guard._errors import OutputError

# errno values that say the disk, not the guard, is at fault
_FULL = (errno.ENOSPC, errno.EDQUOT)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `data` to a temporary file beside `path`, fsync it, then rename it over `path`.
    On any failure the old file (if any) is left as it was and OutputError says why."""
    write_all_atomic({Path(path): data})


def write_all_atomic(files: dict[Path, str | bytes]) -> None:
    """Several files that belong together (report.json and its comment.md): every one is
    written and synced before the first is renamed into place, so a full disk leaves all
    the earlier copies as they were."""
    temps: dict[Path, str] = {}
    path = next(iter(files))
    try:
        for path, data in files.items():
            temps[path] = _synced_temp(path, data.encode("utf-8") if isinstance(data, str) else data)
        for path, temp in temps.items():
            os.replace(temp, path)
    except OSError as exc:
        for temp in temps.values():
            Path(temp).unlink(missing_ok=True)
        raise OutputError(_cannot_write(path, exc)) from None
    for folder in {path.parent for path in files}:
        _sync_folder(folder)


def _synced_temp(path: Path, payload: bytes) -> str:
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), 0o666 & ~_umask())  # mkstemp makes 0600; readers are other steps
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
    except OSError:
        Path(temp).unlink(missing_ok=True)
        raise
    return temp


def append_whole(path: Path, text: str) -> None:
    """Append to a file others own and append to too ($GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY):
    replacing it is not ours to do, so a failed append is cut back to where it began."""
    payload = memoryview(text.encode("utf-8"))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    except OSError as exc:
        raise OutputError(_cannot_write(Path(path), exc)) from None
    try:
        start = os.lseek(fd, 0, os.SEEK_END)
        while payload:
            payload = payload[os.write(fd, payload):]
    except OSError as exc:
        with contextlib.suppress(OSError):  # a device (/dev/full) cannot be truncated; there is nothing to undo
            os.ftruncate(fd, start)
        raise OutputError(_cannot_write(Path(path), exc)) from None
    finally:
        os.close(fd)


def check_out_dir(path: Path, flag: str = "--out") -> Path:
    """Make the output folder (and its parents) and prove a file can be made in it, before
    any build starts: a bad `--out` is found in a second, not after an hour of measuring."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{flag} {path} is a file, not a folder; give a folder for the guard's outputs")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except (FileExistsError, NotADirectoryError):
        raise OutputError(
            f"{flag} {path} cannot be a folder: a part of its path is a file; give another folder"
        ) from None
    except OSError as exc:
        raise OutputError(f"{flag} {path} is not a folder the guard can write in: {exc.strerror}; "
                          "give a writable folder") from None
    return path


def check_out_file(path: Path, flag: str = "--out") -> Path:
    """An output file's folder must be writable, and the path must not be a folder."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{flag} {path} is a folder; give the path of the file to write")
    check_out_dir(path.parent, f"the folder of {flag}")
    return path


def _cannot_write(path: Path, exc: OSError) -> str:
    if exc.errno in _FULL:
        return f"cannot write {path}: no space left on its disk; free some space and run again (what it held is kept)"
    return f"cannot write {path}: {exc.strerror or exc}; check that its folder exists and may be written"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _sync_folder(folder: Path) -> None:
    """The rename is durable once the folder's entry is on disk; not every filesystem allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
