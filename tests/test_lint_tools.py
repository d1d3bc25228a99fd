"""tools/lint/check_workflows.py: the composite action as a workflow, and where scripts start."""

from __future__ import annotations

from pathlib import Path

import yaml

from tools.lint.check_workflows import _run_scripts, _source_line, action_as_workflow

ROOT = Path(__file__).resolve().parent.parent


def test_action_becomes_a_workflow_call_job_with_the_same_steps_and_outputs() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    workflow = yaml.safe_load(action_as_workflow(action))
    call = workflow["on"]["workflow_call"]
    assert set(call["inputs"]) == set(action["inputs"])
    assert all(spec == {"type": "string", "required": False, "description": action["inputs"][name]["description"]}
               for name, spec in call["inputs"].items())
    job = workflow["jobs"]["action"]
    assert job["steps"] == action["runs"]["steps"]
    assert job["outputs"] == {name: spec["value"] for name, spec in action["outputs"].items()}
    assert call["outputs"]["verdict"] == {"value": "${{ jobs.action.outputs.verdict }}"}


def test_scripts_are_located_on_the_lines_they_start_on() -> None:
    path = ROOT / "action.yml"
    lines = path.read_text().splitlines()
    scripts = _run_scripts(path)
    steps = yaml.safe_load(path.read_text())["runs"]["steps"]
    assert len(scripts) == len([step for step in steps if "run" in step])  # a `uses:` step has none
    for script in scripts:
        assert script.shell == "bash"
        assert lines[script.first_line - 1].strip() == script.text.splitlines()[0].strip()


def test_workflow_scripts_take_the_default_shell(tmp_path: Path) -> None:
    workflow = tmp_path / "w.yml"
    workflow.write_text(
        "on: push\ndefaults:\n  run:\n    shell: sh\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo one\n      - shell: bash\n        run: |\n          echo two\n"
    )
    (one, two) = _run_scripts(workflow)
    assert (one.shell, one.first_line, one.text) == ("sh", 9, "echo one")
    assert (two.shell, two.first_line, two.text) == ("bash", 12, "echo two\n")


def test_findings_in_the_generated_workflow_point_back_at_the_action() -> None:
    original = "a: 1\n  env:\n    X: ${{ inputs.x }}\n  value: ${{ steps.s.outputs.o }}\n"
    generated = "jobs:\n  env:\n    X: ${{ inputs.x }}\n  outputs:\n    o: ${{ steps.s.outputs.o }}\n"
    assert _source_line(original, generated, 3) == 3
    assert _source_line(original, generated, 5) == 4  # matched by its value
    assert _source_line(original, generated, 1) == 0  # not in the action
