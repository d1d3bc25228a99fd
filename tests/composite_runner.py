"""Runs a composite action's `run:` steps with bash, the way a runner does, for tests.

Covers what action.yml uses and no more: `${{ }}` expressions of contexts (inputs,
github, runner, steps), string literals, `==`, `!=`, `!`, `&&`, `||`, parentheses and
format(); step `if:` conditions (success() when there is none); `env:`;
`continue-on-error: true`; the steps context's `outputs`, `outcome` and `conclusion`;
GITHUB_OUTPUT and GITHUB_STEP_SUMMARY files. Each step's script runs as
`bash --noprofile --norc -eo pipefail FILE`, as for `shell: bash`. A `uses:` step runs a
stand-in given for that action, with its `with:` rendered: `ArtifactStore` stands in for
actions/upload-artifact.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<number>\d+)|(?P<op>&&|\|\||==|!=|!|\(|\)|,)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_*][A-Za-z0-9_-]*)*))"
)


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"cannot read expression at {text[pos:]!r}")
        kind = match.lastgroup
        tokens.append((kind, match.group(kind)))
        pos = match.end()
    return tokens


def truthy(value: Any) -> bool:
    return value not in (None, False, "", 0)


def to_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _Parser:
    """Recursive descent over: or := and ('||' and)*; and := unary ('&&' unary)*;
    unary := '!' unary | cmp; cmp := atom (('=='|'!=') atom)?."""

    def __init__(self, text: str, contexts: dict[str, Any], functions: dict[str, Any]):
        self.tokens = _tokens(text)
        self.pos = 0
        self.contexts = contexts
        self.functions = functions

    def parse(self) -> Any:
        value = self._or()
        if self.pos != len(self.tokens):
            raise ValueError(f"unexpected {self.tokens[self.pos][1]!r}")
        return value

    def _peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def _take(self) -> tuple[str, str]:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def _or(self) -> Any:
        value = self._and()
        while self._peek() == "||":
            self._take()
            right = self._and()
            value = value if truthy(value) else right
        return value

    def _and(self) -> Any:
        value = self._unary()
        while self._peek() == "&&":
            self._take()
            right = self._unary()
            value = right if truthy(value) else value
        return value

    def _unary(self) -> Any:
        if self._peek() == "!":
            self._take()
            return not truthy(self._unary())
        return self._cmp()

    def _cmp(self) -> Any:
        left = self._atom()
        if self._peek() in ("==", "!="):
            op = self._take()[1]
            right = self._atom()
            # GitHub compares strings ignoring case.
            a = left.lower() if isinstance(left, str) else left
            b = right.lower() if isinstance(right, str) else right
            return (a == b) if op == "==" else (a != b)
        return left

    def _atom(self) -> Any:
        kind, text = self._take()
        if kind == "string":
            return text[1:-1].replace("''", "'")
        if kind == "number":
            return int(text)
        if text == "(":
            value = self._or()
            self._take()  # ')'
            return value
        if kind == "name" and self._peek() == "(":
            self._take()
            args = []
            while self._peek() != ")":
                args.append(self._or())
                if self._peek() == ",":
                    self._take()
            self._take()
            return self.functions[text.lower()](*args)
        if kind == "name":
            if text in ("true", "false"):
                return text == "true"
            if text == "null":
                return None
            value: Any = self.contexts
            for part in text.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            return value
        raise ValueError(f"unexpected {text!r}")


def evaluate(expression: str, contexts: dict[str, Any], succeeded: bool = True) -> Any:
    def format_(template: str, *args: Any) -> str:
        return re.sub(r"\{(\d+)\}", lambda m: to_text(args[int(m.group(1))]), template)

    functions = {
        "format": format_,
        "success": lambda: succeeded,
        "failure": lambda: not succeeded,
        "always": lambda: True,
        "cancelled": lambda: False,
    }
    return _Parser(expression, contexts, functions).parse()


def substitute(text: str, contexts: dict[str, Any]) -> str:
    """A value with `${{ }}` parts, as the runner renders it into a string."""
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: to_text(evaluate(m.group(1), contexts)), text)


def read_output_file(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT lines: `name=value` and `name<<DELIMITER` blocks."""
    outputs: dict[str, str] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, i + 1)
            outputs[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
            continue
        name, _, value = line.partition("=")
        outputs[name] = value
        i += 1
    return outputs


@dataclass
class StepRun:
    name: str
    id: str | None
    ran: bool
    exit_code: int = 0
    env: dict[str, str] = field(default_factory=dict)  # the step's `env:`, rendered
    stdout: str = ""
    outputs: dict[str, str] = field(default_factory=dict)
    continue_on_error: bool = False

    @property
    def outcome(self) -> str:
        return "skipped" if not self.ran else "success" if self.exit_code == 0 else "failure"

    @property
    def conclusion(self) -> str:
        return "success" if self.outcome == "failure" and self.continue_on_error else self.outcome


@dataclass
class ActionRun:
    steps: list[StepRun]
    outputs: dict[str, str]
    summary: str

    @property
    def succeeded(self) -> bool:
        return all(step.conclusion != "failure" for step in self.steps)

    def step(self, name: str) -> StepRun:
        return next(step for step in self.steps if step.name == name)


class StepFailed(Exception):
    """A stand-in action failed, as the action would: its message is the step's log."""


# A stand-in for a `uses:` action: (its rendered `with:`, the workspace, the github context)
# -> its outputs; StepFailed fails the step.
UsesStandIn = Callable[[dict[str, str], Path, dict[str, Any]], dict[str, str]]


class ArtifactStore:
    """actions/upload-artifact@v4 as far as action.yml uses it: `name`, `path` (lines of files,
    folders or globs, relative to the workspace), `if-no-files-found`; the files keep their
    paths below the least common ancestor of the paths searched; a name taken in this run
    fails, as v4 refuses to overwrite. Uploads land in `root/NAME/`."""

    def __init__(self, root: Path):
        self.root = root
        self.uploads: list[dict[str, str]] = []  # each upload's `with:`, in order

    def __call__(self, with_: dict[str, str], workdir: Path, github: dict[str, Any]) -> dict[str, str]:
        name = with_["name"]
        if not name or (self.root / name).exists():
            raise StepFailed(f"an artifact named {name!r} cannot be uploaded: it is empty or exists already")
        searched = [line.strip() for line in with_["path"].splitlines() if line.strip()]
        files: list[Path] = []
        for pattern in searched:
            for match in sorted(glob.glob(str(workdir / pattern), recursive=True)):
                found = Path(match)
                files += sorted(p for p in found.rglob("*") if p.is_file()) if found.is_dir() else [found]
        if not files:
            if with_.get("if-no-files-found", "warn") == "error":
                raise StepFailed("no files were found with the provided path")
            return {}
        self.uploads.append(with_)
        root = Path(os.path.commonpath([str(workdir / _search_path(p)) for p in searched]))
        root = root.parent if root.is_file() else root  # one file: the folder it is in
        for path in files:
            target = self.root / name / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        number = str(len(self.uploads))
        run = f"{github['server_url']}/{github['repository']}/actions/runs/{github['run_id']}"
        return {"artifact-id": number, "artifact-url": f"{run}/artifacts/{number}"}

    def files(self, name: str) -> list[str]:
        return sorted(str(p.relative_to(self.root / name)) for p in (self.root / name).rglob("*") if p.is_file())


def _search_path(pattern: str) -> str:
    """The part of a path before its first wildcard, where the search starts."""
    plain: list[str] = []
    for part in Path(pattern).parts:
        if re.search(r"[*?\[]", part):
            break
        plain.append(part)
    return str(Path(*plain)) if plain else "."


def run_action(
    action: dict[str, Any],
    inputs: dict[str, str],
    github: dict[str, Any],
    workdir: Path,
    base_env: dict[str, str],
    uses: dict[str, UsesStandIn] | None = None,
) -> ActionRun:
    """Runs every step of a composite action; `base_env` is the job's environment, `uses` the
    stand-ins for the actions its `uses:` steps name (by name, without the @ref)."""
    runner_temp = workdir / "runner-temp"
    runner_temp.mkdir(parents=True, exist_ok=True)
    summary_file = runner_temp / "step-summary.md"
    summary_file.touch()
    contexts: dict[str, Any] = {"github": github, "runner": {"temp": str(runner_temp)}, "steps": {}}
    resolved_inputs = {}
    for name, spec in (action.get("inputs") or {}).items():
        value = inputs.get(name, spec.get("default", ""))
        resolved_inputs[name] = substitute(str(value), contexts)
    unknown = set(inputs) - set(resolved_inputs)
    if unknown:
        raise ValueError(f"inputs the action does not declare: {sorted(unknown)}")
    contexts["inputs"] = resolved_inputs

    runs: list[StepRun] = []
    for index, step in enumerate(action["runs"]["steps"]):
        succeeded = all(run.conclusion != "failure" for run in runs)
        condition = str(step.get("if", "success()")).replace("${{", "").replace("}}", "")
        # Without a status function, a condition holds only while every step before succeeded.
        if not re.search(r"\b(success|failure|always|cancelled)\(", condition):
            condition = f"success() && ({condition})"
        name = step.get("name", f"step {index}")
        if not truthy(evaluate(condition, contexts, succeeded)):
            runs.append(StepRun(name, step.get("id"), ran=False))
            if step.get("id"):
                contexts["steps"][step["id"]] = {"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}
            continue
        if "uses" in step:
            runs.append(_run_uses(step, name, contexts, workdir, github, uses or {}))
            if step.get("id"):
                run = runs[-1]
                contexts["steps"][step["id"]] = {"outputs": run.outputs, "outcome": run.outcome,
                                                 "conclusion": run.conclusion}
            continue
        step_env = {key: substitute(str(value), contexts) for key, value in (step.get("env") or {}).items()}
        output_file = runner_temp / f"output-{index}"
        script = runner_temp / f"step-{index}.sh"
        script.write_text(step["run"])
        env = base_env | step_env | {
            "GITHUB_OUTPUT": str(output_file),
            "GITHUB_STEP_SUMMARY": str(summary_file),
            "RUNNER_TEMP": str(runner_temp),
        }
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=workdir, env=env, capture_output=True, text=True,
        )
        outputs = read_output_file(output_file)
        run = StepRun(name, step.get("id"), True, proc.returncode, step_env, proc.stdout + proc.stderr, outputs,
                      continue_on_error=step.get("continue-on-error") is True)
        runs.append(run)
        if step.get("id"):
            contexts["steps"][step["id"]] = {"outputs": outputs, "outcome": run.outcome, "conclusion": run.conclusion}
    action_outputs = {
        name: substitute(str(spec["value"]), contexts) for name, spec in (action.get("outputs") or {}).items()
    }
    return ActionRun(runs, action_outputs, summary_file.read_text())


def _run_uses(
    step: dict[str, Any], name: str, contexts: dict[str, Any], workdir: Path, github: dict[str, Any],
    uses: dict[str, UsesStandIn],
) -> StepRun:
    action = step["uses"].split("@", 1)[0]
    if action not in uses:
        raise ValueError(f"no stand-in for {action}, which step {name!r} uses")
    with_ = {key: substitute(str(value), contexts) for key, value in (step.get("with") or {}).items()}
    try:
        outputs, code, log = uses[action](with_, workdir, github), 0, ""
    except StepFailed as exc:
        outputs, code, log = {}, 1, f"::error::{exc}"
    # `env` holds the step's `with:`: what the action was handed, as a script's env is
    return StepRun(name, step.get("id"), True, code, with_, log, outputs,
                   continue_on_error=step.get("continue-on-error") is True)


def clean_env() -> dict[str, str]:
    """A job environment without anything of this machine's that a step could mistake
    for its own: PATH, HOME and the locale only."""
    return {key: os.environ[key] for key in ("PATH", "HOME", "LANG") if key in os.environ}
