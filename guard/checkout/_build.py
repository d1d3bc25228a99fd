"""Build one arm: check its commit out into a worktree and install it into its own environment,
or reuse the build a run made earlier, once it is proven untouched. The cache folder's layout
and the reuse rule are in guard.checkout._cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import NoReturn, TextIO

from guard._errors import BuildError, GuardError
from guard.checkout._cache import (
    LAYOUT_VERSION, LOCK_NAME, LOG_NAME, TREE_NAME, VENV_NAME, Stale, check_build, clear_folder, discard_build,
    mark_cache, prepare_folder, recorded_image, write_record,
)
from guard.checkout._docker import BuildFailed, arm_container, build_image, check_image, image_workdir
from guard._git import TreeSize, add_worktree, prune_worktrees, tree_size
from guard.checkout._lock import FolderLock, LockTimeout
from guard.checkout._models import ArmRef, BuiltArm
from guard.config._models import BuildConfig
from guard.sandbox import (
    Box, Launch, LaunchError, PrUser, check_interpreter, launch, pr_environment, pr_user,
)

_PTH_NAME = "_guard_parent_site.pth"
_LOG_TAIL_LINES = 40
# a folder rebuilt this many times in a row, and changed each time before it could be used
_BUILD_ATTEMPTS = 3

_SITE_DIRS_CODE = (
    "import json, sysconfig; "
    "print(json.dumps([sysconfig.get_path('purelib'), sysconfig.get_path('platlib')]))"
)
_HAS_PIP_CODE = "import importlib.util; print(importlib.util.find_spec('pip') is not None)"
_VENV_PATHS_CODE = "import json, sys, sysconfig; print(json.dumps([sysconfig.get_path('purelib'), sys.path]))"

_STALE_WORDS = {
    "unfinished": "an earlier build there did not finish",
    "untrusted": "its marker could have been written by another user",
    "other": "its marker is not this commit's and config's",
    "not_checked_out": "its worktree no longer has the commit checked out",
}


def build_arm(
    repo: Path,
    arm: ArmRef,
    build: BuildConfig,
    cache_dir: Path,
    progress: Callable[[str], None] = lambda s: None,
    hold: ExitStack | None = None,
    lock_wait_s: float | None = None,
    *,
    box: Box,
) -> BuiltArm:
    """Check `arm` out and build it per `build`, its steps in the run's `box`, reusing an earlier
    build of the same pair when it is exactly as that build left it. With `hold`, the build stays locked against being
    rebuilt by another run until `hold` is closed (keep it while the arm is measured); without,
    until this returns. Waits for another run's lock up to `lock_wait_s` (default build.timeout_s)."""
    python = _creating_python(arm, build)
    folder = cache_dir.absolute() / f"{arm.sha[:12]}-{_config_key(build, python)}"
    wait_s = build.timeout_s if lock_wait_s is None else lock_wait_s
    try:
        prune_worktrees(repo)  # git forgets the worktrees of cache folders deleted since
        mark_cache(folder.parent)
        prepare_folder(folder)
        lock = FolderLock(folder / LOCK_NAME)
    except OSError as exc:
        raise BuildError(
            arm.name, f"could not prepare the build folder {folder} ({exc}); check its permissions or delete it"
        ) from None
    try:
        built = _locked_build(repo, arm, build, python, folder, lock, wait_s, progress, box)
        lock.touch()  # used now: `guard clean --unused-for` keeps it
    except BaseException:
        lock.close()
        raise
    if hold is None:
        lock.close()
    else:
        hold.callback(lock.close)
    return built


def _locked_build(
    repo: Path,
    arm: ArmRef,
    build: BuildConfig,
    python: Path,
    folder: Path,
    lock: FolderLock,
    wait_s: float,
    progress: Callable[[str], None],
    box: Box,
) -> BuiltArm:
    """Check under the shared lock; build under the exclusive one; return holding the shared one."""
    short_sha = arm.sha[:12]

    def take(kind: Callable[[float, Callable[[], None]], None]) -> None:
        def say_waiting() -> None:
            progress(f"{arm.name}: another guard run is using {folder}; waiting for it (up to {wait_s:.0f} s)")
        try:
            kind(wait_s, say_waiting)
        except LockTimeout:
            raise BuildError(
                arm.name, f"another guard run held {folder} for {wait_s:.0f} s; let it finish, "
                "or give this run a cache folder of its own (--cache-dir)",
            ) from None

    fresh: BuiltArm | None = None
    for _ in range(_BUILD_ATTEMPTS):
        take(lock.shared)
        checked_s = time.monotonic()
        stale = _check(folder, arm.sha, build)
        if stale is None:
            if fresh is not None:
                return fresh
            progress(f"{arm.name}: reusing build of {short_sha} ({build.method}) from {folder}, "
                     f"unchanged since it was built (checked in {time.monotonic() - checked_s:.2f} s)")
            return _arm_in(folder, arm, build, python, reused=True, build_s=0.0)
        take(lock.exclusive)
        stale = _check(folder, arm.sha, build)  # another run may have rebuilt it while this one waited
        if stale is not None:
            if stale.why != "absent":
                progress(f"{arm.name}: the cached build of {short_sha} in {folder} {_stale_words(stale)}: rebuilding")
            fresh = _build_fresh(repo, arm, build, python, folder, progress, box)
    raise BuildError(
        arm.name, f"the build in {folder} was changed right after it was built, {_BUILD_ATTEMPTS} times over; "
        "stop what writes to it, or give this run a cache folder of its own (--cache-dir)",
    )


