"""How many webhook deliveries a real `guard serve` accepts per second on loopback, how long
each answer takes, and whether any job is lost or doubled.

Usage: python benchmarks/service_load.py [--deliveries N] [--concurrency C] [--replays N]
                                         [--db URL] [--out FILE.json]

Starts `guard serve` (no workers: what is measured is the webhook and the queue, not the
jobs) on a free loopback port with a fresh SQLite file (or --db), then sends N signed
pull_request deliveries, C at a time, plus --replays of them sent again, each over its own
request. Counts the answers, times each from send to answer, and afterwards reads
/api/v1/jobs: every accepted delivery must have exactly one job. Bounded: N deliveries, then
it stops; traffic goes to 127.0.0.1 only."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.service_server import Service, delivery, pull_request  # noqa: E402

MAX_DELIVERIES = 100_000


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


async def _send(url: str, bodies: list[tuple[bytes, dict[str, str]]], concurrency: int
                ) -> tuple[list[float], list[httpx.Response], float]:
    latencies_s: list[float] = []
    answers: list[httpx.Response] = []
    queue: asyncio.Queue = asyncio.Queue()
    for item in bodies:
        queue.put_nowait(item)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        async def sender() -> None:
            while not queue.empty():
                body, headers = queue.get_nowait()
                started = time.perf_counter()
                answer = await client.post(url, content=body, headers=headers)
                latencies_s.append(time.perf_counter() - started)
                answers.append(answer)

        started = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(concurrency)))
        elapsed_s = time.perf_counter() - started
    return latencies_s, answers, elapsed_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deliveries", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--replays", type=int, default=200, help="deliveries sent a second time, mixed in")
    parser.add_argument("--db", default=None, help="database URL (default: a fresh SQLite file)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not 0 < args.deliveries <= MAX_DELIVERIES or not 0 <= args.replays <= args.deliveries:
        parser.error(f"--deliveries is 1 to {MAX_DELIVERIES}, --replays 0 to --deliveries")

    work_dir = Path(tempfile.mkdtemp(prefix="guard-service-load-"))
    prefix = uuid.uuid4().hex[:8]
    bodies = [delivery("pull_request", pull_request("octo/engine", n + 1, "b" * 40, "a" * 40, "file:///nowhere"),
                       delivery_id=f"{prefix}-{n}") for n in range(args.deliveries)]
    sent = bodies + bodies[: args.replays]
    with Service(work_dir, "--workers", "0", db=args.db) as service:
        latencies_s, answers, elapsed_s = asyncio.run(_send(service.url + "/github/webhook", sent, args.concurrency))
        jobs = _all_jobs(service.url, prefix)
        database = httpx.get(service.url + "/healthz").json()["database"]
    accepted = [a for a in answers if a.status_code == 202]
    delivered = {f"{prefix}-{n}" for n in range(args.deliveries)}
    with_job = [j["delivery"] for j in jobs]
    result = {
        "database": database,
        "deliveries": args.deliveries, "replays": args.replays, "concurrency": args.concurrency,
        "requests": len(sent), "accepted": len(accepted),
        "refused": len(answers) - len(accepted),
        "elapsed_s": round(elapsed_s, 3),
        "accepted_per_s": round(len(accepted) / elapsed_s, 1),
        "answer_ms_p50": round(statistics.median(latencies_s) * 1000, 2),
        "answer_ms_p99": round(_quantile(latencies_s, 0.99) * 1000, 2),
        "answer_ms_max": round(max(latencies_s) * 1000, 2),
        "jobs_lost": len(delivered - set(with_job)),
        "jobs_doubled": len(with_job) - len(set(with_job)),
        "replays_answered_duplicate": sum(1 for a in accepted if a.json().get("duplicate")),
        "cpus": os.cpu_count(),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if result["jobs_lost"] == 0 and result["jobs_doubled"] == 0 and not result["refused"] else 2


def _all_jobs(url: str, prefix: str) -> list[dict]:
    """Every job, page by page."""
    listed: list[dict] = []
    params: dict[str, int] = {"limit": 1000}
    while True:
        page = httpx.get(url + "/api/v1/jobs", params=params, timeout=120).json()
        listed += page["jobs"]
        if "next_before" not in page:
            return [j for j in listed if (j["delivery"] or "").startswith(prefix)]
        params["before"] = page["next_before"]


if __name__ == "__main__":
    sys.exit(main())
