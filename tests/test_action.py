"""action.yml and the workflows: what reaches which step, and the action's steps run with
bash against a stand-in `guard` that records its arguments and environment."""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.composite_runner import (
    ActionRun, ArtifactStore, clean_env, evaluate, read_output_file, run_action, substitute,
)

ROOT = Path(__file__).resolve().parent.parent
ACTION_PATH = ROOT / "action.yml"
WORKFLOW_PATHS = sorted([*ROOT.glob(".github/workflows/*.yml"), *ROOT.glob("examples/workflows/*.yml")])
EXAMPLES = ROOT / "examples" / "workflows"
SHA_PIN = re.compile(r"^[^@\s]+@[0-9a-f]{40}$")
THIS_ACTION = "example-org/regression-guard"
RELEASE_TAG = re.compile(r"v\d+(\.\d+){0,2}")
BASE_SHA = "1111111111111111111111111111111111111111"
HEAD_SHA = "2222222222222222222222222222222222222222"
TOKEN = "ghs_thetokenofthisjob"
JOB_LEVEL_TOKEN = "ghp_atokenthejobputinitsenv"
SERVICE_TOKEN = "the-ingest-token-of-this-repository"
SERVICE = {"service-url": "https://guard.example.org", "service-token": SERVICE_TOKEN}


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the key `on` as true.
    if True in data:
        data["on"] = data.pop(True)
    return data


ACTION = load(ACTION_PATH)


def all_steps() -> list[tuple[str, dict[str, Any]]]:
    """(where, step) for every step of the action and of every workflow."""
    steps = [(f"action.yml step {s.get('name')}", s) for s in ACTION["runs"]["steps"]]
    for path in WORKFLOW_PATHS:
        for job_id, job in load(path)["jobs"].items():
            steps += [(f"{path.name} job {job_id} step {s.get('name', s.get('uses'))}", s) for s in job["steps"]]
    return steps


def expressions(value: Any) -> list[str]:
    return re.findall(r"\$\{\{(.*?)\}\}", yaml.safe_dump(value)) if value else []


# --- what reaches which step ------------------------------------------------------------


def test_the_files_under_test_exist() -> None:
    names = {path.name for path in WORKFLOW_PATHS}
    assert {"ci.yml", "private-repo.yml", "public-repo-measure.yml", "public-repo-comment.yml"} <= names
    assert len(ACTION["runs"]["steps"]) >= 5


def test_no_expression_inside_a_run_script() -> None:
    offenders = [where for where, step in all_steps() if "${{" in step.get("run", "")]
    assert offenders == []


def test_every_input_reaches_scripts_through_env_only() -> None:
    """A `uses:` step gets inputs through `with:`, which the action it runs reads as its own
    inputs: no shell sees them."""
    declared = set(ACTION["inputs"])
    used: set[str] = set()
    for step in ACTION["runs"]["steps"]:
        passed = "with" if "uses" in step else "env"
        for key in step:
            if key in (passed, "if"):
                continue
            assert "inputs." not in yaml.safe_dump(step[key]), f"step {step['name']}: inputs in {key}"
        env_and_if = expressions(step.get(passed)) + [str(step.get("if", ""))]
        used |= {m for text in env_and_if for m in re.findall(r"inputs\.([A-Za-z0-9_-]+)", text)}
    assert used <= declared, f"undeclared inputs: {used - declared}"
    # Every input does something; `token` only through the comment step.
    assert used == declared


def test_the_token_reaches_the_comment_step_only() -> None:
    holders = []
    for step in ACTION["runs"]["steps"]:
        for name, value in (step.get("env") or step.get("with") or {}).items():
            if "inputs.token" in str(value) or "github.token" in str(value) or "secrets." in str(value):
                holders.append((step["id"], name, value))
    assert holders == [("comment", "GITHUB_TOKEN", "${{ inputs.token }}")]
    assert ACTION["inputs"]["token"]["default"] == "${{ github.token }}"


def test_the_service_token_reaches_the_upload_step_only() -> None:
    """The install step learns whether one was given (a boolean), never the token itself."""
    holders = []
    for step in ACTION["runs"]["steps"]:
        for name, value in (step.get("env") or step.get("with") or {}).items():
            if "inputs.service-token" in str(value):
                holders.append((step["id"], name, value))
    assert holders == [("install", "GUARD_HAS_SERVICE_TOKEN", "${{ inputs.service-token != '' }}"),
                       ("upload", "GUARD_SERVICE_TOKEN", "${{ inputs.service-token }}")]
    assert ACTION["inputs"]["service-token"]["default"] == ""


def test_checkouts_do_not_persist_credentials() -> None:
    checkouts = [(where, step) for where, step in all_steps() if step.get("uses", "").startswith("actions/checkout@")]
    assert len(checkouts) >= 4
    for where, step in checkouts:
        assert step.get("with", {}).get("persist-credentials") is False, where


def test_actions_used_are_pinned_to_a_commit_with_its_version_beside_it() -> None:
    """Every action but this one, which the examples name by its release tag (the next test)."""
    for where, step in all_steps():
        uses = step.get("uses")
        if uses is None or uses.startswith("./") or uses.startswith(f"{THIS_ACTION}@"):
            continue
        assert SHA_PIN.match(uses), f"{where}: {uses} is not pinned to a full commit SHA"
    for path in [ACTION_PATH, *WORKFLOW_PATHS]:
        for line in path.read_text().splitlines():
            if re.match(r"\s*(- )?uses: [^.]", line) and THIS_ACTION not in line:
                assert re.search(r"# v\d", line), f"{path.name}: no version comment on {line.strip()!r}"


