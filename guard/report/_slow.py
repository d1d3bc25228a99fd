"""The sentence that names a run's slow processes and their rate: for the comment's
environment section, the run's progress output and the thresholds file of `guard calibrate`."""

from __future__ import annotations

from typing import Callable

from guard.measure import RATE_CONFIDENCE, SlowProcess, SlowProcesses
from guard.report import _words as words
from guard.report._words import share

MAX_NAMED = 5  # slow processes named one by one; the rest are counted


def slow_processes_sentence(slow: SlowProcesses, arm_label: Callable[[str], str] = str, arm_word: str = "arm",
                            gpu: bool = True, set_aside: int | None = None, rate_interval: bool = True) -> str:
    """'Slow processes: 1 of 20 (5%; 95% interval 0.1% to 25%): head repeat 3 at batch size 1,
    GPU ms per step +4.20% from its arm's median.' `arm_label` names an arm as the reader knows
    it, `arm_word` says what an arm is (an A/A has sides). `set_aside`: the processes the decision
    left out (rule 3), None where its rule sets none aside. `rate_interval` False: the rate alone,
    for the comment, whose intervals are all at the verdict's level (the rate's is in report.json)."""
    interval = f"{RATE_CONFIDENCE:.0%} interval {share(slow.rate_low)} to {share(slow.rate_high)}"
    if not slow.slow:
        return f"Slow processes: none of {slow.processes}" + (f" ({interval})." if rate_interval else ".")
    rate = share(slow.count / slow.processes) if slow.processes else "n/a"
    if rate_interval:
        rate += f"; {interval}"
    named = "; ".join(_one(s, arm_label, arm_word, gpu) for s in slow.slow[:MAX_NAMED])
    more = f"; and {len(slow.slow) - MAX_NAMED} more" if len(slow.slow) > MAX_NAMED else ""
    if set_aside:
        ending = (f"The decision set {set_aside} of these aside in every figure (base's and head's slow in "
                  f"{words.metric('gpu_ms', gpu)}, at most a third of an {arm_word}'s); any other widens the interval "
                  f"of the {arm_word} it ran in.")
    else:
        ending = f"Each widens the interval of the {arm_word} it ran in."
    return f"Slow processes: {slow.count} of {slow.processes} ({rate}): {named}{more}. {ending}"


def _one(s: SlowProcess, arm_label: Callable[[str], str], arm_word: str, gpu: bool) -> str:
    return (f"{arm_label(s.arm)} repeat {s.repeat} {words.at_size(s.batch_size)}, {words.metric(s.metric, gpu)} "
            f"{words.pct(s.off_pct)} from its {arm_word}'s median")
