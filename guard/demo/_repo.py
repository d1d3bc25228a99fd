"""Make a git repository whose base commit holds the reference engine and whose head
commit changes how decode is captured, as one of the scenarios says (guard/demo/_scenarios.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import NamedTuple

from guard._errors import ConfigError
from guard._git import made_git
from guard.config._toml import parse_toml
from guard.config import MIN_REPEATS
from guard.demo._scenarios import DEFAULT_SCENARIO, ENGINE_FILE, SCENARIOS, Scenario

ENGINE_DIR = Path(__file__).resolve().parents[1] / "engine"
ENGINE_FILES = ("__init__.py", "model.py", "parallel.py", "engine.py")
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


def _config(
    scenario: Scenario, steps: int, warmup_steps: int, repeats: int, options_toml: str, max_rounds: int | None = None,
    passes: DemoPasses | None = None,
) -> str:
    given = parse_toml(f"options = {{ {options_toml} }}".encode(), "--options",
                       "give the body of a TOML inline table, e.g. 'layers = 4, max_len = 128'")["options"]
    ours = [f"{name} = {value}" for name, value in scenario.options if name not in given]
    options = ", ".join(ours + [options_toml.strip()] if options_toml.strip() else ours) if ours else options_toml
    mix = f"batch_mix = {scenario.batch_mix}\n" if scenario.batch_mix else ""
    # --repeats under MIN_REPEATS asks for a quick try: the config says it allows so few
    few = "allow_few_repeats = true\n" if repeats < MIN_REPEATS else ""
    # --max-rounds: a quick try stops after so many rounds (measure.max_rounds), decided or not
    rounds = f"max_rounds = {max_rounds}\n" if max_rounds is not None else ""
    # --tok-per-s-min-s, --warmup-max-s: shorter passes for a quick try (workload's defaults otherwise)
    timing = "".join(f"{name} = {value:g}\n" for name, value in (passes or DemoPasses())._asdict().items()
                     if value is not None)
    return f"""# regression-guard configuration
[workload]
entry = "bench/guard_workload.py:make"
{scenario.comment}batch_sizes = [{", ".join(map(str, scenario.batch_sizes))}]
steps = {steps}
warmup_steps = {warmup_steps}
{timing}options = {{ {options} }}
{mix}
[build]
method = "venv"
# No network on a GPU runner: build with what the runner's environment has.
install = "pip install --no-deps --no-build-isolation --no-index ."
# The demo's code is the guard's own, not a pull request's: it runs where the host gives no
# box too (a container), and the report says so; each process still gets one where it can.
isolation = "auto"

[measure]
repeats = {repeats}
{few}{rounds}{scenario.arms}"""


class DemoPasses(NamedTuple):
    """How long the demo's timed passes and warmup run (workload.tok_per_s_min_s and
    workload.warmup_max_s; None: the config's defaults)."""

    tok_per_s_min_s: float | None = None
    warmup_max_s: float | None = None


def scenario_named(name: str) -> Scenario:
    """The scenario called `name`, or a ConfigError that lists them."""
    if name not in SCENARIOS:
        raise ConfigError(f"--scenario: there is no scenario {name!r:.40}; choose one of {', '.join(SCENARIOS)}")
    return SCENARIOS[name]


def _git(repo: Path, *args: str) -> str:
    return made_git(repo, *args, author="Demo Author", email="demo@example.invalid")


def make_demo_repo(
    repo: Path, steps: int = 128, warmup_steps: int = 16, repeats: int = 5, options_toml: str = "",
    scenario: str = DEFAULT_SCENARIO, max_rounds: int | None = None, passes: DemoPasses | None = None,
    as_root: bool = False,
) -> tuple[str, str]:
    """Create the repository at `repo` (must not exist) for `scenario`; return (base sha, head branch).
    `as_root`: its config runs the arms as the guard's own user (build.user ""), for a guard run as
    root whose interpreter the build user cannot reach: the demo's code is the guard's own."""
    staged = scenario_named(scenario)
    # a bad --options fails before any file
    config = _config(staged, steps, warmup_steps, repeats, options_toml, max_rounds, passes)
    if as_root:
        config = config.replace('isolation = "auto"\n', 'isolation = "auto"\n# the guard runs as root with an '
                                'interpreter the build user cannot reach: the demo\'s own code runs as root\n'
                                'user = ""\n', 1)
    repo.mkdir(parents=True)
    _git(repo, "init", "--quiet", "--initial-branch=main")
    package = repo / "refengine"
    package.mkdir()
    for name in ENGINE_FILES:
        shutil.copyfile(ENGINE_DIR / name, package / name)
    (repo / "bench").mkdir()
    (repo / "bench" / "guard_workload.py").write_text(WORKLOAD)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "guard.toml").write_text(config)
    (repo / ".gitignore").write_text("*.egg-info/\nbuild/\n__pycache__/\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "--quiet", "-m", staged.base_message)
    base_sha = _git(repo, "rev-parse", "HEAD")

    _git(repo, "checkout", "--quiet", "-b", staged.head_branch)
    engine = package / ENGINE_FILE
    source = engine.read_text()
    for old, new in staged.edits:
        if source.count(old) != 1:
            raise RuntimeError(f"demo: engine.py no longer holds {old.strip()!r:.80} once; update "
                               "guard/demo/_scenarios.py")
        source = source.replace(old, new)
    engine.write_text(source)
    _git(repo, "commit", "--quiet", "-am", staged.head_message)
    _git(repo, "checkout", "--quiet", "main")
    return base_sha, staged.head_branch