def test_every_use_of_this_action_in_the_docs_and_examples_names_a_release_tag() -> None:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted(EXAMPLES.glob("*.yml"))]
    found = {(path.relative_to(ROOT).as_posix(), ref) for path in files
             for ref in re.findall(rf"{THIS_ACTION}@(\S+)", path.read_text())}
    assert {where for where, _ in found} >= {f"examples/workflows/{p.name}" for p in EXAMPLES.glob("*.yml")}
    assert [(where, ref) for where, ref in sorted(found) if not RELEASE_TAG.fullmatch(ref)] == []
    # the lint's one exception to pinning by commit is this action, and no other
    policies = yaml.safe_load((ROOT / "tools" / "lint" / "zizmor.yml").read_text())["rules"]["unpinned-uses"]
    assert policies["config"]["policies"] == {THIS_ACTION: "ref-pin", "*": "hash-pin"}


def test_every_workflow_starts_from_no_permissions_or_read_only() -> None:
    for path in WORKFLOW_PATHS:
        assert load(path)["permissions"] in ({}, {"contents": "read"}), path.name


def test_public_measuring_job_is_read_only_and_holds_no_secret() -> None:
    workflow = load(EXAMPLES / "public-repo-measure.yml")
    measure = workflow["jobs"]["measure"]
    assert measure["permissions"] == {"contents": "read"}
    text = yaml.safe_dump(measure)
    assert "secrets." not in text and "github.token" not in text
    assert "secrets." not in (EXAMPLES / "public-repo-measure.yml").read_text()
    # Started by the label alone, on the commit that was labelled, and posting nothing.
    assert measure["if"] == "github.event.action == 'labeled' && github.event.label.name == 'safe-to-test'"
    checkout = measure["steps"][0]
    assert checkout["with"]["ref"] == "${{ github.event.pull_request.head.sha }}"
    guard = next(step for step in measure["steps"] if "regression-guard@" in step.get("uses", ""))
    assert guard["with"]["comment"] == "never" and guard["with"]["commit-status"] == "false"
    assert guard["with"]["head"] == "${{ github.event.pull_request.head.sha }}"
    assert guard["with"]["cache-dir"].startswith("${{ runner.temp }}/")


def test_public_measuring_workflow_removes_the_label_on_a_push_without_pr_code() -> None:
    workflow = load(EXAMPLES / "public-repo-measure.yml")
    assert set(workflow["on"]["pull_request_target"]["types"]) >= {"labeled", "synchronize", "reopened"}
    unlabel = workflow["jobs"]["unlabel"]
    assert unlabel["permissions"] == {"pull-requests": "write"}
    assert "github.event.action != 'labeled'" in unlabel["if"]
    assert all("uses" not in step for step in unlabel["steps"]), "the unlabel job must not check out anything"
    assert "labels/safe-to-test" in unlabel["steps"][0]["run"]
    assert unlabel["runs-on"] == "ubuntu-latest"


def test_public_comment_workflow_never_runs_pr_code() -> None:
    workflow = load(EXAMPLES / "public-repo-comment.yml")
    assert workflow["on"]["workflow_run"]["workflows"] == [load(EXAMPLES / "public-repo-measure.yml")["name"]]
    job = workflow["jobs"]["comment"]
    assert job["permissions"] == {"actions": "read", "pull-requests": "write", "statuses": "write"}
    assert job["if"] == "github.event.workflow_run.event == 'pull_request_target'"
    assert not any(step.get("uses", "").startswith("actions/checkout@") for step in job["steps"])
    post = job["steps"][-1]
    assert post["with"]["pr-number"] == "${{ steps.check.outputs.pr-number }}"
    assert post["with"]["head"] == "${{ steps.check.outputs.head-sha }}"


def test_comment_workflow_reads_the_pr_from_the_measuring_run_title() -> None:
    """The measuring workflow's run-name, rendered for an event, matches the pattern the
    comment workflow reads it back with; a title of another shape does not."""
    run_name = load(EXAMPLES / "public-repo-measure.yml")["run-name"]
    sha = "0123456789abcdef0123456789abcdef01234567"
    title = substitute(run_name, {"github": {"event": {"pull_request": {"number": 42, "head": {"sha": sha}}}}})
    assert title == f"regression-guard: PR #42 at {sha}"
    steps = load(EXAMPLES / "public-repo-comment.yml")["jobs"]["comment"]["steps"]
    check = next(step for step in steps if step.get("id") == "check")
    pattern = re.search(r"title_re='([^']+)'", check["run"]).group(1)
    assert re.fullmatch(pattern, title).groups() == ("42", sha)
    assert re.fullmatch(pattern, f"regression-guard: PR #42 at {sha} extra") is None
    assert re.fullmatch(pattern, "Fix decode: PR #42 at " + sha[:39]) is None


def _run_report_check(
    tmp_path: Path, title: str, artifact_pr: str, report_sha: str, pr_state: str = "open"
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """Runs the comment workflow's check step with bash, a stand-in `gh` and a report."""
    steps = load(EXAMPLES / "public-repo-comment.yml")["jobs"]["comment"]["steps"]
    script = tmp_path / "check.sh"
    script.write_text(next(step for step in steps if step.get("id") == "check")["run"])
    report_dir = tmp_path / "report"
    report_dir.mkdir()
    (report_dir / "pr-number").write_text(artifact_pr + "\n")
    arms = [{"name": "base", "sha": BASE_SHA}, {"name": "head", "sha": report_sha}]
    (report_dir / "report.json").write_text(json.dumps({"base": "base", "head": "head", "arms": arms}))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(bin_dir / "gh", f'#!/usr/bin/env bash\necho "$*" >> "{tmp_path}/gh.log"\necho "{pr_state}"\n')
    output = tmp_path / "output"
    env = clean_env() | {
        "PATH": f"{bin_dir}:{clean_env()['PATH']}", "GH_TOKEN": "x", "REPO": "example-org/engine",
        "RUN_TITLE": title, "REPORT_DIR": str(report_dir), "GITHUB_OUTPUT": str(output),
    }
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], env=env, capture_output=True, text=True
    )
    return proc, read_output_file(output)


RUN_TITLE = f"regression-guard: PR #42 at {HEAD_SHA}"


