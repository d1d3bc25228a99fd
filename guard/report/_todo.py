"""The comment's "What to do" line: for each verdict that asks something of the reader, what,
with the command that measures the same two commits again on one's own machine. Made from the
report's facts (its verdict, its arms' commits, the processes an undecided batch size needs)."""

from __future__ import annotations

import re

from guard.measure import MOST_REPEATS
from guard.report._schema import Report

# a command runs the pair again with the config of the base commit, as the run did
_AGAIN = "guard run --repo . --base {base} --head {head}"


def what_to_do(report: Report) -> str | None:
    """None for a pass or an improvement: nothing is asked of the reader, nor where a commit is
    not a plain hex sha (a report read back is data: its strings go into no command)."""
    shas = [report.arm(report.base).sha, report.arm(report.head).sha]
    if not all(re.fullmatch(r"[0-9a-f]{7,64}", sha) for sha in shas):
        return None
    again = _AGAIN.format(base=shas[0][:12], head=shas[1][:12])
    if report.verdict == "regression":
        return f"**What to do:** fix it or accept the cost; to measure it again: `{again}`."
    if report.verdict == "invalid":
        return f"**What to do:** fix what is listed above, then: `{again}`."
    if report.verdict in ("at_threshold", "inconclusive"):
        needed = [b.repeats_to_decide for b in report.decided() if b.undecided]
        if needed and None not in needed:
            more = max(n for n in needed if n is not None)
            return f"**What to do:** about {more} processes per arm decide it: `{again} --repeats {more}`."
        return f"**What to do:** over {MOST_REPEATS} processes per arm at this spread: use a quieter runner."
    return None
