"""A measuring command for the service's tests, in place of `guard run`: the committed CPU
demo's report with this job's base and head shas, after a wait on its first start only (or on
every start), leaving a marker of each start (its pid) where the test looks and the job's kind,
batch sizes and repeats (`/guard run --repeats N`) in its folder; or, with GUARD_TEST_EXIT, a
failure that leaves no report. With GUARD_TEST_SLOW_FILE, a head commit without that file gets
GUARD_TEST_PASS_REPORT instead: the commits that hold it are the slow ones, as a bisect's steps
need."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPORT = Path(__file__).resolve().parent.parent / "docs" / "examples" / "cpu-demo" / "report.json"

base, head = os.environ["GUARD_JOB_BASE"], os.environ["GUARD_JOB_HEAD"]
slow_file = os.environ.get("GUARD_TEST_SLOW_FILE")
fast = slow_file and subprocess.run(["git", "-C", os.environ["GUARD_JOB_CHECKOUT"], "cat-file", "-e",
                                     f"{head}:{slow_file}"], capture_output=True).returncode != 0
report = json.loads(Path(os.environ["GUARD_TEST_PASS_REPORT"] if fast else REPORT).read_text())
for arm in report["arms"]:
    arm["sha"] = base if arm["name"] == report["base"] else head
markers = os.environ.get("GUARD_TEST_MARKERS")
first = True
if markers:
    first = not list(Path(markers).glob(f"started-{os.environ['GUARD_JOB_ID']}-*"))
    Path(markers, f"started-{os.environ['GUARD_JOB_ID']}-{os.getpid()}").write_text(
        f"{os.getpid()} {os.environ.get('CUDA_VISIBLE_DEVICES', '-')} {time.time()}")
# what the job asked of its command, beside the report: the test reads it in the job's folder
Path(os.environ["GUARD_JOB_OUT"], "job-env.txt").write_text(
    f"{os.environ['GUARD_JOB_KIND']} {os.environ['GUARD_JOB_BATCH_SIZES'] or '-'}")
Path(os.environ["GUARD_JOB_OUT"], "job-repeats.txt").write_text(os.environ["GUARD_JOB_REPEATS"] or "-")
if first:  # only the first start of a job waits: the test kills the service meanwhile
    time.sleep(float(os.environ.get("GUARD_TEST_FIRST_SLEEP_S", "0")))
time.sleep(float(os.environ.get("GUARD_TEST_EVERY_SLEEP_S", "0")))
if os.environ.get("GUARD_TEST_EXIT"):
    print("building arm 'head': the compiler ran out of memory")
    sys.exit(int(os.environ["GUARD_TEST_EXIT"]))
if markers:
    Path(markers, f"ended-{os.environ['GUARD_JOB_ID']}-{os.getpid()}").write_text(str(time.time()))
Path(os.environ["GUARD_JOB_OUT"], "report.json").write_text(json.dumps(report))
