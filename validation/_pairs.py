"""One validation pair: a real `guard run` of base against one head branch. Its line in
pairs.jsonl, appended as soon as it finishes, says what it was asked to be; its figures are
read back from the report kept beside it."""

from __future__ import annotations

import gzip
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from guard._errors import ConfigError
from guard.compare import Verdict
from guard.config import GuardConfig
from guard.explain import CauseKind
from guard.pipeline import Progress, run_guard
from guard.report import Report, title

from ._models import KIND_BY_NAME, InjectionSize, Kind, PairFacts, PairRecord
from ._older import read_kept
from ._repo import BASE_BRANCH, head_branch

REPORT = "report.json.gz"  # each pair's report, kept under DIR/pairs/PAIR/


def plan(planned: dict[str, int]) -> list[tuple[Kind, int]]:
    """Kinds take turns (aa 1, idle-1 1, ..., aa 2, ...), so a run stopped early has some of each."""
    most = max(planned.values(), default=0)
    return [(KIND_BY_NAME[name], index) for index in range(most) for name, count in planned.items() if index < count]


def pair_id(kind: Kind, index: int) -> str:
    return f"{kind.name}-{index + 1:02d}"


@dataclass(frozen=True)
class Pair:
    """A pair as the summary reads it: its facts, and the report they come from."""

    facts: PairFacts
    report: Report


def run_pair(
    repo: Path, kind: Kind, index: int, size: InjectionSize | None, config: GuardConfig, config_dir: Path,
    out_dir: Path, progress: Progress,
) -> PairRecord:
    """Runs the pair; its report is in `out_dir`, for `keep_pair_files`."""
    setting = size.setting if size is not None else None
    branch = head_branch(repo, kind, setting)
    if out_dir.exists():  # a pair cut short by an earlier run: measure it again from scratch
        shutil.rmtree(out_dir)
    started = time.perf_counter()
    run_guard(repo, BASE_BRANCH, branch, config, out_dir, progress=progress, config_dir=config_dir)
    return PairRecord(
        pair_id=pair_id(kind, index), kind=kind.name, index=index, setting=setting,
        predicted_pct=size.predicted_pct if size is not None else None,
        duration_s=round(time.perf_counter() - started, 1),
        finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def load_pair(out: Path, record: PairRecord) -> Pair:
    """The pair's facts from the report kept for it under `out` (of any schema, read as data)."""
    path = out / "pairs" / record.pair_id / REPORT
    if not path.is_file():
        raise ConfigError(f"{path}: the report of pair {record.pair_id} is missing; "
                          "run the pair again (remove its line from pairs.jsonl and --resume)")
    try:
        kept = read_kept(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a report this guard can read ({exc})") from None
    return Pair(facts_of(record, kept.report, kept.stated_verdict), kept.report)


def facts_of(record: PairRecord, report: Report, verdict: Verdict) -> PairFacts:
    kind = KIND_BY_NAME[record.kind]
    batch = report.batch_sizes[0]
    section = next((s for s in report.traces if s.batch_size == batch.batch_size), None)
    return PairFacts(
        pair_id=record.pair_id,
        kind=kind.name,
        injection=kind.injection,
        setting=record.setting,
        predicted_pct=record.predicted_pct,
        batch_size=batch.batch_size,
        verdict=verdict,
        threshold_pct=report.rule.gpu_ms.pct,
        tok_threshold_pct=report.rule.tok_per_s.pct,
        gpu_ms_change=batch.gpu_ms_change,
        tok_per_s_change=batch.tok_per_s_change,
        cause=cause_of(report, batch.batch_size),
        title=title(report),
        capture_changed=None if report.capture is None else bool(report.capture.files),
        traced=section is not None and section.diff is not None,
        rounds=report.rounds,
        gpu=report.environment.gpu,
        gpu_uuid=report.gpu_fingerprint.get("uuid"),
        duration_s=record.duration_s,
    )


def cause_of(report: Report, batch_size: int) -> CauseKind | None:
    """The dominant cause the report states for the batch size (its explanation), if any."""
    cause = next((c for c in report.explanation.causes if c.batch_size == batch_size), None)
    return cause.kind if cause is not None and cause.dominant else None


def keep_pair_files(pair_out: Path, dest: Path) -> None:
    """The report (gzipped) and the comment; the runs and traces stay in the work folder."""
    dest.mkdir(parents=True, exist_ok=True)
    with (pair_out / "report.json").open("rb") as src, gzip.open(dest / REPORT, "wb") as dst:
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
