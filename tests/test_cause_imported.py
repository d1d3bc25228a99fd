"""Graph splits in a module that a capturing torch.compile of another file traces, against real git
repositories made in tmp_path: the model in one file, the compiled decode step in another."""

from __future__ import annotations

from pathlib import Path

from guard.cause import CaptureChanges, GraphSplit
from guard.report._capture_text import capture_summary
from tests.conftest import git
from tests.test_cause_compile import changes_after, make_repo

MODEL = '''\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        x = self.proj(x)
        return x


class Transformer(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(Block(8) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def build_model(layers) -> Transformer:
    return Transformer(layers).eval()


def describe(model):
    return f"{len(model.layers)} layers"
'''

WORKLOAD = '''\
import torch

from engine.model import build_model


class Decode:
    def __init__(self, fullgraph=True):
        self.model = build_model(2)
        self.step = torch.compile(self._decode_one, mode="reduce-overhead", fullgraph=fullgraph)

    def _decode_one(self, x):
        return self.model(x).argmax(-1)
'''

BREAK_AFTER_LAYER = ("engine/model.py", "            x = layer(x)\n",
                     "            x = layer(x)\n            torch._dynamo.graph_break()\n")


def line_at(repo: Path, sha: str, name: str, text: str) -> int:
    lines = git(repo, "show", f"{sha}:{name}").split("\n")
    return next(n for n, line in enumerate(lines, start=1) if text in line)


def the_split(changes: CaptureChanges, path: str) -> GraphSplit:
    [change] = [c for c in changes.files if c.path == path]
    [split] = [s for h in change.hunks for s in h.splits]
    return split


def test_a_graph_break_added_in_the_forward_of_a_model_a_compiled_function_of_another_file_calls(tmp_path):
    repo, base = make_repo(tmp_path, {"engine/model.py": MODEL, "engine/workload.py": WORKLOAD})
    changes = changes_after(repo, base, BREAK_AFTER_LAYER,
                            ("engine/workload.py", "fullgraph=True):", "fullgraph=False):"))
    head = changes.head_sha

    assert [c.path for c in changes.files] == ["engine/model.py", "engine/workload.py"]
    line = line_at(repo, head, "engine/model.py", "graph_break()")
    [hunk] = changes.files[0].hunks
    assert hunk.range.as_tuple() == (line, line)
    assert hunk.matched_by == ["api", "imported-code"] and hunk.added_apis == ["torch._dynamo.graph_break"]
    split = hunk.splits[0]
    assert (split.api, split.side, split.line, split.function) == (
        "torch._dynamo.graph_break", "added", line, "Transformer.forward")
    assert (split.reachable, split.reason, split.site_path, split.through) == (
        "traced", None, "engine/workload.py", [])
    assert split.site.line == line_at(repo, head, "engine/workload.py", "torch.compile(")
    assert split.site.target == "Decode._decode_one" and split.site.mode == "reduce-overhead"
    assert split.import_line == line_at(repo, head, "engine/workload.py", "from engine.model import")
    # self.model = build_model(2), whose annotation says Transformer: its forward runs in _decode_one
    assert split.compiled_chain == ["Decode._decode_one"] and split.chain == ["Transformer.forward"]
    assert split.call_line == line_at(repo, head, "engine/workload.py", "self.model(x)")

    summary = capture_summary(changes)
    assert summary is not None and summary.startswith(
        f"CUDA graph capture changes in 2 files: `engine/model.py:{line}` (`Transformer.forward`) adds a "
        "`torch._dynamo.graph_break` call and edits `Transformer.forward` (called from `Decode._decode_one`, "
        f"`engine/workload.py:{split.call_line}`), traced by the `torch.compile` of `Decode._decode_one` in "
        f'`engine/workload.py` (line {split.site.line}, mode "reduce-overhead"); `engine/workload.py:')


def test_a_split_in_a_layer_the_imported_model_loops_over_and_in_a_module_it_imports_in_turn(tmp_path):
    layers = MODEL.split("class Transformer")[0]
    model = "import torch\nfrom torch import nn\n\nfrom engine.layers import Block\n\n\nclass Transformer" + \
        MODEL.split("class Transformer")[1]
    repo, base = make_repo(tmp_path, {"engine/layers.py": layers, "engine/model.py": model,
                                      "engine/workload.py": WORKLOAD})
    changes = changes_after(repo, base, ("engine/layers.py", "        x = self.proj(x)\n",
                                         "        x = torch.compiler.disable(self.proj)(x)\n"))

    split = the_split(changes, "engine/layers.py")
    assert (split.api, split.function, split.reachable) == ("torch.compiler.disable", "Block.forward", "traced")
    assert split.line == line_at(repo, changes.head_sha, "engine/layers.py", "disable(")
    assert split.site_path == "engine/workload.py" and split.through == ["engine/model.py"]
    assert split.chain == ["Transformer.forward", "Block.forward"]
    assert split.compiled_chain == ["Decode._decode_one"]


