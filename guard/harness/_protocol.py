"""The JSON the guard and the harness exchange, defined once: the spec a harness process reads
(`Spec`) and the result it writes (`Result` and its parts), with the protocol's version.

Both sides load this file: the harness by path inside the arm's environment, the guard as
guard.harness._protocol. Standard library only, and annotations evaluated at run time
(`Optional`, not `X | None`), so `read_spec` can check each key against its field's type on
the arm's Python. Bump PROTOCOL_VERSION on any change the other side would misread.
"""

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, Union, get_args, get_origin

# 2: the mix pass settles before its timed steps and comes before every profiled pass, so its
# figures are not taken after a profiler session; its result holds its own profiled trace
# 3: "world_size" in the spec, one process per rank that joins the others before the workload
# is made; "rank" and "world_size" in its result, its traces named by rank
# 4: a process's figures are means over its steps, which the guard computes again from the lists
# its result now also holds: each end-to-end pass's time ("end_to_end_pass_ms"), the end-to-end
# pass's CUDA-event step times ("end_to_end_gpu_ms") and the mix's end-to-end step times
# ("end_to_end_step_ms"); a CPU's "step_ms" are the end-to-end pass's wall step times
PROTOCOL_VERSION = 4
WINDOW_S = 0.1  # tok/s windows when the spec gives none (the guard sends its own)
REFERENCE_FORMAT = "regression-guard reference tokens"  # a reference-tokens file's "format"


def absent() -> Any:
    """A field written only when it holds something: None leaves its key out of the JSON."""
    return field(default=None, metadata={"absent_if_none": True})


@dataclass
class Spec:
    """What one harness process runs: the workload, its passes, where its files go."""

    entry: str  # "pkg.module:make" or "path/file.py:make", relative to `root`
    root: str  # the arm's worktree
    batch_sizes: List[int]
    steps: int  # timed steps per pass
    warmup_steps: int  # untimed steps at the start of every pass
    options: Dict[str, Any] = field(default_factory=dict)  # the entry point's keyword arguments
    arm: Optional[str] = None
    repeat: Optional[int] = None
    mode: Literal["measure", "reference"] = "measure"  # reference: free-running, untimed, writes the ids
    tok_per_s_min_s: float = 0.0  # 0: one timed pass
    tok_per_s_window_s: float = WINDOW_S
    warmup_max_s: float = 0.0  # 0: warmup_steps only
    profile_steps: int = 0  # 0: no profiled pass
    trace_dir: Optional[str] = None
    cpus: List[int] = field(default_factory=list)  # pin to these, before torch starts its threads
    reference: Optional[str] = None  # a reference-tokens JSON whose ids force every step's input
    reference_sha256: Optional[str] = None  # of that file as the guard wrote it
    batch_mix: Optional[Dict[int, float]] = None  # {size: share}: a mix pass after the fixed sizes
    batch_mix_steps: Optional[List[int]] = None  # or one size per step
    batch_mix_seed: int = 0
    world_size: int = 1  # one process per rank, the guard sets RANK etc. (see _ranks.py)
    protocol: int = PROTOCOL_VERSION


