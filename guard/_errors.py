"""Errors a user can hit. Each carries a message that says what to do, and an exit code."""

from __future__ import annotations

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_ERROR = 2  # the guard could not run as asked: a bad config, a missing ref, a full disk
EXIT_INVALID = 3  # it ran, and base and head could not be compared (verdict invalid)
# it ran, and decided nothing (at_threshold, inconclusive): not a pass, so never 0; not a
# regression shown past the threshold, so not 1; more processes or a quieter runner decide it
EXIT_UNDECIDED = 4


class GuardError(Exception):
    """Base of every error the guard reports as a message rather than a traceback."""

    exit_code: int = EXIT_ERROR

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(GuardError):
    """The configuration file is missing, unreadable or has a bad value."""


class GitError(GuardError):
    """A git command failed: a ref that does not exist, a path that is not a repository."""


class BuildError(GuardError):
    """Building one arm failed. Names the arm and carries the tail of its build log."""

    def __init__(self, arm: str, message: str, log_tail: str = "", log_path: str | None = None) -> None:
        super().__init__(f"build of arm '{arm}' failed: {message}")
        self.arm = arm
        self.log_tail = log_tail
        self.log_path = log_path


class HarnessError(GuardError):
    """The workload failed while it ran inside an arm's environment."""

    def __init__(self, arm: str, message: str, log_tail: str = "") -> None:
        super().__init__(f"workload run of arm '{arm}' failed: {message}")
        self.arm = arm
        self.log_tail = log_tail


class TraceError(GuardError):
    """A profiler trace could not be read or holds nothing to analyse."""


class OutputError(GuardError):
    """An output folder or file cannot be written: `--out` is a file, a read-only folder, a full disk."""