@pytest.mark.skipif(shutil.which("jq") is None, reason="needs jq, as GitHub's runners have")
def test_comment_workflow_posts_only_a_report_that_matches_its_run(tmp_path: Path) -> None:
    proc, outputs = _run_report_check(tmp_path, RUN_TITLE, "42", HEAD_SHA)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert outputs == {"pr-number": "42", "head-sha": HEAD_SHA}
    assert (tmp_path / "gh.log").read_text() == "api repos/example-org/engine/pulls/42 --jq .state\n"


@pytest.mark.skipif(shutil.which("jq") is None, reason="needs jq, as GitHub's runners have")
@pytest.mark.parametrize(
    ("title", "artifact_pr", "report_sha", "state", "message"),
    [
        (RUN_TITLE, "43", HEAD_SHA, "open", "the artifact's pr-number is not #42"),
        (RUN_TITLE, "42\n::warning::injected", HEAD_SHA, "open", "the artifact's pr-number is not #42"),
        (RUN_TITLE, "42", BASE_SHA, "open", f"the report is not of {HEAD_SHA}"),
        (RUN_TITLE, "42", HEAD_SHA, "closed", "pull request #42 is closed"),
        (f"Speed up decode: PR #42 at {HEAD_SHA}", "42", HEAD_SHA, "open", "title does not name a pull request"),
        (f"regression-guard: PR #42 at {HEAD_SHA}\nmore", "42", HEAD_SHA, "open", "title does not name"),
    ],
)
def test_comment_workflow_refuses_a_report_that_does_not_match_its_run(
    tmp_path: Path, title: str, artifact_pr: str, report_sha: str, state: str, message: str
) -> None:
    proc, outputs = _run_report_check(tmp_path, title, artifact_pr, report_sha, state)
    assert proc.returncode == 1
    assert "::error title=regression-guard::" in proc.stdout and message in proc.stdout
    assert "injected" not in proc.stdout  # what the artifact says is compared, never printed
    assert outputs == {}


@pytest.mark.parametrize(("listed_id", "expected"), [("987654", "987654"), ("", ""), ("12\n::warning::x", "")])
def test_comment_workflow_links_the_measuring_runs_artifact_by_its_id(
    tmp_path: Path, listed_id: str, expected: str
) -> None:
    """The id comes from GitHub's list of the run's artifacts, and only a number is passed on."""
    steps = load(EXAMPLES / "public-repo-comment.yml")["jobs"]["comment"]["steps"]
    find = next(step for step in steps if step.get("id") == "find")
    script = tmp_path / "find.sh"
    script.write_text(find["run"])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "listed-id").write_text(listed_id)
    _executable(bin_dir / "gh", f"""#!/usr/bin/env bash
echo "$*" >> "{tmp_path}/gh.log"
case "$2" in
  *name=regression-guard-report) echo 1 ;;
  *name=regression-guard) cat "{tmp_path}/listed-id" ;;
esac
""")
    output = tmp_path / "output"
    env = clean_env() | {"PATH": f"{bin_dir}:{clean_env()['PATH']}", "GH_TOKEN": "x", "REPO": "example-org/engine",
                         "RUN_ID": "55", "GITHUB_OUTPUT": str(output)}
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert read_output_file(output) == {"found": "true", "artifact-id": expected}
    assert "repos/example-org/engine/actions/runs/55/artifacts?name=regression-guard " in (
        tmp_path / "gh.log").read_text()
    post = steps[-1]
    assert post["with"]["artifact-id"] == "${{ steps.find.outputs.artifact-id }}"


def test_private_example_grants_write_only_to_its_job() -> None:
    workflow = load(EXAMPLES / "private-repo.yml")
    assert workflow["on"] == {"pull_request": None}
    assert workflow["permissions"] == {}
    assert workflow["concurrency"]["cancel-in-progress"] is True
    assert "pull_request.number" in workflow["concurrency"]["group"]
    job = workflow["jobs"]["guard"]
    assert job["runs-on"] == ["self-hosted", "gpu"]
    assert job["permissions"] == {"contents": "read", "pull-requests": "write", "statuses": "write"}
    assert job["steps"][0]["with"]["fetch-depth"] == 0


def test_examples_use_one_placeholder_owner() -> None:
    for path in EXAMPLES.glob("*.yml"):
        owners = set(re.findall(r"uses: ([\w-]+)/regression-guard@", path.read_text()))
        assert owners == {"example-org"}, path.name


# --- the action's steps, run --------------------------------------------------------------

