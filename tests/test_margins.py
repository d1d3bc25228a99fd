"""The margin rule: the reference's top two logits per output, disagreements at confident
outputs counted apart, and the agreement rule deciding from them; the count rule without them.
Real harness processes of the reference engine on a CPU, in float32 and bf16."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from guard.compare import agreement
from guard.engine import make as make_engine
from guard.measure import MARGIN_FLOOR_ULPS, ArmTarget, BatchRun, HarnessSpec, ReferenceTokens, RepeatResult, ulp
from guard.measure._disagreements import with_disagreements
from guard.harness._protocol import ReferenceRun
from guard.measure._reference import _top_logits, forced_spec, make_reference
from guard.measure._runner import run_interleaved
from guard.sandbox import choose_box

REPO_ROOT = Path(__file__).resolve().parents[1]
BATCH = 2
# the head's function changed: a sign flipped in the rotary embedding (validation's 'output-change')
FLIPPED = '''
def _flipped(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat([x[..., half:], -x[..., :half]], dim=-1) * sin
model._rotate = _flipped
'''
WORKLOAD = '''
import sys
sys.path.insert(0, {root!r})
import torch
from guard.engine import make as _make, model
{patch}
def make(**options):
    return _make(**options)
'''


def next_up_ulp(dtype: torch.dtype, value: float) -> float:
    """The ulp as the dtype's own bits give it: the next number up minus this one."""
    x = torch.tensor(abs(value), dtype=dtype)
    bits = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}[dtype]
    return float((x.view(bits) + 1).view(dtype).double() - x.double())


def test_the_ulp_is_the_spacing_of_the_dtypes_own_numbers() -> None:
    for dtype, name in ((torch.bfloat16, "bfloat16"), (torch.float16, "float16"), (torch.float32, "float32")):
        for value in (1.0, 3.765625, -12.5, 0.0625, 300.0):
            rounded = float(torch.tensor(value, dtype=dtype))
            assert ulp(name, rounded) == next_up_ulp(dtype, rounded), (name, value)


def arm_runs(tmp: Path, dtype: str, head_patch: str) -> tuple[ReferenceTokens, dict[str, list[BatchRun]]]:
    """A reference of base, then two forced processes of each arm: base, and a head whose
    workload file applies `head_patch` to the engine."""
    targets = []
    for name, patch in (("base", ""), ("head", head_patch)):
        worktree = tmp / name
        worktree.mkdir()
        (worktree / "wl.py").write_text(WORKLOAD.format(root=str(REPO_ROOT), patch=patch))
        targets.append(ArmTarget(box=choose_box(), name=name, python=Path(sys.executable), worktree=worktree))
    spec = HarnessSpec(entry="wl.py:make", options={"layers": 2, "max_len": 128, "dtype": dtype},
                       batch_sizes=[BATCH], steps=40, warmup_steps=2, tok_per_s_min_s=0, warmup_max_s=0,
                       profile_steps=0)
    outcome = make_reference(targets[0], spec, tmp / "runs", 300, "base test")
    assert outcome.error is None and outcome.tokens is not None and outcome.path is not None, outcome.error
    results = run_interleaved(targets, forced_spec(spec, outcome.tokens, outcome.path), 2, tmp / "runs", 300,
                              reference=outcome.tokens)
    for result in results.values():
        assert result.error is None, result.error
    return outcome.tokens, {name: [r.run_for(BATCH) for r in results[name].repeats] for name in ("base", "head")}


def own_confident_count(tokens: list[list[int]], reference: ReferenceTokens, dtype: torch.dtype) -> tuple[int, int]:
    """Disagreements at outputs whose reference margin is above the floor, counted here."""
    rows, top = reference.batch_sizes[BATCH], reference.top_for(BATCH)
    assert top is not None
    count = outputs = 0
    for row, ref, pairs in zip(tokens, rows, top):
        for found, expected, (best, second) in zip(row, ref, pairs):
            if (best - second) / next_up_ulp(dtype, max(abs(best), abs(second))) > MARGIN_FLOOR_ULPS:
                outputs += 1
                count += found != expected
    return count, outputs


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_reference_engine_records_its_top_logits_and_an_a_a_is_not_changed(tmp_path: Path, dtype: str) -> None:
    reference, runs = arm_runs(tmp_path, dtype, "")
    assert reference.top_logits is not None and reference.top_logits.dtype == dtype
    top = reference.top_for(BATCH)
    assert top is not None and len(top) == len(reference.batch_sizes[BATCH])
    # the recorded pairs are the engine's own logits: the same engine in this process gives them
    engine = make_engine(layers=2, max_len=128, dtype=dtype)
    engine.setup(BATCH)
    for step in range(5):
        ids = engine.step().tolist()
        logits = engine.step_logits()
        assert logits.argmax(-1).tolist() == ids == reference.batch_sizes[BATCH][step]
        assert logits.topk(2, -1).values.float().tolist() == [list(p) for p in top[step]]
    found = agreement(runs, "base", "ref")
    head = found.arm("head")
    assert found.margin_floor is not None and found.margin_floor.dtype == dtype
    assert head is not None and head.output_changed is False and head.confident == [0, 0]
    assert head.confident_compared == own_confident_count(runs["head"][0].tokens, reference,
                                                          getattr(torch, dtype))[1] > 0


