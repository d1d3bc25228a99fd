"""Capture-change detection for compiled engines, against real git repositories made in tmp_path.

Each test commits a base, edits it into a head, and asks find_capture_changes about the pair.
"""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from guard.cause import CaptureChanges, CaptureHunk, find_capture_changes
from guard.report._capture_text import capture_summary
from tests.conftest import commit_all, git
from tests.test_cause import edit

# The reference engine's compiled decoder, as the gpt-fast style workload spells it.
DECODER = '''\
import os

import torch
from torch import nn

COMPILE_MODE = os.environ.get("GUARD_COMPILE_MODE", "reduce-overhead")


class Layer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, pos):
        x = self.proj(x)
        return x


class CompiledDecoder:
    def __init__(self, mode: str | None = None, fullgraph: bool = True, layers: int = 2):
        self.mode = mode or COMPILE_MODE
        self.fullgraph = fullgraph
        self.embed = nn.Embedding(16, 8)
        self.layers = nn.ModuleList([Layer(8) for _ in range(layers)])
        self.head = nn.Linear(8, 16)
        self.steps = 0
        self._compile()

    def _compile(self):
        self._decode = torch.compile(self._decode_one, mode=self.mode, fullgraph=self.fullgraph)

    def _decode_one(self, tokens, pos):
        x = self.embed(tokens)
        for i, layer in enumerate(self.layers):
            x = layer(x, pos)
        return self.head(x).argmax(-1)

    def step(self, tokens, pos):
        self.steps += 1
        return self._decode(tokens, pos)

    def describe(self):
        return f"decoder with {len(self.layers)} layers"
'''