def _check(folder: Path, sha: str, build: BuildConfig) -> Stale | None:
    stale = check_build(folder, sha)
    if stale is None and build.method == "docker":
        stale = check_image(recorded_image(folder) or "", sha, folder.name, build.docker)
    return stale


def _stale_words(stale: Stale) -> str:
    if stale.why == "modified":
        return f"was modified since it was built ({stale.path} differs)"
    return _STALE_WORDS[stale.why]


def _build_fresh(
    repo: Path, arm: ArmRef, build: BuildConfig, python: Path, folder: Path, progress: Callable[[str], None],
    box: Box,
) -> BuiltArm:
    """Empty `folder` and build into it; a failed build leaves its log and no worktree."""
    short_sha = arm.sha[:12]
    progress(f"{arm.name}: building {short_sha} ({build.method}) ...")
    started_s = time.monotonic()
    replacing = _stale_image(folder) if build.method == "docker" else None
    try:
        clear_folder(folder)
    except OSError as exc:
        raise BuildError(
            arm.name, f"could not empty the build folder {folder} ({exc}); check its permissions or delete it"
        ) from None
    prune_worktrees(repo)
    worktree = folder / TREE_NAME
    log_path = folder / LOG_NAME
    try:
        with log_path.open("w", encoding="utf-8") as log:
            log.write(
                f"arm: {arm.name}\nref: {arm.ref}\nsha: {arm.sha}\nmethod: {build.method}\n"
                f"python: {python}\ninstall: {build.install}\n\n$ git worktree add --detach {worktree} {arm.sha}\n"
            )
            _check_tree(arm, build, tree_size(repo, arm.sha), log, log_path)
            log.write(add_worktree(repo, worktree, arm.sha))
            deadline_s = started_s + build.timeout_s
            image = None
            if build.method == "venv":
                _build_venv(arm, build, python, folder / VENV_NAME, worktree, log, log_path, deadline_s, box)
            elif build.method == "docker":
                try:
                    image, _ = build_image(
                        worktree, arm.sha, folder.name, build.docker, log, deadline_s, replacing=replacing
                    )
                except BuildFailed as failed:
                    _fail(arm, failed.message, log, log_path)
            else:
                log.write("\nmethod 'none': nothing installed; the arm imports its code from the worktree "
                          "via PYTHONPATH\n")
        build_s = time.monotonic() - started_s
        # tree/ and venv/ are sealed by now (_build_venv): the manifest is of what no other user can change
        write_record(folder, arm.sha, build_s, image)
    except BaseException:
        # the log stays for the error message to point at; git forgets the worktree. Best
        # effort: what the build failed with is the error to report, not a failed clean-up
        with suppress(OSError, GuardError):
            discard_build(folder)
            prune_worktrees(repo)
        raise
    progress(f"{arm.name}: built {short_sha} ({build.method}) in {build_s:.1f} s")
    return _arm_in(folder, arm, build, python, reused=False, build_s=build_s)


MIB = 1024 * 1024


def _check_tree(arm: ArmRef, build: BuildConfig, size: TreeSize, log: TextIO, log_path: Path) -> None:
    """Refuse a commit whose tree is over build.max_checkout_files or build.max_checkout_mib,
    before anything of it is written."""
    over = []
    if size.files > build.max_checkout_files:
        over.append(f"{size.files:,} files, over build.max_checkout_files ({build.max_checkout_files:,})")
    if size.bytes > build.max_checkout_mib * MIB:
        over.append(f"{size.bytes / MIB:,.0f} MiB, over build.max_checkout_mib ({build.max_checkout_mib:,})")
    if over:
        _fail(arm, f"its commit {arm.sha[:12]} holds {' and '.join(over)}; nothing of it was "
              "checked out. Raise the limit in the base's guard.toml where the engine is that large", log, log_path)


