"""The built-in workloads on a CPU: through the harness, forced and free-running, against a
reference decode without a KV cache, and the errors a user can hit."""

from __future__ import annotations

import ast
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from guard.workloads import compiled

REPO_ROOT = Path(__file__).resolve().parents[1]
HARNESS = REPO_ROOT / "guard" / "harness" / "run.py"
SMOKE = REPO_ROOT / "benchmarks" / "workloads_smoke.py"
TINY: dict[str, Any] = {"layers": 2, "d_model": 64, "n_heads": 4, "ffn": 128, "vocab": 256, "max_len": 128}
WORKLOADS = ["compiled", "hf"]
STEPS, WARMUP = 8, 3


def make(name: str, **options: Any) -> Any:
    return importlib.import_module(f"guard.workloads.{name}").make(**(TINY | options))


def decode(workload: Any, schedule: list[torch.Tensor | None]) -> list[list[int]]:
    """One step per entry: forced by the ids given, free-running where None."""
    return [workload.step(tokens).tolist() for tokens in schedule]


def random_ids(steps: int, batch_size: int, seed: int, vocab: int = TINY["vocab"]) -> torch.Tensor:
    return torch.randint(vocab, (steps, batch_size), generator=torch.Generator().manual_seed(seed))


def run_harness(tmp_path: Path, name: str, entry: str, options: dict[str, Any], root: Path = REPO_ROOT,
                env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    spec = {"entry": entry, "root": str(root), "options": options, "batch_sizes": [1, 2], "steps": STEPS,
            "warmup_steps": WARMUP, "arm": "base", "repeat": 0}
    (tmp_path / f"{name}.spec.json").write_text(json.dumps(spec))
    out = tmp_path / f"{name}.json"
    proc = subprocess.run([sys.executable, str(HARNESS), str(tmp_path / f"{name}.spec.json"), str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    return proc.returncode, json.loads(out.read_text()) if out.exists() else {}, proc.stderr


@pytest.fixture(scope="module")
def harness_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[int, dict[str, Any], str]]]:
    """Two fresh harness processes per workload, with the protocol's step() without arguments."""
    tmp = tmp_path_factory.mktemp("workloads")
    return {
        name: [run_harness(tmp, f"{name}{i}", f"guard.workloads.{name}:make", TINY) for i in range(2)]
        for name in WORKLOADS
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", WORKLOADS)
def test_the_harness_runs_each_workload_free_running(name: str, harness_runs: dict) -> None:
    runs = harness_runs[name]
    for rc, result, stderr in runs:
        assert rc == 0, stderr
        assert [run["batch_size"] for run in result["runs"]] == [1, 2]
        for run in result["runs"]:
            tokens = run["tokens"]
            assert len(tokens) == WARMUP + STEPS and all(len(row) == run["batch_size"] for row in tokens)
            assert all(0 <= t < TINY["vocab"] for row in tokens for t in row)
            assert len({tuple(row) for row in tokens}) > 1  # it generates, not a constant
            described = run["workload"]
            assert described["engine"] == f"guard.workloads.{name}"
            assert (described["device"], described["dtype"]) == ("cpu", "bfloat16")
            assert described["compiled"] is False and described["cuda_graphs"] is False
            assert described["layers"] == TINY["layers"] and described["max_len"] == TINY["max_len"]
    # two fresh processes: the same weights, so the same tokens
    (_, first, _), (_, second, _) = runs
    for a, b in zip(first["runs"], second["runs"]):
        assert a["workload"]["weights_checksum"] == b["workload"]["weights_checksum"]
        assert a["sha256"] == b["sha256"]


@pytest.mark.slow
@pytest.mark.parametrize("name", WORKLOADS)
def test_the_harness_tokens_are_those_decoded_in_this_process(name: str, harness_runs: dict) -> None:
    _, result, _ = harness_runs[name][0]
    workload = make(name)
    for run in result["runs"]:
        workload.setup(run["batch_size"])
        assert decode(workload, [None] * (WARMUP + STEPS)) == run["tokens"]
    assert result["runs"][0]["workload"]["weights_checksum"] == workload.describe()["weights_checksum"]


@pytest.mark.parametrize("name", WORKLOADS)
@pytest.mark.parametrize("batch_size", [1, 3])
def test_forcing_its_own_sequence_reproduces_free_running(name: str, batch_size: int) -> None:
    workload = make(name)  # bfloat16, the default
    workload.setup(batch_size)
    first = workload.last.clone()
    free = decode(workload, [None] * 40)
    workload.setup(batch_size)
    inputs = torch.tensor([first.tolist(), *free[:-1]])
    assert decode(workload, list(inputs)) == free
    # the caller's tensor was copied, not kept: changing it now changes nothing
    workload.setup(batch_size)
    forced = decode(workload, list(inputs[:5]))
    inputs.zero_()
    assert forced + decode(workload, [None] * 5) == free[:10]


def reference_decode(model: Any, prompt: torch.Tensor, schedule: list[torch.Tensor | None]) -> list[list[int]]:
    """Greedy decode by full forwards over the whole sequence, without a KV cache."""
    with torch.no_grad():
        seq = prompt
        last = model(input_ids=seq, use_cache=False).logits[:, -1].argmax(-1)
        outputs = []
        for tokens in schedule:
            seq = torch.cat([seq, (last if tokens is None else tokens)[:, None]], dim=1)
            last = model(input_ids=seq, use_cache=False).logits[:, -1].argmax(-1)
            outputs.append(last.tolist())
    return outputs


@pytest.mark.parametrize("name", WORKLOADS)
def test_forced_outputs_follow_the_forced_ids(name: str) -> None:
    """Against transformers' Llama decoding without a cache: the compiled model lays out its
    parameters in Llama's order, so the same seed gives it the same weights."""
    batch_size = 2
    workload = make(name, dtype="float32")
    reference = make("hf", dtype="float32").model
    prompt = compiled.seeded_prompt(batch_size, 32, TINY["vocab"], seed=0)
    forced = random_ids(16, batch_size, seed=1)
    schedule = [*forced[:8], *[None] * 8, *forced[8:]]
    workload.setup(batch_size)
    outputs = decode(workload, schedule)
    assert outputs == reference_decode(reference, prompt, schedule)
    workload.setup(batch_size)
    free = decode(workload, [None] * len(schedule))
    assert free == reference_decode(reference, prompt, [None] * len(schedule))
    changed = sum(a != b for row, free_row in zip(outputs, free) for a, b in zip(row, free_row))
    assert changed > len(schedule) * batch_size // 2  # other inputs, other outputs


@pytest.mark.slow
@pytest.mark.parametrize("name", WORKLOADS)
def test_the_compiled_path_decodes_as_the_eager_one(name: str) -> None:
    """torch.compile on a CPU (inductor, no graphs), whole-graph: the decode step has no graph break."""
    eager = make(name, dtype="float32")
    built = make(name, dtype="float32", mode="default", fullgraph=True, compile_on_cpu=True)
    assert built.describe()["compiled"] is True and built.describe()["cuda_graphs"] is False
    for batch_size in (1, 2, 1):  # a second batch size compiles a second graph; the first is kept
        eager.setup(batch_size)
        built.setup(batch_size)
        schedule = [None] * 6 + list(random_ids(6, batch_size, seed=batch_size))
        assert decode(built, schedule) == decode(eager, schedule)


@pytest.mark.parametrize("name", WORKLOADS)
def test_decoding_past_max_len_is_a_clear_error(name: str) -> None:
    workload = make(name, max_len=40, prompt_len=32)
    for _ in range(2):  # setup starts again from the prompt
        workload.setup(1)
        decode(workload, [None] * 8)
        with pytest.raises(RuntimeError, match="decoded past max_len=40.*pass a larger max_len"):
            workload.step()


@pytest.mark.parametrize("name", WORKLOADS)
def test_forced_ids_of_the_wrong_shape_are_refused(name: str) -> None:
    workload = make(name)
    workload.setup(2)
    with pytest.raises(ValueError, match=r"expected 2 ids, got shape \(3,\)"):
        workload.step(torch.zeros(3, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="setup"):
        make(name).step()


COMMON_BAD = [
    ({"mode": "whole"}, "mode must be one of reduce-overhead, default"),
    ({"dtype": "int8"}, "dtype must be one of bfloat16, float16, float32"),
    ({"prompt_len": 128}, r"prompt_len \(128\) must be less than max_len \(128\)"),
    ({"seed": -1}, "seed must be an integer of 0 or more"),
    ({"device": "tpu:0"}, "device must name a torch device"),
]


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [("compiled", o, m) for o, m in COMMON_BAD] + [("hf", o, m) for o, m in COMMON_BAD] + [
        ("compiled", {"layer": 2}, "unknown option.*layer; its options are layers, d_model"),
        ("compiled", {"layers": 0}, "layers must be a positive integer, not 0"),
        ("compiled", {"d_model": 60, "n_heads": 8}, r"d_model \(60\) must be n_heads \(8\) times an even head size"),
        ("compiled", {"d_model": 12, "n_heads": 4}, "even head size"),
        ("hf", {"nlayers": 2}, "unknown option.*nlayers; its options are model, config"),
        ("hf", {"model": "no/such/dir"}, "no local model directory with a config.json.*nothing is downloaded"),
        ("hf", {"config": "llama"}, "config must be a table of config keys"),
        ("hf", {"model_type": "no-such-model"}, "model_type 'no-such-model'"),
        ("hf", {"max_len": 4096, "config": {"max_position_embeddings": 2048}}, "max_position_embeddings"),
        ("hf", {"config": {"sliding_window": 16}, "model_type": "mistral"}, "sliding-window"),
    ],
)
def test_bad_options_are_value_errors_that_say_what_to_change(name: str, options: dict, message: str) -> None:
    module = importlib.import_module(f"guard.workloads.{name}")
    with pytest.raises(ValueError, match=message):
        module.make(**(options if "model" in options else TINY | options))  # a model directory has its sizes


def test_a_model_directory_and_size_options_together_are_refused(tmp_path: Path) -> None:
    make("hf").model.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="not both"):
        make("hf", model=str(tmp_path))  # TINY's sizes come along


def test_a_local_model_directory_decodes_as_the_model_it_holds(tmp_path: Path) -> None:
    built = make("hf", dtype="float32")
    built.model.save_pretrained(tmp_path / "tiny")
    hf = importlib.import_module("guard.workloads.hf")
    loaded = hf.make(model=str(tmp_path / "tiny"), dtype="float32", max_len=TINY["max_len"])
    assert loaded.describe()["model"] == str(tmp_path / "tiny")
    assert loaded.describe()["weights_checksum"] == built.describe()["weights_checksum"]
    for workload in (built, loaded):
        workload.setup(2)
    assert decode(loaded, [None] * 12) == decode(built, [None] * 12)


@pytest.mark.slow
def test_the_mode_default_comes_from_guard_compile_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    code = "from guard.workloads.compiled import make; print(make(layers=1, d_model=32, vocab=64).mode)"
    env = os.environ | {"GUARD_COMPILE_MODE": "default"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "default", proc.stderr
    monkeypatch.setattr(compiled, "COMPILE_MODE", "fastest")
    with pytest.raises(ValueError, match="not 'fastest' .the default comes from GUARD_COMPILE_MODE"):
        make("compiled")
    assert make("compiled", mode="none").mode == "none"  # an explicit mode wins


def test_the_weights_checksum_sees_the_seed_and_a_single_changed_weight() -> None:
    first = make("compiled")
    assert make("compiled").describe()["weights_checksum"] == first.describe()["weights_checksum"]
    assert make("compiled", seed=1).describe()["weights_checksum"] != first.describe()["weights_checksum"]
    bits = [(name, p.clone()) for name, p in first.model.named_parameters()]
    _, tensor = bits[3]  # a bfloat16 matrix: one weight moved by one unit in the last place
    tensor.view(torch.int16).view(-1)[7] += 1
    assert compiled.weights_checksum(bits) != first.describe()["weights_checksum"]
    json.dumps(first.describe())  # JSON-able, for report.json


def test_the_prompt_of_a_row_does_not_depend_on_the_batch_size() -> None:
    three = compiled.seeded_prompt(3, 32, 1000, seed=0)
    assert torch.equal(compiled.seeded_prompt(1, 32, 1000, seed=0), three[:1])
    assert not torch.equal(three[0], three[1])
    assert not torch.equal(compiled.seeded_prompt(1, 32, 1000, seed=1), three[:1])


def test_a_bad_option_reaches_the_harness_result_as_a_message(tmp_path: Path) -> None:
    rc, result, _ = run_harness(tmp_path, "bad", "guard.workloads.compiled:make", TINY | {"mode": "fast"})
    assert rc == 3
    assert result["error"]["stage"] == "make" and result["error"]["type"] == "ValueError"
    assert "mode must be one of" in result["error"]["message"]


@pytest.mark.slow
def test_compiled_is_one_file_of_stdlib_and_torch_that_runs_alone(tmp_path: Path) -> None:
    """Validation copies it into a throwaway repository and edits its mode line there."""
    source = (REPO_ROOT / "guard" / "workloads" / "compiled.py").read_text()
    assert 'COMPILE_MODE = os.environ.get("GUARD_COMPILE_MODE", "reduce-overhead")' in source
    assert "self.mode = mode or COMPILE_MODE" in source
    assert "self._decode = torch.compile(self._decode_one, mode=self.mode, fullgraph=self.fullgraph)" in source
    shutil.copy(REPO_ROOT / "guard" / "workloads" / "compiled.py", tmp_path / "decode.py")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    rc, result, stderr = run_harness(tmp_path, "alone", "decode.py:make", TINY, root=tmp_path, env=env)
    assert rc == 0, stderr
    assert result["runs"][0]["workload"]["engine"] == "guard.workloads.compiled"


@pytest.mark.parametrize(("module", "allowed"), [("compiled", {"torch"}), ("hf", {"torch", "transformers"})])
def test_the_workloads_import_only_what_an_arm_environment_has(module: str, allowed: set[str]) -> None:
    tree = ast.parse((REPO_ROOT / "guard" / "workloads" / f"{module}.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add((node.module or "").split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            assert module == "hf" and node.module == "compiled", "hf may import only its sibling, compiled"
    assert imported - sys.stdlib_module_names - {"__future__"} <= allowed


@pytest.mark.slow
def test_the_smoke_script_runs_on_a_cpu(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SMOKE), "--out", str(tmp_path), "--cases", "compiled:none,hf:none", "--steps", "8",
         "--batch-size", "2", "--options", json.dumps(TINY)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((tmp_path / "smoke.json").read_text())
    assert [case["case"] for case in summary["cases"]] == ["compiled-none", "hf-none"]
    for case in summary["cases"]:
        assert case["free"]["timer"] == "perf_counter" and case["forced_self_disagreements"] == 0
        assert [r["free_disagreements"] for r in case["replays"]] == [0, 0]
        assert [r["forced_disagreements"] for r in case["replays"]] == [0, 0]
        assert all(r["prefill_agrees"] for r in case["replays"])
    assert "compiled-none | eager" in proc.stdout