def make_repo(tmp_path: Path, files: dict[str, str]) -> tuple[Path, str]:
    """A repository whose main holds `files`, checked out on a new branch 'head'; (path, base sha)."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "--quiet", "--initial-branch=main")
    for name, text in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(dedent(text))
    base = commit_all(path, "base")
    git(path, "checkout", "--quiet", "-b", "head")
    return path, base


def changes_after(repo: Path, base: str, *edits: tuple[str, str, str]) -> CaptureChanges:
    for name, old, new in edits:
        edit(repo, name, old, new)
    head = commit_all(repo, "head")
    return find_capture_changes(repo, base, head, [])


def only_hunk(changes: CaptureChanges) -> CaptureHunk:
    hunks = [h for f in changes.files for h in f.hunks]
    assert len(hunks) == 1, [(f.path, h.range) for f in changes.files for h in f.hunks]
    return hunks[0]


def line_of(repo: Path, name: str, text: str) -> int:
    return next(n for n, line in enumerate((repo / name).read_text().split("\n"), start=1) if text in line)


# --- the reference engine's shapes ---------------------------------------------------------


def test_the_environment_default_of_the_compile_mode_changing_is_found_with_the_mode_before_and_after(tmp_path):
    repo, base = make_repo(tmp_path, {"decoder.py": DECODER})
    changes = changes_after(repo, base, ("decoder.py", '"GUARD_COMPILE_MODE", "reduce-overhead")',
                                         '"GUARD_COMPILE_MODE", "default")'))

    hunk = only_hunk(changes)
    assert hunk.range.as_tuple() == (6, 6)
    assert hunk.matched_by == ["capture-setting"]
    [setting] = hunk.settings
    assert (setting.name, setting.reader, setting.via, setting.argument) == (
        "COMPILE_MODE", "CompiledDecoder._compile", "self.mode", "mode")
    [reach] = hunk.compile
    assert reach.how == "argument" and reach.argument == "mode"
    assert (reach.mode_before, reach.mode_after) == ("reduce-overhead", "default")
    site = reach.head
    assert site is not None
    assert (site.caller, site.target, site.line) == ("CompiledDecoder._compile", "CompiledDecoder._decode_one",
                                                      line_of(repo, "decoder.py", "torch.compile("))
    assert (site.mode_source, site.env_var, site.mode_known, site.fullgraph) == (
        "environment", "GUARD_COMPILE_MODE", False, None)
    # a mode the environment can set is not fixed by the file: the site is capture code either way
    assert site.captures_graphs and reach.base is not None and reach.base.captures_graphs
    summary = capture_summary(changes)
    assert summary == (
        "`decoder.py:6` changes settings that CUDA graph capture reads: `COMPILE_MODE` (the `mode` of the "
        '`torch.compile` in `CompiledDecoder._compile` through `self.mode`: mode "reduce-overhead" -> "default").'
    )


def test_a_graph_break_added_in_the_compiled_function_is_found_and_names_the_compile_site(tmp_path):
    repo, base = make_repo(tmp_path, {"decoder.py": DECODER})
    changes = changes_after(repo, base, ("decoder.py", "            x = layer(x, pos)\n",
                                         "            x = layer(x, pos)\n            torch._dynamo.graph_break()\n"))

    hunk = only_hunk(changes)
    line = line_of(repo, "decoder.py", "graph_break()")
    assert hunk.range.as_tuple() == (line, line)
    assert hunk.matched_by == ["api", "compiled-code"]
    assert hunk.added_apis == ["torch._dynamo.graph_break"]
    assert hunk.function == "CompiledDecoder._decode_one"
    [reach] = hunk.compile
    assert (reach.how, reach.function, reach.chain) == (
        "compiled-code", "CompiledDecoder._decode_one", ["CompiledDecoder._decode_one"])
    assert reach.head is not None and reach.head.target == "CompiledDecoder._decode_one"
    compile_line = line_of(repo, "decoder.py", "torch.compile(")
    assert capture_summary(changes) == (
        f"`decoder.py:{line}` (`CompiledDecoder._decode_one`) changes CUDA graph capture: it adds a "
        "`torch._dynamo.graph_break` call and edits `CompiledDecoder._decode_one`, traced by the `torch.compile` of "
        f'`CompiledDecoder._decode_one` (line {compile_line}, mode from `GUARD_COMPILE_MODE`, default '
        '"reduce-overhead").'
    )


def test_a_graph_break_in_the_forward_of_a_layer_the_compiled_function_calls_is_found(tmp_path):
    repo, base = make_repo(tmp_path, {"decoder.py": DECODER})
    changes = changes_after(repo, base, ("decoder.py", "        x = self.proj(x)\n",
                                         "        x = self.proj(x)\n        torch._dynamo.graph_break()\n"))

    hunk = only_hunk(changes)
    assert hunk.function == "Layer.forward"
    assert hunk.added_apis == ["torch._dynamo.graph_break"]
    [reach] = hunk.compile
    assert reach.chain == ["CompiledDecoder._decode_one", "Layer.forward"]


FACTORY = '''\
import torch
from torch import nn


class Transformer(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def build_model(layers):
    with torch.device("meta"):
        model = Transformer(layers)
    model.to_empty(device="cpu")
    return model.eval().requires_grad_(False)


class Decode:
    def __init__(self):
        self.model = build_model(2)
        self._decode = torch.compile(self._decode_one, mode="reduce-overhead")

    def _decode_one(self, x):
        return self.model(x).argmax(-1)
'''


def test_a_graph_break_in_a_module_a_factory_of_the_file_builds_is_found(tmp_path):
    """`self.model = build_model(...)`: the compiled function calls a module whose class the
    factory's return value holds, through a chain of methods that return it."""
    repo, base = make_repo(tmp_path, {"decode.py": FACTORY})
    changes = changes_after(repo, base, ("decode.py", "            x = layer(x)\n",
                                         "            x = layer(x)\n            torch._dynamo.graph_break()\n"))
    hunk = only_hunk(changes)
    assert hunk.function == "Transformer.forward"
    assert hunk.added_apis == ["torch._dynamo.graph_break"]
    [reach] = hunk.compile
    assert reach.chain == ["Decode._decode_one", "Transformer.forward"]
    # and with the factory annotated instead: `-> Transformer`
    annotated = FACTORY.replace("def build_model(layers):", "def build_model(layers) -> Transformer:").replace(
        "    return model.eval().requires_grad_(False)", "    return model")
    (tmp_path / "annotated").mkdir()
    repo2, base2 = make_repo(tmp_path / "annotated", {"decode.py": annotated})
    changes = changes_after(repo2, base2, ("decode.py", "            x = layer(x)\n",
                                           "            x = layer(x)\n            torch._dynamo.graph_break()\n"))
    assert only_hunk(changes).compile[0].chain == ["Decode._decode_one", "Transformer.forward"]


