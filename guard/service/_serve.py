"""`guard serve`: the settings from the command line, the environment and files, then the
app on uvicorn until stopped."""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from guard._comment_mode import COMMENT_MODES, DEFAULT_COMMENT_MODE
from guard.service._settings import (
    DEFAULT_LEASE_S, DEFAULT_MAX_BODY_BYTES, DEFAULT_TRUST_LABEL, DEFAULT_UNDECIDED_CONCLUSION,
    UNDECIDED_CONCLUSIONS, ServiceSettings, SettingsError, app_credentials, cannot_yet, gpu_devices, ingest_tokens,
    read_token, webhook_secret,
)


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """What a job runs with, where it runs: `guard serve`'s own workers or a `guard worker` host."""
    parser.add_argument("--work-dir", type=Path, default=Path("guard-service"),
                        help="clones, job outputs and traces (default: ./guard-service)")
    parser.add_argument("--app-id-file", type=Path, default=None, help="file holding the GitHub App's id")
    parser.add_argument("--app-key-file", type=Path, default=None, help="the App's private key (.pem)")
    parser.add_argument("--api-url", default=os.environ.get("GITHUB_API_URL") or "https://api.github.com",
                        help="GitHub's API root (default: $GITHUB_API_URL or https://api.github.com)")
    parser.add_argument("--job-command", default=None,
                        help="measure with this command instead of `guard run`; it gets the job in GUARD_JOB_* "
                             "variables and writes report.json into $GUARD_JOB_OUT")
    parser.add_argument("--comment-mode", choices=COMMENT_MODES, default=DEFAULT_COMMENT_MODE,
                        help="as the Action's comment input (default: unless-green, every verdict but pass and "
                             "improvement)")
    parser.add_argument("--undecided-conclusion", choices=UNDECIDED_CONCLUSIONS, default=DEFAULT_UNDECIDED_CONCLUSION,
                        help="the Check Run's conclusion for an undecided verdict (at_threshold, inconclusive): "
                             "action_required (default) or failure; never neutral, which a required check passes")
    parser.add_argument("--cache-unused-days", type=float, default=14.0,
                        help="after each job, remove the builds of its repository no job has built or reused for "
                             "this many days (`guard clean --unused-for`; default 14); a negative number keeps all")


def job_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ServiceSettings fields of add_job_arguments' options."""
    work_dir = args.work_dir.absolute()
    try:
        work_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SettingsError(f"cannot make --work-dir {work_dir}: {exc.strerror}") from exc
    try:
        command = shlex.split(args.job_command) if args.job_command else None
    except ValueError as exc:
        raise SettingsError(f"--job-command: {exc}") from exc
    days = args.cache_unused_days
    if not math.isfinite(days) or days > 36500:
        raise SettingsError(f"--cache-unused-days {days:g}: give a number of days, e.g. 14 (below 0: keep every build)")
    return {"work_dir": work_dir, "app": app_credentials(args.app_id_file, args.app_key_file),
            "api_url": args.api_url, "job_command": command, "comment_mode": args.comment_mode,
            "undecided_conclusion": args.undecided_conclusion,
            "cache_unused_days": None if days < 0 else days}


def add_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--db", default=None,
                       help="sqlite:///PATH (default: guard.db in --work-dir, WAL mode) or postgresql://USER@HOST/DB")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="port to listen on (default: 8080)")
    add_job_arguments(serve)
    serve.add_argument("--webhook-secret-file", type=Path, default=None,
                       help="file holding the App's webhook secret (or set GUARD_WEBHOOK_SECRET)")
    serve.add_argument("--read-token-file", type=Path, default=None,
                       help="file holding the token the dashboard's and the API's readers send (or set "
                            "GUARD_READ_TOKEN); without one, nothing can be read")
    serve.add_argument("--public-read", action="store_true",
                       help="let anyone who reaches the service read the dashboard and the API: private "
                            "repositories' subjects, shas and job logs included")
    serve.add_argument("--ingest-tokens-file", type=Path, default=None,
                       help="`OWNER/NAME TOKEN` per line: the tokens CI jobs send to POST /api/v1/runs")
    serve.add_argument("--workers", type=int, default=None,
                       help="jobs run at once on this host (default: one per GPU, one on a CPU host; 0: none)")
    serve.add_argument("--gpus", default=None,
                       help="the GPUs the workers use, one worker each, e.g. 0,1 (default: every GPU NVML finds)")
    serve.add_argument("--lease-s", type=float, default=DEFAULT_LEASE_S,
                       help=f"a job's lease: retried this long after its worker stops (default: {DEFAULT_LEASE_S:g})")
    serve.add_argument("--max-body-mib", type=float, default=DEFAULT_MAX_BODY_BYTES / (1 << 20),
                       help="largest delivery accepted (default: 25, GitHub's own cap)")
    serve.add_argument("--trust-label", default=DEFAULT_TRUST_LABEL,
                       help=f"label that lets a public repository's pull request run (default: {DEFAULT_TRUST_LABEL})")
    serve.add_argument("--dispatch-workflow", default=None,
                       help="send each job to this workflow (workflow_dispatch) on self-hosted runners "
                            "instead of running it here (file name or id, e.g. regression-guard.yml)")
    serve.add_argument("--dispatch-ref", default="main",
                       help="branch whose copy of the workflow is dispatched (default: main)")
    serve.add_argument("--queue", choices=["embedded", "procrastinate"], default="embedded",
                       help="embedded: this process's workers run the jobs (default); procrastinate: jobs go to "
                            "procrastinate's queue in the PostgreSQL --db, for `guard worker` on each GPU host")


