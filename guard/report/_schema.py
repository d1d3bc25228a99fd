"""The schema of report.json. Bump SCHEMA_VERSION on any change a reader would notice."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from guard.cause import CaptureChanges
from guard.compare import Comparison, RoundsStop, RunWarning
from guard.config import MAX_HOST_SECONDS, ConfigChange, ConfigOverrides, Rule, Workload
from guard.explain import Explanation
from guard.measure import MixReport, SlowProcesses, SourceLabel
from guard.report._migrate import current_shape
from guard.sandbox import Isolation
from guard.trace import MixTraceSection, RankTraceSection, TraceSection

SCHEMA_VERSION = 13
# 1: verdicts by the significance rule; 2: the interval rule, with the looks the run could take;
# 3: every fact the comment states is a field (`explanation`), reasons are kinds with figures;
# 4: the report is its comparison's fields and the run's (GPU state as `gpu_fingerprint`, not
# under `environment`; `tok_threshold_pct` always set), trace warnings are kinds with figures;
# 5: the mix's attribution (`explanation.mix`) and the run's record (`record`);
# 6: the mix decided like a batch size (`mix_comparison`), in the verdict and alpha's split;
# workloads of several ranks: `workload.world_size`, each arm's ranks (`batch_sizes[].arms[].ranks`)
# and the reason `ranks_disagree`; their profiled passes across the ranks (`rank_traces`) and
# what those found (`explanation.ranks`, `explanation.headline.rank_cause`). None of these keys
# appears for one process.
# 7: end-to-end ms per step decided beside GPU ms (`end_to_end_threshold_pct`, alpha split over
# 3 metrics), rounds that adapt (`rounds_stopped`), what dynamo compiled (`compiled`), logit
# margins in agreement, and the calibrated spreads the rule borrowed (`calibrated_spreads`,
# `batch_sizes[].borrowed`); none of these keys appears where the run had none of them.
# Later in 7: where each threshold came from (`threshold_sources`; no key in reports written before);
# what boxed the pull request's processes (`isolation`; no key in reports written before).
# 8: the same keys, decided by rule 2 (guard/config/_rule.py): within a batch size, a
# direction any metric decided stands over what another left undecided, and a slowdown shown by
# a metric that does not gate keeps its batch size open (at_threshold); an improvement names
# end-to-end ms or tok/s where they decided it; alpha is spent over the looks the budget can hold
# (`looks`, planned from the first round) by a Pocock-type function, x 2 families (GPU ms; end-to-end
# ms with tok/s) x the batch sizes. A schema 7 report is decided again by rule 1, as it was.
# 9: decided by rule 3: as 2, and the slow processes of base and head (by GPU ms) set aside before
# deciding (`batch_sizes[].set_aside`; no key where none was). A schema 8 report is decided
# again by rule 2, as it was.
# 10: the same rule; a step's copies and memsets are its GPU work, in the same step windows as its
# kernels (`explanation.causes[]` state the kernels, copies or memsets a step added). A schema 9
# report is explained again as its stage explained it.
# 11: decided by rule 4: as 3, and where every process of base and head counted its host
# instructions per step, a rise whose whole interval is past `instructions_threshold_pct` is a
# regression (`batch_sizes[].instructions_verdict`, `decided_by` "instructions"); where a process
# had no counter, `batch_sizes[].arms[].instructions_unavailable` says why. A schema 10 report is
# decided again by rule 3, as it was.
# 12: decided by rule 5: each process's figures are means over its timed steps (tok/s: tokens over
# the decode's time), end-to-end ms and tok/s always gate at their own thresholds, a direction they
# decide stands over GPU ms and host instructions, each family's alpha is split over its metrics
# (`batch_sizes[].alpha_per_bound`), and `caught_pct` is stated at the upper limit of the spread. A
# schema 11 report is decided again by rule 4, as it was.
# 13: the same rule; the warnings about the run are facts, a kind and its values
# (`warnings[].kind`; compare/_warnings.py), where a report of 12 or before kept each as a sentence;
# and the rule is kept whole (`rule`, guard/config/_rule.py, with its version), where 5 to 12
# kept it as keys of the report: guard/report/_migrate.py reads those into it.
# Read: the current version, schema 7 (by its own rule), schema 6 (decided as it says: no
# end-to-end threshold, alpha over 2 metrics) and schema 5 without a mix, which state nothing
# schema 7 would state otherwise; a report of an older one is made again by `guard run`.
READ_VERSIONS = (5, 6, 7, 8, 9, 10, 11, 12, 13)
DESCRIBED_LIMIT = 200  # characters of a string the workload's describe() gave, kept in the record


class ArmInfo(BaseModel):
    name: str
    ref: str
    sha: str
    subject: str = ""  # first line of the commit message
    label: str = ""  # ablation arms: what the arm is, for the table
    source: str | None = None  # ablation arms: the arm whose build it reuses
    env: dict[str, str] = {}  # ablation arms: environment overrides
    status: Literal["ok", "build_failed", "run_failed"] = "ok"
    error: str | None = None
    log_tail: str = ""
    build_method: str
    build_reused: bool = False
    build_s: float = 0.0
    repeats: int = 0
    # processes the arm's code (its build steps, its harness processes) left running, which the
    # guard killed when the process that started them ended: those its cgroup still held
    # (guard/sandbox/_cgroup.py), or where no cgroup could be made, those left in a session of
    # their own (as root, with build.user: guard/sandbox/_sweep.py); 0 where none, or not countable
    swept: int = Field(default=0, ge=0, exclude_if=lambda value: value == 0)
    # files and folders the arm's code left in the folders every user may write (/tmp, /var/tmp,
    # /dev/shm, /run/lock), which the guard removed when the process that wrote them ended,
    # before any other process ran (as root, with build.user); 0 where none, or not countable
    temp_removed: int = Field(default=0, ge=0, exclude_if=lambda value: value == 0)


class Environment(BaseModel):
    """What the numbers were measured on: no number without its environment."""

    gpu: str | None = None
    gpu_capability: str | None = None
    driver: str | None = None
    torch: str | None = None
    cuda: str | None = None
    python: str | None = None
    platform: str | None = None
    hostname: str | None = None
    cpu: str | None = None
    cpus: list[int] | None = None  # the CPUs the harness process could run on (measure.cpus pins them)


class WorkloadInfo(Workload):
    """The workload as the run replayed it, with what the run learnt of it."""

    # tok/s over tok_per_s_min_s or more of decode per batch size and process, after a warmup of up
    # to warmup_max_s: from schema 12 its tokens over their time; to 11 the median of windows of
    # tok_per_s_window_s or more (None: older reports, whose tok/s came from one pass)
    tok_per_s_min_s: float | None = Field(default=None, ge=0, le=MAX_HOST_SECONDS, allow_inf_nan=False)
    tok_per_s_window_s: float | None = Field(default=None, gt=0, le=MAX_HOST_SECONDS, allow_inf_nan=False)
    warmup_max_s: float | None = Field(default=None, ge=0, le=MAX_HOST_SECONDS, allow_inf_nan=False)
    profile_steps: int = 0
    repeats: int
    described: dict[str, Any] = {}  # what the workload says of itself (describe()), per batch size
    reference: SourceLabel | None = None  # where the ids that forced every step's input came from; None: free-running
    reference_error: str | None = None  # the reference process failed, so the processes ran free


class CapturePolicy(BaseModel):
    """How one arm's workload says it captured decode (its describe(), after the mix's set-up
    where it had one): the arm's process said it, so each field is bounded data."""

    arm: str
    mode: str | None = Field(default=None, max_length=DESCRIBED_LIMIT)  # capture_mode, or mode
    cuda_graphs: bool | None = None
    captured_sizes: list[int] | None = Field(default=None, max_length=4096)
    fallback: bool | None = None  # sizes between the captured ones run eagerly at their own shape
    moe_dispatch: str | None = Field(default=None, max_length=DESCRIBED_LIMIT)