GUARD_STAND_IN = '''#!{python}
"""Stand-in for the guard CLI: records argv and environment, acts per scenario.json."""
import json, os, sys
from pathlib import Path

here = Path({root!r})
scenario = json.loads((here / "scenario.json").read_text())
parent = Path(f"/proc/{{os.getppid()}}/cmdline").read_bytes().decode().split("\\0")
with open(here / "calls.jsonl", "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "env": dict(os.environ), "parent": parent}}) + "\\n")


def arg(name):
    return sys.argv[sys.argv.index(name) + 1]


def output(line):
    if os.environ.get("GITHUB_OUTPUT"):
        with open(os.environ["GITHUB_OUTPUT"], "a") as f:
            f.write(line + "\\n")


command = sys.argv[1]
if command == "run":
    out = Path(arg("--out"))
    # the profiled passes leave their traces as they go, whether or not a report follows
    traces = out / "runs" / "traces"
    traces.mkdir(parents=True, exist_ok=True)
    (traces / "base-0-bs1.trace.json.gz").write_bytes(b"trace of base")
    if scenario["verdict"] is None:
        print("guard: error: the build of head failed", file=sys.stderr)
        sys.exit(2)
    report = {{"verdict": scenario["verdict"], "reasons": scenario.get("reasons", [])}}
    (out / "report.json").write_text(json.dumps(report))
    (out / "comment.md").write_text("the comment")
    (out / "step-times.svg").write_text("<svg/>")
    (out / "runs" / "base-0.log").write_text("a process's log: not in the artifact")
    sys.exit({{"regression": 1, "invalid": 3, "at_threshold": 4, "inconclusive": 4}}.get(scenario["verdict"], 0))
if command == "record":  # the real one: tests/test_record.py
    out = Path(arg("--out"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "record.json").write_text(json.dumps({{"status": scenario["verdict"]}}))
    if scenario["verdict"] != "recorded":
        print("[guard] 333333333333 was not measured (build failed: ...)", file=sys.stderr)
        sys.exit(3)
    (out / "bmf.json").write_text("{{}}")
    (out / "pyperf.json").write_text("{{}}")
    sys.exit(0)
if command == "summary":
    report_path = arg("--report")
    verdict = json.loads(Path(report_path).read_text())["verdict"]
    with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as f:
        f.write(f"## regression-guard: {{verdict}}\\n")
    output(f"verdict={{verdict}}")
    output("gate=" + (scenario.get("gate") or {{"pass": "success", "improvement": "success", "regression": "failure",
                                                "invalid": "error"}}.get(verdict, "undecided")))
    output("repeats-to-decide=" + scenario.get("repeats_to_decide", ""))
    output("tok-per-s-change=-1.23" if verdict == "regression" else "tok-per-s-change=")
    output("gpu-ms-change=2.34" if verdict == "regression" else "gpu-ms-change=")
    output(f"report-path={{report_path}}")
    if verdict == "regression":
        print("::error title=regression-guard::tok/s -1.23% at batch size 1")
    sys.exit(0)
if command == "artifact":  # the real one copies only the guard's own regular files (tests/test_artifact.py)
    import shutil
    out, into = Path(arg("--out")), Path(arg("--into"))
    into.mkdir(parents=True)
    for name in ("report.json", "comment.md", "step-times.svg", "record.json", "bmf.json", "pyperf.json",
                 "runs/traces"):
        if (out / name).is_dir():
            shutil.copytree(out / name, into / name)
        elif (out / name).exists():
            shutil.copy(out / name, into / name)
    sys.exit(0)
if command == "clean":
    sys.exit(0)
if command == "upload":  # the real one: tests/test_record_upload.py, tests/test_service_records.py
    if os.environ.get("GUARD_SERVICE_TOKEN") != scenario["service_token"]:
        print("guard: error: no ingest token: set GUARD_SERVICE_TOKEN", file=sys.stderr)
        sys.exit(2)
    output("service-run=12")
    sys.exit(0)
if command == "comment":
    if os.environ.get("GITHUB_TOKEN") != scenario["token"]:
        print("guard: error: GITHUB_TOKEN is not set", file=sys.stderr)
        sys.exit(2)
    url = "https://github.com/example-org/engine/pull/7#issuecomment-1"
    output(f"comment-url={{url}}")
    print(url)
    sys.exit(0)
sys.exit(f"stand-in guard: unexpected command {{command}}")
'''

FAKE_PYTHON = '''#!/usr/bin/env bash
# Stand-in for the runner's Python: `-m venv DIR` makes a venv whose guard is the stand-in.
set -euo pipefail
echo "python $*" >> "{log}"
if [[ "$1" == "-m" && "$2" == "venv" ]]; then
  venv="${{@: -1}}"
  mkdir -p "$venv/bin"
  cp "{guard}" "$venv/bin/guard"
  cat > "$venv/bin/python" <<'EOF'
#!/usr/bin/env bash
if [[ "$1" == "-m" && "$2" == "pip" ]]; then echo "pip $*" >> "{log}"; exit 0; fi
exec "{real_python}" "$@"
EOF
  chmod +x "$venv/bin/guard" "$venv/bin/python"
  exit 0
fi
exit 3
'''


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


class Harness:
    def __init__(self, tmp_path: Path):
        self.root = tmp_path
        self.workspace = tmp_path / "workspace"
        self.workspace.mkdir()
        tools = tmp_path / "tools"
        tools.mkdir()
        guard = _executable(tools / "guard", GUARD_STAND_IN.format(python=sys.executable, root=str(tmp_path)))
        self.python = _executable(
            tools / "python", FAKE_PYTHON.format(log=tmp_path / "python.log", guard=guard, real_python=sys.executable)
        )
        self.artifacts = ArtifactStore(tmp_path / "artifacts")

    def run(
        self, verdict: str | None, inputs: dict[str, str] | None = None, event: str = "pull_request",
        reasons: list[str] | None = None, job_env: dict[str, str] | None = None, ref: str = "refs/heads/main",
        gate: str = "", repeats_to_decide: str = "",
    ) -> ActionRun:
        scenario = {"verdict": verdict, "reasons": reasons or [], "token": TOKEN, "service_token": SERVICE_TOKEN,
                    "gate": gate, "repeats_to_decide": repeats_to_decide}
        (self.root / "scenario.json").write_text(json.dumps(scenario))
        github: dict[str, Any] = {
            "token": TOKEN,
            "action_path": str(ROOT),
            "repository": "example-org/engine",
            "server_url": "https://github.com",
            "run_id": 99,
            "sha": "3333333333333333333333333333333333333333",
            "event_name": event,
            "ref": ref,
            "event": {"repository": {"default_branch": "main"}},
        }
        if event in ("pull_request", "pull_request_target"):
            github["event"] |= {"pull_request": {"number": 7, "base": {"sha": BASE_SHA}, "head": {"sha": HEAD_SHA}}}
        if event == "workflow_run":
            github["event"] |= {"workflow_run": {"html_url": "https://github.com/example-org/engine/actions/runs/5"}}
        return run_action(
            ACTION, {"python": str(self.python), **(inputs or {})}, github, self.workspace,
            clean_env() | (job_env or {}), uses={"actions/upload-artifact": self.artifacts},
        )

    def calls(self, command: str) -> list[dict[str, Any]]:
        log = self.root / "calls.jsonl"
        lines = log.read_text().splitlines() if log.exists() else []
        return [call for call in map(json.loads, lines) if call["argv"][0] == command]


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def _env_holding(run: ActionRun, secret: str) -> list[str]:
    """Names of the steps whose environment holds `secret`, by name or by value."""
    return [step.name for step in run.steps if step.ran and secret in json.dumps(step.env)]


