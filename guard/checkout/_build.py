"""Build one arm: check its commit out into a worktree and install it into its own environment.

Layout under the cache dir, one folder per (commit, build config):

    <sha12>-<config hash>/worktree/    the commit, checked out detached
    <sha12>-<config hash>/venv/        method "venv" only
    <sha12>-<config hash>/build.log    everything the build printed
    <sha12>-<config hash>/build.json   written last; its presence means "finished, reusable"
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TextIO

from guard._errors import BuildError
from guard.checkout._git import add_worktree, prune_worktrees, worktree_head
from guard.checkout._models import ArmRef, BuiltArm
from guard.config._models import BuildConfig
from guard.sandbox import LaunchError, PrUser, handed_over, pr_environment, pr_user, run_process

# bump when the build procedure changes, so folders built the old way are not reused
_LAYOUT_VERSION = 1
_MARKER_NAME = "build.json"
_LOG_NAME = "build.log"
_PTH_NAME = "_guard_parent_site.pth"
_LOG_TAIL_LINES = 40

_SITE_DIRS_CODE = (
    "import json, sysconfig; "
    "print(json.dumps([sysconfig.get_path('purelib'), sysconfig.get_path('platlib')]))"
)
_HAS_PIP_CODE = "import importlib.util; print(importlib.util.find_spec('pip') is not None)"
_VENV_PATHS_CODE = "import json, sys, sysconfig; print(json.dumps([sysconfig.get_path('purelib'), sys.path]))"


def build_arm(
    repo: Path,
    arm: ArmRef,
    build: BuildConfig,
    cache_dir: Path,
    progress: Callable[[str], None] = lambda s: None,
) -> BuiltArm:
    """Check `arm` out and build it per `build`, reusing a finished earlier build of the same pair."""
    python = _creating_python(arm, build)
    folder = cache_dir.absolute() / f"{arm.sha[:12]}-{_config_key(build, python)}"
    short_sha = arm.sha[:12]

    finished = _finished_build(folder, arm)
    if finished is not None:
        progress(f"{arm.name}: reusing build of {short_sha} ({build.method}) from {folder}")
        return BuiltArm(
            name=arm.name, sha=arm.sha, worktree=finished.worktree, python=finished.python,
            env=_arm_env(build, finished.worktree), build_log=finished.build_log,
            reused=True, build_s=0.0,
        )

    progress(f"{arm.name}: building {short_sha} ({build.method}) ...")
    started_s = time.monotonic()
    _start_fresh(repo, folder, arm)
    worktree = folder / "worktree"
    log_path = folder / _LOG_NAME
    with log_path.open("w", encoding="utf-8") as log:
        log.write(
            f"arm: {arm.name}\nref: {arm.ref}\nsha: {arm.sha}\nmethod: {build.method}\n"
            f"python: {python}\ninstall: {build.install}\n\n$ git worktree add --detach {worktree} {arm.sha}\n"
        )
        log.write(add_worktree(repo, worktree, arm.sha))
        if build.method == "venv":
            deadline_s = started_s + build.timeout_s
            arm_python = _build_venv(arm, build, python, folder / "venv", worktree, log, log_path, deadline_s)
        else:
            arm_python = python
            log.write("\nmethod 'none': nothing installed; the arm imports its code from the worktree via PYTHONPATH\n")
    build_s = time.monotonic() - started_s

    built = BuiltArm(
        name=arm.name, sha=arm.sha, worktree=worktree, python=arm_python,
        env=_arm_env(build, worktree), build_log=log_path, reused=False, build_s=build_s,
    )
    _write_marker(folder, built)
    progress(f"{arm.name}: built {short_sha} ({build.method}) in {build_s:.1f} s")
    return built


def _build_venv(
    arm: ArmRef,
    build: BuildConfig,
    python: Path,
    venv_dir: Path,
    worktree: Path,
    log: TextIO,
    log_path: Path,
    deadline_s: float,
) -> Path:
    """Make the arm's venv, let it see the creating interpreter's packages, run the install command."""
    # the guard's own steps run in the build folder: `python -m`/`-c` import from their working
    # folder first, and the guard's may be the pull request's checkout
    folder = venv_dir.parent
    parent_dirs = json.loads(_ask(arm, python, _SITE_DIRS_CODE, log, log_path, deadline_s, folder))

    # no pip of its own: ensurepip's bundled setuptools (65 on Python 3.11) would shadow the
    # parent's newer one and break --no-build-isolation installs; the parent's pip is used instead
    argv = [str(python), "-m", "venv", "--system-site-packages", "--without-pip", str(venv_dir)]
    _run_step(arm, argv, f"creating the venv with `{python} -m venv`", log, log_path, deadline_s,
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

    _provide_pip(arm, venv_python, log, log_path, deadline_s, folder)

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
    with handed_over(user, [worktree, venv_dir]):
        _run_step(arm, build.install, f"install command `{build.install}`", log, log_path, deadline_s,
                  cwd=worktree, env=env, user=user, reads=[venv_python],
                  hint="fix build.install in guard.toml or the arm's packaging")
    return venv_python


def _provide_pip(
    arm: ArmRef, venv_python: Path, log: TextIO, log_path: Path, deadline_s: float, folder: Path
) -> None:
    """Make `pip` in the venv's bin dir install into the venv, with pip from the parent if it has one."""
    has_pip = _ask(arm, venv_python, _HAS_PIP_CODE, log, log_path, deadline_s, folder).strip() == "True"
    if not has_pip:
        argv = [str(venv_python), "-m", "ensurepip", "--default-pip"]
        _run_step(arm, argv, "installing pip into the venv with ensurepip", log, log_path, deadline_s,
                  hint="install pip into the environment of build.python", cwd=folder)
        return
    # `python -m pip` run by the venv's interpreter installs into the venv, wherever pip lives
    for name in ("pip", "pip3"):
        launcher = venv_python.parent / name
        launcher.write_text(f'#!/bin/sh\nexec "{venv_python}" -m pip "$@"\n', encoding="utf-8")
        launcher.chmod(0o755)
    log.write(f"\npip: the parent environment's, run by {venv_python} (launcher {venv_python.parent / 'pip'})\n")


