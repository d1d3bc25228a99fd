"""What torch.compile cost this process: its seconds compiling frames, and what inductor's
FX graph cache and the AOTAutograd cache on disk gave it (hits: graphs an earlier process of
the arm compiled). Standard library only: torch's own counters are read where dynamo is loaded."""

from __future__ import annotations

import sys
from typing import Any

# torch._dynamo.utils.counters' names for each cache's outcomes, by the guard's names
_CACHES = {
    "fx_graph": ("inductor", "fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass"),
    "aot_autograd": ("aot_autograd", "autograd_cache_hit", "autograd_cache_miss", "autograd_cache_bypass"),
}


def compile_stats() -> dict[str, Any] | None:
    """{"compile_s", "fx_graph": {"hit", "miss", "bypass"}, "aot_autograd": {...}}; None when
    nothing was compiled (dynamo never loaded, or it compiled no frame)."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return None
    try:
        seconds = float(utils.calculate_time_spent().get("entire_frame_compile", 0.0))
        counters = utils.counters
        stats: dict[str, Any] = {"compile_s": seconds}
        for name, (group, hit, miss, bypass) in _CACHES.items():
            found = counters.get(group, {})
            stats[name] = {"hit": int(found.get(hit, 0)), "miss": int(found.get(miss, 0)),
                           "bypass": int(found.get(bypass, 0))}
    except Exception:  # another torch's internals: the figures are missing, never the process's result
        return None
    compiled = seconds > 0 or any(sum(stats[name].values()) for name in _CACHES)
    return stats if compiled else None