def test_regression_on_a_pull_request_is_reported_commented_and_fails_the_job(harness: Harness) -> None:
    result = harness.run("regression", job_env={"GITHUB_TOKEN": JOB_LEVEL_TOKEN, "GH_TOKEN": JOB_LEVEL_TOKEN})

    (run_call,) = harness.calls("run")
    assert run_call["argv"] == ["run", "--repo", ".", "--head", HEAD_SHA, "--out", "guard-out", "--base", BASE_SHA,
                                "--cache-dir", str(harness.workspace / "runner-temp" / "regression-guard-cache")]
    # The step's exit code is the guard's (regression: 1); the step goes on to the summary.
    run_step = result.step("Run regression-guard")
    assert (run_step.exit_code, run_step.outcome, run_step.conclusion) == (1, "failure", "success")
    # The process that builds and runs the PR's code sees neither the action's token nor
    # one the workflow put in the job's environment.
    assert TOKEN not in json.dumps(run_call["env"]) and JOB_LEVEL_TOKEN not in json.dumps(run_call["env"])
    assert not {"GITHUB_TOKEN", "GH_TOKEN"} & set(run_call["env"])
    assert _env_holding(result, TOKEN) == ["Post the PR comment and commit status"]

    (comment_call,) = harness.calls("comment")
    assert comment_call["env"]["GITHUB_TOKEN"] == TOKEN
    assert comment_call["argv"] == [
        "comment", "--report", "guard-out/report.json", "--repo", "example-org/engine", "--pr", "7",
        "--mode", "unless-green", "--run-url", "https://github.com/example-org/engine/actions/runs/99",
        "--sha", HEAD_SHA, "--artifact-id", "1",
    ]
    assert result.outputs == {
        "verdict": "regression",
        "tok-per-s-change": "-1.23",
        "gpu-ms-change": "2.34",
        "comment-url": "https://github.com/example-org/engine/pull/7#issuecomment-1",
        "report-path": "guard-out/report.json",
        "artifact-url": "https://github.com/example-org/engine/actions/runs/99/artifacts/1",
        "mode": "compare",
        "bmf-path": "",
        "pyperf-path": "",
        "service-run": "",
    }
    assert result.summary == "## regression-guard: regression\n"
    assert "::error title=regression-guard::tok/s" in result.step("Summarize").stdout
    check = result.step("Check the verdict")
    assert check.ran and check.exit_code == 1 and "::error title=regression-guard::decode got slower" in check.stdout
    assert not result.succeeded
    # Installed into a venv under the runner's temp folder, from the action's own checkout.
    log = (harness.root / "python.log").read_text()
    assert f"-m venv --system-site-packages {harness.workspace / 'runner-temp' / 'regression-guard-venv'}" in log
    assert f"pip -m pip install --quiet --disable-pip-version-check {ROOT}" in log


def test_the_run_step_shell_gives_its_place_to_the_guard(harness: Harness) -> None:
    """The step's shell holds the job's environment: it execs the guard, so that no process
    between the runner and the PR's code keeps it. The summary step's shell, which runs
    no PR code, stays the parent of its guard, which shows the test can tell the two apart."""
    harness.run("pass", job_env={"DEPLOY_KEY": "sentinel-deploy-key"})
    (run_call,) = harness.calls("run")
    (summary_call,) = harness.calls("summary")
    assert any(arg.endswith(".sh") for arg in summary_call["parent"]), summary_call["parent"]
    assert not any(arg.endswith(".sh") for arg in run_call["parent"]), run_call["parent"]
    assert "bash" not in Path(run_call["parent"][0]).name


def test_the_artifact_holds_the_report_the_picture_and_the_traces_and_is_linked(harness: Harness) -> None:
    result = harness.run("regression")
    names = [step.name for step in result.steps]
    assert names.index("Upload the report, the picture and the traces") < names.index("Summarize")
    assert harness.artifacts.files("regression-guard") == [
        "comment.md", "report.json", "runs/traces/base-0-bs1.trace.json.gz", "step-times.svg"]
    (upload,) = harness.artifacts.uploads
    assert upload["retention-days"] == "14" and upload["if-no-files-found"] == "ignore"
    # what the upload reads is the gathered copy, in the job's temp folder, not the run's folder
    assert upload["path"] == str(harness.workspace / "runner-temp" / "regression-guard-artifacts" / "regression-guard")
    (gather,) = harness.calls("artifact")
    assert gather["argv"] == ["artifact", "--out", "guard-out", "--into", upload["path"]]
    # the job summary and the comment link the artifact, from this run's own URL and its id
    run_url = "https://github.com/example-org/engine/actions/runs/99"
    for command in ("summary", "comment"):
        (call,) = harness.calls(command)
        argv = call["argv"]
        assert argv[argv.index("--run-url") + 1] == run_url, command
        assert argv[argv.index("--artifact-id") + 1] == "1", command
    assert result.outputs["artifact-url"] == f"{run_url}/artifacts/1"


def test_a_run_that_wrote_no_report_still_uploads_its_traces(harness: Harness) -> None:
    result = harness.run(None)
    assert result.step("Upload the report, the picture and the traces").exit_code == 0
    assert harness.artifacts.files("regression-guard") == ["runs/traces/base-0-bs1.trace.json.gz"]
    assert not result.succeeded and result.outputs["verdict"] == "invalid"


def test_no_artifact_when_its_name_is_empty(harness: Harness) -> None:
    result = harness.run("regression", {"artifact": ""})
    assert not result.step("Upload the report, the picture and the traces").ran
    assert harness.artifacts.uploads == [] and result.outputs["artifact-url"] == ""
    (comment_call,) = harness.calls("comment")
    assert "--artifact-id" not in comment_call["argv"] and "--run-url" in comment_call["argv"]