def _stale_image(folder: Path) -> str | None:
    """The image id a build folder's marker records, if it has one: what a rebuild replaces."""
    try:
        return recorded_image(folder)
    except (OSError, ValueError):  # no marker (no build yet, or an unfinished one), or not of this layout
        return None


def _arm_in(folder: Path, arm: ArmRef, build: BuildConfig, python: Path, *, reused: bool, build_s: float) -> BuiltArm:
    """The arm as built in `folder`: every path from the layout, none from what is stored there."""
    worktree = folder / TREE_NAME
    arm_python = folder / VENV_NAME / "bin" / "python" if build.method == "venv" else python
    container = None
    if build.method == "docker":
        image = recorded_image(folder) or ""
        container = arm_container(image, image_workdir(image), build)
    return BuiltArm(
        name=arm.name, sha=arm.sha, worktree=worktree, python=arm_python, env=_arm_env(build, worktree),
        build_log=folder / LOG_NAME, reused=reused, build_s=build_s, container=container,
    )


def _build_venv(
    arm: ArmRef,
    build: BuildConfig,
    python: Path,
    venv_dir: Path,
    worktree: Path,
    log: TextIO,
    log_path: Path,
    deadline_s: float,
    box: Box,
) -> Path:
    """Make the arm's venv, let it see the creating interpreter's packages, run the install command."""
    # the guard's own steps run in the build folder: `python -m`/`-c` import from their working
    # folder first, and the guard's may be the pull request's checkout
    folder = venv_dir.parent
    parent_dirs = json.loads(_ask(arm, python, _SITE_DIRS_CODE, log, log_path, deadline_s, folder))

    # no pip of its own: ensurepip's bundled setuptools (65 on Python 3.11) would shadow the
    # parent's newer one and break --no-build-isolation installs; the parent's pip is used instead
    argv = [str(python), "-m", "venv", "--system-site-packages", "--without-pip", str(venv_dir)]
    _run_step(box, arm, argv, f"creating the venv with `{python} -m venv`", log, log_path, deadline_s,
              hint="check that build.python can make venvs (Debian/Ubuntu: install python3-venv)", cwd=folder)
    venv_python = venv_dir / "bin" / "python"

    own_site, own_path = json.loads(_ask(arm, venv_python, _VENV_PATHS_CODE, log, log_path, deadline_s, folder))
    # --system-site-packages only reaches the base interpreter; when the guard runs in a venv,
    # that venv's packages (torch, typically) must stay visible, after the arm's own ones
    extra_dirs = [d for d in dict.fromkeys(parent_dirs) if d not in own_path and Path(d).is_dir()]
    if extra_dirs:
        # addsitedir, not a bare path line: .pth files in those dirs (editable installs) work too
        lines = [f"import site; site.addsitedir({d!r})\n" for d in extra_dirs]
        (Path(own_site) / _PTH_NAME).write_text("".join(lines), encoding="utf-8")
        log.write(f"\nparent site-packages made visible via {Path(own_site) / _PTH_NAME}: {extra_dirs}\n")

    _provide_pip(box, arm, venv_python, log, log_path, deadline_s, folder)

    if not build.install.strip():
        log.write("\nbuild.install is empty: nothing installed\n")
        return venv_python
    env = pr_environment(build.pass_env)  # the install runs the pull request's code
    env.pop("PYTHONHOME", None)
    env.update(
        VIRTUAL_ENV=str(venv_dir),
        PATH=f"{venv_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    user = pr_user(build.user)
    if user is not None:
        log.write(f"\nthe install runs as the user '{user.name}' (build.user), which may write the worktree and "
                  "the venv until it ends\n")
    # the worktree and venv are the install's to write while it runs, and read-only after it
    with box.temp.handed_over(user, [worktree, venv_dir]):
        _run_step(box, arm, build.install, f"install command `{build.install}`", log, log_path, deadline_s,
                  cwd=worktree, env=env, user=user, reads=[venv_python],
                  hint="fix build.install in guard.toml or the arm's packaging")
    return venv_python


def _provide_pip(
    box: Box, arm: ArmRef, venv_python: Path, log: TextIO, log_path: Path, deadline_s: float, folder: Path
) -> None:
    """Make `pip` in the venv's bin dir install into the venv, with pip from the parent if it has one."""
    has_pip = _ask(arm, venv_python, _HAS_PIP_CODE, log, log_path, deadline_s, folder).strip() == "True"
    if not has_pip:
        argv = [str(venv_python), "-m", "ensurepip", "--default-pip"]
        _run_step(box, arm, argv, "installing pip into the venv with ensurepip", log, log_path, deadline_s,
                  hint="install pip into the environment of build.python", cwd=folder)
        return
    # `python -m pip` run by the venv's interpreter installs into the venv, wherever pip lives
    for name in ("pip", "pip3"):
        launcher = venv_python.parent / name
        launcher.write_text(f'#!/bin/sh\nexec "{venv_python}" -m pip "$@"\n', encoding="utf-8")
        launcher.chmod(0o755)
    log.write(f"\npip: the parent environment's, run by {venv_python} (launcher {venv_python.parent / 'pip'})\n")


def _run_step(
    box: Box,
    arm: ArmRef,
    cmd: list[str] | str,
    what: str,
    log: TextIO,
    log_path: Path,
    deadline_s: float,
    *,
    hint: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    user: PrUser | None = None,
    reads: list[Path] | None = None,
) -> None:
    """Run one build step with its output in the log; a failure or timeout is a BuildError."""
    shown = cmd if isinstance(cmd, str) else " ".join(cmd)
    log.write(f"\n$ {shown}\n")
    log.flush()
    try:
        step = Launch(cmd, log, cwd=cwd, env=env, user=user, reads=reads or [], owner=arm.name)
        exit_code = launch(box, [step], timeout_s=deadline_s - time.monotonic()).codes[0]
    except LaunchError as exc:
        _fail(arm, exc.message, log, log_path)
    if exit_code is None:
        log.write("\n[guard] killed: the build ran past build.timeout_s\n")
        _fail(arm, f"{what} timed out (build.timeout_s); raise build.timeout_s or speed the build up", log, log_path)
    if exit_code != 0:
        _fail(arm, f"{what} exited with code {exit_code}; {hint}", log, log_path)


def _ask(arm: ArmRef, python: Path, code: str, log: TextIO, log_path: Path, deadline_s: float, cwd: Path) -> str:
    """Run a one-line query in `python` and return what it printed."""
    try:
        proc = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, check=False, cwd=cwd,
            timeout=max(deadline_s - time.monotonic(), 1.0),
        )
    except subprocess.TimeoutExpired:
        _fail(arm, f"{python} did not answer a sysconfig query in time (build.timeout_s)", log, log_path)
    if proc.returncode != 0:
        log.write(f"\n$ {python} -c {code!r}\n{proc.stdout}{proc.stderr}")
        _fail(arm, f"{python} failed a sysconfig query with exit code {proc.returncode}", log, log_path)
    return proc.stdout


