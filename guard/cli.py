"""Command line: `guard run`, `guard demo`, `guard record`, `guard calibrate`, `guard bisect`, `guard comment` /
`guard summary` for GitHub, `guard export` for other tools, `guard analyze` / `guard diff` of profiler traces,
and `guard serve`, the service, with `guard worker` on each GPU host of its procrastinate queue and
`guard upload` of a record to it.
Errors are one message and an exit code."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import guard
from guard._comment_mode import COMMENT_MODES, DEFAULT_COMMENT_MODE
from guard._crash import describe_failure
from guard._errors import EXIT_ERROR, EXIT_INVALID, EXIT_OK, EXIT_REGRESSION, EXIT_UNDECIDED, GuardError
from guard._output import append_whole, check_out_dir, check_out_file, write_atomic
from guard._types import is_repo_name
from guard.sandbox import restart_clean

if TYPE_CHECKING:  # the report stage pulls in scipy; `guard analyze` needs none of it
    from guard.report import Report

# per gate (guard/report/_gate.py): an undecided run (at_threshold, inconclusive) exits 4, neither
# the pass of 0 nor the regression of 1; measure.at_threshold = "fail" makes at_threshold a failure, 1
GATE_EXIT = {
    "success": EXIT_OK,
    "undecided": EXIT_UNDECIDED,
    "failure": EXIT_REGRESSION,
    "error": EXIT_INVALID,  # the run's verdict invalid: not the guard's own error (2)
}


def _progress(message: str) -> None:
    print(f"[guard {time.strftime('%H:%M:%S')}] {log_text(message)}", file=sys.stderr, flush=True)


def log_text(message: str) -> str:
    """A progress message as the log shows it: what a pull request wrote into it (an exception's
    message, its traceback's lines) can start no workflow command (a line beginning '::') and
    carries no control character but the line breaks."""
    shown = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "?", message)
    return re.sub(r"(?m)^(\s*)::", r"\1: :", shown)


_CONFIG_HELP = (
    f"config file outside the repository's checkout (default: {guard.DEFAULT_CONFIG_NAME} as the base commit "
    "holds it)"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="guard", description="Guard a pull request against decode slowdowns."
    )
    parser.add_argument("--version", action="version", version=f"regression-guard {guard.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for add_commands in (_add_run, _add_record_calibrate_bisect, _add_clean_demo, _add_github, _add_report_tools,
                         _add_traces_and_service):
        add_commands(sub)
    return parser


def _add_builds(command: argparse.ArgumentParser, config_commit: str, out: Path, out_help: str) -> None:
    """--config, --out and --cache-dir of a command that builds commits: `run`, `record`, `bisect`."""
    command.add_argument("--config", type=Path, default=None,
                         help=_CONFIG_HELP.replace("the base commit", config_commit))
    command.add_argument("--out", type=Path, default=out, help=out_help)
    command.add_argument("--cache-dir", type=Path, default=None, help="where arm builds are kept and reused")


def _add_run_links(command: argparse.ArgumentParser, run_url_help: str) -> None:
    """--run-url and --artifact-id, the links of `comment` and `summary` to the run that measured."""
    command.add_argument("--run-url", default=_run_url(), help=run_url_help)
    command.add_argument("--artifact-id", type=_positive_int, default=None,
                         help="id of that run's artifact with report.json, the picture and the traces, to link it")


def _add_run(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="build base and head, replay the workload on both, compare, report")
    run.add_argument("--repo", type=Path, default=Path("."), help="target git repository (default: .)")
    run.add_argument("--base", default=None, help="base ref (default: merge-base of head with the target branch)")
    run.add_argument("--head", default="HEAD", help="head ref (default: HEAD)")
    _add_builds(run, "the base commit", Path("guard-out"), "folder for report.json and comment.md")
    run.add_argument(
        "--github-repo", default=os.environ.get("GITHUB_REPOSITORY"),
        help="OWNER/NAME, to link the comment's file locations (default: $GITHUB_REPOSITORY)",
    )
    tried = run.add_argument_group(
        "overrides", "in place of the config's values, for a quick local try or a threshold the workflow sets; "
        "the report and the comment say which were given")
    tried.add_argument("--repeats", type=_positive_int, default=None, help="fresh processes per arm (measure.repeats)")
    tried.add_argument("--batch-sizes", type=_batch_sizes, default=None,
                       help="batch sizes measured, e.g. 1,2 (workload.batch_sizes)")
    tried.add_argument("--steps", type=_positive_int, default=None, help="timed decode steps (workload.steps)")
    tried.add_argument("--quick", action="store_true",
                       help="a quick try: 2 processes per arm and 32 timed steps unless --repeats or --steps say "
                            "otherwise, fewer processes than the rule needs allowed; the verdict holds for these "
                            "settings alone")
    tried.add_argument("--threshold-pct", type=_percent, default=None,
                       help="smallest slowdown that counts, for GPU ms, tok/s and end-to-end ms where it has no "
                            "threshold of its own (measure.threshold_pct; replaces a calibrated thresholds file)")


def _add_record_calibrate_bisect(sub: argparse._SubParsersAction) -> None:
    record = sub.add_parser(
        "record", help="build one commit and measure it alone, as a run measures each arm: main's figures",
        description="No comparison and no verdict: writes record.json with every process's figures, and the "
                    "same figures as Bencher Metric Format (bmf.json) and pyperf's JSON (pyperf.json). Exit 3: "
                    "the commit did not build or run.")
    record.add_argument("--repo", type=Path, default=Path("."), help="target git repository (default: .)")
    record.add_argument("--commit", default="HEAD", help="the commit to measure (default: HEAD)")
    _add_builds(record, "the commit", Path("guard-out"),
                "folder for record.json, bmf.json and pyperf.json (default: guard-out)")

    cal = sub.add_parser("calibrate", help="A/A runs of one commit: this runner's noise and suggested thresholds")
    cal.add_argument("--repo", type=Path, default=Path("."), help="target git repository (default: .)")
    cal.add_argument("--ref", default="HEAD", help="the commit to run against itself (default: HEAD)")
    cal.add_argument("--config", type=Path, default=None, help=_CONFIG_HELP.replace("the base commit", "REF"))
    cal.add_argument(
        "--out", type=Path, default=Path("guard-thresholds.toml"),
        help="thresholds file to write; point measure.thresholds_file at it",
    )
    cal.add_argument(
        "--threshold-pct", type=_percent, action="append", default=[], metavar="PCT",
        help="a threshold to estimate the repeats per arm of, besides measure.threshold_pct (repeatable)",
    )

    bisect = sub.add_parser(
        "bisect", help="the first commit between a good and a bad one that made decode slower",
        description="A binary search over the commits after GOOD on BAD's first-parent line; each step is a "
                    "paired, interleaved run of its commit against GOOD, reusing cached builds. Exit 1: the first "
                    "bad commit was found; 0: BAD is not slower than GOOD.")
    bisect.add_argument("--repo", type=Path, default=Path("."), help="target git repository (default: .)")
    bisect.add_argument("--good", required=True, help="a commit without the slowdown")
    bisect.add_argument("--bad", required=True, help="a later commit with it, descending from GOOD")
    _add_builds(bisect, "GOOD", Path("guard-bisect"),
                "folder for bisect.json and each step's report (default: guard-bisect)")


def _add_clean_demo(sub: argparse._SubParsersAction) -> None:
    clean = sub.add_parser(
        "clean", help="remove the worktrees and builds the guard made for a repository",
        description="Only from a cache dir the guard marked, and only the builds in it; a build that a running "
                    "guard holds is left.")
    clean.add_argument("--repo", type=Path, default=Path("."), help="the repository the builds are of (default: .)")
    clean.add_argument("--cache-dir", type=Path, default=None,
                       help="the --cache-dir `guard run` used (default: the guard's folder in the repository's .git)")
    clean.add_argument("--dry-run", action="store_true", help="list what would be removed; remove nothing")
    clean.add_argument("--unused-for", type=_days, default=None, metavar="DAYS",
                       help="only the builds no run has built or reused for DAYS days (e.g. 7), for a cache kept "
                            "between jobs; default: every build")

    demo = sub.add_parser("demo", help="run the whole pipeline on a throwaway repo holding the reference engine")
    demo.add_argument("--out", type=Path, default=Path("guard-demo"), help="folder for report.json and comment.md")
    demo.add_argument(
        "--workdir", type=Path, default=None, help="where the throwaway repo is made (default: a temp dir)"
    )
    demo.add_argument("--steps", type=int, default=128, help="timed decode steps per batch size")
    demo.add_argument("--warmup-steps", type=int, default=16)
    demo.add_argument("--repeats", type=int, default=5)
    demo.add_argument("--max-rounds", type=_positive_int, default=None,
                      help="rounds at most, the first included (default: measure.max_rounds's); 1 for a quick try")
    demo.add_argument("--tok-per-s-min-s", type=_seconds, default=None,
                      help="seconds of timed decode per batch size at the least (workload.tok_per_s_min_s; "
                           "default: its default); 0 for a quick try: one pass")
    demo.add_argument("--warmup-max-s", type=_seconds, default=None,
                      help="most seconds of untimed warmup per batch size (workload.warmup_max_s); 0 for a quick try")
    demo.add_argument("--options", default="", help="workload options as TOML inline-table body, e.g. 'layers = 4'")
    demo.add_argument("--scenario", default="piecewise",
                      help="the change the demo stages: piecewise (default; one padded graph per layer), fallback "
                           "(the eager fallback removed, MoE, a batch-size mix), fallback-win (the same removal "
                           "where it costs nothing); docs/scenarios.md")


def _add_github(sub: argparse._SubParsersAction) -> None:
    comment = sub.add_parser(
        "comment", help="post or update the sticky pull-request comment and set the commit status",
        description="Token from $GITHUB_TOKEN (or $GH_TOKEN); API root from $GITHUB_API_URL.",
    )
    comment.add_argument("--report", type=Path, required=True, help="report.json written by `guard run`")
    comment.add_argument("--repo", default=os.environ.get("GITHUB_REPOSITORY"),
                         help="OWNER/NAME (default: $GITHUB_REPOSITORY)")
    comment.add_argument("--pr", type=int, default=None, help="pull request number; without it, the status only")
    comment.add_argument("--mode", choices=COMMENT_MODES, default=DEFAULT_COMMENT_MODE,
                         help="when to write a comment: unless-green (default) for every verdict but pass and "
                              "improvement, on-regression for a regression only; an existing one is always kept "
                              "up to date")
    comment.add_argument("--sha", default=None, help="commit for the status; must be the report's head (default: it)")
    comment.add_argument("--bot-login", default="github-actions[bot]",
                         help="the token's login where GET /user is not allowed (default: github-actions[bot])")
    comment.add_argument("--key", default="default",
                         help="keeps one comment and status per key, e.g. one per GPU in a matrix")
    comment.add_argument("--no-status", action="store_true", help="do not set the commit status")
    _add_run_links(comment, "the workflow run that measured: linked from the comment, and the status's link "
                            "when there is no comment (default: this job's run)")

    summary = sub.add_parser(
        "summary", help="write the job summary, step outputs and annotations of a report (GitHub Actions)"
    )
    summary.add_argument("--report", type=Path, required=True, help="report.json written by `guard run`")
    _add_run_links(summary, "the workflow run that measured, to link (default: this job's run)")

    upload = sub.add_parser(
        "upload", help="send a record (`guard record`'s record.json) to the service, into main's history",
        description="Token from $GUARD_SERVICE_TOKEN: the repository's ingest token of the service's "
                    "--ingest-tokens-file. A retried upload of the same record changes nothing there.",
    )
    upload.add_argument("--record", type=Path, required=True, help="record.json written by `guard record`")
    upload.add_argument("--service-url", required=True, help="the service's root, e.g. https://guard.example.org")
    upload.add_argument("--repo", default=os.environ.get("GITHUB_REPOSITORY"),
                        help="OWNER/NAME whose history it joins (default: $GITHUB_REPOSITORY)")


def _add_report_tools(sub: argparse._SubParsersAction) -> None:
    artifact = sub.add_parser(
        "artifact", help="copy report.json, comment.md, the picture and the traces into a new folder to upload",
        description="Only regular files of this user's, opened without following links: a link a pull "
                    "request's process left in the traces folder cannot make the upload read another file.",
    )
    artifact.add_argument("--out", type=Path, default=Path("guard-out"), help="the run's --out (default: guard-out)")
    artifact.add_argument("--into", type=Path, required=True, help="new folder to copy into; upload this one")

    export = sub.add_parser(
        "export", help="a report's figures for other tools: Bencher (bmf), pyperf, github-action-benchmark",
        description="Reads the report as `guard comment` does (checked, decided again) and writes one arm's "
                    "figures: per batch size, the median and range over its processes.",
    )
    export.add_argument("report", type=Path, help="report.json written by `guard run`")
    # guard.export.FORMATS, spelled out: importing it here would load the report stage for every command
    export.add_argument("--format", required=True, choices=["bmf", "pyperf", "github-action-benchmark"],
                        help="bmf: Bencher Metric Format JSON; pyperf: pyperf's JSON suite (one run per process); "
                             "github-action-benchmark: its customSmallerIsBetter list")
    export.add_argument("--arm", choices=["base", "head"], default="head", help="whose figures (default: head)")
    export.add_argument("--out", type=Path, default=None, help="file to write (default: standard output)")

    explain = sub.add_parser(
        "explain", help="a kept report explained again by this guard's explain stage, from its own figures",
        description="Reads the report as `guard comment` does (checked, decided again), all but its explanation, "
                    "which it makes again and writes; the verdict never changes (exit 2 where it would).",
    )
    explain.add_argument("report", type=Path, help="report.json written by `guard run`")
    explain.add_argument("--out", type=Path, default=None, help="file to write (default: the report, replaced)")


def _add_traces_and_service(sub: argparse._SubParsersAction) -> None:
    steps_help = "decode steps in the trace; needed when it has no step ranges and no graph launches"
    max_help = "largest trace read, in MiB uncompressed (default: 2048); a larger one is refused before it is held"
    analyze = sub.add_parser("analyze", help="kernel, idle and gap figures per decode step of one profiler trace")
    analyze.add_argument("trace", type=Path, help="Kineto JSON (.json, .json.gz) or Nsight Systems SQLite trace")
    analyze.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    analyze.add_argument("--steps", type=int, default=None, help=steps_help)
    analyze.add_argument("--max-trace-mib", type=_positive_int, default=None, help=max_help)

    from guard.service._serve import add_arguments as add_serve_arguments

    add_serve_arguments(sub.add_parser(
        "serve", help="the service: the GitHub App's webhooks, durable jobs on this host's GPUs, the API",
        description="Secrets from GUARD_WEBHOOK_SECRET or files, never from the command line."))
    from guard.service._work import add_arguments as add_worker_arguments

    add_worker_arguments(sub.add_parser(
        "worker", help="a GPU host's worker for `guard serve --queue procrastinate`: measures and posts its jobs",
        description="Secrets from files, never from the command line."))

    diff = sub.add_parser("diff", help="what changed per decode step between a base and a head trace")
    diff.add_argument("base_trace", type=Path)
    diff.add_argument("head_trace", type=Path)
    diff.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
    diff.add_argument("--steps", type=int, default=None, help=steps_help + " (applies to both)")
    diff.add_argument("--max-trace-mib", type=_positive_int, default=None, help=max_help)


def main(argv: list[str] | None = None) -> int:
    """Exit 1 only for a regression: every failure, expected or not, is one line and exit 2."""
    args = _parser().parse_args(argv)
    args.own_process = argv is None  # started as the program, so it may restart itself
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "record":
            return _record(args)
        if args.command == "analyze":
            return _analyze(args)
        if args.command == "diff":
            return _diff(args)
        if args.command == "calibrate":
            return _calibrate(args)
        if args.command == "comment":
            return _comment(args)
        if args.command == "summary":
            return _summary(args)
        if args.command == "export":
            return _export(args)
        if args.command == "artifact":
            return _artifact(args)
        if args.command == "upload":
            return _upload(args)
        if args.command == "explain":
            return _explain(args)
        if args.command == "clean":
            return _clean(args)
        if args.command == "bisect":
            return _bisect(args)
        if args.command == "serve":
            return _serve(args)
        if args.command == "worker":
            return _worker(args)
        return _demo(args)
    except GuardError as exc:
        print(f"guard: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("guard: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout went away (`guard analyze ... | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001  # a bug or the machine's limit: still one line, never exit 1
        print(f"guard: error: {describe_failure(exc, args.command, _bug_dir(args))}", file=sys.stderr)
        return EXIT_ERROR


def _bug_dir(args: argparse.Namespace) -> Path | None:
    """Where a traceback is kept: beside the command's outputs when it writes any."""
    if args.command in ("run", "demo", "bisect", "record"):
        return args.out
    if args.command == "calibrate":
        return args.out.parent
    return None


def _serve(args: argparse.Namespace) -> int:
    from guard.service._extra import require_service_packages

    require_service_packages("serve")
    from guard.service._serve import serve

    return serve(args)


def _worker(args: argparse.Namespace) -> int:
    from guard.service._extra import require_service_packages

    require_service_packages("worker")
    from guard.service._work import work

    return work(args)


def _run(args: argparse.Namespace) -> int:
    from guard._resolve import run_config
    from guard.config import ConfigOverrides, load_caller_config

    check_out_dir(args.out)
    if args.github_repo and not is_repo_name(args.github_repo):  # its links are made at the end: say so first
        raise GuardError(f"--github-repo {args.github_repo!r} is not OWNER/NAME (e.g. octo/engine)")
    # without --config, the pipeline reads guard.toml from the base commit
    config = load_caller_config(args.config, args.repo) if args.config else None
    config_dir = args.config.resolve().parent if args.config else None
    if args.own_process:  # before anything is built: this process, too, then holds no secret
        restart_clean(run_config(args.repo, args.base, args.head, config, config_dir).build.pass_env)
    from guard.pipeline import run_guard  # after the restart: the process that exec()s needs none of it

    report = run_guard(
        args.repo, args.base, args.head, config, args.out, args.cache_dir, _progress,
        config_dir=config_dir, github_repo=args.github_repo,
        server_url=os.environ.get("GITHUB_SERVER_URL", "https://github.com"),
        overrides=(ConfigOverrides.quick if args.quick else ConfigOverrides)(
            repeats=args.repeats, batch_sizes=args.batch_sizes, steps=args.steps, threshold_pct=args.threshold_pct),
    )
    return _finish(report, args.out, print_comment=False)


def _record(args: argparse.Namespace) -> int:
    from guard._resolve import record_config
    from guard.config import load_caller_config

    check_out_dir(args.out)
    config = load_caller_config(args.config, args.repo) if args.config else None  # None: the commit's guard.toml
    if args.own_process:  # as `guard run`: no secret in the process that builds and runs the commit
        restart_clean(record_config(args.repo, args.commit, config).build.pass_env)
    from guard.pipeline import record_commit

    record = record_commit(args.repo, args.commit, config, args.out, args.cache_dir, _progress)
    from guard.export import RECORD_EXPORTS
    from guard.record import RECORD_FILE

    if not record.measured:
        _progress(f"{record.arm.sha[:12]} was not measured ({record.arm.status.replace('_', ' ')}: "
                  f"{record.arm.error}); wrote {args.out / RECORD_FILE}, and no figures")
        return EXIT_INVALID
    written = ", ".join(str(args.out / name) for name in [RECORD_FILE, *RECORD_EXPORTS.values()])
    _progress(f"recorded {record.arm.sha[:12]}: {len(record.batch_sizes)} batch size(s), {record.arm.repeats} "
              f"processes; wrote {written}")
    return EXIT_OK


def _bisect(args: argparse.Namespace) -> int:
    from guard.bisect import BISECT_FILE, chain_text, commits_between, run_bisect
    from guard.config import load_caller_config
    from guard._resolve import run_config

    check_out_dir(args.out)
    commits_between(args.repo, args.good, args.bad)  # a bad range is the first thing to fix
    config = load_caller_config(args.config, args.repo) if args.config else None  # None: GOOD's guard.toml
    config_dir = args.config.resolve().parent if args.config else None
    if args.own_process:  # as `guard run`: no secret in the process that builds and runs the commits
        restart_clean(run_config(args.repo, args.good, args.bad, config, config_dir).build.pass_env)
    result = run_bisect(args.repo, args.good, args.bad, config, args.out, args.cache_dir, _progress, config_dir)
    sys.stdout.write(chain_text(result))
    _progress(f"wrote {args.out / BISECT_FILE}")
    return EXIT_REGRESSION if result.outcome == "found" else EXIT_OK


def _calibrate(args: argparse.Namespace) -> int:
    from guard.calibrate import calibrate, calibration_path, suggested_text
    from guard.config import load_caller_config

    check_out_file(args.out)
    config = load_caller_config(args.config, args.repo) if args.config else None  # None: REF's guard.toml
    result = calibrate(args.repo, args.ref, config, args.out, _progress, thresholds_pct=args.threshold_pct)
    print(args.out.read_text(), end="")
    _progress(
        f"suggested thresholds: {suggested_text(result.suggested)} (the smallest {result.repeats} repeats per arm "
        "support here); "
        f"{result.slow.count} of {result.slow.processes} processes slow; wrote {args.out} and "
        f"{calibration_path(args.out)}"
    )
    return 0


def _run_url() -> str | None:
    env = os.environ
    if env.get("GITHUB_RUN_ID") and env.get("GITHUB_REPOSITORY"):
        server = env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
        return f"{server}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
    return None


def _comment(args: argparse.Namespace) -> int:
    from guard.publish import DEFAULT_API_URL, PublishError, PublishRequest, publish, write_outputs

    if not args.repo:
        raise PublishError("no repository: pass --repo OWNER/NAME (or set GITHUB_REPOSITORY)")
    request = PublishRequest(
        report=args.report, repo=args.repo, pr=args.pr, mode=args.mode, sha=args.sha, bot_login=args.bot_login,
        key=args.key, status=not args.no_status, run_url=args.run_url, artifact_id=args.artifact_id,
        api_url=os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL,
        server_url=os.environ.get("GITHUB_SERVER_URL"),
    )
    token = os.environ.get("GITHUB_TOKEN") or os.environ.get("GH_TOKEN") or ""
    result = publish(request, token, _progress)
    url = result.comment.url or ""
    if url:
        print(url)
    if os.environ.get("GITHUB_OUTPUT"):
        write_outputs(Path(os.environ["GITHUB_OUTPUT"]), {"comment-url": url, "comment-action": result.comment.action})
    return EXIT_OK


def _summary(args: argparse.Namespace) -> int:
    from guard.publish import (
        annotations, job_links, worst_gpu_ms_change_pct, worst_tok_per_s_change_pct, write_outputs,
    )
    from guard.report import gate, read_report, render_comment, repeats_to_decide, run_links

    links = run_links(args.run_url, args.artifact_id)
    report = job_links(read_report(args.report), os.environ.get("GITHUB_REPOSITORY"),
                       os.environ.get("GITHUB_SERVER_URL"))
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        append_whole(Path(os.environ["GITHUB_STEP_SUMMARY"]), render_comment(report, links) + "\n")
    if os.environ.get("GITHUB_OUTPUT"):
        tok, gpu = worst_tok_per_s_change_pct(report), worst_gpu_ms_change_pct(report)
        needed = repeats_to_decide(report)
        write_outputs(Path(os.environ["GITHUB_OUTPUT"]), {
            "verdict": report.verdict,
            "gate": gate(report),
            # an undecided run's processes per arm that would decide it; empty: none, or more than the guard counts
            "repeats-to-decide": "" if needed is None else str(needed),
            "tok-per-s-change": "" if tok is None else f"{tok:.2f}",
            "gpu-ms-change": "" if gpu is None else f"{gpu:.2f}",
            "report-path": str(args.report),
        })
    for line in annotations(report):
        print(line)
    return EXIT_OK


def _upload(args: argparse.Namespace) -> int:
    from guard.publish import UploadError, upload_record, write_outputs

    if not args.repo:
        raise UploadError("no repository: pass --repo OWNER/NAME (or set GITHUB_REPOSITORY)")
    uploaded = upload_record(args.record, args.service_url, args.repo, os.environ.get("GUARD_SERVICE_TOKEN", ""),
                             progress=_progress)
    said = {"created": "a new point of main's history", "unchanged": "already there: nothing changed",
            "replaced": "in place of the commit's earlier record"}[uploaded.outcome]
    _progress(f"uploaded {args.record} to {args.service_url} for {args.repo}: run {uploaded.run}, {said}")
    if os.environ.get("GITHUB_OUTPUT"):
        write_outputs(Path(os.environ["GITHUB_OUTPUT"]), {"service-run": str(uploaded.run)})
    return EXIT_OK


def _artifact(args: argparse.Namespace) -> int:
    from guard.publish import gather_artifact

    copied, left_out = gather_artifact(args.out, args.into)
    skipped = f"; left out {left_out} that were not this user's own regular files" if left_out else ""
    _progress(f"gathered {len(copied)} file(s) of {args.out} into {args.into}{skipped}")
    return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    from guard.export import export
    from guard.report import read_report

    if args.out is not None:
        check_out_file(args.out)  # before the report is read: a bad --out is the first thing to fix
    text = export(read_report(args.report), args.format, args.arm)
    if args.out is None:
        sys.stdout.write(text)
    else:
        write_atomic(args.out, text)
        _progress(f"wrote {args.format} of the {args.arm} arm to {args.out}")
    return EXIT_OK


def _explain(args: argparse.Namespace) -> int:
    from guard.report import changes_lines, reexplain

    if args.out is not None:
        check_out_file(args.out)  # before the report is read: a bad --out is the first thing to fix
    out = args.out or args.report
    result = reexplain(args.report)
    if not result.changes and out == args.report:
        _progress(f"{args.report}: its explanation is the one this guard gives; left as it was")
        return EXIT_OK
    write_atomic(out, result.report.model_dump_json(indent=2) + "\n")
    for line in changes_lines(result.changes):
        _progress(f"changed: {line}")
    _progress(f"wrote {out}: {len(result.changes)} fact(s) of the explanation changed, verdict "
              f"{result.report.verdict} as it was")
    return EXIT_OK


def _clean(args: argparse.Namespace) -> int:
    from guard.checkout import clean, default_cache_dir

    repo = args.repo.resolve()
    cache_dir = (args.cache_dir or default_cache_dir(repo)).absolute()
    days = args.unused_for
    done = clean(repo, cache_dir, dry_run=args.dry_run, unused_for_s=None if days is None else days * 86400)
    verb = "would remove" if args.dry_run else "removed"
    for build in done.builds:
        print(f"{verb} {build}")
    for build in done.in_use:
        print(f"left {build}: a running guard holds it")
    for other in done.others:
        print(f"left {other}: not a build of the guard")
    if done.removed_cache_dir:
        print(f"removed {cache_dir}")
    if done.recent:
        _progress(f"kept {len(done.recent)} build(s) used in the last {days:g} day(s)")
    if not done.builds and not done.in_use:
        _progress(f"nothing to clean in {cache_dir}")
    else:
        _progress(f"{verb} {len(done.builds)} build(s) of {cache_dir}" + (
            "; run again without --dry-run to remove them" if args.dry_run and done.builds else ""))
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from guard.demo import run_demo
    from guard.demo._repo import DemoPasses

    check_out_dir(args.out)
    report = run_demo(
        out_dir=args.out,
        workdir=args.workdir,
        steps=args.steps,
        warmup_steps=args.warmup_steps,
        repeats=args.repeats,
        options_toml=args.options,
        progress=_progress,
        scenario=args.scenario,
        max_rounds=args.max_rounds,
        passes=DemoPasses(args.tok_per_s_min_s, args.warmup_max_s),
    )
    return _finish(report, args.out, print_comment=True)


def _finish(report: Report, out_dir: Path, print_comment: bool) -> int:
    if print_comment:
        sys.stdout.write((out_dir / "comment.md").read_text())
    _progress(f"verdict: {report.verdict}; wrote {out_dir / 'report.json'} and {out_dir / 'comment.md'}")
    from guard.report import gate

    return GATE_EXIT[gate(report)]


def _analyze(args: argparse.Namespace) -> int:
    from guard.trace import analyze, figures_text, read_trace

    figures = analyze(read_trace(args.trace, *_trace_cap(args)), steps=args.steps)
    sys.stdout.write(figures.model_dump_json(indent=2) + "\n" if args.json else figures_text(figures))
    return EXIT_OK


def _diff(args: argparse.Namespace) -> int:
    from guard.trace import analyze, diff, diff_text, read_trace

    base = analyze(read_trace(args.base_trace, *_trace_cap(args)), steps=args.steps)
    head = analyze(read_trace(args.head_trace, *_trace_cap(args)), steps=args.steps)
    result = diff(base, head)
    sys.stdout.write(result.model_dump_json(indent=2) + "\n" if args.json else diff_text(result))
    return EXIT_OK


def _trace_cap(args: argparse.Namespace) -> tuple[int, ...]:
    return () if args.max_trace_mib is None else (args.max_trace_mib << 20,)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {text!r}")
    return value


def _batch_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"expected batch sizes as whole numbers of 1 or more, e.g. 1,2; got {text!r}")
    return sizes


def _number_from(text: str, low: float, high: float, what: str) -> float:
    """`text` as a finite number from `low` to `high`, or the argparse error that says `what`."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and low <= value <= high):
        raise argparse.ArgumentTypeError(f"expected {what}; got {text!r}")
    return value


def _days(text: str) -> float:
    return _number_from(text, 0, 36500, "a number of days from 0 to 36500, e.g. 7")


def _seconds(text: str) -> float:
    return _number_from(text, 0, 600, "seconds from 0 to 600, e.g. 0.2")


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value < 100):
        raise argparse.ArgumentTypeError(f"expected a percentage above 0 and below 100, e.g. 0.5; got {text!r}")
    return value