def test_the_default_of_the_mode_parameter_and_the_attribute_it_is_stored_in_count(tmp_path):
    repo, base = make_repo(tmp_path, {"decoder.py": DECODER})
    changes = changes_after(repo, base, ("decoder.py", "mode: str | None = None,", 'mode: str | None = "default",'))
    [setting] = only_hunk(changes).settings
    assert (setting.name, setting.via, setting.argument) == ("mode=", "self.mode", "mode")

    git(repo, "checkout", "--quiet", "-b", "attr", base)
    changes = changes_after(repo, base, ("decoder.py", "self.mode = mode or COMPILE_MODE",
                                         'self.mode = mode or "max-autotune"'))
    hunk = only_hunk(changes)
    assert [s.name for s in hunk.settings] == ["self.mode"]
    assert hunk.compile[0].mode_after == "max-autotune"


def test_fullgraph_of_a_capturing_site_counts_and_edits_beside_the_compiled_code_do_not(tmp_path):
    repo, base = make_repo(tmp_path, {"decoder.py": DECODER})
    changes = changes_after(
        repo, base,
        ("decoder.py", "fullgraph: bool = True,", "fullgraph: bool = False,"),
        # step() calls the compiled function, but this line of it does not; describe() is not compiled
        ("decoder.py", "self.steps += 1", "self.steps += 2"),
        ("decoder.py", 'return f"decoder with', 'return f"a decoder with'),
    )
    hunk = only_hunk(changes)
    assert [(s.name, s.argument) for s in hunk.settings] == [("fullgraph=", "fullgraph")]


def test_changing_which_compiled_function_is_called_counts(tmp_path):
    repo, base = make_repo(tmp_path, {"decoder.py": DECODER})
    changes = changes_after(repo, base, ("decoder.py", "        return self._decode(tokens, pos)\n",
                                         "        return self._decode(tokens, pos + 1)\n"))
    hunk = only_hunk(changes)
    assert hunk.matched_by == ["compile"]
    [reach] = hunk.compile
    assert (reach.how, reach.function) == ("captured-call", "CompiledDecoder.step")


# --- where the mode comes from ---------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "old", "new", "name", "origin"),
    [
        ("""\
         import os
         import torch

         def build(step):
             mode = os.getenv("DECODE_MODE", "reduce-overhead")
             return torch.compile(step, mode=mode)
         """, '"reduce-overhead")', '"default")', "mode", "environment"),
        ("""\
         import torch

         COMPILE_MODE = "reduce-overhead"

         def build(step):
             return torch.compile(step, mode=COMPILE_MODE)
         """, 'COMPILE_MODE = "reduce-overhead"', 'COMPILE_MODE = "max-autotune-no-cudagraphs"', "COMPILE_MODE",
         "constant"),
        ("""\
         from dataclasses import dataclass

         import torch

         @dataclass
         class CompileConfig:
             mode: str = "reduce-overhead"
             fullgraph: bool = True

         def build(step, config: CompileConfig):
             return torch.compile(step, mode=config.mode)
         """, 'mode: str = "reduce-overhead"', 'mode: str = "default"', "CompileConfig.mode", "config"),
        ("""\
         import argparse
         import torch

         parser = argparse.ArgumentParser()
         parser.add_argument("--compile-mode", default="reduce-overhead")

         def build(step, args):
             return torch.compile(step, mode=args.compile_mode)
         """, 'default="reduce-overhead"', 'default="default"', "--compile-mode", "argument"),
    ],
    ids=["os.getenv in the function", "module constant", "config field", "argparse default"],
)
def test_a_mode_from_a_variable_is_followed_to_where_it_is_set(tmp_path, source, old, new, name, origin):
    repo, base = make_repo(tmp_path, {"engine.py": source})
    hunk = only_hunk(changes_after(repo, base, ("engine.py", old, new)))
    assert [s.name for s in hunk.settings] == [name]
    [reach] = hunk.compile
    assert reach.argument == "mode" and reach.base is not None and reach.head is not None
    assert reach.base.mode_source == origin
    assert reach.mode_before == "reduce-overhead" and reach.mode_after == new.split('"')[-2]


def test_a_kwargs_dict_holding_the_mode_counts(tmp_path):
    repo, base = make_repo(tmp_path, {"engine.py": """\
        import torch

        def build(step, device):
            if device == "cpu":
                kwargs = {}
            else:
                kwargs = {"mode": "reduce-overhead"}
            return torch.compile(step, fullgraph=True, **kwargs)
        """})
    hunk = only_hunk(changes_after(repo, base, ("engine.py", '{"mode": "reduce-overhead"}', '{"mode": "default"}')))
    assert [(s.name, s.argument) for s in hunk.settings] == [("kwargs", "**kwargs")]
    assert hunk.compile[0].base is not None and hunk.compile[0].base.captures_graphs


