"""build.method "docker" against a real Docker engine: the isolation seen from inside the
container, the time limit, the removal of every container (SIGKILL of the guard included),
and the whole pipeline building and measuring two arms as images. The arms' base is a
local Python-only image (tools/docker/make-test-base.sh), as no registry may be reachable;
everything that needs the engine is skipped with one line where none answers."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from guard.config._models import GuardConfig
from guard.config import ConfigOverrides
from guard.measure._in_container import container_environment
from guard.pipeline import build_arms, plan_run
from guard.sandbox import Container, Mount, choose_box, guard_environment, run_container
from guard.sandbox._container import LABEL, LABEL_BOOT, LABEL_PID, LABEL_START, boot_id, device_requests
from tests.docker_engine import engine_with
from tests.conftest import commit_all, git
from tests.workload_sources import busy_workload

docker = pytest.importorskip("docker")

ROOT = Path(__file__).resolve().parents[1]
BASE_IMAGE = os.environ.get("GUARD_TEST_SMALL_BASE", "local/python:3.11")


@pytest.fixture(scope="module")
def client():  # type: ignore[no-untyped-def]
    return engine_with(BASE_IMAGE, "no Docker engine answers: docker mode not tested (see docs/docker-mode.md)")


def base_container(client, **limits) -> Container:
    settings = {"python": "python3", "workdir": "/", "user": "65534:65534", "gpus": "none", "cpus": 1.0,
                "memory_mb": 256, "pids_limit": 64, "shm_mb": 64, "tmpfs_mb": 64} | limits
    return Container(image=client.images.get(BASE_IMAGE).id, **settings)


def ours(client) -> list[dict]:
    """The guard's containers as one listing gives them (no inspection each, which a removal races)."""
    return client.api.containers(all=True, filters={"label": LABEL})


# --- what needs no engine ---------------------------------------------------------------

def test_gpus_are_asked_for_only_where_configured_and_present() -> None:
    assert device_requests("none", host_has_gpu=True) == []
    assert device_requests("auto", host_has_gpu=False) == []
    [every] = device_requests("auto", host_has_gpu=True)
    assert every["Count"] == -1 and every["Capabilities"] == [["gpu"]]
    assert device_requests("all", host_has_gpu=False)[0]["Count"] == -1  # asked for: the engine says if it can
    [named] = device_requests("0,GPU-5d1f", host_has_gpu=True)
    assert named["DeviceIDs"] == ["0", "GPU-5d1f"] and not named.get("Count")


def test_the_container_environment_is_the_allowlist_without_the_hosts_paths(monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws_secret")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker.sock")  # the guard's, to reach the engine
    assert "DOCKER_HOST" in guard_environment()
    env = container_environment([], {"TORCH_LOGS": "graph_breaks"})
    assert "DOCKER_HOST" not in env
    assert "hf_secret" not in env.values() and "ghs_secret" not in env.values() and "aws_secret" not in env.values()
    assert env["OMP_NUM_THREADS"] == "3" and env["TORCH_LOGS"] == "graph_breaks"
    assert "PATH" not in env and "PIP_FIND_LINKS" not in env  # the image's own ENV says where things are
    assert env["HOME"] == env["TMPDIR"] == "/tmp"
    assert container_environment(["HF_TOKEN"], {})["HF_TOKEN"] == "hf_secret"  # named in build.pass_env


def test_a_full_disk_is_said_as_such_not_blamed_on_the_dockerfile() -> None:
    from guard.checkout._docker import _remedy

    full = "no space left on device"  # the whole of what the engine said when CI's disk filled
    assert "disk is full" in _remedy(full) and "docker image prune" in _remedy(full)
    assert _remedy("The command '/bin/sh -c false' returned a non-zero code: 1").startswith("fix the Dockerfile")


def test_a_root_user_in_the_container_is_refused() -> None:
    with pytest.raises(ValueError, match="uid 0 is root"):
        GuardConfig.model_validate({"build": {"method": "docker", "docker": {"user": "0:1000"}}})


# --- against the engine -----------------------------------------------------------------

