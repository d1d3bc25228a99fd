"""Two jobs on one host, tried as an attacker would: while one guard run installs its base (the
tree handed to the user its install runs as), a process of another guard run's pull request
tries, as fast as it can, to write that tree. Each run has a build identity of its own
(guard/sandbox/_user.py: pr_user), so the other job's user can write nothing of it; on a host
where every run used one build user, it rewrote the base while it was being built. Real
processes: the other job is a second guard process that launches its code through the guard's
own sandbox. Runs where the tests run as root (skipped otherwise)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guard.checkout import ArmRef, build_arm
from guard.checkout._cache import check_build
from guard.config import BuildConfig
from guard.sandbox import choose_box, pr_user
from tests.test_checkout import make_repo

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to run as build identities")

# The other job's pull-request code: until STOP exists, append to every file of each cached tree
# and make a file in it; counts its tries while a tree is handed over (not root's: an install runs).
WRITER = r'''
import json, os, sys, time
cache, stop = sys.argv[1], sys.argv[2]
seen = {"tries_while_installing": 0, "wrote": [], "errors": []}
deadline = time.monotonic() + 60
while not os.path.exists(stop) and time.monotonic() < deadline:
    for entry in os.listdir(cache) if os.path.isdir(cache) else []:
        tree = os.path.join(cache, entry, "tree")
        try:
            if os.lstat(tree).st_uid == 0:
                continue
        except OSError:
            continue
        seen["tries_while_installing"] += 1
        for target in [os.path.join(tree, "planted.py"), *(os.path.join(tree, "tinypkg", n) for n in ("__init__.py",))]:
            try:
                with open(target, "a") as f:
                    f.write("VERSION = 'poisoned'\n")
                seen["wrote"].append(target)
            except OSError as exc:
                if exc.strerror not in seen["errors"]:
                    seen["errors"].append(exc.strerror)
    time.sleep(0.002)
print(json.dumps(seen))
'''

# The other guard run: its own build identity, its code launched as the guard launches a workload.
OTHER_JOB = r'''
import json, subprocess, sys
from pathlib import Path
from guard.sandbox import Launch, choose_box, launch, pr_user
user = pr_user("guard-pr")
out = Path(sys.argv[3])
with out.open("w") as log:
    one = Launch([sys.executable, "-c", sys.argv[4], sys.argv[1], sys.argv[2]], log, cwd=Path("/"), user=user,
                 reads=[Path(sys.argv[1]).parent])
    code = launch(choose_box(), [one], timeout_s=90).codes[0]
print(json.dumps({"user": user.name, "exit": code}))
'''


@pytest.mark.slow
@needs_root
def test_another_jobs_code_cannot_write_a_build_while_it_is_installed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tmp_path.chmod(0o755)  # the other job may look in it, as in a runner's workspace
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    stop, seen = tmp_path / "stop", tmp_path / "writer.json"
    other = subprocess.Popen([sys.executable, "-c", OTHER_JOB, str(cache), str(stop), str(seen), WRITER],
                             stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
    try:
        # this job's install runs for 3 s as this run's identity, which may write the tree meanwhile
        config = BuildConfig(method="venv", install="sleep 3")
        built = build_arm(repo.path, ArmRef(name="base", ref="main~1", sha=repo.first_sha), config, cache,
                          box=choose_box())
    finally:
        stop.touch()
        out, _ = other.communicate(timeout=120)
    job = json.loads(out)
    writer = json.loads(seen.read_text())
    ours = pr_user("guard-pr")
    assert ours is not None and job["exit"] == 0
    assert writer["tries_while_installing"] > 0, writer  # it tried while the tree was the install's
    assert writer["wrote"] == [], writer
    assert job["user"] != ours.name  # each run its own identity
    assert writer["errors"] == ["Permission denied"], writer
    assert (built.worktree / "tinypkg" / "__init__.py").read_text() == 'VERSION = "one"\n'
    assert not (built.worktree / "planted.py").exists()
    assert check_build(built.worktree.parent, repo.first_sha) is None  # sealed as built
