"""The changes `guard demo` can stage: each a base commit of the reference engine, a head
commit that changes how decode is captured, and the guard.toml both are measured with.

- `piecewise` (the default): the head captures decode one graph per layer at one padded size.
- `fallback`: the base captures batch sizes 1, 2, 4 and 8 and runs every other size eagerly
  at its own shape; the head deletes that fallback, so sizes between the captured ones pad up
  to the next one and replay its graph. Each row attends over a long KV cache, the model has
  MoE layers whose graphs pad every expert to a static capacity, and the traffic is a
  batch-size mix with sizes between and above the captured ones: the padded work costs more
  than the launches the graphs save.
- `fallback-win`: the same change on a dense short-context model whose traffic sits at the
  captured sizes: the padding is rare and cheap, so removing the fallback costs nothing that
  matters.

Above the largest captured size (9 > 8) no graph can hold a batch: both arms run it eagerly
at its own shape, as serving engines do past their largest capture.
"""

from __future__ import annotations

from dataclasses import dataclass

ENGINE_FILE = "engine.py"


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str  # what the head does, for the progress line
    base_message: str
    head_branch: str
    head_message: str
    edits: tuple[tuple[str, str], ...]  # (base text, head text) in the engine's engine.py
    batch_sizes: tuple[int, ...]
    # workload options as (name, TOML value), written unless --options gives the same name
    options: tuple[tuple[str, str], ...] = ()
    batch_mix: str | None = None  # a TOML inline table of sizes to shares
    comment: str = ""  # TOML comment lines above the workload's figures: why the config is so
    arms: str = ""  # [[arms]] tables


_PIECEWISE = Scenario(
    name="piecewise",
    summary="piecewise, padded capture",
    base_message="Reference engine: decode captured as one CUDA graph per batch size",
    head_branch="piecewise-capture",
    head_message="""engine: capture decode piecewise, one graph per layer, at one padded size

One graph per layer at batch size 4 replaces one whole-step graph per batch
size: capture takes less memory and time, and batch sizes 1-4 share it.
""",
    edits=(('CAPTURE_MODE = "step"\n', 'CAPTURE_MODE = "layer"\n'),
           ("CAPTURE_BATCH_SIZES = (1, 2)\n", "CAPTURE_BATCH_SIZES = (4,)\n")),
    batch_sizes=(1, 2),
    arms="""
# An ablation arm: the head build again, with graphs at batch sizes 1 and 2 as on base,
# so the table separates what padding costs from what the per-layer graphs cost.
[[arms]]
name = "head-unpadded"
from = "head"
env = { REFENGINE_CAPTURE_BATCH_SIZES = "1,2" }
label = "same build, graphs at batch sizes 1 and 2 (no padding)"
""",
)

# The lines the head deletes: the fallback, in setup() (the state's rows) and in step() (the path).
FALLBACK_LINES = (
    "        if self.fallback and batch_size not in self.capture_batch_sizes:\n"
    "            self.run_batch = batch_size  # the fallback: a size without a graph of its own runs eagerly\n",
    "        if self.fallback and rows not in self.capture_batch_sizes:\n"
    "            size, captured = rows, False  # the fallback: a size without a graph of its own runs eagerly\n",
)
_CAPTURE_POLICY = (("capture_batch_sizes", "[1, 2, 4, 8]"), ("fallback", "true"), ("layers", "2"))


def _removed_fallback(
    name: str, summary: str, batch_sizes: tuple[int, ...], options: tuple[tuple[str, str], ...], batch_mix: str,
    comment: str,
) -> Scenario:
    """A scenario whose head deletes the fallback lines, measured as `options` and `batch_mix` say."""
    return Scenario(
        name=name,
        summary=summary,
        base_message="Reference engine: CUDA graphs at batch sizes 1, 2, 4 and 8; other sizes run eagerly (fallback)",
        head_branch="remove-fallback",
        head_message="""engine: remove the eager fallback; every batch up to 8 replays a CUDA graph

A batch size without a graph of its own now pads up to the next captured
size (1, 2, 4, 8) and replays that graph instead of running eagerly: one
code path, and no batch up to 8 pays eager launches any more.
""",
        edits=tuple((line, "") for line in FALLBACK_LINES),
        batch_sizes=batch_sizes,
        options=(*_CAPTURE_POLICY, *options),
        batch_mix=batch_mix,
        comment=comment,
    )


_FALLBACK = _removed_fallback(
    "fallback", "eager fallback removed, every size padded up to a captured one; MoE experts padded to capacity",
    batch_sizes=(1, 6),
    # a long context: every row computed attends over its whole KV cache, so a padded row costs
    # what a real one does; and MoE layers, whose graphs pad every expert to capacity
    options=(("max_len", "65536"), ("moe_experts", "4"), ("moe_top_k", "2"), ("moe_ffn", "512")),
    batch_mix="{ 1 = 0.4, 2 = 0.25, 3 = 0.15, 6 = 0.1, 9 = 0.1 }",
    comment="""# Batch size 1 has a graph on both sides; 6 has none on base, which runs it eagerly (the
# fallback), and is padded to 8 on head. The mix is the traffic: 3 and 6 fall between the
# captured sizes, 9 above the largest (eager on both sides). A 64k-position KV cache makes
# each row computed cost what a real one does; MoE: 4 experts, 2 per token.
""",
)

_FALLBACK_WIN = _removed_fallback(
    "fallback-win", "eager fallback removed on a dense model whose traffic sits at the captured sizes",
    batch_sizes=(1, 2),
    options=(),
    batch_mix="{ 1 = 0.5, 2 = 0.25, 4 = 0.15, 8 = 0.05, 3 = 0.05 }",
    comment="""# The traffic sits at the captured sizes, 1 and 2 most of all; one step in twenty is a 3,
# padded to 4 on head. The model is dense: a padded row costs little.
""",
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (_PIECEWISE, _FALLBACK, _FALLBACK_WIN)}
DEFAULT_SCENARIO = _PIECEWISE.name
