"""A report of an older schema, in the current shape: the one place that knows the keys older
schemas kept flat. Schemas 5 to 12 stated the rule a verdict was decided by as keys of the
report (each metric's threshold, where each came from, alpha, confidence, looks, the calibrated
spreads, the at-threshold policy); from schema 13 it is one record, `rule`, with its version. The
report keeps its own schema_version: its figures are still that schema's."""

from __future__ import annotations

from typing import Any

# the first schema each version of the rule decided (guard/config/_rule.py); before schema 8, rule 1
_RULE_FROM_SCHEMA = ((12, 5), (11, 4), (9, 3), (8, 2))
NESTED_SCHEMA = 13  # the first schema that keeps the rule whole


def current_shape(data: Any) -> Any:
    """`data`, a report read as JSON, with the rule of an older schema's flat keys nested, at the
    version that schema was decided by; anything else as it is, for the model to validate."""
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(version, int) or version >= NESTED_SCHEMA or "rule" in data:
        return data
    data = dict(data)
    sources = data.pop("threshold_sources", None) or {}
    if not isinstance(sources, dict):
        raise ValueError("threshold_sources is a source per metric")
    flat = {"gpu_ms": "threshold_pct", "tok_per_s": "tok_threshold_pct", "end_to_end_ms": "end_to_end_threshold_pct",
            "instructions": "instructions_threshold_pct"}
    pcts = {metric: data.pop(key, None) for metric, key in flat.items()}
    if pcts["tok_per_s"] is None:  # reports before schema 4 held tok/s to GPU ms's threshold
        pcts["tok_per_s"] = pcts["gpu_ms"]
    if version < 11:  # host instructions decided nothing before rule 4
        pcts["instructions"] = None
    thresholds = {metric: {"pct": pct, "source": sources.get(metric)} if pct is not None else None
                  for metric, pct in pcts.items()}
    for metric in ("gpu_ms", "tok_per_s"):  # decided in every schema: a missing one is the model's to name
        thresholds[metric] = thresholds[metric] or {}
    renamed = {"alpha": "alpha", "confidence": "confidence", "calibrated_spreads": "spreads",
               "at_threshold_status": "at_threshold"}
    moved = {new: data.pop(old) for old, new in renamed.items() if old in data}
    looks = data.pop("looks", None)
    decided = data.get("batch_sizes")
    data["rule"] = {
        **thresholds,
        "alpha": 0.01,  # reports before the setting decided at 0.01
        **moved,
        "looks": looks if looks is not None else data.get("rounds") or 1,  # none before looks were kept: the rounds
        "decided_sizes": (len(decided) if isinstance(decided, list) else 0) + (data.get("mix_comparison") is not None),
        "version": next((rule for first, rule in _RULE_FROM_SCHEMA if version >= first), 1),
    }
    return data
