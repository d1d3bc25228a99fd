"""Run the same pipeline as `guard run` on the demo repository."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

from guard.demo._repo import DemoPasses, make_demo_repo, scenario_named
from guard.demo._scenarios import DEFAULT_SCENARIO
from guard.pipeline import run_guard
from guard.report import Report


def run_demo(
    out_dir: Path,
    workdir: Path | None = None,
    steps: int = 128,
    warmup_steps: int = 16,
    repeats: int = 5,
    options_toml: str = "",
    progress: Callable[[str], None] = lambda _: None,
    scenario: str = DEFAULT_SCENARIO,
    max_rounds: int | None = None,
    passes: DemoPasses | None = None,
) -> Report:
    staged = scenario_named(scenario)  # before anything is made
    if workdir is None:
        parent = Path(tempfile.mkdtemp(prefix="guard-demo-"))
        parent.chmod(0o755)  # run as root, the arms' code runs as build.user, which must reach the repo
    else:
        parent = workdir
    repo = parent / "engine-repo"
    if repo.exists():
        raise FileExistsError(f"{repo} exists; pass an empty --workdir")
    as_root = _build_user_cannot_run_this_python()
    if as_root:
        progress(f"demo: the build user cannot run this Python ({as_root}); the demo's arms run as root, which "
                 "its own code may, and a pull request's never does: for `guard run`, use a Python every user may "
                 "run (build.python)")
    _, head = make_demo_repo(repo, steps, warmup_steps, repeats, options_toml, scenario, max_rounds, passes,
                             as_root=bool(as_root))
    progress(f"demo repository at {repo} ({staged.name}): base is main, head is branch {head} ({staged.summary})")
    # config None: guard.toml from the base commit, as `guard run` reads it
    return run_guard(repo, None, head, None, out_dir.resolve(), progress=progress)


def _build_user_cannot_run_this_python() -> str:
    """Why the build user cannot run this interpreter and the harness (as root), or ""."""
    from guard._errors import GuardError
    from guard.checkout import check_interpreter_reach
    from guard.config import BuildConfig
    from guard.harness import HARNESS_SCRIPT

    try:
        check_interpreter_reach(BuildConfig(), [HARNESS_SCRIPT])
    except GuardError as exc:
        return exc.message.split(": ", 1)[-1].split(";", 1)[0]
    return ""