@pytest.mark.slow
def test_a_sign_flip_changes_the_output_at_confident_outputs_in_every_process(tmp_path: Path) -> None:
    reference, runs = arm_runs(tmp_path, "bfloat16", FLIPPED)
    found = agreement(runs, "base", "ref")
    head, base = found.arm("head"), found.arm("base")
    assert head is not None and base is not None
    assert base.confident == [0, 0]
    assert head.confident == [own_confident_count(r.tokens, reference, torch.bfloat16)[0] for r in runs["head"]]
    assert min(head.confident) > 0 and head.output_changed is True
    assert head.first_confident is not None and head.first_confident.margin_ulps > MARGIN_FLOOR_ULPS
    assert head.first_change == head.first_confident


def synthetic(margins: bool) -> tuple[ReferenceTokens, dict[str, list[BatchRun]]]:
    """40 steps of one sequence: even steps' reference logits tied within 1 bf16 ulp, odd ones
    apart by 64; every head process differs at 14 of the 20 near-ties, base's at one."""
    steps = 40
    rows = [[7] for _ in range(steps)]
    pairs = [[(4.0, 4.0 - 1 / 32)] if k % 2 == 0 else [(4.0, 2.0)] for k in range(steps)]
    reference = ReferenceTokens(source="t", batch_sizes={1: rows},
                                top_logits={"dtype": "bfloat16", "batch_sizes": {1: pairs}} if margins else None)
    runs: dict[str, list[BatchRun]] = {}
    for name, flips in (("base", 1), ("head", 14)):
        tokens = [[8] if k % 2 == 0 and k // 2 < flips else [7] for k in range(steps)]
        run = BatchRun(batch_size=1, steps=steps, warmup_steps=0, timer="perf_counter", setup_s=0, wall_s=1,
                       tok_per_s=1, gpu_ms_per_step=1, step_ms=[1.0], tokens=tokens, sha256="x", forced=True)
        result = RepeatResult(arm=name, repeat=0, environment={}, runs=[run])
        runs[name] = [with_disagreements(result, reference).runs[0] for _ in range(3)]
    return reference, runs


def test_disagreements_only_at_tiny_margins_are_noise_and_without_margins_the_count_rule_decides() -> None:
    _, runs = synthetic(margins=True)
    head = agreement(runs, "base", "ref").arm("head")
    assert head is not None and head.disagreements == [14] * 3 and head.confident == [0] * 3
    assert head.confident_compared == 20  # the odd steps: 2.0 / (1/32) = 64 ulps
    assert (head.output_changed, head.numerics_changed) == (False, True)
    _, counted = synthetic(margins=False)
    found = agreement(counted, "base", "ref")
    head = found.arm("head")
    assert found.margin_floor is None and head is not None and head.confident is None
    assert head.output_changed is True  # 13 more of 40 on average: past a quarter, the count rule's change


def test_a_workloads_margins_are_data_checked_and_bad_ones_lose_only_the_margins() -> None:
    good = ReferenceRun(batch_size=1, tokens=[[3]], sha256="", top_logits=[[[2.0, 1.0]]], logits_dtype="bfloat16")
    top, error = _top_logits([good])
    assert error is None and top is not None and top.batch_sizes[1] == [[(2.0, 1.0)]]
    assert _top_logits([ReferenceRun(batch_size=1, tokens=[[3]], sha256="")]) == (None, None)  # no step_logits()
    for bad in ([[[float("nan"), 1.0]]], [[[1.0, 2.0]]], [[[1e30, 1.0]]], [["x", 1.0]], {"a": 1}):
        top, error = _top_logits([replace(good, top_logits=bad)])
        assert top is None and error, bad
    assert _top_logits([replace(good, logits_dtype="int8")])[0] is None
    with pytest.raises(ValueError, match="one pair per id"):
        ReferenceTokens(source="t", batch_sizes={1: [[3], [4]]},
                        top_logits={"dtype": "float32", "batch_sizes": {1: [[(2.0, 1.0)]]}})


def test_the_comment_says_the_margin_rules_figures() -> None:
    from types import SimpleNamespace

    from guard.report._like_for_like import changed_text

    _, runs = synthetic(margins=True)
    found = agreement(runs, "base", "ref")
    head = found.arm("head")
    assert head is not None
    changed = head.model_copy(update={"confident": [3, 2, 4], "output_changed": True})
    words = changed_text(SimpleNamespace(base="base"), found, changed)  # type: ignore[arg-type]
    assert "more than 16 bfloat16 ulps" in words and "(3, 2, 4 of those 20 outputs, against 0, 0, 0 in base's" in words


@pytest.mark.parametrize("name", ["compiled", "hf"])
def test_the_built_in_workloads_give_the_logits_their_ids_were_chosen_from(name: str) -> None:
    from tests.test_workloads import make

    workload = make(name, dtype="bfloat16")
    workload.setup(2)
    forced = torch.tensor([5, 9])
    for tokens in (None, forced, None):
        ids = workload.step(tokens).tolist()
        logits = workload.step_logits()
        assert logits.dtype == torch.bfloat16 and tuple(logits.shape) == (2, 256)
        assert logits.argmax(-1).tolist() == ids


def test_a_stored_margin_agreement_is_judged_again_alike_and_an_edited_one_is_refused() -> None:
    from guard.compare._recheck import _agreement_again, _confident_shape

    _, runs = synthetic(margins=True)
    stored = agreement(runs, "base", "ref")
    assert _agreement_again(stored, "base") == stored
    head = stored.arm("head")
    assert head is not None and _confident_shape(stored, head, 1) == []
    for edit in ({"confident": None}, {"confident": [0, 0, 21]}, {"confident": [0, 15, 0]}, {"confident": [0]}):
        assert _confident_shape(stored, head.model_copy(update=edit), 1), edit
    counted = agreement(synthetic(margins=False)[1], "base", "ref")
    assert _confident_shape(counted, counted.arms[1].model_copy(update={"confident": [0, 0, 0]}), 1)