CHECKS = r'''
import errno, json, os, socket, sys
found = {"uid": os.getuid(), "interfaces": sorted(os.listdir("/sys/class/net")), "env": dict(os.environ)}
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
found |= {k: status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs")}
def writes(path):
    try:
        with open(path, "w") as f:
            f.write("x")
        return "ok"
    except OSError as exc:
        return errno.errorcode[exc.errno]
found["writes"] = {p: writes(p) for p in ("/etc/guard-probe", "/usr/guard-probe", "/tmp/probe", "/guard/in/probe",
                                          "/guard/out/probe")}
try:
    socket.create_connection(("192.0.2.1", 80), timeout=2)
    found["connect"] = "connected"
except OSError as exc:
    found["connect"] = errno.errorcode.get(exc.errno, str(exc))
for name in ("/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/pids.max"):
    if os.path.exists(name):
        found["pids_max"] = open(name).read().strip()
for name in ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max"):
    if os.path.exists(name):
        found["memory_max"] = open(name).read().strip()
json.dump(found, open("/guard/out/found.json", "w"))
'''


@pytest.mark.slow
def test_isolation_seen_from_inside(client, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_secret_value")
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    out.mkdir(mode=0o777)
    out.chmod(0o777)
    (inputs / "checks.py").write_text(CHECKS)
    log = tmp_path / "log"
    with log.open("wb") as sink:
        code = run_container(
            choose_box(container=True).containers, base_container(client), ["python3", "/guard/in/checks.py"],
            mounts=[Mount(inputs, "/guard/in"), Mount(out, "/guard/out", writable=True)],
            env=container_environment([], {}), log=sink, timeout_s=120,
        )
    assert code == 0, log.read_text()
    found = json.loads((out / "found.json").read_text())
    assert found["interfaces"] == ["lo"]
    assert found["connect"] in ("ENETUNREACH", "EHOSTUNREACH")
    assert found["uid"] == 65534
    assert not any("secret_value" in value for value in found["env"].values())
    assert not {"HF_TOKEN", "GITHUB_TOKEN"} & found["env"].keys()
    assert int(found["CapEff"], 16) == int(found["CapPrm"], 16) == int(found["CapBnd"], 16) == 0
    assert found["NoNewPrivs"] == "1"
    assert found["writes"] == {"/etc/guard-probe": "EROFS", "/usr/guard-probe": "EROFS", "/tmp/probe": "ok",
                               "/guard/in/probe": "EROFS", "/guard/out/probe": "ok"}
    assert found["pids_max"] == "64"
    assert int(found["memory_max"]) == 256 << 20
    assert ours(client) == []


@pytest.mark.slow
def test_a_container_past_its_time_is_killed_and_removed(client, tmp_path: Path) -> None:
    started = time.monotonic()
    with (tmp_path / "log").open("wb") as sink:
        code = run_container(choose_box(container=True).containers, base_container(client), ["sleep", "300"],
                             mounts=[], env={}, log=sink, timeout_s=3)
    assert code is None
    assert time.monotonic() - started < 60
    assert ours(client) == []


HOLDER = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from guard.sandbox import Container, choose_box, run_container
container = Container.model_validate_json({container!r})
with open({log!r}, "wb") as sink:
    run_container(choose_box(container=True).containers, container, ["sleep", "300"], mounts=[], env={{}}, log=sink,
                  timeout_s=300)
"""


@pytest.mark.slow
def test_a_killed_guard_leaves_no_container(client, tmp_path: Path) -> None:
    script = HOLDER.format(root=str(ROOT), container=base_container(client).model_dump_json(),
                           log=str(tmp_path / "log"))
    guard = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 120
        mine = []
        while not mine and time.monotonic() < deadline:
            mine = [c for c in ours(client)
                    if (c.get("Labels") or {}).get(LABEL_PID) == str(guard.pid) and c["State"] == "running"]
            time.sleep(0.5)
        assert mine, "the container never started"
        guard.send_signal(signal.SIGKILL)
        guard.wait()
        deadline = time.monotonic() + 60
        while ours(client) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert ours(client) == []  # the watchdog removed it
    finally:
        if guard.poll() is None:
            guard.kill()


@pytest.mark.slow
def test_the_sweep_removes_containers_of_guards_that_are_gone_and_keeps_the_others(client) -> None:
    from guard.sandbox._reaper import remove_orphans

    image = client.images.get(BASE_IMAGE).id
    dead = subprocess.Popen(["true"])
    dead.wait()
    common = {LABEL: "sweep-test", LABEL_BOOT: boot_id()}
    gone = client.containers.create(image, ["sleep", "1"], network_mode="none",
                                    labels=common | {LABEL_PID: str(dead.pid), LABEL_START: "1"})
    from guard.sandbox._container import process_start
    alive = client.containers.create(image, ["sleep", "1"], network_mode="none",
                                     labels=common | {LABEL_PID: str(os.getpid()),
                                                      LABEL_START: str(process_start(os.getpid()))})
    try:
        assert remove_orphans(client) == 1
        left = {c["Id"] for c in ours(client)}
        assert alive.id in left and gone.id not in left
    finally:
        for container in (gone, alive):
            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                pass


@pytest.mark.slow
def test_the_sweep_survives_containers_removed_while_it_looks(client) -> None:
    """Another guard's watchdog removes its containers whenever it likes. Here it removes one
    at the worst moment, just after the engine listed it to this sweep: the sweep must take
    the rest and go on, not fail the run with "No such container"."""
    from guard.sandbox._reaper import remove_orphans

    image = client.images.get(BASE_IMAGE).id
    dead = subprocess.Popen(["true"])
    dead.wait()
    labels = {LABEL: "race-test", LABEL_BOOT: boot_id(), LABEL_PID: str(dead.pid), LABEL_START: "1"}
    made = [client.containers.create(image, ["sleep", "1"], network_mode="none", labels=labels).id
            for _ in range(2)]
    sweeper = docker.from_env()  # this guard's connection; `client` plays the other guard
    listing = sweeper.api.containers

    def listed_then_one_removed(*args, **kwargs):  # type: ignore[no-untyped-def]
        rows = listing(*args, **kwargs)
        raced = next((row["Id"] for row in rows if row["Id"] in made), None)
        if raced is not None:
            client.api.remove_container(raced, force=True)  # the engine really no longer has it
            made.remove(raced)
        return rows

    sweeper.api.containers = listed_then_one_removed
    try:
        assert remove_orphans(sweeper) == 1  # the one the other guard did not take
        assert not {c["Id"] for c in ours(client)} & set(made)
    finally:
        for found in made:
            try:
                client.api.remove_container(found, force=True)
            except docker.errors.NotFound:
                pass

DOCKERFILE = """
ARG BASE_IMAGE=scratch
FROM ${BASE_IMAGE}
WORKDIR /engine
COPY wl.py ./
"""

CONFIG = """
[workload]
entry = "wl.py:make"
batch_sizes = [1]
steps = 12
warmup_steps = 2
tok_per_s_min_s = 0.0  # one timed pass per process: the containers are the point, not the figures
warmup_max_s = 0.0
[build]
method = "docker"
[build.docker]
build_args = {{ BASE_IMAGE = "{base}" }}
memory_mb = 1024
pids_limit = 256
[measure]
repeats = 3
allow_few_repeats = true  # the CPU tests' few processes
max_rounds = 2  # the CPU tests' time: one confirmation round at most
"""


def one_file_tar(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def guard_run(repo: Path, out: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "feature", "--out", str(out),
         "--cache-dir", str(cache)],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )


@pytest.mark.slow
def test_the_pipeline_builds_images_measures_in_containers_and_reuses_verified_images(client, tmp_path: Path) -> None:
    repo = tmp_path / "engine"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    # a base tag of the test's own, so that it may move it
    test_base = f"regression-guard-test-base:{os.getpid()}"
    client.images.get(BASE_IMAGE).tag(test_base)
    (repo / "guard.toml").write_text(CONFIG.format(base=test_base))
    (repo / "Dockerfile").write_text(DOCKERFILE)
    (repo / "wl.py").write_text(busy_workload(3000))
    commit_all(repo, "base workload")
    git(repo, "checkout", "--quiet", "-b", "feature")
    (repo / "wl.py").write_text(busy_workload(30000))
    commit_all(repo, "make decode ten times slower")
    cache = tmp_path / "cache"
    shas = (git(repo, "rev-parse", "main"), git(repo, "rev-parse", "feature"))
    try:
        pipeline_in_docker(client, repo, cache, tmp_path, test_base)
    finally:  # a failed run's images too, tagged or not: they are the test's
        arms = client.images.list(name="regression-guard-arm") + client.images.list(
            filters={"dangling": True, "label": "regression-guard.sha"})
        for image in arms:
            if image.labels.get("regression-guard.sha") in shas:
                client.images.remove(image.id, force=True)
        client.images.remove(test_base, force=True)


def built_again(repo: Path, cache: Path) -> str:
    """`guard run`'s stages up to the arms' builds, in this process, with the run's defaults;
    the progress lines, joined."""
    lines: list[str] = []
    with ExitStack() as held:
        plan = plan_run(repo.resolve(), None, "feature", None, None, ConfigOverrides(), lines.append)
        built = build_arms(repo.resolve(), plan, cache, lines.append, held)
    assert not built.failed, lines
    return "\n".join(lines)


def pipeline_in_docker(client, repo: Path, cache: Path, tmp_path: Path, test_base: str) -> None:
    started = time.monotonic()
    proc = guard_run(repo, tmp_path / "out", cache)
    first_s = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == "regression"
    assert [a["build_method"] for a in report["arms"]][:2] == ["docker", "docker"]
    assert report["batch_sizes"][0]["gpu_ms_change"]["pct"] > 100  # ten times the loop
    # each arm is an image tagged and labelled with its commit
    tags = {tag for image in client.images.list(name="regression-guard-arm") for tag in image.tags}
    for arm in report["arms"][:2]:
        [tag] = [t for t in tags if t.split(":")[1].startswith(arm["sha"][:12])]
        assert client.images.get(tag).labels["regression-guard.sha"] == arm["sha"]
    # the harness ran in the image (a host of its own, the base's Python without torch, which the
    # guard's has), and nothing of its scratch is left
    environment = json.loads((tmp_path / "out" / "runs" / "base-0.json").read_text())["environment"]
    assert environment["hostname"] != socket.gethostname() and environment["torch"] is None
    assert not list((tmp_path / "out" / "runs").glob("*.box"))
    assert ours(client) == []

    # The later runs in-process, up to their builds: which images are reused is the point, and
    # their containers ran in the run above.
    started = time.monotonic()
    again = built_again(repo, cache)
    second_s = time.monotonic() - started
    assert again.count("reusing build of") == 2

    # an image moved under the tag is not reused: the head is built again
    head_tag = next(t for t in tags if t.split(":")[1].startswith(report["arms"][1]["sha"][:12]))
    client.images.get(BASE_IMAGE).tag(*head_tag.split(":"))
    moved = built_again(repo, cache)
    assert "was modified since it was built (image differs): rebuilding" in moved
    assert moved.count("reusing build of") == 1
    assert ours(client) == []

    # a base moved under BASE_IMAGE (a new torch, say): both arms are built again on it, never one alone
    holder = client.containers.create(test_base, ["true"], network_mode="none")
    try:
        holder.put_archive("/", one_file_tar("moved-base", b"a new base\n"))
        holder.commit(*test_base.split(":"))  # the base, with one more layer
    finally:
        holder.remove()
    rebased = built_again(repo, cache)
    assert rebased.count("was modified since it was built (BASE_IMAGE differs): rebuilding") == 2
    assert "reusing build of" not in rebased
    # every rebuild removed the image it replaced (the one moved off the tag among them):
    # no image of these arms is left that no tag names, to fill the runner's disk
    shas = {arm["sha"] for arm in report["arms"][:2]}
    untagged = [image.id for image in client.images.list(filters={"dangling": True, "label": "regression-guard.sha"})
                if image.labels.get("regression-guard.sha") in shas]
    assert untagged == []

    # `guard clean` removes the images with the builds
    cleaned = subprocess.run([sys.executable, "-m", "guard", "clean", "--repo", str(repo), "--cache-dir", str(cache)],
                             capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert cleaned.returncode == 0, cleaned.stderr
    left = [t for image in client.images.list(name="regression-guard-arm") for t in image.tags
            if t.split(":")[1].startswith((report["arms"][0]["sha"][:12], report["arms"][1]["sha"][:12]))]
    assert left == []
    print(f"\ndocker mode: first run {first_s:.1f} s (two builds), second {second_s:.1f} s (reused)")


def test_a_missing_dockerfile_is_a_build_error_naming_the_setting(client, tmp_path: Path) -> None:
    repo = tmp_path / "engine"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "guard.toml").write_text(CONFIG.format(base=BASE_IMAGE))
    (repo / "wl.py").write_text(busy_workload(10))
    commit_all(repo, "no Dockerfile")
    git(repo, "checkout", "--quiet", "-b", "feature")
    (repo / "wl.py").write_text(busy_workload(20))
    commit_all(repo, "head")
    proc = guard_run(repo, tmp_path / "out", tmp_path / "cache")
    assert proc.returncode == 3, proc.stderr[-2000:]  # invalid: neither arm built
    assert "the commit has no file Dockerfile (build.docker.dockerfile)" in proc.stderr
    assert "Traceback" not in proc.stderr
