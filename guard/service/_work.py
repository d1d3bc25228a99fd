"""`guard worker`: the settings of a GPU host's worker from the command line and files, the
database prepared, then procrastinate's worker until stopped (SIGTERM or SIGINT)."""

from __future__ import annotations

import argparse
import asyncio
import re
import socket
import sys

from guard.service._serve import add_job_arguments, job_settings, parse_gpus
from guard.service._settings import ServiceSettings, SettingsError, gpu_devices

DEFAULT_STALLED_S = 30.0  # procrastinate's own default
DEFAULT_RETRY_WAIT_S = 60.0
_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def add_arguments(worker: argparse.ArgumentParser) -> None:
    worker.add_argument("--db", required=True,
                        help="the service's PostgreSQL database, postgresql://USER@HOST:PORT/DB, where "
                             "`guard serve --queue procrastinate` queues the jobs")
    worker.add_argument("--host-name", default=None,
                        help="this host's name in the queue: its own queue and its lock, one measurement at a time "
                             "(default: the machine's host name)")
    worker.add_argument("--gpus", default=None,
                        help="the GPUs a job here sees as CUDA_VISIBLE_DEVICES, e.g. 0,1 (default: every GPU NVML "
                             "finds)")
    add_job_arguments(worker)
    worker.add_argument("--stalled-s", type=float, default=DEFAULT_STALLED_S,
                        help="a worker this long without a heartbeat has stopped: its job is retried "
                             f"(default: {DEFAULT_STALLED_S:g})")
    worker.add_argument("--retry-wait-s", type=float, default=DEFAULT_RETRY_WAIT_S,
                        help=f"wait before a job that raised is tried again (default: {DEFAULT_RETRY_WAIT_S:g})")


def work(args: argparse.Namespace) -> int:
    from guard.service._github_app import GitHubApp
    from guard.service._host_worker import Host, serve_host
    from guard.service._log import log_json_lines
    from guard.service._procrastinate import host_queue, is_postgresql, prepare_database, queue_sessions
    from guard.service._store import open_engine

    if not is_postgresql(args.db):
        raise SettingsError(f"--db {args.db!r}: a worker takes its jobs from procrastinate's queue in PostgreSQL; "
                            "give the service's database, postgresql://USER@HOST:PORT/DB")
    name = args.host_name or socket.gethostname().split(".")[0]
    if not _HOST_NAME.match(name):
        raise SettingsError(f"--host-name {name!r}: give letters, digits, '.', '_' or '-', at most 63")
    if args.stalled_s < 2 or args.retry_wait_s < 0:
        raise SettingsError("--stalled-s must be 2 or more (heartbeats go at a quarter of it), "
                            "--retry-wait-s 0 or more")
    gpus = parse_gpus(args.gpus) if args.gpus is not None else gpu_devices()
    settings = ServiceSettings(db_url=args.db, **job_settings(args), gpus=gpus, queue="procrastinate")
    engine = open_engine(settings.db_url)
    prepare_database(engine, settings.db_url)
    host = Host(name=name, gpus=gpus, settings=settings, sessions=queue_sessions(engine, settings.db_url),
                app=GitHubApp(settings.app, settings.api_url) if settings.app else None,
                stalled_s=args.stalled_s, retry_wait_s=args.retry_wait_s)
    log_json_lines()
    print(f"guard worker: host {name}, GPUs {','.join(gpus) or 'none (CPU)'}, queues {host_queue(name)} and the "
          f"pool, database {engine.url.host}/{engine.url.database}"
          + ("" if settings.app else "; no App credentials: nothing is posted"), file=sys.stderr, flush=True)
    try:
        asyncio.run(serve_host(host))
    finally:
        engine.dispose()
    return 0
