"""A throwaway PostgreSQL cluster for a test: initdb and pg_ctl from Debian's `postgresql`
package, run as an unprivileged user (made when the tests run as root), listening on a free
loopback port, stopped at the end. `None` where no PostgreSQL is installed."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from guard.sandbox import pr_user
from tests.service_server import free_port

PG_USER = "guard-postgres"  # the OS user the cluster runs as, when the tests run as root


def postgres_bin() -> Path | None:
    # Debian keeps the server's programs out of PATH, one folder per major version
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    if versions:
        return Path(versions[-1]).parent
    found = shutil.which("pg_ctl")
    return Path(found).resolve().parent if found and (Path(found).resolve().parent / "initdb").exists() else None


@contextmanager
def cluster() -> Iterator[str]:
    """The URL of a fresh database `guard` in a new cluster."""
    bin_dir = postgres_bin()
    assert bin_dir is not None
    user = pr_user(PG_USER)  # None: not root, the cluster runs as this user
    folder = Path(tempfile.mkdtemp(prefix="guard-pg-"))
    ids = {"user": user.uid, "group": user.gid, "extra_groups": []} if user else {}
    if user:
        os.chown(folder, user.uid, user.gid)
    data, port = folder / "data", free_port()

    def run(*argv: str) -> None:
        subprocess.run(argv, check=True, capture_output=True, timeout=120, cwd=folder, **ids)

    run(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "guard", "--no-sync", "-E", "UTF8")
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start")
    try:
        run(str(bin_dir / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "guard", "-d", "postgres",
            "-c", "CREATE DATABASE guard")
        yield f"postgresql://guard@127.0.0.1:{port}/guard"
    finally:
        subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=120, cwd=folder, **ids)
        shutil.rmtree(folder, ignore_errors=True)
