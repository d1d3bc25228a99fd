"""Capture-change detection against real git repositories made in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from guard._errors import GitError, GuardError
from guard.cause import (
    CaptureChange,
    CaptureChanges,
    LineRange,
    find_capture_changes,
    location,
)
from guard.report._capture_text import capture_summary
from tests.conftest import commit_all, git

ENGINE = '''\
"""A small engine whose decode step is captured into CUDA graphs."""

import torch

LOG_EVERY = 10


class Engine:
    def __init__(self, model):
        self.model = model
        self.graphs = {}
        self.graph_cache = {}

    def prefill(self, tokens):
        out = self.model(tokens)
        return out

    def capture(self, batch_size):
        graph = torch.cuda.CUDAGraph()
        static = torch.zeros(batch_size)
        with torch.cuda.graph(graph):
            out = self.model(static)
        graph.replay()
        self.graphs[batch_size] = graph
        return out

    def _upload_graph(self, graph, stream):
        stream.synchronize()
'''


@pytest.fixture()
def repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose first commit on main holds engine.py; returns (path, base sha)."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "--quiet", "--initial-branch=main")
    (path / "engine.py").write_text(ENGINE)
    base = commit_all(path, "engine")
    git(path, "checkout", "--quiet", "-b", "head")
    return path, base


def edit(repo: Path, name: str, old: str, new: str) -> None:
    target = repo / name
    text = target.read_text()
    assert old in text, f"{old!r} not in {name}"
    target.write_text(text.replace(old, new, 1))


def line_of(repo: Path, sha: str, name: str, text: str) -> int:
    """1-based line of the first line containing `text` in `name` at `sha`."""
    lines = git(repo, "show", f"{sha}:{name}").splitlines()
    return next(number for number, line in enumerate(lines, start=1) if text in line)


def only(changes: CaptureChanges) -> CaptureChange:
    assert len(changes.files) == 1, [f.path for f in changes.files]
    return changes.files[0]


def test_edit_inside_a_function_that_captures_is_found_with_its_head_lines_and_function(repo):
    path, base = repo
    edit(path, "engine.py", "            out = self.model(static)\n",
         "            out = self.model(static, use_cache=True)\n            out = out.float()\n")
    head = commit_all(path, "capture with the cache on")

    change = only(find_capture_changes(path, base, head, []))

    first = line_of(path, head, "engine.py", "use_cache=True")
    assert change.path == "engine.py"
    assert change.ranges == [(first, first + 1)]
    assert change.hunks[0].function == "Engine.capture"
    assert change.matched_by == ["api"]
    # the lines name no API; the def they sit in calls torch.cuda.graph
    assert change.hunks[0].added_apis == [] and "torch.cuda.graph" in change.hunks[0].scope_apis
    assert change.excerpts[:2] == [
        "-            out = self.model(static)",
        "+            out = self.model(static, use_cache=True)",
    ]


def test_added_cugraphupload_call_is_named_like_the_reference_issue(repo):
    path, base = repo
    edit(path, "engine.py", "        stream.synchronize()\n",
         "        cuda.cuGraphUpload(graph.raw_exec, stream.cuda_stream)\n        stream.synchronize()\n")
    head = commit_all(path, "upload graphs at capture")

    changes = find_capture_changes(path, base, head, [])
    change = only(changes)

    line = line_of(path, head, "engine.py", "cuGraphUpload")
    assert change.hunks[0].range == LineRange(start=line, end=line)
    assert change.hunks[0].added_apis == ["cuGraphUpload"]
    assert change.hunks[0].function == "Engine._upload_graph"
    assert capture_summary(changes) == (
        f"`engine.py:{line}` (`Engine._upload_graph`) changes CUDA graph capture: it adds a `cuGraphUpload` call."
    )


def test_change_beside_capture_code_that_does_not_touch_it_is_not_found(repo):
    path, base = repo
    edit(path, "engine.py", "        out = self.model(tokens)\n", "        out = self.model(tokens).float()\n")
    edit(path, "engine.py", "LOG_EVERY = 10\n", "LOG_EVERY = 20\n")
    edit(path, "engine.py", "        self.graph_cache = {}\n", "        self.graph_cache = dict()\n")
    head = commit_all(path, "prefill in float, log less")

    changes = find_capture_changes(path, base, head, [])

    assert changes.files == []
    assert changes.changed_files == ["engine.py"]
    assert capture_summary(changes) is None


def test_a_file_matched_by_a_capture_glob_counts_by_glob(repo):
    path, base = repo
    (path / "kernels").mkdir()
    (path / "kernels" / "decode_step.cu").write_text("__global__ void step(float* x) {\n  x[0] = 1.0f;\n}\n")
    head = commit_all(path, "a kernel")

    assert find_capture_changes(path, base, head, []).files == []  # its lines name no graph API
    change = only(find_capture_changes(path, base, head, ["kernels/**/*.cu"]))

    assert change.path == "kernels/decode_step.cu"
    assert change.status == "added"
    assert change.glob == "kernels/**/*.cu"
    assert change.matched_by == ["glob"]
    assert change.ranges == [(1, 3)]


def test_computation_graph_comments_and_other_graphs_are_not_capture(repo):
    path, base = repo
    (path / "analysis.py").write_text(
        "import networkx as nx\n\n\n"
        "def build(model):\n"
        "    # walk the computation graph of the model once\n"
        "    graph = nx.DiGraph()\n"
        "    graph.add_edge('embed', 'head')\n"
        "    return graph\n"
    )
    # a comment in a capture function changes nothing that runs
    edit(path, "engine.py", "        with torch.cuda.graph(graph):\n",
         "        # the computation graph is recorded here\n        with torch.cuda.graph(graph):\n")
    head = commit_all(path, "graph analysis")

    changes = find_capture_changes(path, base, head, [])

    assert changes.files == []
    assert sorted(changes.changed_files) == ["analysis.py", "engine.py"]


def test_a_deleted_capture_line_is_found_where_the_deletion_sits(repo):
    path, base = repo
    edit(path, "engine.py", "        graph.replay()\n", "")
    head = commit_all(path, "no warm replay")

    change = only(find_capture_changes(path, base, head, []))

    before = line_of(path, head, "engine.py", "out = self.model(static)")
    hunk = change.hunks[0]
    assert hunk.range == LineRange(start=before, end=before, deletion=True)
    assert hunk.removed_apis == ["graph.replay"] and hunk.added_apis == []
    assert hunk.base_start == line_of(path, base, "engine.py", "graph.replay()")
    assert hunk.function == "Engine.capture"
    assert location(change, change.ranges[0]) == f"`engine.py:{before}` (lines removed after line {before})"


def test_a_renamed_file_reports_its_new_path_and_head_lines(repo):
    path, base = repo
    (path / "runtime").mkdir()
    git(path, "mv", "engine.py", "runtime/engine core.py")
    edit(path, "runtime/engine core.py", "        static = torch.zeros(batch_size)\n",
         "        static = torch.zeros(batch_size, device='cuda')\n")
    head = commit_all(path, "move the engine")

    changes = find_capture_changes(path, base, head, [])
    change = only(changes)

    line = line_of(path, head, "runtime/engine core.py", "device='cuda'")
    assert (change.path, change.old_path, change.status) == ("runtime/engine core.py", "engine.py", "renamed")
    assert change.ranges == [(line, line)]
    assert change.hunks[0].function == "Engine.capture"
    assert changes.changed_files == ["runtime/engine core.py"]


def test_torch_compile_reduce_overhead_counts(repo):
    path, base = repo
    (path / "compiled.py").write_text(
        "import torch\n\n\n"
        "def compile_step(step):\n"
        "    return torch.compile(\n"
        "        step,\n"
        "        mode='reduce-overhead',\n"
        "    )\n"
    )
    head = commit_all(path, "compile the decode step")

    change = only(find_capture_changes(path, base, head, []))

    assert change.status == "added"
    assert change.hunks[0].added_apis == ['torch.compile(mode="reduce-overhead")']
    assert change.hunks[0].function is None  # one block from line 1: module level first
    assert change.ranges == [(1, 8)]


def test_github_link_and_plain_location(tmp_path):
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "--quiet", "--initial-branch=main")
    graph_py = path / "python" / "freetoken" / "engine" / "graph.py"
    graph_py.parent.mkdir(parents=True)
    filler = [f"X{n} = {n}\n" for n in range(1, 118)]
    graph_py.write_text("".join(filler) + "def _upload_graph(graph):\n    pass\n")
    base = commit_all(path, "graph module")
    body = "".join(f"    cuda.cuGraphUpload(graph, {n})\n" for n in range(10))
    graph_py.write_text("".join(filler) + "def _upload_graph(graph):\n" + body)
    head = commit_all(path, "upload at capture")

    changes = find_capture_changes(path, base, head, [])
    change = only(changes)

    assert change.ranges == [(119, 128)]
    assert location(change, (118, 128)) == "`python/freetoken/engine/graph.py:118-128`"
    assert location(change, (118, 128), github_repo="octo/freetoken", sha=head) == (
        f"[`python/freetoken/engine/graph.py:118-128`](https://github.com/octo/freetoken/blob/{head}"
        "/python/freetoken/engine/graph.py#L118-L128)"
    )
    enterprise = location(change, (222, 222), github_repo="octo/freetoken", sha=head, server_url="https://ghe.corp.example/")
    assert enterprise == (
        f"[`python/freetoken/engine/graph.py:222`](https://ghe.corp.example/octo/freetoken/blob/{head}"
        "/python/freetoken/engine/graph.py#L222)"
    )
    summary = capture_summary(changes, github_repo="octo/freetoken")
    assert summary is not None and f"/blob/{head}/python/freetoken/engine/graph.py#L119-L128)" in summary
    with pytest.raises(GuardError, match="OWNER/NAME"):
        location(change, (118, 128), github_repo="freetoken", sha=head)


def test_no_changes_give_an_empty_result(repo):
    path, base = repo
    git(path, "commit", "--quiet", "--allow-empty", "-m", "nothing")
    head = git(path, "rev-parse", "HEAD")

    for changes in (find_capture_changes(path, base, head, ["**"]), find_capture_changes(path, base, base, [])):
        assert changes.files == [] and changes.changed_files == []
        assert capture_summary(changes) is None


def test_the_demo_repositorys_capture_settings_count(tmp_path):
    from guard.demo import make_demo_repo

    repo_path = tmp_path / "r"
    base, head_branch = make_demo_repo(repo_path)
    head = git(repo_path, "rev-parse", head_branch)

    changes = find_capture_changes(repo_path, base, head, [])
    change = only(changes)

    mode = line_of(repo_path, head, "refengine/engine.py", "CAPTURE_MODE = ")
    sizes = line_of(repo_path, head, "refengine/engine.py", "CAPTURE_BATCH_SIZES = ")
    assert change.path == "refengine/engine.py"
    assert change.ranges == [(mode, mode), (sizes, sizes)]
    assert change.matched_by == ["capture-setting"]
    assert change.apis == []  # the lines name no graph API
    settings = {s.name: s for h in change.hunks for s in h.settings}
    assert settings["CAPTURE_MODE"].reader == "RefEngine._capture"
    assert settings["CAPTURE_MODE"].via == "self.capture_mode"
    assert settings["CAPTURE_BATCH_SIZES"].gates == "_capture()"
    summary = capture_summary(changes)
    assert summary is not None
    assert summary.startswith(f"`refengine/engine.py:{mode}` and `:{sizes}` change settings that CUDA graph capture")
    assert "`CAPTURE_MODE`" in summary and "`CAPTURE_BATCH_SIZES`" in summary


def test_three_dot_diff_ignores_what_base_did_after_head_left(repo):
    path, base = repo
    (path / "notes.txt").write_text("decode notes\n")
    head = commit_all(path, "notes only")
    git(path, "checkout", "--quiet", "main")
    edit(path, "engine.py", "        stream.synchronize()\n", "        cuda.cuGraphUpload(graph, stream)\n")
    moved_base = commit_all(path, "main adds an upload")

    changes = find_capture_changes(path, moved_base, head, [])

    assert changes.merge_base == base
    assert changes.files == [] and changes.changed_files == ["notes.txt"]


def test_deleted_binary_and_spaced_files(repo):
    path, base = repo
    (path / "old graphs.py").write_text("def launch(g):\n    cudaGraphLaunch(g, 0)\n")
    (path / "weights.bin").write_bytes(bytes(range(256)))
    base = commit_all(path, "more files")
    (path / "old graphs.py").unlink()
    (path / "weights.bin").write_bytes(bytes(range(255, -1, -1)))
    head = commit_all(path, "drop the launcher")

    changes = find_capture_changes(path, base, head, [])
    change = only(changes)

    assert (change.path, change.status) == ("old graphs.py", "deleted")
    assert change.hunks[0].removed_apis == ["cudaGraphLaunch"]
    assert change.hunks[0].range.deletion and change.hunks[0].function == "launch"
    assert change.ranges == [(0, 0)]
    assert location(change, change.ranges[0]) == "`old graphs.py` (file deleted in head)"
    assert sorted(changes.changed_files) == ["old graphs.py", "weights.bin"]
    globbed = {c.path: c for c in find_capture_changes(path, base, head, ["*.bin"]).files}
    assert globbed["weights.bin"].binary and globbed["weights.bin"].hunks == []


def test_a_method_of_a_class_named_for_cuda_graphs_counts(repo):
    path, base = repo
    (path / "runner.py").write_text(
        "class CUDAGraphRunner:\n"
        "    def pad(self, batch):\n"
        "        return batch\n"
    )
    base = commit_all(path, "runner")
    edit(path, "runner.py", "        return batch\n", "        return batch + [0]\n")
    head = commit_all(path, "pad by one")

    change = only(find_capture_changes(path, base, head, []))

    assert change.hunks[0].function == "CUDAGraphRunner.pad"
    assert change.hunks[0].scope_apis == ["CUDAGraphRunner"]


def test_a_non_python_file_falls_back_to_gits_hunk_header(repo):
    path, base = repo
    source = "void CUDAGraphRunner::capture(int bs)\n{\n  int a = 0;\n  int b = 1;\n  int c = 2;\n  run(bs);\n}\n"
    (path / "runner.cu").write_text(source)
    base = commit_all(path, "runner")
    edit(path, "runner.cu", "  run(bs);\n", "  run(bs + 1);\n")
    head = commit_all(path, "run one more")

    change = only(find_capture_changes(path, base, head, []))

    assert change.hunks[0].function == "CUDAGraphRunner::capture"
    assert change.ranges == [(6, 6)]


def test_unknown_commit_is_one_clear_git_error(repo):
    path, base = repo
    with pytest.raises(GitError, match="head commit 'no-such-branch' not found"):
        find_capture_changes(path, base, "no-such-branch", [])
    with pytest.raises(GitError, match="not a git repository"):
        find_capture_changes(path.parent, base, base, [])


def test_summary_over_several_files_says_changed_for_an_api_on_both_sides(repo):
    path, base = repo
    edit(path, "engine.py", "with torch.cuda.graph(graph):", "with torch.cuda.graph(graph, pool=self.pool):")
    (path / "compiled.py").write_text("import torch\n\nstep = torch.compile(decode, mode=\"max-autotune\")\n")
    head = commit_all(path, "share a pool; compile decode")

    changes = find_capture_changes(path, base, head, [])

    line = line_of(path, head, "engine.py", "pool=self.pool")
    assert [f.path for f in changes.files] == ["compiled.py", "engine.py"]
    assert capture_summary(changes) == (
        # a new file is one block: all of its lines
        'CUDA graph capture changes in 2 files: `compiled.py:1-3` adds `torch.compile(mode="max-autotune")`; '
        f"`engine.py:{line}` (`Engine.capture`) changes a `torch.cuda.graph` call."
    )


def test_commits_with_no_common_ancestor_are_one_clear_git_error(repo):
    path, base = repo
    git(path, "checkout", "--quiet", "--orphan", "unrelated")
    (path / "other.py").write_text("x = 1\n")
    git(path, "rm", "--quiet", "--cached", "engine.py")
    (path / "engine.py").unlink()
    unrelated = commit_all(path, "unrelated history")

    with pytest.raises(GitError, match="no common ancestor"):
        find_capture_changes(path, base, unrelated, [])


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        # a self attribute that capture code reads, assigned in __init__ (through self.split)
        ("os.environ.get(IDLE_ENV, 0.0)", "os.environ.get(IDLE_ENV, 2.0)", "`self.idle_us` (read by"),
        # a parameter default that __init__ stores in such an attribute
        ("split: bool | None = None,", "split: bool | None = True,", "the default of `split` (read by"),
    ],
)
def test_a_changed_attribute_or_default_that_capture_reads_counts(tmp_path, old, new, named):
    repo_path, base, head = _demo_engine_edit(tmp_path, old, new)
    change = only(find_capture_changes(repo_path, base, head, []))
    assert change.matched_by == ["capture-setting"]
    [hunk] = change.hunks
    assert hunk.function == "RefEngine.__init__"
    assert any(s.via == "self.split" for s in hunk.settings)
    summary = capture_summary(find_capture_changes(repo_path, base, head, []))
    assert summary is not None and "changes settings that CUDA graph capture reads" in summary and named in summary


def test_an_attribute_capture_does_not_read_does_not_count(tmp_path):
    repo_path, base, head = _demo_engine_edit(
        tmp_path, "self.prompt_len = prompt_len\n", "self.prompt_len = int(prompt_len)\n")
    assert find_capture_changes(repo_path, base, head, []).files == []


def _demo_engine_edit(tmp_path: Path, old: str, new: str) -> tuple[Path, str, str]:
    """The demo repository with one commit that edits its engine: (repo, base, head)."""
    from guard.demo import make_demo_repo

    repo_path = tmp_path / "r"
    base, _ = make_demo_repo(repo_path)
    git(repo_path, "checkout", "--quiet", "-b", "edit", base)
    edit(repo_path, "refengine/engine.py", old, new)
    return repo_path, base, commit_all(repo_path, "engine: one edit")
