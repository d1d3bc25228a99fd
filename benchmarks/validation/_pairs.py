"""One validation pair: a real `guard run` of base against one head branch, read back into a
record, appended to pairs.jsonl as soon as it finishes."""

from __future__ import annotations

import gzip
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from guard._errors import ConfigError
from guard.config import GuardConfig
from guard.pipeline import Progress, run_guard
from guard.report import Report, title
from guard.report._reason_text import reason_short
from guard.trace import TraceSection

from ._models import KIND_BY_NAME, ArmValues, InjectionSize, Kind, PairRecord, TraceSplit
from ._repo import BASE_BRANCH, head_branch


def plan(planned: dict[str, int]) -> list[tuple[Kind, int]]:
    """Kinds take turns (aa 1, idle-1 1, ..., aa 2, ...), so a run stopped early has some of each."""
    most = max(planned.values(), default=0)
    return [(KIND_BY_NAME[name], index) for index in range(most) for name, count in planned.items() if index < count]


def pair_id(kind: Kind, index: int) -> str:
    return f"{kind.name}-{index + 1:02d}"


def run_pair(
    repo: Path, kind: Kind, index: int, size: InjectionSize | None, config: GuardConfig, config_dir: Path,
    out_dir: Path, progress: Progress,
) -> PairRecord:
    setting = size.setting if size is not None else None
    branch = head_branch(repo, kind, setting)
    if out_dir.exists():  # a pair cut short by an earlier run: measure it again from scratch
        shutil.rmtree(out_dir)
    started = time.perf_counter()
    report = run_guard(repo, BASE_BRANCH, branch, config, out_dir, progress=progress, config_dir=config_dir)
    return record_of(report, kind, index, size, time.perf_counter() - started)


def record_of(report: Report, kind: Kind, index: int, size: InjectionSize | None, duration_s: float) -> PairRecord:
    batch = report.batch_sizes[0]
    section = next((s for s in report.traces if s.batch_size == batch.batch_size), None)
    stats = {a.arm: a for a in batch.arms}
    return PairRecord(
        pair_id=pair_id(kind, index),
        kind=kind.name,
        injection=kind.injection,
        index=index,
        target_pct=kind.target_pct,
        setting=size.setting if size is not None else None,
        predicted_pct=size.predicted_pct if size is not None else None,
        batch_size=batch.batch_size,
        steps=report.workload.steps,
        verdict=report.verdict,
        reasons=[reason_short(r) for r in report.reasons],
        warnings=report.warnings,
        threshold_pct=report.threshold_pct,
        tok_threshold_pct=report.tok_threshold_pct or report.threshold_pct,
        alpha=report.alpha,
        confidence=report.confidence,
        gpu_ms_change=batch.gpu_ms_change,
        tok_per_s_change=batch.tok_per_s_change,
        cause=cause_of(report, batch.batch_size),
        title=title(report),
        capture_changed=bool(report.capture and report.capture.files),
        traced=section is not None and section.diff is not None,
        trace_split=_split(section),
        rounds=report.rounds,
        repeats=report.workload.repeats,
        arms=[
            ArmValues(
                arm=name, timer=s.timer, sha256=s.sha256, deterministic=s.deterministic,
                gpu_ms_per_step=s.gpu_ms_per_step.values, tok_per_s=s.tok_per_s.values,
            )
            for name, s in stats.items()
        ],
        base_sha=report.arm(report.base).sha,
        head_sha=report.arm(report.head).sha,
        gpu=report.environment.gpu,
        gpu_uuid=report.environment.gpu_state.get("uuid"),
        duration_s=round(duration_s, 1),
        finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def cause_of(report: Report, batch_size: int) -> str | None:
    """The dominant cause the report states for the batch size (its explanation), if any."""
    cause = next((c for c in report.explanation.causes if c.batch_size == batch_size), None)
    return cause.kind if cause is not None and cause.dominant else None


def _split(section: TraceSection | None) -> TraceSplit | None:
    if section is None or section.diff is None:
        return None
    change = section.diff
    return TraceSplit(
        idle_ms=change.idle_ms_per_step.delta,
        busy_from_counts_ms=change.busy_ms_per_step_from_counts,
        busy_from_durations_ms=change.busy_ms_per_step_from_durations,
        kernel_counts_identical=change.kernel_counts_identical,
    )


def keep_pair_files(pair_out: Path, dest: Path) -> None:
    """The report (gzipped) and the comment; the runs and traces stay in the work folder."""
    dest.mkdir(parents=True, exist_ok=True)
    with (pair_out / "report.json").open("rb") as src, gzip.open(dest / "report.json.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copyfile(pair_out / "comment.md", dest / "comment.md")


def append_record(path: Path, record: PairRecord) -> None:
    cut = path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
    with path.open("a", encoding="utf-8") as out:
        out.write(("\n" if cut else "") + record.model_dump_json() + "\n")
        out.flush()


def read_records(path: Path, repair: bool = False) -> list[PairRecord]:
    """Every record of a pairs.jsonl. A last line cut off by a killed run is skipped, and with
    `repair` removed from the file, so that the next record starts on a line of its own."""
    if not path.exists():
        return []
    records = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(PairRecord.model_validate_json(line))
        except ValidationError as exc:
            if number < len(lines):
                raise ConfigError(
                    f"{path}:{number}: not a pair record ({exc.errors()[0]['msg']}); fix or remove the line"
                ) from None
            if repair:
                path.write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")
    return records
