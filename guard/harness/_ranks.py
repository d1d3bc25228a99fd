"""The ranks of a multi-process workload, as the harness joins them: one harness process per
rank, started by the guard with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT.

The harness joins torch.distributed before the workload is made (NCCL on GPUs, one GPU per
rank by LOCAL_RANK; gloo on CPUs), so that the workload finds its world there. Its own
agreements go over a gloo group of their own, never the workload's: every rank must call
step() equally often, so a loop that ends on a clock (a warmup that settles, tok/s passes
that fill their seconds) ends on every rank at once, when the ranks agree.
Standard library and torch only: it runs in the arm's environment, beside run.py.
"""

from __future__ import annotations

import os
from typing import Any


class RankError(Exception):
    """The ranks could not be joined; the message says what to change."""


class Peers:
    """This process's rank among the others, and the harness's agreements with them. Alone
    (world size 1) every agreement is this process's own answer and nothing is sent."""

    def __init__(self, rank: int = 0, world_size: int = 1, torch: Any = None, group: Any = None) -> None:
        self.rank, self.world_size, self.torch, self.group = rank, world_size, torch, group

    def _reduce(self, value: float, op: Any) -> float:
        if self.world_size == 1:
            return value
        t = self.torch.tensor([value], dtype=self.torch.float64)
        self.torch.distributed.all_reduce(t, op=op, group=self.group)
        return float(t.item())

    def any(self, flag: bool) -> bool:
        """True on every rank when it is true on one: a loop goes on while a rank still wants it."""
        if self.world_size == 1:
            return flag
        return self._reduce(1.0 if flag else 0.0, self.torch.distributed.ReduceOp.MAX) > 0

    def max(self, value: float) -> float:
        if self.world_size == 1:
            return value
        return self._reduce(value, self.torch.distributed.ReduceOp.MAX)

    def barrier(self) -> None:
        """Every rank is here: a timed pass starts on all of them together."""
        if self.world_size > 1:
            self.torch.distributed.barrier(group=self.group)


ALONE = Peers()


def world_of(env: dict[str, str] | None = None) -> tuple[int, int, int]:
    """(rank, local rank, world size) as the guard set them; (0, 0, 1) without them."""
    env = dict(os.environ) if env is None else env
    try:
        world = int(env.get("WORLD_SIZE", "1"))
        rank = int(env.get("RANK", "0"))
        local = int(env.get("LOCAL_RANK", str(rank)))
    except ValueError:
        raise RankError("RANK, LOCAL_RANK and WORLD_SIZE must be whole numbers") from None
    if world < 1 or not 0 <= rank < world or not 0 <= local < world:
        raise RankError(f"rank {rank} (local {local}) is not one of world size {world}'s ranks")
    return rank, local, world


def join(torch: Any, world_size: int) -> Peers:
    """This process's place among `world_size` ranks (the spec's), joined; ALONE for one."""
    rank, local, world = world_of()
    if world != world_size:
        raise RankError(f"the spec asks for world size {world_size}, but WORLD_SIZE is {world}: "
                        "start one harness per rank through the guard")
    if world == 1:
        return ALONE
    if torch is None:
        raise RankError(f"world size {world} needs torch.distributed, and torch is not importable here")
    dist = torch.distributed
    if not dist.is_available():
        raise RankError("this torch was built without torch.distributed")
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        if count < world:
            raise RankError(f"world size {world} needs a GPU per rank; this machine shows {count}")
        torch.cuda.set_device(local)
        try:
            dist.init_process_group("nccl", device_id=torch.device("cuda", local))  # binds the communicator now
        except TypeError:  # a torch before device_id
            dist.init_process_group("nccl")
    else:
        dist.init_process_group("gloo")
    group = dist.new_group(backend="gloo")  # the harness's own: its agreements never sit among the workload's
    return Peers(rank=rank, world_size=world, torch=torch, group=group)
