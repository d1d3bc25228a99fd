"""Make a git repository whose base commit holds the reference engine and whose head
commit changes how decode is captured, so that decode gets slower."""

from __future__ import annotations

import shutil
from pathlib import Path

from guard._git import made_git

ENGINE_DIR = Path(__file__).resolve().parents[1] / "engine"
ENGINE_FILES = ("__init__.py", "model.py", "engine.py")
HEAD_BRANCH = "piecewise-capture"

BASE_CAPTURE = 'CAPTURE_MODE = "step"\n'
HEAD_CAPTURE = 'CAPTURE_MODE = "layer"\n'
BASE_SIZES = "CAPTURE_BATCH_SIZES = (1, 2)\n"
HEAD_SIZES = "CAPTURE_BATCH_SIZES = (4,)\n"

HEAD_MESSAGE = """engine: capture decode piecewise, one graph per layer, at one padded size

One graph per layer at batch size 4 replaces one whole-step graph per batch
size: capture takes less memory and time, and batch sizes 1-4 share it.
"""

PYPROJECT = """[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "refengine"
version = "0.0.1"
requires-python = ">=3.10"

[tool.setuptools]
packages = ["refengine"]
"""

WORKLOAD = '''"""The decode workload regression-guard replays (see guard.toml)."""

from refengine import make

__all__ = ["make"]
'''


def _config(steps: int, warmup_steps: int, repeats: int, options_toml: str) -> str:
    return f"""# regression-guard configuration
[workload]
entry = "bench/guard_workload.py:make"
batch_sizes = [1, 2]
steps = {steps}
warmup_steps = {warmup_steps}
options = {{ {options_toml} }}

[build]
method = "venv"
# No network on a GPU runner: build with what the runner's environment has.
install = "pip install --no-deps --no-build-isolation --no-index ."

[measure]
repeats = {repeats}

# An ablation arm: the head build again, with graphs at batch sizes 1 and 2 as on base,
# so the table separates what padding costs from what the per-layer graphs cost.
[[arms]]
name = "head-unpadded"
from = "head"
env = {{ REFENGINE_CAPTURE_BATCH_SIZES = "1,2" }}
label = "same build, graphs at batch sizes 1 and 2 (no padding)"
"""


def _git(repo: Path, *args: str) -> str:
    return made_git(repo, *args, author="Demo Author", email="demo@example.invalid")


def make_demo_repo(
    repo: Path, steps: int = 128, warmup_steps: int = 16, repeats: int = 5, options_toml: str = ""
) -> tuple[str, str]:
    """Create the repository at `repo` (must not exist); return (base sha, head branch)."""
    repo.mkdir(parents=True)
    _git(repo, "init", "--quiet", "--initial-branch=main")
    package = repo / "refengine"
    package.mkdir()
    for name in ENGINE_FILES:
        shutil.copyfile(ENGINE_DIR / name, package / name)
    (repo / "bench").mkdir()
    (repo / "bench" / "guard_workload.py").write_text(WORKLOAD)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "guard.toml").write_text(_config(steps, warmup_steps, repeats, options_toml))
    (repo / ".gitignore").write_text("*.egg-info/\nbuild/\n__pycache__/\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "--quiet", "-m", "Reference engine: decode captured as one CUDA graph per batch size")
    base_sha = _git(repo, "rev-parse", "HEAD")

    _git(repo, "checkout", "--quiet", "-b", HEAD_BRANCH)
    engine = package / "engine.py"
    source = engine.read_text()
    for old, new in ((BASE_CAPTURE, HEAD_CAPTURE), (BASE_SIZES, HEAD_SIZES)):
        if old not in source:
            raise RuntimeError(f"demo: engine.py no longer contains {old.strip()!r}; update guard/demo/_repo.py")
        source = source.replace(old, new)
    engine.write_text(source)
    _git(repo, "commit", "--quiet", "-am", HEAD_MESSAGE)
    _git(repo, "checkout", "--quiet", "main")
    return base_sha, HEAD_BRANCH