class SpecError(Exception):
    """The spec cannot be run; the message says which key is wrong and how. `given`: the
    JSON object as it came ({} when it was none), for the arm and repeat of the refusal."""

    def __init__(self, message: str, given: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.given = given or {}


class ProtocolMismatch(SpecError):
    """The spec comes from a guard of another protocol."""


def read_spec(text: str) -> Spec:
    """The spec in `text`, each key checked against its field; SpecError saying what is wrong."""
    try:
        given = json.loads(text)
    except ValueError as exc:
        raise SpecError(f"the spec is not JSON: {exc}") from None
    if not isinstance(given, dict):
        raise SpecError(f"the spec must be a JSON object, not {type(given).__name__}")
    protocol = given.get("protocol", PROTOCOL_VERSION)
    if protocol != PROTOCOL_VERSION:
        raise ProtocolMismatch(f"the guard speaks harness protocol {protocol} and this harness {PROTOCOL_VERSION}: "
                               "they come from different installs of the guard; run the harness of the guard that "
                               "runs it", given)
    known = {f.name: f for f in dataclasses.fields(Spec)}
    unknown = sorted(set(given) - set(known))
    missing = [f.name for f in known.values() if f.name not in given and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if unknown or missing:
        raise SpecError(f"the spec has unknown keys {unknown} and lacks {missing}: this harness reads "
                        f"{sorted(known)}", given)
    try:
        return Spec(**{name: _checked(name, value, known[name].type) for name, value in given.items()})
    except SpecError as exc:
        raise SpecError(str(exc), given) from None


def _checked(name: str, value: Any, kind: Any) -> Any:
    """`value` as a `kind` (JSON's string keys made ints, ints made floats), or a SpecError."""
    origin, args = get_origin(kind), get_args(kind)
    if origin is Union and value is None and type(None) in args:
        return None
    if origin is Union:
        return _checked(name, value, next(a for a in args if a is not type(None)))
    if kind is Any or (origin is Literal and value in args) or (kind is str and isinstance(value, str)):
        return value
    if kind in (int, float) and isinstance(value, (int, float if kind is float else int)) \
            and not isinstance(value, bool):
        return kind(value)
    if origin is list and isinstance(value, list):
        return [_checked(f"{name}[{i}]", item, args[0]) for i, item in enumerate(value)]
    if origin is dict and isinstance(value, dict):
        return {_checked(f"{name} key", int(key) if args[0] is int and str(key).isdigit() else key, args[0]):
                _checked(f"{name}[{key!r}]", item, args[1]) for key, item in value.items()}
    wanted = " or ".join(map(repr, args)) if origin is Literal else getattr(kind, "__name__", str(kind))
    raise SpecError(f"the spec's {name} must be {wanted}, not {value!r:.60}")


@dataclass
class BatchRun:
    """One batch size's passes in one process (harness/_passes.py, `run_batch`). The guard
    computes every figure again from the lists (guard/measure/_figures.py)."""

    batch_size: int
    steps: int
    warmup_steps: int
    timer: str  # "cuda_event" or "perf_counter"
    setup_s: float
    wall_s: float  # the first end-to-end pass
    gpu_ms_per_step: float  # the mean of `step_ms`
    gpu_ms_median_per_step: float
    step_ms: List[float]  # a GPU's held pass's CUDA events, a CPU's first end-to-end pass's wall times
    forced: bool
    tok_per_s: float
    end_to_end_pass_ms: List[float]  # each end-to-end pass's decode time, the first first
    tok_per_s_windows: List[float]
    window_s: float
    timed_passes: int
    timed_s: float
    passes_differing: int
    gc_disabled: bool
    host: Optional[Dict[str, Any]]  # harness/_host.py, HostMeter.result()
    warmup_s: float
    warmup_settled: Optional[bool]
    tokens: List[List[int]]  # one row per step, the warmup's included
    sha256: str
    workload: Dict[str, Any]  # its describe()
    # on a GPU: the first end-to-end pass's CUDA events, and the held pass's host side
    end_to_end_gpu_ms: Optional[List[float]] = absent()
    end_to_end_gpu_ms_per_step: Optional[float] = absent()
    end_to_end_gpu_ms_median_per_step: Optional[float] = absent()
    host_ms: Optional[List[float]] = absent()
    hold_us: Optional[float] = absent()
    unheld_steps: Optional[int] = absent()
    host_ms_per_step: Optional[float] = absent()
    step_done_ns: Optional[List[int]] = absent()  # several ranks
    trace: Optional[str] = absent()  # a profiled pass's
    profile_steps: Optional[int] = absent()


@dataclass
class MixRun:
    """The batch-size mix pass of one process (harness/_mix_passes.py, `run_mix`)."""

    timer: str
    step_ms: List[float]
    end_to_end_step_ms: List[float]
    step_info: Optional[List[Dict[str, Any]]]
    max_batch_size: int
    steps: int
    warmup_steps: int
    setup_s: float
    tok_per_s: float
    tokens: List[List[int]]  # the lead step (every row), then one row per schedule step
    forced: bool
    workload: Dict[str, Any]
    warmup_s: float
    warmup_settled: Optional[bool]
    hold_us: Optional[float] = absent()  # a GPU's
    step_done_ns: Optional[List[int]] = absent()
    trace: Optional[str] = absent()
    profile_steps: Optional[int] = absent()


@dataclass
class ReferenceRun:
    """A reference process's free-running ids of one batch size, and its top two logits where
    the workload has step_logits()."""

    batch_size: int
    tokens: List[List[int]]
    sha256: str
    # per step, per sequence, [top, runner-up]; the guard checks them apart from the ids
    # (measure/_reference.py), so margins that do not check out only lose the margins
    top_logits: Any = absent()
    logits_dtype: Any = absent()  # one dtype's name; a list of them where the steps differed


@dataclass
class ReferenceMix:
    """A reference process's free-running ids of the mix pass."""

    tokens: List[List[int]]
    top_logits: Any = absent()  # as a batch size's
    logits_dtype: Any = absent()


@dataclass
class Failure:
    """Where and how the process failed."""

    stage: str
    type: str
    message: str
    traceback: str = ""


@dataclass
class Result:
    """What one harness process writes: its passes, the machine it ran on, or how it failed."""

    protocol: int
    arm: Optional[str]
    repeat: Optional[int]
    pid: int
    started_at: float
    timings_s: Dict[str, float]  # seconds by phase
    environment: Dict[str, Any]
    fingerprint: Optional[Dict[str, Any]] = absent()  # {"before": ..., "after": ...}, harness/_fingerprint.py
    rank: Optional[int] = absent()  # several ranks
    world_size: Optional[int] = absent()
    accepts_tokens: Optional[bool] = absent()
    dynamo: Optional[Dict[str, Any]] = absent()  # harness/_dynamo.py
    mix: Optional[Union[MixRun, ReferenceMix]] = absent()
    runs: Optional[List[Union[BatchRun, ReferenceRun]]] = absent()
    finished_at: Optional[float] = absent()
    compile: Optional[Dict[str, Any]] = None  # harness/_compile_stats.py; a failed process states none
    error: Optional[Failure] = absent()
    failed_at: Optional[float] = absent()  # time.monotonic(): which rank failed first

    def json(self) -> str:
        data = wire(self)
        if self.error is not None:
            del data["compile"]
        return json.dumps(data)


def wire(value: Any) -> Any:
    """`value` as JSON data: a dataclass as an object, its absent fields left out."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: wire(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not (f.metadata.get("absent_if_none") and getattr(value, f.name) is None)}
    if isinstance(value, (list, tuple)):
        return [wire(item) for item in value]
    if isinstance(value, dict):
        return {key: wire(item) for key, item in value.items()}
    return value


def tokens_sha256(tokens: list[list[int]]) -> str:
    """The hash a process states for the tokens it decoded: each id as 8 little-endian signed
    bytes, row after row. The guard makes it again from the tokens (compare/_mix.py)."""
    digest = hashlib.sha256()
    for row in tokens:
        for token in row:
            digest.update(int(token).to_bytes(8, "little", signed=True))
    return digest.hexdigest()
