"""Every error a message: the inputs an attacker tried, each in a real `guard` process.

Exit code 1 means "regression", so nothing else may give it: a known failure is one line
and exit 2, a bug in the guard is one line naming the file that keeps its traceback and
exit 2, Ctrl-C is 130. Disks are real (small tmpfs mounts, /dev/full), GitHub is the
stand-in on loopback, the bombs and nestings are made here."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import guard.publish._client as client
from guard._errors import OutputError
from guard.config import Thresholds, write_thresholds
from guard.publish import GitHub, PublishError, write_outputs
from guard.report import read_report, write_report
from tests.conftest import commit_all, git
from tests.github_standin import GitHubStandIn
from tests.report_fixtures import committed, current_file
from tests.test_pipeline import make_repo
from tests.workload_sources import busy_workload

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = current_file(REPO_ROOT / "docs" / "examples" / "h200-demo" / "report.json")
SMALL_TRACE = REPO_ROOT / "tests" / "fixtures" / "traces" / "h200-refengine-step-graph-bs1.json.gz"
REPO, PR, TOKEN = "octo/engine", 7, "user-token"
MiB = 1 << 20


def guard(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guard", *args], capture_output=True, text=True, timeout=timeout,
                          env=os.environ | (env or {}), cwd=REPO_ROOT)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The process failed as a message: exit 2, no traceback, its last stderr line the error."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.rstrip("\n").splitlines()[-1]
    assert last.startswith("guard: error: "), proc.stderr
    return last


def only_line(proc: subprocess.CompletedProcess[str]) -> str:
    """As one_error_line, and nothing else was said: the check came before any work."""
    line = one_error_line(proc)
    assert proc.stderr.strip() == line, proc.stderr
    return line


@contextlib.contextmanager
def small_disk(path: Path, size: str, *options: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `path`: a disk that really fills, or really is read-only."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small disk needs root")
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *options]), "tmpfs", str(path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path) -> None:
    """Write a filler file until the disk says it is full."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for block in (1 << 16, 1 << 12, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * block)
        with pytest.raises(OSError) as full:
            os.write(fd, b"\0")
        assert full.value.errno == errno.ENOSPC
    finally:
        os.close(fd)