def _run_step(
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
        exit_code = run_process(cmd, stdout=log, timeout_s=deadline_s - time.monotonic(), cwd=cwd, env=env,
                                user=user, reads=reads or [])
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
    settings = {"layout": _LAYOUT_VERSION, "method": build.method, "install": build.install, "python": str(python)}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]


def _arm_env(build: BuildConfig, worktree: Path) -> dict[str, str]:
    """Extra environment for the arm's processes; computed on every call, as PYTHONPATH may differ."""
    if build.method == "venv":
        return {}
    existing = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": f"{worktree}{os.pathsep}{existing}" if existing else str(worktree)}


def _finished_build(folder: Path, arm: ArmRef) -> BuiltArm | None:
    """The finished build in `folder`, if its marker is there and what it points at still holds up."""
    try:
        stored = BuiltArm.model_validate_json((folder / _MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if stored.sha != arm.sha or not stored.python.exists() or worktree_head(stored.worktree) != arm.sha:
        return None
    return stored


def _start_fresh(repo: Path, folder: Path, arm: ArmRef) -> None:
    """Remove what an unfinished build left in `folder` and let git forget its worktree."""
    try:
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
    except OSError as exc:
        raise BuildError(
            arm.name, f"could not prepare the build folder {folder} ({exc}); check its permissions or delete it"
        ) from None
    prune_worktrees(repo)


def _write_marker(folder: Path, built: BuiltArm) -> None:
    # written whole then renamed, so a crash never leaves a marker that looks finished
    partial = folder / f"{_MARKER_NAME}.partial"
    partial.write_text(built.model_dump_json(indent=2), encoding="utf-8")
    os.replace(partial, folder / _MARKER_NAME)
