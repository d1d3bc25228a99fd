"""How the guard runs pull-request code: with an allowlisted environment (`_env`), as an
unprivileged user when the guard is root (`_user`), in process groups that end with the
guard (`_process`), started by a guard that holds no secret itself (`_reexec`)."""

from guard.sandbox._container import Container, ContainerError, Mount, engine, run_container
from guard.sandbox._env import COMPILE_CACHES, STEP_FILES, check_pass_env, guard_environment, is_allowed, pr_environment
from guard.sandbox._process import (
    Launch, LaunchError, Leftovers, Together, check_interpreter, check_reachable, counting_sweeps, end_all,
    run_process, run_together, sweeps_of,
)
from guard.sandbox._reexec import MARKER, restart_clean
from guard.sandbox._user import (
    DEFAULT_PR_USER, PrUser, handed_over, pr_user, seal, seal_children, shared_folder, writable_file,
)

__all__ = [
    "COMPILE_CACHES",
    "Container",
    "ContainerError",
    "DEFAULT_PR_USER",
    "MARKER",
    "STEP_FILES",
    "Together",
    "Launch",
    "LaunchError",
    "Leftovers",
    "Mount",
    "PrUser",
    "check_interpreter",
    "check_pass_env",
    "check_reachable",
    "counting_sweeps",
    "end_all",
    "engine",
    "guard_environment",
    "handed_over",
    "is_allowed",
    "pr_environment",
    "pr_user",
    "restart_clean",
    "run_container",
    "run_process",
    "run_together",
    "sweeps_of",
    "seal",
    "seal_children",
    "shared_folder",
    "writable_file",
]
