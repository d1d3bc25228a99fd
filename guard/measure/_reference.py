"""The reference every measured process is forced with (teacher forcing).

In bf16, fresh processes of one commit break near-ties in the argmax differently, so their
free-running greedy tokens part ways after a few dozen steps, and with them the work each
step does. Forced with one fixed sequence of inputs, every process of every arm does the same
work step by step; how often a process's own output disagrees with the reference is then a
figure to compare, not a reason to give up. The reference comes from one free-running pass of
the base build, in its own untimed process before the measured ones, or from a file the team
commits (`workload.reference_file`).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from guard._errors import ConfigError
from guard.config import MAX_BATCH_SIZE, MAX_MIX_SIZES, MAX_REFERENCE_BYTES, Files
from guard.harness._protocol import ReferenceMix, ReferenceRun
from guard.measure._models import REFERENCE_FORMAT, ReferenceTokens, TopLogits
from guard.measure._runner import ArmTarget, Harness, HarnessSpec, RunFailed, run_ranks

REFERENCE_STEM = "reference"
REFERENCE_FILE = "reference-tokens.json"


class ReferenceOutcome(BaseModel):
    """What the reference stage hands on. `path` is set when processes are to be forced."""

    tokens: ReferenceTokens | None = None
    accepts_tokens: bool = False  # the workload's step() takes its input ids
    path: Path | None = None
    error: str | None = None  # the reference process failed: measured processes run free
    frames: str = ""  # what the workload raised there: its last frames (`_runner.workload_frames`)
    margins_error: str | None = None  # its top logits did not check out: the count rule decides
    seconds: float = 0.0


class _ReferenceAnswer(BaseModel):
    """What the reference process reports: whether its step() takes ids, and its ids."""

    accepts_tokens: bool = False
    runs: list[ReferenceRun] = []  # the protocol's records, validated as data
    mix: ReferenceMix | None = None


def rows_needed(spec: HarnessSpec) -> int:
    """Steps after a setup that a measured process may decode: warmup, then on a GPU two timed
    passes, or the profiled pass if that is longer."""
    return spec.warmup_steps + max(2 * spec.steps, spec.profile_steps)


def make_reference(
    target: ArmTarget, spec: HarnessSpec, run_dir: Path, timeout_s: float, source: str, harness: Harness = run_ranks,
) -> ReferenceOutcome:
    """Run the reference process on `target` (the base build) and write the file the measured
    processes read. A workload whose step() takes no ids is not forced."""
    run_dir = run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    payload = spec.model_dump() | {"mode": "reference", "reference": None, "reference_sha256": None}
    try:
        data = harness(target, payload, REFERENCE_STEM, run_dir, timeout_s)[0]  # rank 0's ids force every rank
    except RunFailed as failed:
        return ReferenceOutcome(error=failed.message, frames=failed.frames, seconds=time.perf_counter() - started)
    seconds = time.perf_counter() - started
    try:
        # written by a process that ran the arm's code: data, checked like any other result
        answer = _ReferenceAnswer.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return ReferenceOutcome(error=f"its result is malformed at {where}: {first['msg']}", seconds=seconds)
    if not answer.accepts_tokens:
        return ReferenceOutcome(accepts_tokens=False, seconds=seconds)
    tokens = ReferenceTokens(source=source, batch_sizes={run.batch_size: run.tokens for run in answer.runs},
                             mix=answer.mix.tokens if answer.mix else None)
    top, margins_error = _top_logits(answer.runs, answer.mix)
    if top is not None:
        try:
            tokens = ReferenceTokens(**(tokens.model_dump() | {"top_logits": top}))
        except ValidationError as exc:
            margins_error = exc.errors()[0]["msg"]
    return ReferenceOutcome(tokens=tokens, accepts_tokens=True, path=write_reference(tokens, run_dir), seconds=seconds,
                            margins_error=margins_error)


def _top_logits(runs: list[ReferenceRun], mix: ReferenceMix | None = None) -> tuple[TopLogits | None, str | None]:
    """The reference's top logits of every batch size and of the mix, checked as data (finite,
    bounded, one dtype, the runner-up not above the top), or None and why not; None, None: the
    workload has no step_logits()."""
    passes: list[ReferenceRun | ReferenceMix] = [*runs, *([mix] if mix is not None else [])]
    if all(found.top_logits is None for found in passes):
        return None, None
    dtypes = {str(found.logits_dtype) for found in passes}  # a process's word: a list, say, is no dtype
    try:
        if len(dtypes) != 1:
            raise ValueError(f"the passes' logits are of {len(dtypes)} dtypes")
        return TopLogits.model_validate({"dtype": dtypes.pop(),
                                         "batch_sizes": {run.batch_size: run.top_logits for run in runs},
                                         "mix": mix.top_logits if mix is not None else None}), None
    except ValidationError as exc:
        first = exc.errors()[0]
        return None, f"{'.'.join(str(part) for part in first['loc'])}: {first['msg']}"[:200]
    except ValueError as exc:
        return None, str(exc)


def write_reference(tokens: ReferenceTokens, run_dir: Path) -> Path:
    path = run_dir / REFERENCE_FILE
    path.write_text(tokens.model_dump_json())
    return path


def forced_spec(spec: HarnessSpec, tokens: ReferenceTokens, path: Path) -> HarnessSpec:
    """The spec of a forced process: the file, and the hash the harness checks it against."""
    digest = hashlib.sha256(tokens.model_dump_json().encode()).hexdigest()
    return spec.model_copy(update={"reference": str(path), "reference_sha256": digest})


_HINT = "write it with the guard (copy runs/reference-tokens.json of an earlier run), or remove reference_file"


def parse_reference_file(text: bytes, shown_as: str, spec: HarnessSpec) -> ReferenceTokens:
    """A committed reference file, checked: every batch size measured, rows as wide as the
    batch, enough steps, ids that are whole numbers of 0 or more."""
    try:
        data: Any = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"workload.reference_file: {shown_as} is not JSON ({exc}); {_HINT}") from None
    except RecursionError:
        raise ConfigError(f"workload.reference_file: {shown_as} is nested too deeply to be one; {_HINT}") from None
    if not isinstance(data, dict) or data.get("format") != REFERENCE_FORMAT:
        raise ConfigError(f"workload.reference_file: {shown_as} is not a reference-tokens file; {_HINT}")
    try:
        tokens = ReferenceTokens.model_validate(data | {"source": shown_as})
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"]
        raise ConfigError(f"workload.reference_file: {shown_as} is malformed: {problem}; {_HINT}") from None
    # a CPU process decodes warmup + steps; a GPU one more (rows_needed), which its harness
    # checks with a message of its own: the file may come from either
    need = spec.warmup_steps + spec.steps
    for size in spec.batch_sizes:
        rows = tokens.rows_for(size)
        if rows is None:
            raise ConfigError(f"workload.reference_file: {shown_as} has no batch size {size}; {_HINT}")
        if len(rows) < need:
            raise ConfigError(
                f"workload.reference_file: {shown_as} holds {len(rows)} steps at batch size {size}, fewer than "
                f"the {need} a process decodes (warmup_steps + steps; on a GPU warmup_steps + 2 x steps); {_HINT}"
            )
        if any(len(row) != size or any(not isinstance(t, int) or t < 0 for t in row) for row in rows):
            raise ConfigError(
                f"workload.reference_file: {shown_as}, batch size {size}: every row must hold {size} token ids "
                f"(whole numbers, 0 or more); {_HINT}"
            )
    schedule = spec.mix_schedule()
    if schedule is not None:
        need_mix = 1 + spec.warmup_steps + spec.steps  # the lead step, then the schedule's
        widths = [max(schedule), *schedule]
        if tokens.mix is None or len(tokens.mix) < need_mix or any(
                len(row) != width or any(not isinstance(t, int) or t < 0 for t in row)
                for row, width in zip(tokens.mix, widths)):
            raise ConfigError(
                f"workload.reference_file: {shown_as} has no batch-size mix of this schedule (mix: a row of the "
                f"largest size, then one row per step as wide as that step's batch, {need_mix} rows or more); {_HINT}"
            )
    return tokens


MIX_FILE_KEY = "workload.batch_mix_file"
MAX_MIX_FILE_BYTES = 8 << 20


def parse_mix_file(text: bytes, shown_as: str) -> list[int]:
    """A committed batch-size sequence: one whole number per line (1 to the largest batch size
    a config may name), blank lines and `#` comments ignored, at most 64 distinct sizes."""
    hint = "write one batch size per line, one line per decode step"
    try:
        lines = text.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise ConfigError(f"{MIX_FILE_KEY}: {shown_as} is not UTF-8 text; {hint}") from None
    sizes: list[int] = []
    for number, line in enumerate(lines, start=1):
        value = line.split("#", 1)[0].strip()
        if not value:
            continue
        if not value.isdigit() or not 1 <= int(value) <= MAX_BATCH_SIZE:
            raise ConfigError(f"{MIX_FILE_KEY}: {shown_as}, line {number}: {value[:40]!r} is not a batch size "
                              f"from 1 to {MAX_BATCH_SIZE}; {hint}")
        sizes.append(int(value))
    if not sizes:
        raise ConfigError(f"{MIX_FILE_KEY}: {shown_as} holds no batch size; {hint}")
    if len(set(sizes)) > MAX_MIX_SIZES:
        raise ConfigError(f"{MIX_FILE_KEY}: {shown_as} holds {len(set(sizes))} distinct batch sizes, more than "
                          f"{MAX_MIX_SIZES}; group the rare ones with their neighbours")
    return sizes


def with_mix_file(spec: HarnessSpec, files: Files | None) -> HarnessSpec:
    """The spec with batch_mix_file's sizes, read from `files` (the base commit) like reference_file."""
    if spec.batch_mix_file is None:
        return spec
    if files is None:
        raise ValueError("with_mix_file: a batch_mix_file is read from `files`, the base commit")
    data = files.read(spec.batch_mix_file, MIX_FILE_KEY, MAX_MIX_FILE_BYTES)
    if data is None:
        raise ConfigError(f"{MIX_FILE_KEY}: {files.shown(spec.batch_mix_file)} not found; commit it, or remove "
                          "batch_mix_file")
    return spec.model_copy(update={"batch_mix_steps": parse_mix_file(data, spec.batch_mix_file)})


