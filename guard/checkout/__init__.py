"""Checkout and build stage: pick the base and head commits, give each its own built worktree."""

from guard._git import commit_subject, persisted_credentials, require_repo, resolve_commit, uncommitted_changes
from guard.checkout._arms import require_distinct, resolve_arms
from guard.checkout._build import build_arm, check_interpreter_reach
from guard.checkout._cache import default_cache_dir
from guard.checkout._clean import Cleaning, CleanError, clean
from guard.checkout._models import ArmRef, BuiltArm

__all__ = [
    "ArmRef", "BuiltArm", "CleanError", "Cleaning", "build_arm", "check_interpreter_reach", "clean", "commit_subject",
    "default_cache_dir", "persisted_credentials", "require_distinct", "require_repo", "resolve_arms", "resolve_commit",
    "uncommitted_changes",
]
