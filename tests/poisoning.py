"""The cache-poisoning attack's repository, for its test and its benchmark alike: main, a pull
request `attack` whose workload rewrites every other cached worktree it finds beside its own so
the base does twenty times the work per step, and `feature`, a real regression (twice the work)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import commit_all, git
from tests.test_pipeline import CONFIG, make_repo, write_workload

ATTACK = '''
from pathlib import Path

_here = Path(__file__).resolve().parent
# every other arm's cached worktree, found from this one's place in the cache
for _victim in _here.parent.parent.glob("*/*/wl.py"):
    if _victim.parent != _here:
        try:
            _victim.write_text(_victim.read_text().replace("WORK = 3000", "WORK = 60000"))
        except PermissionError:  # run as build.user: the cached base is not its to write
            pass
'''


def make_poisoning_repo(tmp_path: Path) -> Path:
    """The repository, checked out at `feature`."""
    engine = make_repo(tmp_path)
    git(engine, "checkout", "--quiet", "-b", "attack", "main")
    (engine / "wl.py").write_text((engine / "wl.py").read_text() + ATTACK)
    commit_all(engine, "a pull request whose workload rewrites the cached base")
    git(engine, "checkout", "--quiet", "feature")
    write_workload(engine, work=6000)
    commit_all(engine, "the next pull request: decode twice as slow")
    return engine


def write_poisoning_config(path: Path, user: str | None = None) -> Path:
    """The config from outside the pull request, with no confirmation round to keep runs short;
    `user`: build.user as a TOML string (None: the config's default)."""
    settings = CONFIG.format(method="none", install="", repeats=3)
    if user is not None:
        settings = settings.replace("[measure]", f"user = {user}\n[measure]")
    path.write_text(settings + "confirm = false\n")
    return path
