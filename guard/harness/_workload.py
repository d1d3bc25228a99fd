"""The arm's workload as the harness drives it: loading its entry point, calling its steps
(free-running or fed the reference's ids), and checking what they return.

Standard library only; torch is the workload's, handed in where a step's ids are fed.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

from ._protocol import REFERENCE_FORMAT

class WorkloadError(Exception):
    """The workload broke the protocol; the message says how."""


def log(message: str) -> None:
    print(f"[harness] {message}", file=sys.stderr, flush=True)


def load_entry(entry: str, root: Path) -> Callable[..., Any]:
    target, _, func_name = entry.rpartition(":")
    if target.endswith(".py") or "/" in target:
        path = (root / target).resolve()
        if not path.is_file():
            raise WorkloadError(f"workload file {target} not found in {root}")
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(f"_guard_workload_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses and pickling look the module up by name
        spec.loader.exec_module(module)
    else:
        sys.path.append(str(root))  # after installed packages, so an installed build wins
        module = importlib.import_module(target)
    func = getattr(module, func_name, None)
    if not callable(func):
        raise WorkloadError(f"{entry}: {func_name} is not a callable in {target}")
    return func


def token_ids(output: Any, batch_size: int) -> list[int]:
    """The step's output as a list of ints, one per sequence of the batch."""
    values = output.tolist() if hasattr(output, "tolist") else output
    if isinstance(values, int):
        values = [values]
    if not isinstance(values, (list, tuple)) or len(values) != batch_size:
        raise WorkloadError(f"step() must return {batch_size} token ids (one per sequence), got {values!r:.80}")
    if not all(isinstance(v, int) for v in values):
        raise WorkloadError("step() must return integer token ids")
    return list(values)


def mean(values: list[float]) -> float:
    """A process's figure over its steps: their total time over their count (0 without steps).
    The guard computes it again from the same lists (guard/measure/_figures.py)."""
    return sum(values) / len(values) if values else 0.0


def median(values: list[float]) -> float:
    """A diagnostic beside a mean: a stall moves the mean and leaves the median where it was."""
    return statistics.median(values) if values else 0.0


def uses_cuda(output: Any) -> bool:
    device = getattr(output, "device", None)
    return getattr(device, "type", None) == "cuda"


def accepts_tokens(workload: Any) -> bool:
    """Whether the workload's step() takes the step's input ids (teacher forcing)."""
    try:
        params = list(inspect.signature(workload.step).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                  inspect.Parameter.VAR_POSITIONAL)
    return any(p.kind in positional for p in params)


class Feed:
    """The input ids of each step after a setup. Free-running (no reference): None, the
    workload decodes from its own last output. Forced: step k (k >= 1) gets the reference's
    output of step k - 1, a view of one tensor preloaded on the device, so no host copy
    happens per step; the first step decodes from the workload's own prefill."""

    def __init__(self, torch: Any, rows: list[list[int]] | None, device: Any, batch_size: int) -> None:
        self.rows = rows
        self.views: list[Any] = []
        if rows is not None:
            if any(len(row) != batch_size for row in rows):
                raise WorkloadError(f"the reference tokens for batch size {batch_size} have rows of another width")
            if torch is None:  # a workload without torch gets each step's ids as a list of ints
                self.views = [list(row) for row in rows]
            else:
                ids = torch.tensor(rows, dtype=torch.int64, device=device if device is not None else "cpu")
                self.views = list(ids.unbind(0))
        self.k = 0

    def reset(self) -> None:
        self.k = 0

    def next(self) -> Any:
        """The input of the next step (None on the first one, or when free-running)."""
        k, self.k = self.k, self.k + 1
        if self.rows is None or k == 0:
            return None
        if k > len(self.views):
            raise WorkloadError(
                f"the reference tokens hold {len(self.views)} steps, fewer than this pass needs (on a GPU a process "
                "decodes warmup_steps + 2 x steps after each setup): write workload.reference_file with the guard on "
                "a machine like the one that runs it, or with fewer steps"
            )
        return self.views[k - 1]


def call_step(workload: Any, feed: Feed | None) -> Any:
    return workload.step(feed.next()) if feed is not None else workload.step()



def workload_device(workload: Any) -> Any:
    return getattr(workload, "device", None)


def described(workload: Any) -> dict[str, Any]:
    """The workload's describe(), or nothing without one."""
    describe = getattr(workload, "describe", None)
    return describe() if callable(describe) else {}


def loaded_torch(torch: Any) -> Any:
    """`torch` as given, else torch where the workload has imported it by now, else None:
    the harness times and feeds with the torch its workload uses, and imports none itself."""
    return torch if torch is not None else sys.modules.get("torch")


def load_reference(path: str, sha256: str | None = None) -> dict[Any, list[list[int]]]:
    """Batch size -> one row of ids per step, from a reference-tokens file the guard wrote,
    checked against the hash the guard gave (an earlier process may have changed the file);
    the mix's rows, when it has them, under "mix"."""
    raw = Path(path).read_bytes()
    if sha256 is not None and hashlib.sha256(raw).hexdigest() != sha256:
        raise WorkloadError(f"{path} is not the reference the guard wrote (its sha256 differs)")
    data = json.loads(raw)
    if not isinstance(data, dict) or data.get("format") != REFERENCE_FORMAT:
        raise WorkloadError(f"{path} is not a reference-tokens file")
    found: dict[Any, list[list[int]]] = {int(size): rows for size, rows in data["batch_sizes"].items()}
    if data.get("mix"):
        found["mix"] = data["mix"]
    return found
