"""Checkout and build stage: pick the base and head commits, give each its own built worktree."""

from guard.checkout._build import build_arm
from guard.checkout._git import (
    changed_files, commit_subject, persisted_credentials, require_distinct, require_repo, resolve_arms, resolve_commit,
    uncommitted_changes,
)
from guard.checkout._models import ArmRef, BuiltArm

__all__ = ["ArmRef", "BuiltArm", "build_arm", "changed_files", "commit_subject", "persisted_credentials",
           "require_distinct", "require_repo", "resolve_arms", "resolve_commit", "uncommitted_changes"]
