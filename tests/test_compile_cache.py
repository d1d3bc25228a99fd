"""torch.compile's caches per arm (measure.compile_cache): real harness processes. The
processes of one arm get one folder, the arm's code may write it while its process runs, and
neither the other arm's folder nor a runner's cache folder reaches them; with torch.compile on
this CPU, the second process of an arm loads what the first compiled. And the check, before
anything is built, that the build user can run the interpreter the arms run on."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from guard.config import Workload
from guard.harness import HARNESS_SCRIPT
from guard.measure import ArmTarget, HarnessSpec, compile_caches, filled, run_interleaved
from guard.measure._compile_cache import CACHE_DEFAULTS, remove_abandoned
from guard.sandbox import COMPILE_CACHES, LaunchError, check_interpreter, choose_box, pr_user, process_start
from tests.conftest import commit_all, git

REPO_ROOT = Path(__file__).resolve().parents[1]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the build user exists only when the guard is root")

# Says what compile caches its process was given, leaves a mark in its inductor folder, lists
# the marks earlier processes left there, and tries to write the folder named in OTHER_CACHE.
MARKING_WORKLOAD = '''
import os
import sys
import uuid
from pathlib import Path

NAMES = {names!r}
ME = uuid.uuid4().hex[:12]  # this process, whatever PID namespace it runs in


class Marking:
    def __init__(self):
        self.env = {{name: os.environ.get(name) for name in NAMES}}
        folder = self.env["TORCHINDUCTOR_CACHE_DIR"]
        self.earlier, self.wrote = [], None
        if folder:
            os.makedirs(folder, exist_ok=True)  # as inductor makes it
            self.earlier = sorted(p.name for p in Path(folder).glob("mark-*"))
            Path(folder, f"mark-{{ME}}").write_text("")
            self.wrote = True
        self.other = None
        if os.environ.get("OTHER_CACHE"):
            try:
                Path(os.environ["OTHER_CACHE"], "planted").write_text("")
                self.other = "wrote"
            except OSError as exc:
                self.other = type(exc).__name__

    def setup(self, batch_size):
        self.out = [0] * batch_size  # no torch: what the guard gives each process is the point

    def step(self, tokens=None):
        return self.out

    def describe(self):
        return {{"env": self.env, "earlier": self.earlier, "wrote": self.wrote, "other": self.other,
                 "me": ME, "uid": os.getuid(), "dont_write_bytecode": sys.dont_write_bytecode}}


def make():
    return Marking()
'''

# The built-in compiled workload, tiny, under torch.compile's default mode on this CPU
COMPILED_OPTIONS = {"layers": 1, "d_model": 32, "n_heads": 2, "ffn": 64, "vocab": 128, "max_len": 32,
                    "prompt_len": 4, "dtype": "float32", "mode": "default", "compile_on_cpu": True}


def _worktree(tmp_path: Path) -> Path:
    worktree = tmp_path / "arm"
    worktree.mkdir()
    worktree.chmod(0o755)
    (worktree / "wl.py").write_text(MARKING_WORKLOAD.format(names=sorted([*COMPILE_CACHES, *CACHE_DEFAULTS])))
    (worktree / "wl.py").chmod(0o644)
    return worktree


def _spec(entry: str = "wl.py:make", options: dict[str, object] | None = None) -> HarnessSpec:
    return HarnessSpec.of(Workload(entry=entry, options=options or {}, batch_sizes=[1], steps=2, warmup_steps=0,
                                   tok_per_s_min_s=0.0, warmup_max_s=0.0, profile_steps=0))


def _seen(measured: dict[str, object], arm: str) -> list[dict[str, object]]:
    m = measured[arm]
    assert m.error is None, m.log_tail  # type: ignore[attr-defined]
    return [r.runs[0].workload for r in m.repeats]  # type: ignore[attr-defined]


@pytest.mark.slow
def test_the_processes_of_an_arm_share_its_folder_across_rounds_and_no_other_arm_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a runner's own cache folder, which every arm and later pull request would share: never passed
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "runner-cache"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "runner-triton"))
    # a runner's bytecode folder (a .pyc planted there runs in a later pull request's processes),
    # and a runner that writes none, which left every process compiling torch's Python again
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "runner-bytecode"))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    worktree = _worktree(tmp_path)
    with compile_caches(["base", "head"]) as caches:
        targets = [ArmTarget(name=arm, python=Path(sys.executable),
                             box=choose_box(), worktree=worktree, compile_cache=caches[arm])
                   for arm in ("base", "head")]
        first = run_interleaved(targets, _spec(), 2, tmp_path / "runs", timeout_s=120)
        # the workload's bytecode, written by the arm's first process into the arm's folder
        written = {arm: sorted((caches[arm] / "bytecode").rglob("wl.*.pyc")) for arm in caches}
        stamps = {arm: [(f.stat().st_ino, f.stat().st_mtime_ns) for f in written[arm]] for arm in caches}
        assert all(len(files) == 1 for files in written.values()), written
        # a confirmation round: the same folders; head's process tries to write base's
        targets[1] = targets[1].model_copy(update={"env": {"OTHER_CACHE": str(caches["base"] / "inductor")}})
        second = run_interleaved(targets, _spec(), 1, tmp_path / "runs", timeout_s=120, first_repeat=2)
        sealed = {arm: caches[arm].stat().st_uid for arm in caches}
        # the confirmation round's processes loaded that bytecode: none compiled it again
        assert {arm: [(f.stat().st_ino, f.stat().st_mtime_ns) for f in written[arm]] for arm in caches} == stamps
    assert not any(folder.exists() for folder in caches.values())  # the run's folders go with it

    for arm in ("base", "head"):
        seen = _seen(first, arm) + _seen(second, arm)
        expected = CACHE_DEFAULTS | {name: str(caches[arm] / part) for name, part in COMPILE_CACHES.items()}
        assert [s["env"] for s in seen] == [expected] * 3  # one folder for the arm's every process, its own
        assert all(s["wrote"] for s in seen) and not any(s["dont_write_bytecode"] for s in seen)
        # each process finds the marks of the arm's earlier processes, in either round, and no other arm's
        mes = [s["me"] for s in seen]
        assert [s["earlier"] for s in seen] == [sorted(f"mark-{p}" for p in mes[:k]) for k in range(3)]
    assert caches["base"] != caches["head"]
    assert not any((tmp_path / name).exists() for name in ("runner-cache", "runner-triton", "runner-bytecode"))
    planted = _seen(second, "head")[0]["other"]
    if os.geteuid() == 0:
        user = pr_user("guard-pr")
        assert user is not None
        assert {s["uid"] for arm in ("base", "head") for s in _seen(first, arm)} == {user.uid}
        assert planted == "PermissionError"  # base's folder is the guard's between base's processes
        assert sealed == {"base": 0, "head": 0}
    else:
        assert planted == "wrote"  # one user for guard and arms: nothing to hold it back


@pytest.mark.slow
def test_without_the_cache_a_process_is_given_no_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "runner-cache"))
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "runner-bytecode"))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    target = ArmTarget(box=choose_box(), name="base", python=Path(sys.executable), worktree=_worktree(tmp_path))
    seen = _seen(run_interleaved([target], _spec(), 2, tmp_path / "runs", timeout_s=120), "base")
    assert [s["env"] for s in seen] == [dict.fromkeys([*COMPILE_CACHES, *CACHE_DEFAULTS])] * 2
    assert all(s["dont_write_bytecode"] for s in seen)  # the runner's setting, as it is without the cache
    assert not (tmp_path / "runner-bytecode").exists()
    assert [s["earlier"] for s in seen] == [[], []]


def test_bytecode_alone_is_not_a_compiled_workload(tmp_path: Path) -> None:
    # every process writes bytecode; only a compiled workload's writes the compilers' folders,
    # and only then does head get an unmeasured process to fill its cache (guard.measure.to_fill)
    (tmp_path / "bytecode" / "usr").mkdir(parents=True)
    assert not filled(tmp_path)
    (tmp_path / "inductor").mkdir()
    assert filled(tmp_path)


def _inductor_works() -> bool:
    return shutil.which(os.environ.get("CXX", "g++")) is not None or shutil.which("c++") is not None


@pytest.mark.slow
@pytest.mark.skipif(not _inductor_works(), reason="inductor's CPU backend needs a C++ compiler")
def test_the_second_process_of_a_compiled_arm_loads_its_graphs_from_the_cache(tmp_path: Path) -> None:
    worktree = tmp_path / "arm"
    worktree.mkdir()
    worktree.chmod(0o755)
    spec = _spec("guard.workloads.compiled:make", COMPILED_OPTIONS)
    with compile_caches(["head"]) as caches:
        target = ArmTarget(name="head", python=Path(sys.executable),
                           box=choose_box(), worktree=worktree, compile_cache=caches["head"],
                           env={"PYTHONPATH": str(REPO_ROOT)})
        lines: list[str] = []
        found = run_interleaved([target], spec, 2, tmp_path / "runs", timeout_s=600, progress=lines.append)["head"]
        compiled_files = [p for p in (caches["head"] / "inductor").rglob("*") if p.is_file()]
    assert found.error is None, found.log_tail
    first, second = (r.compile for r in found.repeats)
    assert first is not None and second is not None
    assert first.fx_graph.miss >= 1 and first.fx_graph.hit == 0  # the first compiled every graph
    assert second.fx_graph.hit == first.fx_graph.miss and second.fx_graph.miss == 0
    assert second.aot_autograd.hit >= 1 and second.aot_autograd.miss == 0
    assert second.compile_s < first.compile_s
    assert compiled_files  # in the arm's folder, not in the process's own temp folder
    # the result file as the harness wrote it holds the same counts, from torch's own counters
    written = json.loads((tmp_path / "runs" / "head-1.json").read_text())["compile"]
    assert written["fx_graph"] == second.fx_graph.model_dump()
    # the progress lines say it, and benchmarks/process_phases.py reads the first process beside the later one
    (tmp_path / "pair").mkdir()
    (tmp_path / "pair" / "progress.log").write_text("compile caches: a folder per arm under /x, shared\n"
                                                    + "\n".join(lines) + "\n")
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "process_phases.py"), str(tmp_path / "pair")],
                          capture_output=True, text=True, check=True)
    first_s, second_s = (r.process_s for r in found.repeats)
    assert (f"  head: first {first_s:.1f} s (torch.compile {first.compile_s:.1f} s, FX graph cache 0 hit "
            f"{first.fx_graph.miss} miss); later 1, median {second_s:.1f} s (torch.compile {second.compile_s:.1f} s, "
            f"FX graph cache {second.fx_graph.hit} hit 0 miss)") in proc.stdout, proc.stdout
    assert proc.stdout.splitlines()[0].endswith("; compile cache on")


# --- the interpreter the arms run on ----------------------------------------------------------


def _hidden_python(tmp_path: Path) -> Path:
    """This interpreter, named through a link in a folder only root may enter (like /root/.pyenv)."""
    outer = tmp_path / "runner-home"
    outer.mkdir()
    outer.chmod(0o755)
    private = outer / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    (private / "python").symlink_to(sys.executable)
    return private / "python"


@needs_root
def test_an_interpreter_the_build_user_cannot_reach_is_named(tmp_path: Path) -> None:
    user = pr_user("guard-pr")
    assert user is not None
    check_interpreter(user, Path(sys.executable), [HARNESS_SCRIPT])  # this one it can run
    with pytest.raises(LaunchError) as caught:
        check_interpreter(user, _hidden_python(tmp_path))
    assert caught.value.message.startswith(
        f"the user '{user.name}' that runs the pull request's code (build.user) cannot run the interpreter the arms "
        f"run on, {tmp_path / 'runner-home' / 'private' / 'python'} (build.python, or the guard's own): "
        "Permission denied; install it where every user may read it")
    # one it can run, whose packages it cannot read
    venv = tmp_path / "runner-home" / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    site.chmod(0o700)
    with pytest.raises(LaunchError) as caught:
        check_interpreter(user, venv / "bin" / "python")
    assert f"cannot read {site}, which the interpreter the arms run on, {venv / 'bin' / 'python'}" in (
        caught.value.message)


@needs_root
def test_guard_run_refuses_an_interpreter_out_of_the_build_user_s_reach_before_building(tmp_path: Path) -> None:
    hidden = _hidden_python(tmp_path)
    git_repo = tmp_path / "engine"
    git_repo.mkdir()
    git(git_repo, "init", "--quiet", "--initial-branch=main")
    (git_repo / "guard.toml").write_text(f'[build]\nmethod = "venv"\npython = "{hidden}"\n')
    commit_all(git_repo, "config")
    git(git_repo, "checkout", "--quiet", "-b", "head")
    (git_repo / "NOTES.md").write_text("a change\n")
    commit_all(git_repo, "head")
    cache = tmp_path / "cache"
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "run", "--repo", str(git_repo), "--base", "main", "--head", "head",
         "--out", str(tmp_path / "out"), "--cache-dir", str(cache)],
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    # the run's own build identity: guard-pr, or guard-pr-N where other runs on the host hold the first ones
    assert re.fullmatch(
        r"guard: error: the user 'guard-pr(-\d+)?' that runs the pull request's code \(build\.user\) cannot run the "
        + re.escape(f"interpreter the arms run on, {hidden} (build.python, or the guard's own): Permission denied; "
                    "install it where every user may read it (a system python3, or one under a folder that others "
                    "may search and read: chmod o+rx every folder above it), or set build.python to one that is"),
        lines[-1]), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not cache.exists() or not any(cache.iterdir())  # nothing was built
    assert pwd.getpwnam("guard-pr").pw_uid != 0


@pytest.mark.slow
def test_no_measured_process_of_either_arm_is_the_one_that_compiles(tmp_path: Path) -> None:
    """Base's reference process fills base's cache; head's is filled by one unmeasured process
    of its own. Without it head's first measured process compiles and base's none: on the H200
    such a process ran 9% faster than the ones that load, which lands on one arm alone."""
    from tests.test_pipeline import CONFIG, make_repo

    marking = MARKING_WORKLOAD.format(names=sorted([*COMPILE_CACHES, *CACHE_DEFAULTS]))
    repo = make_repo(tmp_path, config=CONFIG.format(method="none", install="", repeats=2).replace("[1, 2]", "[1]"),
                     files={"wl.py": marking})
    (repo / "wl.py").write_text(marking + "\n# a comment, nothing else\n")
    commit_all(repo, "a comment")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "feature",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1, 4), proc.stderr  # a verdict, any
    assert "compile caches: one unmeasured process for head compiles first" in proc.stderr
    fill = json.loads((out / "runs" / "compile-fill" / "head-0.json").read_text())
    assert fill["runs"][0]["workload"]["earlier"] == []  # it was the first of its arm
    for arm in ("base", "head"):
        for repeat in range(2):
            seen = json.loads((out / "runs" / f"{arm}-{repeat}.json").read_text())["runs"][0]["workload"]
            assert seen["earlier"], f"{arm} repeat {repeat} found no earlier process's mark: it compiled"
    assert not (out / "runs" / "compile-fill" / "base-0.json").exists()  # base's reference process filled it
    report = json.loads((out / "report.json").read_text())
    assert report["compile_caches"] is True and report["compile_filled"] == ["head"]  # a field, not only a line


@pytest.mark.slow
@needs_root
def test_no_measured_process_of_a_calibration_is_the_one_that_compiles(tmp_path: Path) -> None:
    """`guard calibrate` fills its second side's cache as `guard run` fills head's: on the H200
    its second side's first measured process compiled and ran at 0.200 ms per step where the
    other nine ran at 0.219-0.221, which made the spread 3.1% and the threshold 19%."""
    from tests.test_calibrate import SLEEPY_CONFIG
    from tests.test_pipeline import make_repo

    # steps of 4 ms of sleep: steady enough on a shared CPU for calibrate to write its files
    marking = MARKING_WORKLOAD.format(names=sorted([*COMPILE_CACHES, *CACHE_DEFAULTS])).replace(
        "        return self.out\n", "        import time\n        time.sleep(0.004)\n        return self.out\n")
    repo = make_repo(tmp_path, config=SLEEPY_CONFIG, files={"wl.py": marking})
    out = tmp_path / "cal" / "thresholds.toml"
    out.parent.mkdir()
    proc = subprocess.run([sys.executable, "-m", "guard", "calibrate", "--repo", str(repo), "--ref", "main",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "compile caches: one unmeasured process for b compiles first" in proc.stderr
    runs = tmp_path / "cal" / "thresholds-runs"
    fill = json.loads((runs / "compile-fill" / "b-0.json").read_text())
    assert fill["runs"][0]["workload"]["earlier"] == []  # it was the first of its side
    assert not (runs / "compile-fill" / "a-0.json").exists()  # side a's reference process filled it
    calibration = json.loads((tmp_path / "cal" / "thresholds-calibration.json").read_text())
    assert calibration["compile_filled"] == ["b"]  # a field, not only a line
    for side in ("a", "b"):
        for repeat in range(4):
            seen = json.loads((runs / f"{side}-{repeat}.json").read_text())["runs"][0]["workload"]
            assert seen["earlier"], f"side {side} repeat {repeat} found no earlier process's mark: it compiled"


def test_the_report_says_which_arm_compiled_first_and_refuses_a_fill_it_could_not_have(tmp_path: Path) -> None:
    from guard.report import ReportError, read_report, render_comment
    from tests.report_fixtures import committed

    example = Path(__file__).resolve().parents[1] / "docs" / "examples" / "h200-graph-break-callee-c435193"
    report = committed(example / "report.json").model_copy(update={"compile_caches": True, "compile_filled": ["head"]})
    assert report.compiled is not None  # an engine under torch.compile
    comment = render_comment(report)
    assert ("torch.compile's caches are in a folder per arm, shared by that arm's processes and rounds, never between "
            "arms; head first ran one unmeasured process that compiled, as base's reference process did for base, "
            "so that no measured process is the one that compiles.") in comment
    assert "unmeasured process" not in render_comment(report.model_copy(update={"compile_filled": []}))
    path = tmp_path / "report.json"
    for forged, why in ((["base"], "names 'base', not an arm besides base"), (["nobody"], "names 'nobody'")):
        path.write_text(report.model_copy(update={"compile_filled": forged}).model_dump_json())
        with pytest.raises(ReportError, match=why):
            read_report(path)
    path.write_text(report.model_copy(update={"compile_caches": None}).model_dump_json())
    with pytest.raises(ReportError, match="is set with compile caches off"):
        read_report(path)


def test_the_folder_of_a_killed_guard_is_removed_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a guard killed with SIGKILL mid-run: its folder holds its pid and start time, and both are gone
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started = process_start(killed.pid)
    killed.kill()
    killed.wait()
    abandoned = tmp_path / f"guard-compile-cache-{killed.pid}-{started}-x1y2"
    (abandoned / "base-ab12" / "inductor").mkdir(parents=True)
    (abandoned / "base-ab12" / "inductor" / "kernel.so").write_bytes(b"compiled")
    running = tmp_path / f"guard-compile-cache-{os.getpid()}-{process_start(os.getpid())}-z9"  # a guard that runs
    older = tmp_path / "guard-compile-cache-q7r8"  # a name of the layout before pids: not known dead, left
    planted = tmp_path / f"guard-compile-cache-{killed.pid}-{started}-link"  # a link another user may plant
    for folder in (running, older):
        folder.mkdir()
    planted.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with compile_caches(["base", "head"]) as folders:
        assert not abandoned.exists()
        assert running.is_dir() and older.is_dir() and planted.is_symlink() and (tmp_path / "elsewhere").is_dir()
        root = folders["base"].parent
        assert root.name.startswith(f"guard-compile-cache-{os.getpid()}-{process_start(os.getpid())}-")
        assert remove_abandoned(tmp_path) == []  # this run's own folder: its guard runs
    assert not root.exists()
