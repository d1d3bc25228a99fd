"""What the comment asks of its reader: for a regression or an invalid run, the "What to do"
line with the command that measures the same two commits again on one's own machine; for an
undecided run, the line under the title with the processes per arm that would decide it. Made
from the report's facts (its verdict, its arms' commits, each undecided batch size's
`repeats_to_decide`)."""

from __future__ import annotations

import re

from guard.compare import UNDECIDED, BatchComparison
from guard.config import MIN_REPEATS
from guard.measure import MOST_REPEATS
from guard.report import _words as words
from guard.report._schema import Report

# a command runs the pair again with the config of the base commit, as the run did
_AGAIN = "guard run --repo . --base {base} --head {head}"


def what_to_do(report: Report) -> str | None:
    """None for a pass or an improvement: nothing is asked of the reader; none for an undecided
    run, whose line is under the title (`what_decides`); nor where a commit is not a plain hex
    sha (a report read back is data: its strings go into no command)."""
    again = _again(report.arm(report.base).sha, report.arm(report.head).sha)
    if again is None:
        return None
    if report.verdict == "regression":
        return f"**What to do:** fix it or accept the cost; to measure it again: `{again}`."
    if report.verdict == "invalid":
        return f"**What to do:** fix what is listed above, then: `{again}`."
    return None


def repeats_to_decide(report: Report) -> int | None:
    """The processes per arm that would decide an undecided run: the most any of its undecided
    batch sizes needs, and never fewer than a run may have (MIN_REPEATS). None where one needs
    more than the guard counts to (MOST_REPEATS), or where the run is not undecided."""
    if report.verdict not in UNDECIDED:
        return None
    needed = [b.repeats_to_decide for b in report.decided() if b.undecided]
    if not needed or None in needed:
        return None
    return max(MIN_REPEATS, *(n for n in needed if n is not None))


def what_decides(report: Report) -> str | None:
    """The line under an undecided run's title: how many processes per arm would decide it, and
    the two ways to get them (a quieter runner, or more processes: the service's comment command
    or the command line); None for a run that decided."""
    if report.verdict not in UNDECIDED:
        return None
    n, ran = repeats_to_decide(report), _this_run(report.decided(), report.base, report.head)
    calibrate = _calibrate_clause(report)
    if n is None:
        return (f"**Needs more than {MOST_REPEATS} processes per arm to decide** (this run: {ran}) at this spread: "
                f"run it on a quieter runner{calibrate}.")
    again = _again(report.arm(report.base).sha, report.arm(report.head).sha)
    local = f", or run `{again} --repeats {n}`" if again is not None else ""
    return (f"**Needs about {n} processes per arm to decide** (this run: {ran}): run it on a quieter runner, or "
            f"comment `/guard run --repeats {n}` where the service runs{local}{calibrate}.")


def _calibrate_clause(report: Report) -> str:
    """Rule 5, where only felt metrics held to the config's threshold left the batch sizes open
    (GPU ms decided each): what this run's spread resolves in them (their `*_detectable_pct`, the
    most over those sizes), which a calibration of the runner would hold them to: ', or calibrate
    the runner (`guard calibrate`): end-to-end ms per step resolves about 4.2% here, and a run then
    holds it there'. None where GPU ms is open too: a calibration would not decide that."""
    if not report.rule.felt_gates:
        return ""
    found: dict[str, float] = {}
    for batch in report.decided():
        if not batch.undecided:
            continue
        if batch.gpu_ms_verdict in UNDECIDED:
            return ""
        for metric, verdict, resolved in (("end_to_end_ms", batch.end_to_end_verdict, batch.end_to_end_detectable_pct),
                                          ("tok_per_s", batch.tok_per_s_verdict, batch.tok_per_s_detectable_pct)):
            threshold = report.rule.thresholds().get(metric)  # type: ignore[call-overload]
            if (verdict in UNDECIDED and resolved is not None and threshold is not None
                    and threshold.source != "calibrated" and resolved > threshold.pct):
                found[metric] = max(found.get(metric, 0.0), resolved)
    if not found:
        return ""
    metric, resolved = max(found.items(), key=lambda item: item[1])
    name = words.END_TO_END if metric == "end_to_end_ms" else words.TOK
    return (f", or calibrate the runner (`guard calibrate`): {name} resolves about {resolved:.2g}% here at "
            f"{_this_run(report.decided(), report.base, report.head)} processes per arm, and a run then holds it there")


def _this_run(decided: list[BatchComparison], base: str, head: str) -> int:
    """The processes per arm this run had where it left a batch size undecided (the fewest)."""
    return min((a.repeats for b in decided if b.undecided for a in b.arms if a.arm in (base, head)), default=0)


def _again(base_sha: str, head_sha: str) -> str | None:
    shas = [base_sha, head_sha]
    if not all(re.fullmatch(r"[0-9a-f]{7,64}", sha) for sha in shas):
        return None
    return _AGAIN.format(base=shas[0][:12], head=shas[1][:12])
