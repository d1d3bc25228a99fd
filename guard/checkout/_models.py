"""What the checkout stage hands on: the commits chosen for each arm, and each arm once built."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from guard._types import CommitSha
from guard.sandbox import Container



class ArmRef(BaseModel):
    """One arm's commit: the ref the user asked for and the full sha git resolved it to."""

    model_config = ConfigDict(frozen=True)

    name: str
    ref: str
    sha: CommitSha


class BuiltArm(BaseModel):
    """One arm checked out and built: where its code is and which interpreter runs it."""

    model_config = ConfigDict(frozen=True)

    name: str
    sha: CommitSha
    worktree: Path
    python: Path
    env: dict[str, str]
    build_log: Path
    reused: bool
    build_s: float = Field(ge=0)
    container: Container | None = None  # method "docker": the image and limits its harness runs under
