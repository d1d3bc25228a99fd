"""Removing the guard's containers that outlived it.

`python -m guard.sandbox._reaper RUN_ID` is the watchdog of one guard: it waits for its
standard input, a pipe that only that guard holds open, to reach its end, which it does
when the guard exits however it exits (SIGKILL included), and then removes every
container labelled with RUN_ID. `remove_orphans` is the sweep each guard makes before
its first container: containers of this host whose guard no longer runs."""

from __future__ import annotations

import sys
from typing import Any

from guard.sandbox._engine import LABEL, LABEL_BOOT, LABEL_PID, LABEL_START, engine
from guard.sandbox._proc import boot_id, process_start


def listed(client: Any, label: str) -> list[dict[str, Any]]:
    """The engine's one listing of the containers carrying `label`: id and labels of each.

    One request, no inspection per container: `containers.list` inspects each in turn, and
    one removed meanwhile (by its guard's watchdog, or by another guard's sweep) made the
    whole listing fail with "No such container"."""
    return [{"id": row["Id"], "labels": row.get("Labels") or {}}
            for row in client.api.containers(all=True, filters={"label": label})]


def remove_labelled(client: Any, run_id: str) -> int:
    """Remove the containers of the guard run `run_id`; how many there were."""
    return _remove(client, [row["id"] for row in listed(client, f"{LABEL}={run_id}")])


def remove_orphans(client: Any) -> int:
    """Remove the containers of guards of this host (this boot) that no longer run; how many."""
    this_boot = boot_id()
    orphans = []
    for found in listed(client, LABEL):
        labels = found["labels"]
        if labels.get(LABEL_BOOT) != this_boot:
            continue  # another host's, or one from before a reboot: its own guard's or a later sweep's
        try:
            pid = int(labels.get(LABEL_PID, ""))
        except ValueError:
            orphans.append(found["id"])
            continue
        if str(process_start(pid)) != labels.get(LABEL_START):
            orphans.append(found["id"])
    return _remove(client, orphans)


def _remove(client: Any, ids: list[str]) -> int:
    from docker.errors import DockerException

    removed = 0
    for found in ids:
        try:
            client.api.remove_container(found, force=True, v=True)
            removed += 1
        except DockerException:
            pass  # gone already, or the engine is going: the next sweep takes it
    return removed


def watch(run_id: str) -> None:
    while sys.stdin.buffer.read(4096):  # nothing is ever written: this returns at the guard's end
        pass
    remove_labelled(engine(), run_id)


if __name__ == "__main__":
    watch(sys.argv[1])