def peak_rss_mib(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run `guard ARGS` under a parent that reports its child's peak resident memory."""
    parent = textwrap.dedent("""
        import resource, subprocess, sys
        proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
        sys.stderr.write(proc.stderr)
        print(proc.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    """)
    proc = subprocess.run([sys.executable, "-c", parent, sys.executable, "-m", "guard", *args],
                          capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    code, rss_kib = proc.stdout.split()
    return subprocess.CompletedProcess(proc.args, int(code), "", proc.stderr), int(rss_kib) / 1024


# -- the top of the command line ------------------------------------------------------


PLANTED_BUG = """
import sys
import guard.pipeline, guard.trace

def planted(*args, **kwargs):
    raise ZeroDivisionError("planted by the test")

guard.pipeline.run_guard = guard.trace.analyze = planted
from guard.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def test_a_bug_is_one_line_naming_the_file_that_keeps_its_traceback(tmp_path: Path) -> None:
    """A failure no message was written for: the line says it is a bug, never exit 1, and
    the traceback is beside the report in --out, or in a temp file without one."""
    repo = make_repo(tmp_path)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", PLANTED_BUG, "run", "--repo", str(repo), "--head", "feature",
                           "--out", str(out)], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    line = only_line(proc)
    bug_file = out / "guard-bug.txt"
    assert line == (f"guard: error: unexpected ZeroDivisionError: planted by the test; this is a bug in the guard, "
                    f"please report it. The traceback is in {bug_file}")
    saved = bug_file.read_text()
    assert "Traceback (most recent call last)" in saved and "in planted" in saved and "command: guard run" in saved

    proc = subprocess.run([sys.executable, "-c", PLANTED_BUG, "analyze", str(SMALL_TRACE)],
                          capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    line = only_line(proc)
    temp = Path(re.fullmatch(r".*The traceback is in (\S+)", line)[1])  # type: ignore[index]
    try:
        assert temp.name.startswith("guard-bug-") and "ZeroDivisionError: planted by the test" in temp.read_text()
    finally:
        temp.unlink()


def test_running_out_of_memory_is_a_message(tmp_path: Path) -> None:
    """Under an address-space limit, a trace allowed to be larger than the memory left: the
    guard says it ran out of memory, with exit 2."""
    import resource

    members = _spaces_gzip(64 * MiB)
    bomb = tmp_path / "large.json.gz"
    bomb.write_bytes(_trace_start_gzip() + members * 4)  # 256 MiB of JSON, ISIZE of the last member only
    one_thread = os.environ | {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}  # no per-thread arenas
    probe = subprocess.run([sys.executable, "-c", "import guard.cli, guard.trace, guard.report;"
                            "print(int(open('/proc/self/status').read().split('VmPeak:')[1].split()[0]))"],
                           capture_output=True, text=True, cwd=REPO_ROOT, check=True, env=one_thread)
    limit = (int(probe.stdout) + 160 * 1024) * 1024  # what the imports take, and 160 MiB

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = subprocess.run([sys.executable, "-m", "guard", "analyze", str(bomb), "--max-trace-mib", "4096"],
                          capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, preexec_fn=limited,
                          env=one_thread)
    line = only_line(proc)
    assert "`guard analyze` ran out of memory" in line and "The traceback is in" in line
    Path(line.rsplit("The traceback is in ", 1)[1]).unlink(missing_ok=True)


def test_ctrl_c_exits_130_without_a_traceback(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    # Ctrl-C's disposition as a terminal gives it: a shell's background job (`./.ci/run &`) starts
    # with SIGINT ignored, which its children inherit, and Python then installs no handler
    proc = subprocess.Popen([sys.executable, "-m", "guard", "analyze", str(fifo)], stderr=subprocess.PIPE, text=True,
                            cwd=REPO_ROOT, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    with open(fifo, "wb"):  # returns once the guard has opened the pipe: it waits in read() now
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and stderr.strip() == "guard: interrupted"


# -- where the outputs go -------------------------------------------------------------


def test_out_that_is_a_file_is_refused_before_any_build(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    taken = tmp_path / "taken"
    taken.write_text("someone's file\n")
    cache = tmp_path / "cache"
    common = ["run", "--repo", str(repo), "--head", "feature", "--cache-dir", str(cache)]
    assert only_line(guard(*common, "--out", str(taken))) == (
        f"guard: error: --out {taken} is a file, not a folder; give a folder for the guard's outputs")
    assert "a part of its path is a file" in only_line(guard(*common, "--out", str(taken / "sub")))
    assert taken.read_text() == "someone's file\n" and not cache.exists()  # nothing was built
    assert "is a folder; give the path of the file" in only_line(
        guard("calibrate", "--repo", str(repo), "--out", str(tmp_path)))


def test_out_on_a_read_only_disk_is_refused_before_any_build(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    with small_disk(tmp_path / "ro", "1m", "ro") as disk:
        line = only_line(guard("run", "--repo", str(repo), "--head", "feature", "--out", str(disk / "out"),
                               "--cache-dir", str(tmp_path / "cache")))
        assert line.startswith(f"guard: error: --out {disk / 'out'} is not a folder the guard can write in: ")
        assert "Read-only file system" in line
        assert not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_a_full_disk_keeps_the_earlier_report_whole(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, repeats=2)
    (repo / "note.txt").write_text("no code change\n")
    commit_all(repo, "a head that is not its base")
    with small_disk(tmp_path / "disk", "4m") as disk:
        out = disk / "out"
        first = guard("run", "--repo", str(repo), "--head", "feature", "--out", str(out))
        assert first.returncode in (0, 4), first.stderr  # a pass, or undecided
        before = {name: (out / name).read_bytes() for name in ("report.json", "comment.md")}
        fill(disk)
        again = guard("run", "--repo", str(repo), "--head", "feature", "--out", str(out))
        line = one_error_line(again)
        assert "no space left on" in line and "free some space" in line
        assert {name: (out / name).read_bytes() for name in before} == before
        assert read_report(out / "report.json").verdict in ("pass", "at_threshold", "inconclusive")
        assert not list(out.glob(".*.tmp"))


def test_report_and_thresholds_are_written_whole_or_not_at_all(tmp_path: Path) -> None:
    """The writers themselves on a disk that fills: the earlier files stay as they were, and
    no temporary file is left behind."""
    report = committed(EXAMPLE)
    with small_disk(tmp_path / "disk", "1m") as disk:
        write_report(report, disk)
        write_thresholds(disk / "thr.toml", Thresholds(gpu_ms_pct=2.0, tok_per_s_pct=3.0), "first")
        before = {p.name: p.read_bytes() for p in disk.iterdir()}
        fill(disk)
        bigger = report.model_copy(update={"reasons": ["x" * 200_000]})
        with pytest.raises(OutputError, match=r"cannot write .*: no space left on its disk"):
            write_report(bigger, disk)
        with pytest.raises(OutputError, match=r"thr\.toml: no space left"):
            write_thresholds(disk / "thr.toml", Thresholds(gpu_ms_pct=9.0, tok_per_s_pct=9.0), "x" * 10_000)
        assert {p.name: p.read_bytes() for p in disk.iterdir() if p.name != "filler"} == before


def test_step_outputs_and_summary_on_a_full_disk(tmp_path: Path) -> None:
    """`guard summary` appends to files the runner owns: on a full disk it says so, and what
    the file held before is left without half a line of it."""
    report = tmp_path / "report.json"
    report.write_text(EXAMPLE.read_text())
    line = only_line(guard("summary", "--report", str(report), env={"GITHUB_STEP_SUMMARY": "/dev/full"}))
    assert line == ("guard: error: cannot write /dev/full: no space left on its disk; free some space and run again "
                    "(what it held is kept)")
    with small_disk(tmp_path / "disk", "64k") as disk:
        outputs = disk / "github_output"
        outputs.write_text("earlier=1\n")
        fill(disk)
        with pytest.raises(OutputError, match="no space left"):
            write_outputs(outputs, {"verdict": "regression", "comment": "x\n" * 8_000})
        assert outputs.read_text() == "earlier=1\n"


# -- traces ---------------------------------------------------------------------------


def _trace_start_gzip() -> bytes:
    return zlib.compress(b'{"traceEvents": [', 9, wbits=31)


def _spaces_gzip(size: int) -> bytes:
    """One gzip member of `size` spaces (about a thousandth of that on disk)."""
    pack = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (16 * MiB)
    return b"".join(pack.compress(block) for _ in range(size // len(block))) + pack.flush()


@pytest.mark.slow
def test_a_gzip_bomb_is_refused_without_holding_it(tmp_path: Path) -> None:
    """5 GiB of trace in 5 MB of gzip (members repeated, so the trailer tells 64 MiB): the
    default cap of 2 GiB refuses it, and the guard never holds more than a little of it."""
    member = _spaces_gzip(64 * MiB)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(_trace_start_gzip() + member * 80 + zlib.compress(b"]}", 9, wbits=31))
    assert bomb.stat().st_size < 8 * MiB
    small, small_rss = peak_rss_mib("analyze", str(SMALL_TRACE))
    assert small.returncode == 0, small.stderr
    proc, rss = peak_rss_mib("analyze", str(bomb))
    assert only_line(proc) == (
        f"guard: error: {bomb} expands to more than the 2,147,483,648 bytes a trace may be uncompressed; a decode "
        "trace of a few hundred steps is far smaller: profile fewer steps, or raise the limit "
        "(guard analyze --max-trace-mib)")
    assert rss < small_rss + 200, (rss, small_rss)  # the trailer's 64 MiB at the most, never gigabytes

    proc, rss = peak_rss_mib("analyze", str(bomb), "--max-trace-mib", "16")
    assert "expands to more than the 16,777,216 bytes" in only_line(proc)


def test_traces_too_large_or_endless_are_refused(tmp_path: Path) -> None:
    plain = tmp_path / "big.json"
    plain.write_bytes(b'{"traceEvents": [' + b" " * (2 * MiB) + b"]}")
    line = only_line(guard("analyze", str(plain), "--max-trace-mib", "1"))
    assert line.startswith(f"guard: error: {plain} is 2,097,171 bytes, more than the 1,048,576 bytes a trace may be")
    line = only_line(guard("analyze", "/dev/zero", "--max-trace-mib", "8"))  # a device: no size to check first
    assert line.startswith("guard: error: /dev/zero holds more than the 8,388,608 bytes a trace may be")
    usage = guard("analyze", str(plain), "--max-trace-mib", "0")
    assert usage.returncode == 2 and "expected a whole number of 1 or more, got '0'" in usage.stderr


@pytest.mark.parametrize("depth", [2_000, 1_000_000])
def test_deeply_nested_json_trace(tmp_path: Path, depth: int) -> None:
    deep = tmp_path / "deep.json"
    deep.write_bytes(b'{"traceEvents": [{"ph": "X", "args": ' + b"[" * depth + b"]" * depth + b"}]}")
    assert "nests JSON arrays or objects about a thousand levels deep" in only_line(guard("analyze", str(deep)))
    deep.write_bytes(b'{"traceEvents": ' + b"[" * depth + b"]" * depth + b"}")
    assert "nests JSON arrays or objects" in only_line(guard("diff", str(SMALL_TRACE), str(deep)))


# -- reports read back ----------------------------------------------------------------


def test_reports_that_are_no_reports(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_bytes(b'{"schema_version": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    assert "is not a valid report" in only_line(guard("summary", "--report", str(deep)))
    line = only_line(guard("summary", "--report", "/dev/zero"))
    assert line == "guard: error: /dev/zero holds more than the 33,554,432 bytes a report can be"
    assert "Is a directory" in only_line(guard("summary", "--report", str(tmp_path)))
    # valid JSON, valid fields, and a head that is none of its arms
    data = json.loads(EXAMPLE.read_text())
    data["head"] = "elsewhere"
    (tmp_path / "report.json").write_text(json.dumps(data))
    assert only_line(guard("summary", "--report", str(tmp_path / "report.json"))) == (
        f"guard: error: {tmp_path / 'report.json'} is not a valid report: its head 'elsewhere' is none of its arms; "
        "pass the report.json that `guard run` wrote")


# -- GitHub ---------------------------------------------------------------------------


@pytest.fixture
def api() -> Iterator[GitHubStandIn]:
    with GitHubStandIn({TOKEN: "guard-bot"}) as server:
        yield server


def comment(api: GitHubStandIn, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    report = tmp_path / "report.json"
    report.write_text(EXAMPLE.read_text())  # a regression: a comment is due
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": api.url, "GITHUB_REPOSITORY": REPO}
    return guard("comment", "--report", str(report), "--pr", str(PR), env=env, timeout=120)


def test_an_html_page_with_status_200_is_a_message(api: GitHubStandIn, tmp_path: Path) -> None:
    api.plan("GET", "/user", "html-200")
    line = one_error_line(comment(api, tmp_path))
    assert line.startswith("guard: error: GET /user: HTTP 200 with a body that is not JSON (text/html: "
                           "'<!DOCTYPE html>")
    assert "GITHUB_API_URL must be the API" in line
    assert api.requests("POST") == [] and api.requests("PATCH") == []


def test_a_next_link_back_to_its_own_page_stops(api: GitHubStandIn, tmp_path: Path) -> None:
    api.plan("GET", rf"/repos/{REPO}/issues/{PR}/comments", "self-next")
    line = one_error_line(comment(api, tmp_path))
    assert "the `next` link points back to a page already read" in line
    assert len(api.requests("GET", "/comments$")) == 1 and api.comments(REPO, PR) == []


@pytest.mark.slow
def test_next_links_without_end_stop_at_the_page_limit(api: GitHubStandIn, tmp_path: Path) -> None:
    api.plan("GET", rf"/repos/{REPO}/issues/{PR}/comments", "endless-next")
    line = one_error_line(comment(api, tmp_path))
    assert f"more than {client.MAX_PAGES} pages; stopping" in line
    assert len(api.requests("GET", "/comments$")) == client.MAX_PAGES and api.comments(REPO, PR) == []


def test_comments_of_the_wrong_shape_are_skipped_not_fatal(api: GitHubStandIn, tmp_path: Path) -> None:
    marker = "<!-- regression-guard:comment key=default -->\nold"
    api.state.comments[(REPO, PR)] = [
        {"id": "not-a-number", "body": marker, "user": {"login": "guard-bot"}},
        {"id": 5, "body": 12, "user": {"login": "guard-bot"}},
        {"id": 6, "body": marker, "user": "guard-bot"},
    ]
    proc = comment(api, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(api.comments(REPO, PR)) == 4 and len(api.requests("POST", "/comments$")) == 1


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.mark.parametrize("kind, header, wait_s", [
    ("retry-after", "soon", client.SECONDARY_LIMIT_WAIT_S),
    ("retry-after", "nan", client.SECONDARY_LIMIT_WAIT_S),
    ("retry-after", "inf", client.SECONDARY_LIMIT_WAIT_S),
    ("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # a date gone by: no wait
    ("retry-after", "12", 12.0),
    ("reset", "tomorrow", client.SECONDARY_LIMIT_WAIT_S),
])
def test_rate_limit_headers_that_are_no_number_or_date(api: GitHubStandIn, kind: str, header: str,
                                                       wait_s: float) -> None:
    sleeps = Sleeps()
    api.plan("GET", "/user", kind, header=header)
    with GitHub(TOKEN, api.url, sleep=sleeps) as gh:
        assert gh.get("/user")["login"] == "guard-bot"
    assert sleeps == [wait_s]


def test_waiting_and_retrying_in_all_are_bounded(api: GitHubStandIn) -> None:
    sleeps = Sleeps()
    api.plan("GET", "/user", "retry-after", times=3, wait_s=250)
    with GitHub(TOKEN, api.url, sleep=sleeps) as gh, pytest.raises(PublishError) as err:
        gh.get("/user")
    assert sleeps == [250, 250]  # a third would pass the 600 s of waiting one run allows
    assert "giving up: this run has retried 2 times and waited 500 s" in err.value.message

    sleeps = Sleeps()
    api.plan("GET", "/user", "5xx", times=1_000, status=503)
    with GitHub(TOKEN, api.url, sleep=sleeps) as gh:
        for _ in range(client.MAX_RETRIES // (gh.max_tries - 1)):
            with pytest.raises(PublishError, match="after 5 tries"):
                gh.get("/user")
        with pytest.raises(PublishError, match=f"at most {client.MAX_RETRIES} retries"):
            gh.get("/user")
    assert len(sleeps) == client.MAX_RETRIES


def test_an_answer_trickled_a_byte_at_a_time_is_cut_off(api: GitHubStandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each byte comes well within httpx's read timeout; the answer as a whole does not."""
    monkeypatch.setattr(client, "ANSWER_DEADLINE_S", 0.5)
    api.plan("GET", "/user", "trickle", times=2, wait_s=0.1)
    started = time.monotonic()
    with GitHub(TOKEN, api.url, sleep=Sleeps(), max_tries=2) as gh, pytest.raises(PublishError) as err:
        gh.get("/user")
    assert "no answer after 2 tries (ReadTimeout('the answer took over 0.5 s'))" in err.value.message
    assert time.monotonic() - started < 5  # the whole answer would take 4 s, twice


def test_an_answer_too_large_is_refused(api: GitHubStandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "MAX_ANSWER_BYTES", 4_000)
    for n in range(40):
        api.add_comment(REPO, PR, "someone", f"comment {n} " + "x" * 200)
    with GitHub(TOKEN, api.url, sleep=Sleeps()) as gh, pytest.raises(PublishError, match="the answer is over"):
        list(gh.paginate(f"/repos/{REPO}/issues/{PR}/comments"))


# -- config and harness input ---------------------------------------------------------


def test_an_arm_env_name_with_equals_is_a_config_error(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    git(repo, "checkout", "--quiet", "main")  # the base commit's config is the one read

    def run() -> str:
        return only_line(guard("run", "--repo", str(repo), "--base", "main", "--head", "feature",
                               "--out", str(tmp_path / "out")))

    config = repo / "guard.toml"
    config.write_text(config.read_text() + '[[arms]]\nname = "x"\nfrom = "head"\nenv = { "A=B" = "1" }\n')
    commit_all(repo, "an arm with a bad variable name")
    assert run().endswith("bad value for 'arms.0.env': {'A=B': '1'}; expected: environment variable names are "
                          "letters, digits and _, not starting with a digit: 'A=B'")
    config.write_text(config.read_text().replace('"A=B" = "1"', 'A = "1\\u0000"'))
    commit_all(repo, "a NUL in a value")
    assert "cannot hold a NUL" in run()
    config.write_text(config.read_text().replace('A = "1\\u0000"', 'A = "1"').replace(
        "[[arms]]", "[workload.options]\nwhen = 1979-05-27\n[[arms]]"))
    commit_all(repo, "a date among the options")
    assert "not dates or times" in run()


# The workload's process rewrites its own result file as it exits: in the reference pass a
# string where a batch size is due; in measured passes, JSON nested past any parser's limit.
# The harness ends with os._exit, which runs no atexit hook: the workload wraps it too.
REWRITES_ITS_RESULT = '''
import atexit, json, os, sys

def _rewrite():
    spec = json.load(open(sys.argv[1]))
    if spec.get("mode") == "reference":
        text = json.dumps({"accepts_tokens": True, "runs": [{"batch_size": "one", "tokens": [[1]]}]})
    else:
        text = "[" * 100000 + "]" * 100000
    open(sys.argv[2], "w").write(text)

_exit = os._exit

def _rewrite_and_exit(code):
    _rewrite()
    _exit(code)

atexit.register(_rewrite)
os._exit = _rewrite_and_exit
'''


@pytest.mark.slow
def test_a_workload_that_rewrites_its_result_gets_messages(tmp_path: Path) -> None:
    workload = busy_workload(work=3000)
    # in the base too: the reference pass runs the base's code
    repo = make_repo(tmp_path, repeats=2, files={"wl.py": REWRITES_ITS_RESULT + workload})
    (repo / "note.txt").write_text("no code change\n")
    commit_all(repo, "a head that is not its base")
    out = tmp_path / "out"
    proc = guard("run", "--repo", str(repo), "--head", "feature", "--out", str(out))
    assert "reference: failed (its result is malformed at runs.0.batch_size" in proc.stderr
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
    report = read_report(out / "report.json")
    assert report.verdict == "invalid"
    assert all(arm.status == "run_failed" and "no result" in (arm.error or "") for arm in report.arms)


def test_the_stand_in_trickles_for_real(api: GitHubStandIn) -> None:
    """The trickle fault above is slow per answer, not per byte: without the deadline an
    answer arrives whole, later."""
    api.plan("GET", "/user", "trickle", wait_s=0.01)
    started = time.monotonic()
    with GitHub(TOKEN, api.url, sleep=Sleeps()) as gh:
        assert gh.get("/user")["login"] == "guard-bot"
    assert time.monotonic() - started > 0.2  # ~40 bytes at 10 ms each

