"""How the guard runs pull-request code: in the run's `Box`, chosen once from what the host
gives (`choose_box`: cgroups, namespaces, or a container) and passed to every `launch`; with an
allowlisted environment (`_env`), as an unprivileged user when the guard is root (`_user`),
started by a guard that holds no secret itself (`_reexec`)."""

from guard.sandbox._box import Box, Isolation, Leftovers, choose_box
from guard.sandbox._container import Container, Mount, run_container
from guard.sandbox._engine import ContainerError, engine
from guard.sandbox._env import COMPILE_CACHES, STEP_FILES, check_pass_env, guard_environment, is_allowed, pr_environment
from guard.sandbox._launch import Launch, Together, launch
from guard.sandbox._proc import process_start
from guard.sandbox._reach import LaunchError, check_interpreter
from guard.sandbox._reexec import MARKER, restart_clean
from guard.sandbox._user import (
    DEFAULT_PR_USER, PrUser, pr_user, seal, seal_children, shared_folder, writable_file,
)

__all__ = [
    "Box",
    "COMPILE_CACHES",
    "Container",
    "ContainerError",
    "DEFAULT_PR_USER",
    "Isolation",
    "Launch",
    "LaunchError",
    "Leftovers",
    "MARKER",
    "Mount",
    "PrUser",
    "STEP_FILES",
    "Together",
    "check_interpreter",
    "check_pass_env",
    "choose_box",
    "engine",
    "guard_environment",
    "is_allowed",
    "launch",
    "pr_environment",
    "pr_user",
    "process_start",
    "restart_clean",
    "run_container",
    "seal",
    "seal_children",
    "shared_folder",
    "writable_file",
]
