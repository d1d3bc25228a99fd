"""What the head changed in the config and the files it names: shown to reviewers, never used."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, StringConstraints

from guard._git import checked_git
from guard.config._models import GuardConfig

# enough to read a change to a few keys; a longer diff is cut, and says so
MAX_DIFF_LINES = 80
MAX_DIFF_CHARS = 6000

ConfigPath = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}$")]


class ConfigChange(BaseModel):
    """The head changed files the config is made of; the run used the base commit's."""

    paths: list[ConfigPath]
    diff: str  # unified, base...head, of those paths; text from git, to be shown as data
    diff_truncated: bool = False


def config_paths(config: GuardConfig, config_name: str) -> list[str]:
    """The config file and the files it names that hold settings (not the workload's code)."""
    named = [config.measure.thresholds_file, config.workload.reference_file, config.workload.batch_mix_file]
    return [config_name] + [p for p in named if p]


def config_change(repo: Path, base_sha: str, head_sha: str, paths: list[str]) -> ConfigChange | None:
    """The head's changes to `paths` since it left base (`git diff base...head`), or None."""
    # :(top,literal): paths from the repository's root, no glob; no external diff or textconv
    # driver of the repository's config or attributes runs
    specs = [f":(top,literal){p}" for p in paths]
    common = ["diff", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--no-relative",
              f"{base_sha}...{head_sha}"]
    names = _git(repo, *common, "--name-only", "-z", "--", *specs)
    changed = [p for p in names.split("\0") if p]
    if not changed:
        return None
    text = _git(repo, *common, "--", *specs)
    lines = text.splitlines()
    cut = "\n".join(lines[:MAX_DIFF_LINES])[:MAX_DIFF_CHARS]
    return ConfigChange(paths=changed, diff=cut, diff_truncated=len(cut) < len("\n".join(lines)))


def _git(repo: Path, *args: str) -> str:
    return checked_git(repo, *args, doing="diff the config between base and head").stdout