def test_a_failed_upload_leaves_the_summary_and_the_comment_to_go_on(harness: Harness) -> None:
    (harness.artifacts.root / "regression-guard").mkdir(parents=True)  # another job of the run took the name
    result = harness.run("pass", {"comment": "always"})
    upload = result.step("Upload the report, the picture and the traces")
    assert (upload.exit_code, upload.conclusion) == (1, "success")
    assert result.succeeded and result.outputs["verdict"] == "pass"
    (comment_call,) = harness.calls("comment")
    assert "--artifact-id" not in comment_call["argv"]


def test_threshold_input_reaches_the_run_as_an_override(harness: Harness) -> None:
    harness.run("pass", {"threshold-pct": "0.25"})
    (run_call,) = harness.calls("run")
    argv = run_call["argv"]
    assert argv[argv.index("--threshold-pct") + 1] == "0.25"
    assert all("--threshold-pct" not in call["argv"] for call in harness.calls("summary") + harness.calls("comment"))
    harness.run("pass")
    assert "--threshold-pct" not in harness.calls("run")[-1]["argv"]


def test_report_mode_uploads_nothing_and_links_the_measuring_runs_artifact(harness: Harness) -> None:
    report = harness.root / "downloaded" / "report.json"
    report.parent.mkdir()
    report.write_text(json.dumps({"verdict": "pass", "reasons": []}))
    harness.run("pass", {"report": str(report), "pr-number": "12", "artifact-id": "4242"}, event="workflow_run")
    assert harness.artifacts.uploads == []
    (comment_call,) = harness.calls("comment")
    argv = comment_call["argv"]
    assert argv[argv.index("--artifact-id") + 1] == "4242"
    assert argv[argv.index("--run-url") + 1] == "https://github.com/example-org/engine/actions/runs/5"


def test_regression_passes_the_job_when_fail_on_regression_is_false(harness: Harness) -> None:
    result = harness.run("regression", {"fail-on-regression": "false"})
    assert result.outputs["verdict"] == "regression"
    assert result.step("Check the verdict").exit_code == 0
    assert result.succeeded


@pytest.mark.parametrize("verdict", ["pass", "improvement"])
def test_a_pass_or_an_improvement_passes_and_still_goes_to_the_comment_step(harness: Harness, verdict: str) -> None:
    result = harness.run(verdict, {"comment": "always"})
    assert result.succeeded
    assert result.outputs["verdict"] == verdict and result.outputs["tok-per-s-change"] == ""
    (comment_call,) = harness.calls("comment")
    assert comment_call["argv"][comment_call["argv"].index("--mode") + 1] == "always"


@pytest.mark.parametrize("verdict", ["at_threshold", "inconclusive"])
def test_an_undecided_run_fails_the_job_by_default_saying_what_would_decide_it(harness: Harness, verdict: str) -> None:
    result = harness.run(verdict, repeats_to_decide="14")
    run_step = result.step("Run regression-guard")
    assert (run_step.exit_code, run_step.outcome) == (4, "failure")  # the guard's exit code for undecided
    check = result.step("Check the verdict")
    assert check.exit_code == 1 and not result.succeeded
    assert (f"::error title=regression-guard::undecided (verdict {verdict}); about 14 processes per arm would "
            "decide it: run it on a quieter runner, or with measure.repeats = 14 (guard run --repeats 14); set "
            "fail-on-undecided to false to report it without failing") in check.stdout
    # the default comment mode posts it: the comment says the same under its title
    (comment_call,) = harness.calls("comment")
    assert comment_call["argv"][comment_call["argv"].index("--mode") + 1] == "unless-green"


def test_an_undecided_run_past_what_the_guard_counts_says_so_and_a_forged_count_is_not_printed(
        harness: Harness) -> None:
    for said in ("", "0", "14; rm -rf ~", "1e3"):
        result = harness.run("inconclusive", repeats_to_decide=said)
        check = result.step("Check the verdict")
        assert check.exit_code == 1
        assert ("::error title=regression-guard::undecided (verdict inconclusive); more processes per arm than the "
                "guard counts to would be needed at this spread: run it on a quieter runner") in check.stdout
        assert "::warning" not in check.stdout


def test_fail_on_undecided_false_makes_an_undecided_run_a_warning(harness: Harness) -> None:
    result = harness.run("at_threshold", {"fail-on-undecided": "false"}, repeats_to_decide="9")
    check = result.step("Check the verdict")
    assert check.exit_code == 0 and result.succeeded
    assert ("::warning title=regression-guard::undecided (verdict at_threshold); about 9 processes per arm would "
            "decide it") in check.stdout and "not failing the job, as fail-on-undecided is false" in check.stdout
    assert "::error" not in check.stdout


def test_at_threshold_set_to_fail_fails_as_a_regression_does_whatever_fail_on_undecided_says(harness: Harness) -> None:
    """measure.at_threshold = "fail" (the gate a failure): fail-on-regression decides, not fail-on-undecided."""
    failing = harness.run("at_threshold", {"fail-on-undecided": "false"}, gate="failure")
    check = failing.step("Check the verdict")
    assert check.exit_code == 1 and "measure.at_threshold fail" in check.stdout and not failing.succeeded
    kept = harness.run("at_threshold", {"fail-on-regression": "false"}, gate="failure")
    assert kept.step("Check the verdict").exit_code == 0 and kept.succeeded


def test_invalid_fails_the_job_and_says_why(harness: Harness) -> None:
    reasons = ["tokens differ at step 3 of sequence 0", "100% of\nrepeats"]
    result = harness.run("invalid", {"fail-on-regression": "false"}, reasons=reasons)
    run_step = result.step("Run regression-guard")
    assert (run_step.exit_code, run_step.outcome) == (3, "failure")  # the guard's exit code for invalid
    check = result.step("Check the verdict")
    assert check.exit_code == 1
    assert "::error title=regression-guard::no valid comparison of base and head (verdict invalid)" in check.stdout
    assert len(harness.calls("comment")) == 1  # the comment says it was invalid