def prepare_reference(
    target: ArmTarget,
    spec: HarnessSpec,
    run_dir: Path,
    timeout_s: float,
    reference_file: str | None,
    source: str,
    progress: Callable[[str], None] = lambda _: None,
    files: Files | None = None,
    harness: Harness = run_ranks,
) -> tuple[HarnessSpec, ReferenceOutcome]:
    """The spec every measured process gets, forcing from the reference when there is one, and
    the reference stage's outcome. `target` is the base build; a `reference_file` is read
    from `files`, the base commit as git holds it (not the worktree, which a build can change)."""
    run_dir = run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    spec = with_mix_file(spec, files)
    if reference_file:
        if files is None:
            raise ValueError("prepare_reference: a reference_file is read from `files`, the base commit")
        data = files.read(reference_file, "workload.reference_file", MAX_REFERENCE_BYTES)
        if data is None:
            raise ConfigError(f"workload.reference_file: {files.shown(reference_file)} not found; {_HINT}")
        tokens = parse_reference_file(data, reference_file, spec)
        written = write_reference(tokens, run_dir)
        progress(f"reference: {reference_file} from the base commit forces every step's input")
        return forced_spec(spec, tokens, written), ReferenceOutcome(
            tokens=tokens, accepts_tokens=True, path=written
        )
    progress(f"reference: a free-running greedy pass of {source}, untimed, for the ids every process is forced with")
    outcome = make_reference(target, spec, run_dir, timeout_s, source, harness)
    if outcome.error:
        progress(f"reference: failed ({outcome.error}); the measured processes run free")
        if outcome.frames:
            progress(outcome.frames)
    elif not outcome.accepts_tokens:
        progress("reference: the workload's step() takes no input ids, so its processes run free "
                 "(tokens must then match exactly)")
    else:
        progress(f"reference: {rows_needed(spec)} steps per batch size in {outcome.seconds:.1f} s"
                 + (", with its top two logits per output" if outcome.tokens and outcome.tokens.top_logits else ""))
        if outcome.margins_error:
            progress(f"reference: its top logits are not used ({outcome.margins_error}); disagreements are counted "
                     "alone")
    if outcome.path is None or outcome.tokens is None:
        return spec, outcome
    return forced_spec(spec, outcome.tokens, outcome.path), outcome