def test_a_compile_flag_that_decides_whether_the_capturing_compile_runs_counts(tmp_path):
    repo, base = make_repo(tmp_path, {"generate.py": """\
        import torch

        def decode_one_token(model, x):
            return model(x).argmax(-1)

        def main(compile: bool = True, steps: int = 10):
            global decode_one_token
            if compile:
                decode_one_token = torch.compile(decode_one_token, mode="reduce-overhead", fullgraph=True)
            print(steps)
        """})
    hunk = only_hunk(changes_after(repo, base, ("generate.py", "compile: bool = True", "compile: bool = False")))
    assert [(s.name, s.argument) for s in hunk.settings] == [("compile=", "condition")]


# --- forms of torch.compile ------------------------------------------------------------


def test_a_reduce_overhead_decorator_removed_and_an_edit_of_the_function_it_compiles(tmp_path):
    source = """\
        import torch
        from torch import nn

        class Experts(nn.Module):
            @torch.compile(mode="reduce-overhead", fullgraph=True)
            def forward(self, x):
                return x * 2

            def load(self, weights):
                return weights
        """
    repo, base = make_repo(tmp_path, {"moe.py": source})
    hunk = only_hunk(changes_after(repo, base, ("moe.py", "return x * 2", "return x * 3")))
    [reach] = hunk.compile
    assert (reach.how, reach.function) == ("compiled-code", "Experts.forward")
    assert reach.head is not None and (reach.head.form, reach.head.target) == ("decorator", "Experts.forward")

    git(repo, "checkout", "--quiet", "-b", "removed", base)
    changes = changes_after(repo, base, ("moe.py", '    @torch.compile(mode="reduce-overhead", fullgraph=True)\n', ""),
                            ("moe.py", "return weights", "return list(weights)"))
    hunk = only_hunk(changes)  # the decorator; load() is not compiled
    assert hunk.removed_apis == ['torch.compile(mode="reduce-overhead")']
    [reach] = hunk.compile
    assert reach.how == "call-site" and reach.head is None and reach.base is not None


def test_a_module_compiled_whole_counts_edits_of_its_forward(tmp_path):
    repo, base = make_repo(tmp_path, {"model.py": """\
        import torch
        from torch import nn

        class Transformer(nn.Module):
            def forward(self, x):
                return self.norm(x)

            def norm(self, x):
                return x / x.norm()

        def load():
            model = Transformer()
            return torch.compile(model, mode="max-autotune")
        """})
    hunk = only_hunk(changes_after(repo, base, ("model.py", "return x / x.norm()", "return x / (x.norm() + 1e-6)")))
    [reach] = hunk.compile
    assert reach.chain == ["Transformer.forward", "Transformer.norm"]
    assert reach.head is not None and reach.head.target == "Transformer.forward"


def test_a_module_function_the_compiled_decode_calls_counts(tmp_path):
    repo, base = make_repo(tmp_path, {"generate.py": """\
        import torch

        def sample(logits, temperature):
            return torch.argmax(logits / temperature, dim=-1)

        def decode_one_token(model, x, temperature):
            return sample(model(x), temperature)

        def prefill(model, x):
            return model(x)

        decode_one_token = torch.compile(decode_one_token, mode="reduce-overhead")
        prefill = torch.compile(prefill, dynamic=True)
        """})
    changes = changes_after(repo, base, ("generate.py", "logits / temperature", "logits / max(temperature, 1e-5)"),
                            # prefill is compiled without CUDA graphs: editing it is not capture
                            ("generate.py", "    return model(x)\n", "    return model(x).float()\n"))
    hunk = only_hunk(changes)
    assert hunk.compile[0].chain == ["decode_one_token", "sample"]


@pytest.mark.parametrize(
    ("call", "captures"),
    [
        ('torch.compile(step, options={"triton.cudagraphs": True})', True),
        ('torch.compile(step, mode="reduce-overhead", options={"triton.cudagraphs": False})', False),
        ('torch.compile(step, backend="cudagraphs")', True),
        ('torch.compile(step, backend="inductor")', False),
        ('torch.compile(step, mode="max-autotune-no-cudagraphs")', False),
        ("torch.compile(step)", False),
    ],
)
def test_options_and_backend_decide_whether_the_compiled_code_is_captured(tmp_path, call, captures):
    repo, base = make_repo(tmp_path, {"engine.py": f"""\
        import torch

        def step(x):
            return x + 1

        run = {call}
        """})
    changes = changes_after(repo, base, ("engine.py", "return x + 1", "return x + 2"))
    assert bool(changes.files) is captures