def test_removing_a_graph_break_from_the_imported_model_counts_with_its_line_in_the_merge_base(tmp_path):
    broken = MODEL.replace(BREAK_AFTER_LAYER[1], BREAK_AFTER_LAYER[2])
    repo, base = make_repo(tmp_path, {"engine/model.py": broken, "engine/workload.py": WORKLOAD})
    changes = changes_after(repo, base, ("engine/model.py", "            torch._dynamo.graph_break()\n", ""))

    [change] = changes.files
    [hunk] = change.hunks
    removed_at = line_at(repo, base, "engine/model.py", "graph_break()")
    assert hunk.range.deletion and hunk.range.start == removed_at - 1
    assert hunk.removed_apis == ["torch._dynamo.graph_break"] and hunk.added_apis == []
    [split] = hunk.splits
    assert (split.side, split.line, split.function, split.reachable) == (
        "removed", removed_at, "Transformer.forward", "traced")
    assert split.site.line == line_at(repo, base, "engine/workload.py", "torch.compile(")
    assert capture_summary(changes) == (
        f"`engine/model.py:{removed_at - 1}` (`Transformer.forward`, lines removed after line {removed_at - 1}) "
        "changes CUDA graph capture: it removes a `torch._dynamo.graph_break` call and edits `Transformer.forward` "
        f"(called from `Decode._decode_one`, `engine/workload.py:{split.call_line}`), traced by the "
        f'`torch.compile` of `Decode._decode_one` in `engine/workload.py` (line {split.site.line}, '
        'mode "reduce-overhead").')


def test_a_graph_break_in_a_module_no_compiling_file_imports_is_not_capture(tmp_path):
    tools = "import torch\n\n\ndef warm(model, x):\n    return model(x)\n"
    script = "from engine.model import build_model\nfrom engine.tools import warm\n\nwarm(build_model(2), None)\n"
    repo, base = make_repo(tmp_path, {"engine/model.py": MODEL, "engine/workload.py": WORKLOAD,
                                      "engine/tools.py": tools, "bench.py": script})
    changes = changes_after(repo, base, ("engine/tools.py", "    return model(x)\n",
                                         "    torch._dynamo.graph_break()\n    return model(x)\n"))
    assert changes.files == []  # bench.py imports it, and runs eagerly


def test_a_default_mode_compile_importing_the_module_does_not_reach_it(tmp_path):
    workload = WORKLOAD.replace('mode="reduce-overhead", ', "")
    repo, base = make_repo(tmp_path, {"engine/model.py": MODEL, "engine/workload.py": workload})
    assert changes_after(repo, base, BREAK_AFTER_LAYER).files == []


def test_a_split_the_calls_cannot_be_followed_to_is_possibly_traced_with_its_reason(tmp_path):
    # the compiled function takes the model as an unannotated argument: which class it is, the file does not say
    workload = '''\
import torch

from engine import model as model_lib


def decode_one(model, x):
    return model(x).argmax(-1)


decode = torch.compile(decode_one, mode="reduce-overhead")
MODEL = model_lib.build_model(2)
'''
    repo, base = make_repo(tmp_path, {"engine/model.py": MODEL, "engine/workload.py": workload})
    changes = changes_after(repo, base, BREAK_AFTER_LAYER)

    split = the_split(changes, "engine/model.py")
    assert (split.reachable, split.reason, split.function) == ("possibly", "imported-not-called", "Transformer.forward")
    assert split.import_line == line_at(repo, changes.head_sha, "engine/workload.py", "from engine import model")
    assert split.compiled_chain == [] and split.chain == [] and split.call_line is None
    summary = capture_summary(changes)
    assert summary is not None and summary.endswith(
        f'possibly traced by the `torch.compile` of `decode_one` in `engine/workload.py` (line {split.site.line}, '
        f'mode "reduce-overhead"): that file imports this module (line {split.import_line}), but no call from its '
        "compiled code into it could be followed.")


def test_a_split_in_a_def_the_followed_calls_do_not_reach_is_possibly_traced(tmp_path):
    repo, base = make_repo(tmp_path, {"engine/model.py": MODEL, "engine/workload.py": WORKLOAD})
    changes = changes_after(repo, base, ("engine/model.py", '    return f"{len(model.layers)} layers"\n',
                                         '    torch._dynamo.graph_break()\n    return f"{len(model.layers)} layers"\n'))
    split = the_split(changes, "engine/model.py")
    assert (split.function, split.reachable, split.reason) == ("describe", "possibly", "entered-elsewhere")


def test_a_module_level_disallow_in_graph_is_possibly_traced_wherever_the_module_is_imported(tmp_path):
    repo, base = make_repo(tmp_path, {"engine/model.py": MODEL, "engine/workload.py": WORKLOAD})
    changes = changes_after(repo, base, ("engine/model.py", "\n\ndef describe(model):",
                                         "\n\ntorch._dynamo.disallow_in_graph(build_model)\n\n\ndef describe(model):"))
    split = the_split(changes, "engine/model.py")
    assert (split.api, split.function, split.reachable, split.reason) == (
        "torch._dynamo.disallow_in_graph", None, "possibly", "module-level")


def test_a_relative_import_of_a_compiled_module_whole_and_a_disable_decorator(tmp_path):
    workload = ("import torch\n\nfrom .model import Transformer\n\n"
                "step = torch.compile(Transformer(2), mode='max-autotune')\n")
    repo, base = make_repo(tmp_path, {"engine/__init__.py": "", "engine/model.py": MODEL,
                                      "engine/workload.py": workload})
    forward = "    def forward(self, x):\n        x = self.proj"
    changes = changes_after(repo, base, ("engine/model.py", forward, "    @torch._dynamo.disable\n" + forward))
    split = the_split(changes, "engine/model.py")
    assert (split.api, split.function, split.reachable) == ("torch._dynamo.disable", "Block.forward", "traced")
    assert split.chain == ["Transformer.forward", "Block.forward"] and split.compiled_chain == []
    assert split.call_line == split.site.line == line_at(repo, changes.head_sha, "engine/workload.py", "torch.compile(")
