"""Which two commits a run compares and the config it reads, before anything is built: what
`guard run` needs first, also before it restarts itself clean, without the measuring and
reporting stages' imports (numpy, the trace analysis)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from guard._errors import ConfigError
from guard.checkout import ArmRef, require_repo, resolve_arms, resolve_commit
from guard.config import (
    DEFAULT_CONFIG_NAME, CommitFiles, ConfigChange, Files, FolderFiles, GuardConfig, config_change, config_paths,
    load_commit_config,
)


class Resolved(NamedTuple):
    base: ArmRef
    head: ArmRef
    config: GuardConfig
    files: Files  # where the files the config names are read from
    change: ConfigChange | None  # the head's changes to the config, not used


def run_config(
    repo: Path, base: str | None, head: str, config: GuardConfig | None, config_dir: Path | None = None
) -> GuardConfig:
    """The config `run_guard` runs with, from the same arguments: the caller's, or the base
    commit's. `guard run` needs its build.pass_env before it restarts itself clean."""
    return arms_and_config(repo.resolve(), base, head, config, config_dir).config


def record_config(repo: Path, commit: str, config: GuardConfig | None) -> GuardConfig:
    """The config `record_commit` runs with: the caller's, or the commit's own."""
    if config is not None:
        return config
    require_repo(repo.resolve())
    return load_commit_config(repo.resolve(), resolve_commit(repo.resolve(), commit))


def arms_and_config(
    repo: Path, base: str | None, head: str, given: GuardConfig | None, config_dir: Path | None
) -> Resolved:
    if given is not None:
        base_ref, head_ref = resolve_arms(repo, base, head, given.target_branch)
        # beside a config from outside the checkout, named files must be outside it too
        files = FolderFiles(folder=config_dir, checkout=repo) if config_dir else FolderFiles(folder=repo)
        return Resolved(base_ref, head_ref, given, files, None)
    # Without --base the target branch picks the base; the head must not pick it, so it starts
    # as the default and moves only where the base's own config says.
    default = GuardConfig().target_branch
    base_ref, head_ref = resolve_arms(repo, base, head, default)
    config = load_commit_config(repo, base_ref.sha)
    if base is None and config.target_branch != default:
        base_ref, head_ref = resolve_arms(repo, None, head, config.target_branch)
        moved = load_commit_config(repo, base_ref.sha)
        if moved.target_branch != config.target_branch:
            raise ConfigError(
                f"the config at the merge-base with {default} names target_branch '{config.target_branch}', but "
                f"the one at the merge-base with '{config.target_branch}' names '{moved.target_branch}'; "
                "pass --base to say which base to compare with"
            )
        config = moved
    change = config_change(repo, base_ref.sha, head_ref.sha, config_paths(config, DEFAULT_CONFIG_NAME))
    return Resolved(base_ref, head_ref, config, CommitFiles(repo=repo, sha=base_ref.sha), change)
