"""The values that cross the guard's boundaries (config, command line, webhooks, the API,
publish, the service, history), each defined once: a repository's OWNER/NAME, a commit's full
object name, the largest trace read, the kinds of a job's failure. The bottom floor: it
imports only the standard library and pydantic, and everything in guard may import it."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import StringConstraints

# OWNER/NAME as GitHub allows them: an owner of letters, digits, hyphens and underscores (an
# enterprise-managed user's `_shortcode`), 39 at most, led by a letter or digit; a name of
# letters, digits, '-', '_' and '.', 100 at most, but not '.' or '..' (written without
# lookahead, so that pydantic's default regex engine takes it too)
_REPO = (r"^[A-Za-z0-9][A-Za-z0-9_-]{0,38}/"
         r"(?:[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}|\.[A-Za-z0-9_-][A-Za-z0-9_.-]{0,98}|\.\.[A-Za-z0-9_.-]{1,98})$")
# a commit's full object name: SHA-1 or SHA-256, lower-case hex, as git prints it
_SHA = r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$"

RepoName = Annotated[str, StringConstraints(pattern=_REPO)]
CommitSha = Annotated[str, StringConstraints(pattern=_SHA)]

# The largest trace, uncompressed: a decode profile of a few hundred steps is tens of MB. 2 GiB
# (the container copy had 4): the reader holds a trace whole in memory, and a trace file is never
# larger than what it holds uncompressed, so a bigger one copied out could only be refused.
MAX_TRACE_BYTES = 2 << 30

# timeout: over the job's time limit; no-report: the measuring command exited without report.json;
# report-refused: the report did not hold up when read back; report-mismatch: a report of other commits;
# fetch: git could not fetch the commits; github: an API call failed; dispatch: the workflow could not be
# dispatched; worker-lost: the job's worker stopped on every try; cancelled: the operator stopped the job
# (procrastinate's abort); internal: a fault of the service. A `/guard run` refused before it ran (REFUSALS):
# not-permitted: its sender has no write access; not-pinned: the head is not the commit the command named (or
# a fork's head named none); not-dispatched: dispatch mode cannot take its --repeats
FailureKind = Literal[
    "timeout", "no-report", "report-refused", "report-mismatch", "fetch", "github", "dispatch", "worker-lost",
    "cancelled", "internal", "not-permitted", "not-pinned", "not-dispatched",
]
# said in the job's error, and no Check Run posted: the one who asked may not set the gate
REFUSALS: frozenset[FailureKind] = frozenset({"not-permitted", "not-pinned", "not-dispatched"})


def is_repo_name(value: object) -> bool:
    """Whether `value` is an OWNER/NAME GitHub allows."""
    return isinstance(value, str) and re.fullmatch(_REPO, value) is not None


def is_commit_sha(value: object) -> bool:
    """Whether `value` is a commit's full object name (40 or 64 lower-case hex digits)."""
    return isinstance(value, str) and re.fullmatch(_SHA, value) is not None
