"""Attacks on the build cache, on real git repositories with real subprocesses: a cached
build that was changed after it was built is rebuilt, a marker that someone else could have
written is not trusted, and two runs on one cache folder never build it at once."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import marshal
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from guard.checkout import ArmRef, BuiltArm, build_arm
from guard.config import BuildConfig
from guard.sandbox import choose_box
from tests.conftest import writable_by_all
from tests.poisoning import make_poisoning_repo, write_poisoning_config
from tests.test_checkout import PIP_INSTALL, Repo, git, make_repo, run_in_arm
from tests.test_pipeline import guard_run

ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo(tmp_path / "repo")


def _base(repo: Repo) -> ArmRef:
    return ArmRef(name="base", ref="main~1", sha=repo.first_sha)


def _version(arm: BuiltArm, tmp_path: Path) -> str:
    return run_in_arm(arm, "import tinypkg; print(tinypkg.VERSION)", cwd=tmp_path)


def _listed_worktrees(repo: Path) -> list[str]:
    porcelain = git(repo, "worktree", "list", "--porcelain").splitlines()
    return [line.removeprefix("worktree ") for line in porcelain if line.startswith("worktree ")][1:]


# ---- the attack, end to end: a workload poisons the cached base -------------------------

AS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not AS_ROOT, reason="needs root, to act as a second user")


@pytest.mark.slow
@pytest.mark.parametrize(
    "user",
    [pytest.param('"guard-pr"', marks=needs_root), '""'],
    ids=["as build.user, which cannot write the cache", "as the guard's own user, which can"],
)
def test_a_workload_that_poisons_the_cached_base_does_not_hide_the_next_regression(
    user: str, tmp_path: Path
) -> None:
    engine = make_poisoning_repo(tmp_path)
    cache = tmp_path / "cache"
    config = write_poisoning_config(tmp_path / "guard.toml", user)
    cached = ["--cache-dir", str(cache), "--config", str(config)]
    attack = guard_run(engine, tmp_path / "out-attack", "--head", "attack", *cached)
    assert attack.returncode in (0, 1, 4), attack.stderr  # the attacker's arm ran: a verdict, any
    poisoned = [p for p in cache.glob("*/tree/wl.py") if "\nWORK = 60000\n" in p.read_text()]
    sealed = user != '""'

    proc = guard_run(engine, tmp_path / "out", *cached)
    assert proc.returncode in (0, 1, 4), proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    base = next(arm for arm in report["arms"] if arm["name"] == "base")
    if sealed:  # the write was refused, so the base is reused as its build left it
        assert poisoned == []
        assert "unchanged since it was built" in proc.stderr and "rebuilding" not in proc.stderr
        assert base["build_reused"] is True
    else:  # the write landed, and the check before reuse finds it
        assert len(poisoned) == 1
        assert "was modified since it was built (tree/wl.py differs): rebuilding" in proc.stderr
        assert base["build_reused"] is False
        assert "\nWORK = 3000\n" in poisoned[0].read_text()  # measured from the clean tree
    # twice the loop, not a twentieth of it: a poisoned base would read near -90%; a dozen CPU
    # steps, with the process's fixed costs in each and a shared CPU, may show +40% for the +100%,
    # or, each process's figure its mean (a stall of the shared CPU counts in full), +300% and more,
    # and may not settle the verdict itself; a poisoned base reads near -90%
    assert report["verdict"] in ("regression", "at_threshold", "inconclusive")
    for batch in report["batch_sizes"]:
        assert 15 < batch["gpu_ms_change"]["pct"] < 1000

    # the runs' own leftovers (bytecode in the worktrees) do not cost the next run its reuse
    again = guard_run(engine, tmp_path / "out-again", *cached)
    assert again.returncode in (0, 1, 4), again.stderr
    assert again.stderr.count("unchanged since it was built") == 2, again.stderr
    again_report = json.loads((tmp_path / "out-again" / "report.json").read_text())
    # the same bounds as above, for the same shared CPU: a reuse of a poisoned base would read near -90%
    changes = [batch["gpu_ms_change"]["pct"] for batch in again_report["batch_sizes"]]
    assert all(15 < pct < 1000 for pct in changes), changes


# ---- what a change to the cached worktree looks like, each way it can be made ------------------


def _edit_keeping_mtime(tree: Path) -> None:
    """Same size, same mtime, and hidden from git's index besides."""
    target = tree / "tinypkg" / "__init__.py"
    before = target.stat()
    git(tree, "update-index", "--skip-worktree", "tinypkg/__init__.py")
    target.write_text('VERSION = "bad"\n')
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert target.stat().st_size == before.st_size
    # git itself sees nothing: it is not what proves a tree unchanged
    assert git(tree, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
    assert subprocess.run(["git", "-C", str(tree), "diff", "--quiet", "HEAD"]).returncode == 0


def _add_sitecustomize(tree: Path) -> None:
    # on PYTHONPATH (method "none"), so every process of the arm would run it first
    (tree / "sitecustomize.py").write_text("import tinypkg; tinypkg.VERSION = 'bad'\n")


def _add_ignored_file(tree: Path) -> None:
    common = Path(git(tree, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    (common / "info").mkdir(exist_ok=True)
    (common / "info" / "exclude").write_text("build/\n")
    (tree / "build").mkdir()
    (tree / "build" / "tinypkg.py").write_text("VERSION = 'bad'\n")
    assert git(tree, "status", "--porcelain", "--untracked-files=all") == ""  # ignored, not untracked


def _swap_for_a_link(tree: Path) -> None:
    evil = tree.parent.parent / "evil.py"
    evil.write_text('VERSION = "bad"\n')
    target = tree / "tinypkg" / "__init__.py"
    target.unlink()
    target.symlink_to(evil)


def _move_head(tree: Path) -> None:
    # HEAD to another commit, files left as they were
    git(tree, "update-ref", "--no-deref", "HEAD", git(tree, "rev-parse", "main"))


def _point_git_elsewhere(tree: Path) -> None:
    # a forged gitdir that says HEAD is the right commit
    forged = tree.parent.parent / "forged-gitdir"
    shutil.copytree(git(tree, "rev-parse", "--absolute-git-dir"), forged)
    (tree / ".git").write_text(f"gitdir: {forged}\n")


def _plant_bytecode(tree: Path) -> None:
    """A .pyc for tinypkg/__init__.py, made from other source, with the header of the real one."""
    source = tree / "tinypkg" / "__init__.py"
    code = compile('VERSION = "bad"\n', str(source), "exec")
    source_stat = source.stat()
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
    header += int(source_stat.st_mtime).to_bytes(4, "little") + (source_stat.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    cached = Path(importlib.util.cache_from_source(str(source)))
    cached.parent.mkdir(exist_ok=True)
    cached.write_bytes(header + marshal.dumps(code))


# (the change, what the rebuild message names, whether the arm's processes would run the change)
TAMPERINGS: dict[str, tuple[Callable[[Path], None], str, bool]] = {
    "tracked file edited, mtime kept, index told to skip it": (
        _edit_keeping_mtime, "tree/tinypkg/__init__.py differs", True),
    "untracked file added": (_add_sitecustomize, "tree/sitecustomize.py differs", True),
    "ignored file added": (_add_ignored_file, "tree/build differs", False),
    "file swapped for a link": (_swap_for_a_link, "tree/tinypkg/__init__.py differs", True),
    "HEAD moved": (_move_head, "no longer has the commit checked out", False),
    ".git pointed at a forged gitdir": (_point_git_elsewhere, "tree/.git differs", False),
}


@pytest.mark.parametrize("tamper", TAMPERINGS.values(), ids=list(TAMPERINGS))
def test_a_changed_worktree_is_rebuilt_from_the_commit(
    tamper: tuple[Callable[[Path], None], str, bool], repo: Repo, tmp_path: Path
) -> None:
    change, reason, reaches_the_arm = tamper
    config = BuildConfig(method="none")
    first = build_arm(repo.path, _base(repo), config, tmp_path / "cache", box=choose_box())
    change(first.worktree)
    if reaches_the_arm:
        assert _version(first, tmp_path) == "bad"

    messages: list[str] = []
    again = build_arm(repo.path, _base(repo), config, tmp_path / "cache", progress=messages.append, box=choose_box())
    assert not again.reused and again.worktree == first.worktree
    assert any(reason in m and m.endswith(": rebuilding") for m in messages), messages
    assert _version(again, tmp_path) == "one"
    assert git(again.worktree, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
    assert git(again.worktree, "rev-parse", "HEAD") == repo.first_sha
    # and git knows that worktree once, no stale entry beside it
    assert _listed_worktrees(repo.path) == [str(again.worktree)]


def test_bytecode_a_run_left_is_removed_not_trusted_and_costs_no_rebuild(repo: Repo, tmp_path: Path) -> None:
    config = BuildConfig(method="none")
    first = build_arm(repo.path, _base(repo), config, tmp_path / "cache", box=choose_box())
    _plant_bytecode(first.worktree)
    assert _version(first, tmp_path) == "bad"  # Python would load it: the header matches the source

    messages: list[str] = []
    again = build_arm(repo.path, _base(repo), config, tmp_path / "cache", progress=messages.append, box=choose_box())
    assert again.reused, messages
    assert not (first.worktree / "tinypkg" / "__pycache__").exists()
    assert _version(again, tmp_path) == "one"


@pytest.mark.slow
def test_a_changed_venv_is_rebuilt(repo: Repo, tmp_path: Path) -> None:
    config = BuildConfig(method="venv", install=PIP_INSTALL)
    first = build_arm(repo.path, _base(repo), config, tmp_path / "cache", box=choose_box())
    installed = Path(run_in_arm(first, "import tinypkg; print(tinypkg.__file__)", cwd=tmp_path))
    assert installed.is_relative_to(first.python.parent.parent)
    # a size of its own: bytecode compiled within the same second is checked by mtime and size
    installed.write_text('VERSION = "bad"  # poisoned\n')
    assert _version(first, tmp_path) == "bad"

    messages: list[str] = []
    again = build_arm(repo.path, _base(repo), config, tmp_path / "cache", progress=messages.append, box=choose_box())
    assert not again.reused
    assert any(f"venv/{installed.relative_to(first.python.parent.parent)} differs" in m for m in messages), messages
    assert _version(again, tmp_path) == "one"

    # bytecode the build itself left (pip compiles what it installs) is checked like any file
    compiled = Path(importlib.util.cache_from_source(str(installed)))
    assert compiled.is_file()
    compiled.write_bytes(compiled.read_bytes()[:16] + marshal.dumps(compile('VERSION = "bad"\n', "x", "exec")))
    assert _version(again, tmp_path) == "bad"
    rebuilt = build_arm(repo.path, _base(repo), config, tmp_path / "cache", progress=messages.append, box=choose_box())
    assert not rebuilt.reused and _version(rebuilt, tmp_path) == "one"


# The build user's try at every path of a sealed build: append to each file, add a file to
# each folder, remove each entry; prints what got through.
_AT_A_SEALED_BUILD = textwrap.dedent("""
    import os, sys
    got_through = []
    for root in sys.argv[1:]:
        for folder, dirs, files in os.walk(root):
            for name in files:
                path = os.path.join(folder, name)
                if os.path.islink(path):
                    continue
                try:
                    with open(path, "ab"):
                        got_through.append("wrote " + path)
                except OSError:
                    pass
            for path in [os.path.join(folder, "planted.py")] + [os.path.join(folder, n) for n in dirs + files]:
                try:
                    if os.path.basename(path) == "planted.py":
                        open(path, "x").close()
                        got_through.append("added " + path)
                    else:
                        os.rename(path, path + ".moved")
                        got_through.append("moved " + path)
                except OSError:
                    pass
    print("\\n".join(got_through))
""")


@pytest.mark.slow
@needs_root
def test_a_sealed_build_is_reused_and_out_of_the_build_users_reach(repo: Repo, tmp_path: Path) -> None:
    """As root, the install runs as build.user, which may write tree/ and venv/ while it runs;
    the guard makes them its own again before it takes the manifest. So the next run finds
    them as recorded and reuses them, and that user (the workload's) can change none of it."""
    config = BuildConfig(method="venv", install=f"{PIP_INSTALL} && touch made-by-the-install")
    first = build_arm(repo.path, _base(repo), config, tmp_path / "cache", box=choose_box())
    folder = first.worktree.parent
    user = pwd.getpwnam(config.user)
    # the install ran as the user: what it made is in the tree, and is the guard's now
    assert (first.worktree / "made-by-the-install").is_file()
    for path in [folder, *folder.rglob("*")]:
        info = path.lstat()
        assert info.st_uid == 0, path
        assert path.is_symlink() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH | stat.S_ISUID) == 0, path
    assert folder.joinpath("lock").stat().st_mode & 0o077 == 0  # the guard's alone: no other user holds it

    proc = subprocess.run(
        [sys.executable, "-c", _AT_A_SEALED_BUILD, str(first.worktree), str(folder / "venv")],
        user=user.pw_uid, group=user.pw_gid, extra_groups=[], capture_output=True, text=True, cwd="/",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""

    messages: list[str] = []
    again = build_arm(repo.path, _base(repo), config, tmp_path / "cache", progress=messages.append, box=choose_box())
    assert again.reused, messages
    assert any("unchanged since it was built" in m for m in messages), messages
    assert _version(again, tmp_path) == "one"


# ---- forged markers ----------------------------------------------------------------------------


def _marker(arm: BuiltArm) -> Path:
    return arm.worktree.parent / "marker.json"


def _forge_to_match(marker: Path, tree_path: str, content: bytes) -> str:
    """A marker.json that vouches for `content` at tree/`tree_path`: what a forger would write."""
    record = json.loads(marker.read_text())
    record["tree"][tree_path] = f"f {hashlib.sha256(content).hexdigest()}"
    return json.dumps(record)


def test_a_marker_others_may_write_is_not_trusted(repo: Repo, tmp_path: Path) -> None:
    config = BuildConfig(method="none")
    first = build_arm(repo.path, _base(repo), config, tmp_path / "cache", box=choose_box())
    poison = b'VERSION = "bad"\n'
    (first.worktree / "tinypkg" / "__init__.py").write_bytes(poison)
    _marker(first).write_text(_forge_to_match(_marker(first), "tinypkg/__init__.py", poison))
    _marker(first).chmod(0o666)

    messages: list[str] = []
    again = build_arm(repo.path, _base(repo), config, tmp_path / "cache", progress=messages.append, box=choose_box())
    assert not again.reused
    assert any("could have been written by another user" in m for m in messages), messages
    assert _version(again, tmp_path) == "one"
    assert _marker(again).stat().st_mode & 0o777 == 0o644
    assert again.worktree.parent.stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize("forgery", ["another commit's marker", "the old layout's marker", "a link to a marker"])
def test_a_marker_for_something_else_is_not_trusted(forgery: str, repo: Repo, tmp_path: Path) -> None:
    config = BuildConfig(method="none")
    cache = tmp_path / "cache"
    first = build_arm(repo.path, _base(repo), config, cache, box=choose_box())
    (first.worktree / "tinypkg" / "__init__.py").write_text('VERSION = "two"\n')
    other = build_arm(repo.path, ArmRef(name="head", ref="feature", sha=repo.feature_sha), config, cache,
                      box=choose_box())
    if forgery == "another commit's marker":  # genuine, the guard's own, and of a tree with this content
        record = json.loads(_marker(other).read_text())
        _marker(first).write_text(json.dumps(record))
    elif forgery == "the old layout's marker":
        record = json.loads(_marker(first).read_text()) | {"layout": 1}
        _marker(first).write_text(json.dumps(record))
    else:
        forged = tmp_path / "forged.json"
        forged.write_text(_forge_to_match(_marker(first), "tinypkg/__init__.py", b'VERSION = "two"\n'))
        _marker(first).unlink()
        _marker(first).symlink_to(forged)

    again = build_arm(repo.path, _base(repo), config, cache, box=choose_box())
    assert not again.reused and _version(again, tmp_path) == "one"


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder another user can reach (pytest's tmp_path is the owner's alone)."""
    path = Path(tempfile.mkdtemp(prefix="guard-attack-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@needs_root
def test_a_marker_written_by_another_user_is_not_trusted(repo: Repo, shared_tmp: Path, tmp_path: Path) -> None:
    config = BuildConfig(method="none")
    cache = shared_tmp / "cache"
    first = build_arm(repo.path, _base(repo), config, cache, box=choose_box())
    folder = first.worktree.parent
    # a cache whose folders the pull request's user can write: the guard must not count on them
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink() and path.name != "lock":
            path.chmod(0o777 if path.is_dir() else 0o666)
    poison = b'VERSION = "bad"\n'
    forged = _forge_to_match(_marker(first), "tinypkg/__init__.py", poison)
    attacker = textwrap.dedent(f"""
        import os, sys
        folder = {str(folder)!r}
        try:
            open(os.path.join(folder, "lock"))
            sys.exit("could open the lock")
        except PermissionError:
            pass
        with open(os.path.join(folder, "tree", "tinypkg", "__init__.py"), "wb") as f:
            f.write({poison!r})
        with open(os.path.join(folder, "marker.json.new"), "w") as f:
            f.write({forged!r})
        os.replace(os.path.join(folder, "marker.json.new"), os.path.join(folder, "marker.json"))
    """)
    proc = subprocess.run([sys.executable, "-c", attacker], user=NOBODY, group=NOBODY, extra_groups=[],
                          capture_output=True, text=True, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert _marker(first).stat().st_uid == NOBODY and _version(first, tmp_path) == "bad"

    messages: list[str] = []
    again = build_arm(repo.path, _base(repo), config, cache, progress=messages.append, box=choose_box())
    assert not again.reused
    assert any("could have been written by another user" in m for m in messages), messages
    assert _version(again, tmp_path) == "one"
    assert {p.stat().st_uid for p in [folder, _marker(again), folder / "lock"]} == {0}


# ---- one lock per cache folder -----------------------------------------------------------------

# A run in its own process: builds the arm, keeps it in use for HOLD_S seconds, says when it let go.
_RUN = textwrap.dedent("""
    import json, sys, time
    from contextlib import ExitStack
    from pathlib import Path
    from guard._errors import BuildError
    from guard.checkout import ArmRef, build_arm
    from guard.config import BuildConfig
    from guard.sandbox import choose_box

    repo, sha, cache, install, hold_s, wait_s = sys.argv[1:]
    with ExitStack() as in_use:
        try:
            built = build_arm(Path(repo), ArmRef(name="base", ref="base", sha=sha),
                              BuildConfig(method="venv", install=install), Path(cache),
                              lambda m: print(m, file=sys.stderr, flush=True), hold=in_use, lock_wait_s=float(wait_s),
                              box=choose_box())
        except BuildError as exc:
            print(json.dumps({"error": exc.message}), flush=True)
            sys.exit(2)
        print(json.dumps({"reused": built.reused, "worktree": str(built.worktree), "ready": time.time()}), flush=True)
        time.sleep(float(hold_s))
        released = time.time()
    print(json.dumps({"released": released}), flush=True)
""")


def _start_run(
    repo: Repo, cache: Path, install: str, hold_s: float = 0.0, wait_s: float = 120
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _RUN, str(repo.path), repo.first_sha, str(cache), install, str(hold_s), str(wait_s)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> tuple[list[dict[str, object]], str]:
    out, err = proc.communicate(timeout=300)
    return [json.loads(line) for line in out.splitlines()], err


def _install_logging_to(log: Path) -> str:
    """An install command that notes when it started and ended, and takes a while."""
    return f'echo "start $(date +%s.%N)" >> {log}; sleep 1.5; echo "end $(date +%s.%N)" >> {log}; {PIP_INSTALL}'


def _build_spans(log: Path) -> list[tuple[float, float]]:
    times = [(word, float(at)) for word, at in (line.split() for line in log.read_text().splitlines())]
    starts, ends = [t for w, t in times if w == "start"], [t for w, t in times if w == "end"]
    # a second start before the first end would be two builds at once
    assert [w for w, _ in times] == ["start", "end"] * len(starts), times
    return list(zip(starts, ends))


@pytest.mark.slow
def test_two_runs_at_once_build_the_folder_once(repo: Repo, tmp_path: Path) -> None:
    log = writable_by_all(tmp_path / "notes") / "installs.log"  # the install, as build.user, writes it
    first = _start_run(repo, tmp_path / "cache", _install_logging_to(log))
    deadline_s = time.monotonic() + 120
    while not log.exists():  # the first one is building
        assert first.poll() is None and time.monotonic() < deadline_s, first.communicate()
        time.sleep(0.05)
    second = _start_run(repo, tmp_path / "cache", _install_logging_to(log))
    (first_out, *_), _ = _finish(first)
    (second_out, *_), second_err = _finish(second)

    assert len(_build_spans(log)) == 1
    assert first_out["reused"] is False and second_out["reused"] is True
    assert first_out["worktree"] == second_out["worktree"]
    assert "another guard run is using" in second_err and "waiting for it" in second_err


@pytest.mark.slow
def test_a_folder_in_use_is_rebuilt_only_once_its_run_is_done(repo: Repo, tmp_path: Path) -> None:
    log = writable_by_all(tmp_path / "notes") / "installs.log"  # the install, as build.user, writes it
    cache = tmp_path / "cache"
    user = _start_run(repo, cache, _install_logging_to(log), hold_s=8)
    ready = json.loads(user.stdout.readline())  # built, and now measuring from it
    (Path(str(ready["worktree"])) / "sitecustomize.py").write_text("raise SystemExit('poisoned')\n")

    # one that would only reuse it goes ahead at once; one that must rebuild it waits
    impatient = _start_run(repo, cache, _install_logging_to(log), wait_s=0.5)
    (impatient_out,), _ = _finish(impatient)
    assert "another guard run held" in str(impatient_out["error"]) and "--cache-dir" in str(impatient_out["error"])
    assert (Path(str(ready["worktree"])) / "sitecustomize.py").exists()  # nothing was removed under the user

    patient = _start_run(repo, cache, _install_logging_to(log))
    (released,), _ = _finish(user)
    (patient_out, _), patient_err = _finish(patient)
    assert patient_out["reused"] is False
    assert "waiting for it" in patient_err and "tree/sitecustomize.py differs" in patient_err
    (_, first_end), (second_start, _) = _build_spans(log)
    assert second_start > float(released["released"])  # the rebuild began after the user let go
    assert not (Path(str(patient_out["worktree"])) / "sitecustomize.py").exists()


# ---- worktrees the guard made do not pile up in the repository ---------------------------------


def test_worktrees_of_a_deleted_cache_are_pruned(repo: Repo, tmp_path: Path) -> None:
    config = BuildConfig(method="none")
    head = ArmRef(name="head", ref="feature", sha=repo.feature_sha)
    for arm in (_base(repo), head):
        build_arm(repo.path, arm, config, tmp_path / "temporary-cache", box=choose_box())
    assert len(_listed_worktrees(repo.path)) == 2
    shutil.rmtree(tmp_path / "temporary-cache")  # the runner empties its temp folder after the job

    kept = build_arm(repo.path, _base(repo), config, tmp_path / "kept-cache", box=choose_box())
    assert _listed_worktrees(repo.path) == [str(kept.worktree)]
