"""The rule a test decides by: every metric at one threshold, as a config of one threshold
states it (`Rule.of_config` without a thresholds file), its other settings as the test gives them."""

from __future__ import annotations

from typing import Any

from guard.config import Rule, Threshold


def rule_at(pct: float, confidence: float = 0.95, alpha: float = 0.01, **settings: Any) -> Rule:
    """GPU ms, tok/s and end-to-end ms at `pct` percent; `settings`: the rule's other fields
    (looks, spreads, version, or a metric's own `Threshold`)."""
    every = Threshold(pct=pct)
    return Rule(**{"gpu_ms": every, "tok_per_s": every, "end_to_end_ms": every, "alpha": alpha,
                   "confidence": confidence, **settings})