class BatchShare(BaseModel):
    batch_size: int
    share: float  # of the mix's timed steps


class RunRecord(BaseModel):
    """What a performance claim is kept with, besides the arms' revisions (`arms[].sha`) and
    the GPU, driver, torch and CUDA (`environment`): the model and its precision, the batch
    distribution the run replayed, and each arm's capture policy."""

    model: str | None = Field(default=None, max_length=DESCRIBED_LIMIT)  # describe()'s model, or its engine
    precision: str | None = Field(default=None, max_length=DESCRIBED_LIMIT)  # describe()'s dtype
    # the mix's sizes and shares of its timed steps; empty: fixed batch sizes, each its own pass
    batch_distribution: list[BatchShare] = []
    capture: list[CapturePolicy] = []  # base, then head


class Report(Comparison):
    """The comparison (verdict, reasons, the rule, batch sizes, the runs' warnings and GPU
    fingerprint: `Comparison`'s fields, defined there once) and the run around it."""

    schema_version: Literal[5, 6, 7, 8, 9, 10, 11, 12, 13] = SCHEMA_VERSION
    # about the runs (the checkout's credential first); a string: a sentence, as schema 12 and before kept it
    warnings: list[RunWarning | str] = []  # type: ignore[assignment]
    tool_version: str
    base: str  # arm names
    head: str
    arms: list[ArmInfo]
    rounds: int = 1  # the rounds of processes the run took, the first included
    # why it took no further round (None: made before rounds adapted)
    rounds_stopped: RoundsStop | None = Field(default=None, exclude_if=lambda value: value is None)
    # seconds the confirmation rounds' processes took together, against measure.confirm_budget_s
    confirm_s: float | None = Field(default=None, exclude_if=lambda value: value is None)
    confirm_budget_s: float | None = Field(default=None, exclude_if=lambda value: value is None)
    # processes far on the slow side of their arm's others, every round's (None in older reports)
    slow_processes: SlowProcesses | None = None
    # torch.compile's caches in a folder per arm, shared by its processes (measure.compile_cache);
    # None: off, or a report from before
    compile_caches: bool | None = Field(default=None, exclude_if=lambda value: value is None)
    # the arms that ran one unmeasured process first, to compile, as base's reference process did
    # for base: so that no measured process is the one that compiles (runs/compile-fill/)
    compile_filled: list[str] = Field(default=[], exclude_if=lambda value: not value)
    workload: WorkloadInfo
    environment: Environment
    traces: list[TraceSection] = []  # from the profiled pass, on a GPU
    changed_files: list[str] = []
    config_change: ConfigChange | None = None  # the head changed guard.toml (or a file it names): not used
    overrides: ConfigOverrides | None = None  # values the command line gave in place of the config's
    capture: CaptureChanges | None = None  # hunks of the change that touch CUDA graph capture
    mix: MixReport | None = None  # the batch-size mix pass, per arm (guard/measure/_mix.py)
    mix_traces: MixTraceSection | None = None  # the mix's profiled pass, per arm, on a GPU
    # several ranks: per batch size, each arm's profiled passes across its ranks and their diff; no key for one
    rank_traces: list[RankTraceSection] = Field(default_factory=list, exclude_if=lambda value: not value)
    record: RunRecord | None = None  # the run's record (guard/report/_record.py); None: made before it
    github_repo: str | None = None  # OWNER/NAME, for links
    server_url: str = "https://github.com"
    repo: str
    started_at: str
    duration_s: float
    explanation: Explanation  # what the comment states, from the figures above (guard/explain)
    # what held the pull request's processes on this host (guard/sandbox/_box.py); None: a report from before
    isolation: Isolation | None = Field(default=None, exclude_if=lambda value: value is None)

    @model_validator(mode="before")
    @classmethod
    def _older_schemas(cls, data: Any) -> Any:
        return current_shape(data)

    @field_validator("rule")
    @classmethod
    def _sources_said_for_all(cls, rule: Rule) -> Rule:
        """Where each threshold came from is said for every metric decided, or (older reports) for none."""
        if rule.sources() is None and any(t.source is not None for t in rule.thresholds().values()):
            raise ValueError("where a threshold came from (its source) is said for every metric decided, or none")
        return rule

    def arm(self, name: str) -> ArmInfo:
        return next(a for a in self.arms if a.name == name)

    def gpu_timed(self) -> bool:
        """Steps were timed with CUDA events (on a GPU), not the host clock."""
        return any(a.timer == "cuda_event" for b in self.batch_sizes for a in b.arms)
