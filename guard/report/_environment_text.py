"""What the numbers were measured on, in a line: GPU and its state, torch, CUDA, Python, host."""

from __future__ import annotations

from typing import Any

from guard.report._schema import Environment


def environment_line(env: Environment, state: dict[str, Any]) -> str:
    """`state`: the GPU fingerprint every repeat shared."""
    parts = []
    if env.gpu:
        extras = ", ".join(x for x in (env.gpu_capability, f"driver {env.driver}" if env.driver else None) if x)
        parts.append(f"{env.gpu} ({extras})" if extras else env.gpu)
    else:
        parts.append(f"CPU only ({env.cpu or 'unknown'}; times are wall clock)")
    if state.get("available"):
        clocks = [
            f"power limit {state['power_limit_w']:g} W" if _number(state.get("power_limit_w")) else None,
            f"max SM clock {state['max_sm_clock_mhz']:g} MHz" if _number(state.get("max_sm_clock_mhz")) else None,
            "MIG enabled" if state.get("mig_mode_current") is True else None,
            "persistence mode on" if state.get("persistence_mode") is True else None,
        ]
        parts.append("; ".join(c for c in clocks if c) or "GPU state recorded")
    if env.torch:
        parts.append(f"torch {env.torch}" + (f", CUDA {env.cuda}" if env.cuda else ""))
    if env.python:
        parts.append(f"Python {env.python}")
    if env.hostname:
        parts.append(f"host {env.hostname}")
    return ", ".join(parts)


def _number(value: object) -> bool:
    """A figure to print: the fingerprint is a report's free-form dict, so a value may be anything."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