def settings_of(args: argparse.Namespace) -> ServiceSettings:
    if not 0 < args.port < 65536:
        raise SettingsError(f"--port {args.port} is not a port number")
    if args.lease_s <= 0:
        raise SettingsError(f"--lease-s {args.lease_s:g} must be above 0")
    jobs = job_settings(args)
    db_url = args.db or f"sqlite:///{jobs['work_dir'] / 'guard.db'}"
    if args.queue == "procrastinate":
        _check_procrastinate(args, db_url)
    gpus = parse_gpus(args.gpus) if args.gpus is not None else gpu_devices()
    workers = args.workers if args.workers is not None else max(len(gpus), 1)
    if args.queue == "procrastinate":
        workers, gpus = 0, []  # the jobs run on `guard worker` hosts, with their GPUs
    if workers < 0:
        raise SettingsError("--workers must be 0 or more")
    if gpus and workers > len(gpus):
        raise SettingsError(f"--workers {workers} is more than the {len(gpus)} GPU(s) here: one job per GPU at a time")
    return ServiceSettings(
        db_url=db_url, **jobs, webhook_secret=webhook_secret(args.webhook_secret_file),
        ingest_tokens=ingest_tokens(args.ingest_tokens_file),
        read_token=read_token(args.read_token_file, args.public_read), public_read=args.public_read,
        workers=workers, gpus=gpus, lease_s=args.lease_s,
        max_body_bytes=int(args.max_body_mib * (1 << 20)), trust_label=args.trust_label,
        dispatch_workflow=args.dispatch_workflow, dispatch_ref=args.dispatch_ref, queue=args.queue,
    )


def _check_procrastinate(args: argparse.Namespace, db_url: str) -> None:
    from guard.service._procrastinate import is_postgresql

    if not is_postgresql(db_url):
        raise SettingsError("--queue procrastinate keeps its queue in PostgreSQL: give --db "
                            "postgresql://USER@HOST:PORT/DB, the database every `guard worker` host reaches")
    if args.workers:
        raise SettingsError("--workers runs jobs in this process; with --queue procrastinate they run on "
                            "`guard worker` hosts: leave --workers out")
    if args.dispatch_workflow:
        raise SettingsError("--dispatch-workflow and --queue procrastinate each send the jobs elsewhere: keep one")


def parse_gpus(text: str) -> list[str]:
    devices = [part.strip() for part in text.split(",") if part.strip()]
    if not devices or not all(d.isdigit() for d in devices) or len(set(devices)) != len(devices):
        raise SettingsError(f"--gpus {text!r}: give GPU indexes, each once, e.g. 0,1")
    return devices


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from guard.service._app import create_app
    from guard.service._log import log_json_lines

    settings = settings_of(args)
    app = create_app(settings)
    cannot = [c["what"] for c in cannot_yet(settings)]
    runs = (f"{settings.workers} worker(s)" if settings.queue == "embedded"
            else "jobs queued for `guard worker` hosts (procrastinate)")
    print(f"guard serve: http://{args.host}:{args.port}, database {app.state.guard.engine.dialect.name}, {runs}"
          + (f"; cannot yet: {', '.join(cannot)} (see /healthz)" if cannot else ""), file=sys.stderr, flush=True)
    log_json_lines()
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=10)
    return 0