def test_fail_on_invalid_false_makes_invalid_a_warning(harness: Harness) -> None:
    result = harness.run("invalid", {"fail-on-invalid": "false"}, reasons=["tokens differ at step 3"])
    check = result.step("Check the verdict")
    assert check.exit_code == 0 and result.succeeded
    assert "::warning title=regression-guard::no valid comparison of base and head (verdict invalid)" in check.stdout
    assert "::error" not in check.stdout


def test_a_run_without_a_report_is_invalid_and_posts_nothing(harness: Harness) -> None:
    stale = harness.workspace / "guard-out" / "report.json"
    stale.parent.mkdir()
    stale.write_text(json.dumps({"verdict": "pass", "reasons": []}))  # from an earlier job
    result = harness.run(None)
    run_step = result.step("Run regression-guard")
    assert (run_step.exit_code, run_step.outcome) == (2, "failure")
    assert "::error title=regression-guard::guard run ended (failure) without writing a report" in (
        result.step("Summarize").stdout
    )
    assert result.outputs["verdict"] == "invalid" and result.outputs["report-path"] == ""
    assert not result.step("Post the PR comment and commit status").ran
    assert harness.calls("summary") == [] and harness.calls("comment") == []
    check = result.step("Check the verdict")
    assert check.exit_code == 1 and "verdict invalid" in check.stdout


def test_a_push_to_another_branch_measures_against_the_merge_base_and_holds_no_token(harness: Harness) -> None:
    result = harness.run("pass", event="push", ref="refs/heads/feature")
    assert result.outputs["mode"] == "compare"
    (run_call,) = harness.calls("run")
    # the cache defaults to the job's temp folder, which the runner empties for each job
    assert run_call["argv"] == ["run", "--repo", ".", "--head", "3333333333333333333333333333333333333333",
                                "--out", "guard-out", "--cache-dir",
                                str(harness.workspace / "runner-temp" / "regression-guard-cache")]
    assert not result.step("Post the PR comment and commit status").ran
    assert _env_holding(result, TOKEN) == []
    assert result.succeeded and result.outputs["comment-url"] == ""


def test_a_push_to_the_default_branch_records_the_commit_alone(harness: Harness) -> None:
    result = harness.run("recorded", event="push", job_env={"GITHUB_TOKEN": JOB_LEVEL_TOKEN})
    assert harness.calls("run") == [] and not result.step("Run regression-guard").ran
    (record_call,) = harness.calls("record")
    assert record_call["argv"] == ["record", "--repo", ".", "--commit", "3333333333333333333333333333333333333333",
                                   "--out", "guard-out", "--cache-dir",
                                   str(harness.workspace / "runner-temp" / "regression-guard-cache")]
    assert "bash" not in Path(record_call["parent"][0]).name  # exec'd, as the run step's guard
    assert not {"GITHUB_TOKEN", "GH_TOKEN"} & set(record_call["env"]) and _env_holding(result, TOKEN) == []
    # no verdict: nothing summarized or posted, the figures in the artifact and the outputs
    assert harness.calls("summary") == [] and harness.calls("comment") == []
    assert not result.step("Check the verdict").ran
    assert harness.artifacts.files("regression-guard") == [
        "bmf.json", "pyperf.json", "record.json"]
    assert len(harness.calls("clean")) == 1
    assert result.succeeded
    assert {k: result.outputs[k] for k in ("mode", "bmf-path", "pyperf-path", "verdict")} == {
        "mode": "record", "bmf-path": "guard-out/bmf.json", "pyperf-path": "guard-out/pyperf.json", "verdict": ""}


def test_a_record_without_figures_fails_the_job_and_still_uploads_what_it_wrote(harness: Harness) -> None:
    result = harness.run("build_failed", {"mode": "record"}, event="workflow_dispatch")
    record_step = result.step("Record the commit")
    assert (record_step.exit_code, record_step.outcome) == (3, "failure")
    check = result.step("Check the record")
    assert check.exit_code == 1 and (
        "::error title=regression-guard::guard record ended (failure) without the commit's figures" in check.stdout)
    assert "record.json" in harness.artifacts.files("regression-guard")
    assert not result.succeeded and result.outputs["bmf-path"] == ""


def test_a_record_is_sent_to_the_service_by_a_step_of_its_own_that_alone_holds_its_token(harness: Harness) -> None:
    result = harness.run("recorded", SERVICE, event="push")
    (upload,) = harness.calls("upload")
    assert upload["argv"] == ["upload", "--record", "guard-out/record.json", "--service-url",
                              "https://guard.example.org", "--repo", "example-org/engine"]
    # the process that built and ran the commit never saw it, nor did any other step
    assert _env_holding(result, SERVICE_TOKEN) == ["Send the record to the service"]
    (record_call,) = harness.calls("record")
    assert SERVICE_TOKEN not in json.dumps(record_call["env"])
    assert result.succeeded and result.outputs["service-run"] == "12"


def test_no_record_is_sent_without_a_service_url_or_without_figures(harness: Harness) -> None:
    result = harness.run("recorded", event="push")
    assert harness.calls("upload") == [] and not result.step("Send the record to the service").ran
    assert result.succeeded and result.outputs["service-run"] == ""
    failed = harness.run("build_failed", SERVICE, event="push")
    assert harness.calls("upload") == [] and not failed.succeeded


def test_a_pull_requests_run_sends_nothing_to_the_service(harness: Harness) -> None:
    result = harness.run("pass", SERVICE)
    assert harness.calls("upload") == [] and _env_holding(result, SERVICE_TOKEN) == []


def test_mode_compare_on_a_push_to_the_default_branch_runs_as_before(harness: Harness) -> None:
    harness.run("pass", {"mode": "compare"}, event="push")
    assert len(harness.calls("run")) == 1 and harness.calls("record") == []