def test_changing_the_options_of_a_compile_call_counts(tmp_path):
    repo, base = make_repo(tmp_path, {"engine.py": """\
        import torch

        def step(x):
            return x + 1

        run = torch.compile(step, options={"triton.cudagraphs": True})
        """})
    hunk = only_hunk(changes_after(repo, base, ("engine.py", '"triton.cudagraphs": True', '"triton.cudagraphs": 0')))
    [reach] = hunk.compile
    assert reach.how == "call-site"
    assert reach.base is not None and reach.base.cudagraphs_option is True
    assert reach.head is not None and reach.head.cudagraphs_option is False and not reach.head.captures_graphs


@pytest.mark.parametrize("argument", ["fullgraph=True", "dynamic=True"])
def test_fullgraph_or_dynamic_added_to_a_default_mode_compile_is_not_capture(tmp_path, argument):
    repo, base = make_repo(tmp_path, {"engine.py": """\
        import torch

        def step(x):
            return x + 1

        run = torch.compile(step, mode="default")
        """})
    changes = changes_after(repo, base, ("engine.py", 'mode="default")', f'mode="default", {argument})'))
    assert changes.files == []


def test_fullgraph_and_dynamic_of_a_capturing_compile_count(tmp_path):
    repo, base = make_repo(tmp_path, {"engine.py": """\
        import torch

        def step(x):
            return x + 1

        run = torch.compile(step, mode="reduce-overhead", fullgraph=False)
        """})
    hunk = only_hunk(changes_after(repo, base, ("engine.py", "fullgraph=False)", "fullgraph=True, dynamic=False)")))
    reach = hunk.compile[0]
    assert (reach.base.fullgraph, reach.head.fullgraph, reach.head.dynamic) == (False, True, False)  # type: ignore[union-attr]


# --- negatives ---------------------------------------------------------------------------


def test_an_unchanged_default_mode_compile_and_an_unrelated_edit_elsewhere_is_not_capture(tmp_path):
    repo, base = make_repo(tmp_path, {"engine.py": """\
        import torch

        LOG_EVERY = 10

        def step(x):
            return x + 1

        def main():
            run = torch.compile(step, mode="default")
            print(LOG_EVERY)
            return run
        """})
    changes = changes_after(repo, base, ("engine.py", "LOG_EVERY = 10", "LOG_EVERY = 20"),
                            ("engine.py", "return x + 1", "return x + 2"))
    assert changes.files == []
    assert changes.changed_files == ["engine.py"]


def test_edits_in_a_def_that_calls_a_capturing_compile_count_only_at_the_call(tmp_path):
    repo, base = make_repo(tmp_path, {"generate.py": """\
        import torch

        def decode_one_token(model, x):
            return model(x)

        def main(prompts, steps):
            if not isinstance(prompts, list):
                prompts = [prompts]
            global decode_one_token
            decode_one_token = torch.compile(decode_one_token, mode="reduce-overhead")
            return prompts
        """})
    changes = changes_after(repo, base, ("generate.py", "(prompts, list)", "(prompts, (list, tuple))"))
    assert changes.files == []


def test_a_graph_break_in_a_function_that_is_never_compiled_is_not_capture(tmp_path):
    repo, base = make_repo(tmp_path, {"engine.py": """\
        import torch

        def step(x):
            return x + 1

        def eager_step(x):
            return x * 2

        run = torch.compile(step, mode="reduce-overhead")
        """})
    changes = changes_after(repo, base, ("engine.py", "    return x * 2\n",
                                         "    torch._dynamo.graph_break()\n    return x * 2\n"))
    assert changes.files == []


def test_setting_an_attribute_of_torch_does_not_assign_torch(tmp_path):
    repo, base = make_repo(tmp_path, {"generate.py": """\
        import torch

        torch._inductor.config.fx_graph_cache = False

        def main():
            torch.profiler._utils._init_for_cuda_graphs()
        """})
    changes = changes_after(repo, base, ("generate.py", "fx_graph_cache = False", "fx_graph_cache = True"))
    assert changes.files == []  # main() reads `torch`, but the line sets an inductor cache option


def test_compile_words_in_prose_are_not_capture(tmp_path):
    repo, base = make_repo(tmp_path, {"README.md": "# Engine\n\nRuns eagerly.\n"})
    changes = changes_after(repo, base, ("README.md", "Runs eagerly.",
                                         'Set `mode="reduce-overhead"`; a `torch._dynamo.graph_break()` splits the '
                                         "graph; `--enforce-eager` and `torch._inductor.config.triton.cudagraphs`."))
    assert changes.files == []


