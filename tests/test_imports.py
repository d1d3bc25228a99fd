"""What each entry point imports, checked in a fresh interpreter: reading a report (the
trusted workflow's `guard comment` and `guard summary`) needs no numpy, scipy, msgspec or
trace reader, and `guard analyze` none of the report, comparison or publishing stages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.report_fixtures import current_file

REPO = Path(__file__).resolve().parents[1]
# the H200 example (it has traces), read as data into the current schema (in this process)
EXAMPLE_REPORT = current_file(REPO / "docs" / "examples" / "h200-demo" / "report.json")
FIXTURE_TRACE = REPO / "tests" / "fixtures" / "traces" / "h200-refengine-layer-graphs-bs1.json.gz"
HEAVY = ["numpy", "scipy", "msgspec"]
TRACE_READING = ["guard.trace._read", "guard.trace._kineto", "guard.trace._nsys", "guard.trace._analyze",
                 "guard.trace._model", "guard.trace._steps"]


def _loaded_after(code: str, blocked: list[str] = ()) -> set[str]:
    """The modules a fresh interpreter holds after `code`; importing a `blocked` one fails it."""
    program = (
        "import json, sys\n"
        f"for name in {list(blocked)!r}: sys.modules[name] = None\n"  # an import of it raises
        f"{code}\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_the_report_and_publish_stages_import_without_numpy_scipy_msgspec_or_the_readers() -> None:
    loaded = _loaded_after("import guard.report, guard.publish, guard.export")
    assert "guard.report._schema" in loaded and "guard.trace._sections" in loaded  # what is checked did load
    assert not loaded & set(HEAVY + TRACE_READING)


def test_a_report_reads_into_its_models_with_numpy_scipy_and_msgspec_blocked() -> None:
    code = ("from pathlib import Path\nfrom guard.report import Report\n"
            f"report = Report.model_validate_json(Path({str(EXAMPLE_REPORT)!r}).read_text())\n"
            "assert report.traces and report.traces[0].diff is not None, 'the example has traces'\n")
    loaded = _loaded_after(code, blocked=HEAVY)
    assert not loaded & set(TRACE_READING)


def test_the_commands_of_the_trusted_workflow_start_without_numpy_or_scipy() -> None:
    # the command line as `guard comment` and `guard summary` start: parsing, then their stages
    code = ("from guard import cli\ncli._parser().parse_args(['summary', '--report', 'r.json'])\n"
            "import guard.publish, guard.report")
    assert not _loaded_after(code) & set(HEAVY + TRACE_READING)


def test_guard_analyze_imports_the_trace_stage_alone() -> None:
    code = ("import contextlib, io\nfrom guard.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    rc = main(['analyze', {str(FIXTURE_TRACE)!r}, '--json'])\n"
            "assert rc == 0 and json.loads(out.getvalue())['steps'] > 0\n")
    loaded = _loaded_after(code)
    assert {"numpy", "msgspec", "guard.trace._kineto"} <= loaded  # it did read the trace
    stages = {name for name in loaded if name.split(".")[:2] in (
        ["guard", "report"], ["guard", "compare"], ["guard", "measure"], ["guard", "publish"], ["guard", "cause"],
        ["guard", "checkout"], ["guard", "pipeline"], ["guard", "config"])}
    assert not stages
    assert not loaded & {"scipy", "jinja2", "httpx"}


def test_the_command_line_loads_no_stage_before_a_command_runs() -> None:
    """Parsing any command loads none of the config stage (its models alone took about 0.25 s
    to import): each command imports its own stages when it runs."""
    code = ("from guard import cli\n"
            "for argv in (['run'], ['comment', '--report', 'r.json'], ['analyze', 't.json'], ['calibrate']):\n"
            "    cli._parser().parse_args(argv)\n")
    loaded = _loaded_after(code)
    assert "guard.cli" in loaded
    assert not {name for name in loaded if name == "guard.config" or name.startswith("guard.config.")}
    assert not loaded & {"jinja2", *HEAVY}


def test_the_guard_and_its_action_commands_run_with_the_service_stack_blocked() -> None:
    """The Action installs the core alone: `guard summary` renders and `guard run` loads its
    pipeline with every package of the service extra made unimportable."""
    from guard.service._extra import SERVICE_MODULES

    code = ("import contextlib, io, os, tempfile\nimport guard\nfrom guard.cli import main\n"
            "summary = os.path.join(tempfile.mkdtemp(), 'summary.md')\nos.environ['GITHUB_STEP_SUMMARY'] = summary\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert main(['summary', '--report', {str(EXAMPLE_REPORT)!r}]) == 0\n"
            "assert open(summary).read().startswith('<!-- regression-guard:comment')\n"
            "from guard import cli\nfor argv in (['run'], ['comment', '--report', 'r.json'], ['serve'], ['worker', "
            "'--db', 'postgresql://u@h:1/d']):\n    cli._parser().parse_args(argv)\n"
            "import guard.pipeline, guard.publish, guard.report, guard.bisect, guard.history\n")
    loaded = _loaded_after(code, blocked=list(SERVICE_MODULES))
    assert {"guard.pipeline", "guard.report._render", "jinja2"} <= loaded
    # the blocked names themselves stay in sys.modules as None; an import of any of them would have failed the code
    assert not {name for name in loaded if name.split(".")[0] in SERVICE_MODULES} - set(SERVICE_MODULES)