def _fail(arm: ArmRef, message: str, log: TextIO, log_path: Path) -> NoReturn:
    log.flush()
    raise BuildError(arm.name, f"{message} (log: {log_path})", log_tail=_tail(log_path), log_path=str(log_path))


def _tail(log_path: Path) -> str:
    text = log_path.read_bytes().decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-_LOG_TAIL_LINES:])


def check_interpreter_reach(build: BuildConfig, reads: Sequence[Path] = ()) -> None:
    """Before anything is built: when the guard is root, the build user can run the interpreter
    the arms run on (methods "venv" and "none") and read its libraries and `reads`, or a
    LaunchError. One that is not found is left to the build, which says so."""
    user = pr_user(build.user) if build.method != "docker" else None
    found = shutil.which(build.python or sys.executable)
    if user is not None and found is not None:
        check_interpreter(user, Path(os.path.abspath(found)), reads)


def _creating_python(arm: ArmRef, build: BuildConfig) -> Path:
    """The interpreter the arm's venv is made from (method "venv") or that runs it (method "none")."""
    wanted = build.python or sys.executable
    found = shutil.which(wanted)
    if found is None:
        raise BuildError(
            arm.name, f"python interpreter '{wanted}' not found; set build.python to an existing interpreter"
        )
    # absolute but not resolved: a venv's python is a symlink whose location is what makes it the venv
    return Path(os.path.abspath(found))


def _config_key(build: BuildConfig, python: Path) -> str:
    """Short hash of what decides the build's result, so a different config gets its own folder."""
    settings: dict[str, object] = {"layout": LAYOUT_VERSION, "method": build.method}
    if build.method == "docker":  # the image holds its own interpreter; limits are the run's, not the build's
        settings |= build.docker.model_dump(include={"dockerfile", "build_args", "build_network"})
    else:  # and the box its install ran in: a build made unboxed is never one a boxed run reuses
        settings |= {"install": build.install, "python": str(python), "isolation": build.isolation}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]


def _arm_env(build: BuildConfig, worktree: Path) -> dict[str, str]:
    """Extra environment for the arm's processes; computed on every call, as PYTHONPATH may differ."""
    if build.method in ("venv", "docker"):
        return {}
    existing = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": f"{worktree}{os.pathsep}{existing}" if existing else str(worktree)}