def test_comment_never_without_status_skips_the_token_step(harness: Harness) -> None:
    inputs = {"comment": "never", "commit-status": "false", "config": "/tmp/runner/guard.toml", "cache-dir": "/tmp/c"}
    result = harness.run("regression", inputs, event="pull_request_target")
    assert not result.step("Post the PR comment and commit status").ran
    assert _env_holding(result, TOKEN) == []
    assert harness.calls("run")[0]["argv"][-4:] == ["--config", "/tmp/runner/guard.toml", "--cache-dir", "/tmp/c"]
    assert not result.succeeded  # fail-on-regression defaults to true


def test_comment_never_with_status_still_sets_the_status(harness: Harness) -> None:
    harness.run("pass", {"comment": "never"})
    (comment_call,) = harness.calls("comment")
    assert "--no-status" not in comment_call["argv"]
    assert comment_call["argv"][comment_call["argv"].index("--mode") + 1] == "never"


def test_report_input_posts_a_downloaded_report_without_running(harness: Harness) -> None:
    report = harness.root / "downloaded" / "report.json"
    report.parent.mkdir()
    report.write_text(json.dumps({"verdict": "regression", "reasons": []}))
    result = harness.run(
        "pass", {"report": str(report), "pr-number": "12", "head": HEAD_SHA, "commit-status": "false"},
        event="workflow_run",
    )
    assert harness.calls("run") == []
    (comment_call,) = harness.calls("comment")
    argv = comment_call["argv"]
    assert argv[argv.index("--pr") + 1] == "12" and argv[argv.index("--sha") + 1] == HEAD_SHA
    assert argv[argv.index("--report") + 1] == str(report)
    assert argv[argv.index("--run-url") + 1] == "https://github.com/example-org/engine/actions/runs/5"
    assert "--no-status" in argv
    # The measuring run already failed or passed on the verdict; this one only posts.
    assert not result.step("Check the verdict").ran
    assert result.succeeded and result.outputs["verdict"] == "regression"


def test_the_builds_are_removed_when_the_job_ends_however_the_run_ended(harness: Harness) -> None:
    # the per-job cache: every build goes (the run failed: its builds go too)
    harness.run(None)
    [per_job] = harness.calls("clean")
    argv = per_job["argv"]
    assert argv[argv.index("--cache-dir") + 1] == str(harness.workspace / "runner-temp" / "regression-guard-cache")
    assert "--unused-for" not in argv
    # a cache of the workflow's: only what no job used for cache-unused-days (default 14)
    harness.run("regression", {"cache-dir": "/srv/guard-cache"})
    argv = harness.calls("clean")[-1]["argv"]
    assert argv[argv.index("--cache-dir") + 1] == "/srv/guard-cache" and argv[argv.index("--unused-for") + 1] == "14"
    # empty: that cache keeps every build
    kept = harness.run("pass", {"cache-dir": "/srv/guard-cache", "cache-unused-days": ""})
    assert len(harness.calls("clean")) == 2 and not kept.step("Remove the builds no later job needs").ran
    # in report mode nothing was built, so nothing is cleaned
    harness.run("pass", {"report": "guard-out/report.json"})
    assert len(harness.calls("clean")) == 2


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"comment": "sometimes"}, "input comment is 'sometimes'; use unless-green, on-regression, always or never"),
        ({"mode": "push"}, "input mode is 'push'; use auto, compare or record"),
        ({"mode": "record", "report": "r.json"}, "input mode is 'record'; a record measures; leave report empty"),
        ({"service-url": "guard.example.org", "service-token": "t"},
         "input service-url is 'guard.example.org'; give the service's root URL"),
        ({"service-url": "https://guard.example.org"},
         "input service-token is ''; give this repository's ingest token"),
        ({"fail-on-regression": "yes"}, "input fail-on-regression is 'yes'; use true or false"),
        ({"fail-on-invalid": "warn"}, "input fail-on-invalid is 'warn'; use true or false"),
        ({"fail-on-undecided": "no"}, "input fail-on-undecided is 'no'; use true or false"),
        ({"commit-status": "no"}, "input commit-status is 'no'; use true or false"),
        ({"pr-number": "7; rm -rf /"}, "input pr-number is '7; rm -rf /'; give the number of a pull request"),
        ({"threshold-pct": "1%"}, "input threshold-pct is '1%'; give a percentage below 100, e.g. 0.5"),
        ({"threshold-pct": "100"}, "input threshold-pct is '100'; give a percentage below 100"),
        ({"artifact": "a/b"}, "input artifact is 'a/b'; use letters, digits and . _ -"),
        ({"artifact-id": "12 && x"}, "input artifact-id is '12 && x'; give the number of an artifact"),
        ({"cache-unused-days": "two weeks"}, "input cache-unused-days is 'two weeks'; give a number of days, e.g. 14"),
    ],
)
def test_bad_inputs_stop_before_anything_runs(harness: Harness, inputs: dict[str, str], message: str) -> None:
    result = harness.run("pass", inputs)
    install = result.step("Install regression-guard")
    assert install.exit_code == 1 and f"::error title=regression-guard::{message}" in install.stdout
    assert all(not step.ran for step in result.steps[1:])
    assert not (harness.root / "calls.jsonl").exists()


# --- the evaluator the tests above rely on -------------------------------------------------


def test_evaluator_follows_github_expression_rules() -> None:
    contexts = {"inputs": {"a": "", "b": "x", "flag": "true"}, "github": {"event": {"n": 3}, "run_id": 9}}
    assert evaluate("inputs.a || inputs.b", contexts) == "x"
    assert evaluate("inputs.a || github.event.missing.deep", contexts) is None
    assert evaluate("inputs.b && github.event.n", contexts) == 3
    assert evaluate("inputs.a && github.event.n", contexts) == ""
    assert evaluate("inputs.flag == 'TRUE'", contexts) is True  # strings compare ignoring case
    assert evaluate("!(inputs.a != '') && inputs.b == 'x'", contexts) is True
    assert evaluate("format('{0}/runs/{1}', inputs.b, github.run_id)", contexts) == "x/runs/9"
    assert evaluate("'it''s'", contexts) == "it's"
    assert substitute("a-${{ github.event.n }}-${{ inputs.missing }}-b", contexts) == "a-3--b"
