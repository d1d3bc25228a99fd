"""A workload that raises: its last frames, the harness's own left out, in the log and in the
comment's failure fold; and nothing it wrote can start a workflow command in the log."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import commit_all
from tests.test_pipeline import make_repo


HARNESS_FRAME = '  File "{harness}/run.py", line 980, in main\n    workload = make(**options)\n'


def test_a_tracebacks_last_frames_leave_the_harness_out_and_keep_the_workloads() -> None:
    from guard.harness import HARNESS_SCRIPT
    from guard.measure._runner import MOST_FRAMES, workload_frames

    user = ''.join(f'  File "/src/engine/layer{i}.py", line {i}, in f{i}\n    g{i}()\n' for i in range(MOST_FRAMES + 2))
    text = ("Traceback (most recent call last):\n" + HARNESS_FRAME.format(harness=HARNESS_SCRIPT.parent) + user
            + "ValueError: shapes (1, 3) and (2,) do not line up\n")
    shown = workload_frames(text)
    assert str(HARNESS_SCRIPT.parent) not in shown
    assert shown.splitlines()[0] == "Traceback (most recent call last; 2 earlier frame(s) left out):"
    assert 'layer0.py' not in shown and 'layer1.py' not in shown and f'layer{MOST_FRAMES + 1}.py", line' in shown
    assert shown.endswith("ValueError: shapes (1, 3) and (2,) do not line up")
    assert workload_frames("") == "" and workload_frames("just a message") == ""


def test_a_workload_that_raises_shows_its_frames_in_the_log_and_in_the_comment(tmp_path: Path) -> None:
    """A real harness process: the head's step() raises in the workload's own file."""
    from guard.pipeline import run_guard

    repo = make_repo(tmp_path)
    source = (repo / "wl.py").read_text()
    assert "    def step(self" in source
    (repo / "wl.py").write_text(source.replace(
        "    def step(self", "    def step(self, *args, **kwargs):\n        return self._broken()\n\n"
        "    def _broken(self):\n        raise RuntimeError('the KV cache is full')\n\n    def _unused(self", 1))
    commit_all(repo, "head: step() raises")
    lines: list[str] = []
    report = run_guard(repo, None, "feature", None, tmp_path / "out", progress=lines.append)
    assert report.verdict == "invalid"
    log = "\n".join(lines)
    assert 'wl.py", line ' in log and "in _broken" in log and "RuntimeError: the KV cache is full" in log
    assert "guard/harness" not in log
    fold = (tmp_path / "out" / "comment.md").read_text()
    assert "in _broken" in fold and "RuntimeError: the KV cache is full" in fold


def test_what_a_pull_request_wrote_starts_no_workflow_command_in_the_log() -> None:
    from guard.cli import log_text

    shown = log_text("FAILED: boom\n::error::forged\n  ::add-mask::x\x1b[31m at::native::add")
    assert shown.splitlines() == ["FAILED: boom", ": :error::forged", "  : :add-mask::x?[31m at::native::add"]