# --- settings and APIs --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "api"),
    [
        ("x = step(x)", "torch.compiler.cudagraph_mark_step_begin()\nx = step(x)",
         "torch.compiler.cudagraph_mark_step_begin"),
        ("x = step(x)", "torch._inductor.config.triton.cudagraphs = False\nx = step(x)",
         "torch._inductor.config.triton.cudagraphs"),
        ("x = step(x)", 'with torch._inductor.config.patch({"triton.cudagraph_trees": False}):\n    x = step(x)',
         "torch._inductor.config.triton.cudagraph_trees"),
        ("x = step(x)", "torch._dynamo.config.capture_scalar_outputs = True\nx = step(x)",
         "torch._dynamo.config.capture_scalar_outputs"),
        ("x = step(x)", "torch._dynamo.config.cache_size_limit = 64\nx = step(x)",
         "torch._dynamo.config.cache_size_limit"),
    ],
    ids=["mark step", "inductor assignment", "inductor patch", "dynamo capture", "dynamo limit"],
)
def test_compile_settings_that_change_graphs_count_anywhere(tmp_path, old, new, api):
    repo, base = make_repo(tmp_path, {"run.py": "import torch\n\nx = step(x)\n"})
    hunk = only_hunk(changes_after(repo, base, ("run.py", old, new)))
    assert hunk.added_apis == [api]


def test_an_inductor_setting_that_does_not_touch_graphs_is_not_capture(tmp_path):
    setting = "torch._inductor.config.coordinate_descent_tuning = True\n"
    repo, base = make_repo(tmp_path, {"run.py": "import torch\n\n" + setting})
    changes = changes_after(repo, base, ("run.py", "tuning = True", "tuning = False"))
    assert changes.files == []


@pytest.mark.parametrize(
    ("name", "old", "new", "found"),
    [
        ("bench.py", "LLM(path, enforce_eager=False, tensor_parallel_size=1)",
         "LLM(path, enforce_eager=True, tensor_parallel_size=1)", ["enforce_eager"]),
        # the setting is on the changed line, with the value it had
        ("bench.py", "LLM(path, enforce_eager=False, tensor_parallel_size=1)",
         "LLM(path, enforce_eager=False, tensor_parallel_size=2)", []),
        ("serve.sh", "--model m", "--model m --enforce-eager", ["enforce_eager"]),
        ("serve.sh", "--model m", "--model m --cuda-graph-max-bs 16", ["cuda-graph"]),
        ("engine.py", "eager_mode = False", "eager_mode = True", ["eager_mode"]),
        ("engine.py", "graph_max_batch_size = 16", "graph_max_batch_size = 32", ["graph_max_batch_size"]),
    ],
    ids=["vllm enforce_eager", "enforce_eager kept", "cli flag", "sglang cli size", "lmdeploy", "lightllm"],
)
def test_engine_graph_settings_count_when_their_value_changes(tmp_path, name, old, new, found):
    files = {
        "bench.py": "from vllm import LLM\n\nllm = LLM(path, enforce_eager=False, tensor_parallel_size=1)\n",
        "serve.sh": "python -m server --model m\n",
        "engine.py": "eager_mode = False\ngraph_max_batch_size = 16\n",
    }
    repo, base = make_repo(tmp_path, files)
    changes = changes_after(repo, base, (name, old, new))
    assert [a for f in changes.files for h in f.hunks for a in h.added_apis] == found


def test_a_def_that_calls_a_capture_def_counts_only_at_that_call_and_its_condition(tmp_path):
    repo, base = make_repo(tmp_path, {"runner.py": """\
        class ModelRunner:
            def __init__(self, config):
                self.config = config
                self.block_size = config.block_size
                if not config.enforce_eager:
                    self.capture_cudagraph()

            def capture_cudagraph(self):
                pass
        """})
    assert changes_after(repo, base, ("runner.py", "self.block_size = config.block_size",
                                      "self.block_size = config.block_size * 2")).files == []
    git(repo, "checkout", "--quiet", "-b", "condition", base)
    hunk = only_hunk(changes_after(repo, base, ("runner.py", "if not config.enforce_eager:",
                                                "if not config.enforce_eager and config.graphs:")))
    assert hunk.scope_apis == ["capture_cudagraph"]
