"""`guard bisect`: the first commit between a good and a bad one that made decode slower."""

from guard.bisect._commits import commits_between
from guard.bisect._models import BisectOutcome, BisectResult, BisectStep
from guard.bisect._run import BISECT_FILE, BisectStepInvalid, Measure, run_bisect, search_commits
from guard.bisect._search import first_bad
from guard.bisect._text import chain_text

__all__ = [
    "BISECT_FILE",
    "BisectOutcome",
    "BisectResult",
    "BisectStep",
    "BisectStepInvalid",
    "Measure",
    "chain_text",
    "commits_between",
    "first_bad",
    "run_bisect",
    "search_commits",
]
