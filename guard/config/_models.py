"""Pydantic models of `guard.toml`. Field names here are a public contract (docs/configuration.md)."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from guard.config._paths import entry_problem, relative_path_problem

# Upper bounds no real run comes near; past them a value is a typo (or an attack on the
# runner's memory), so it is a config error that names the key and the range.
MAX_REPEATS = 200
# Fewer processes per arm than this are refused unless measure.allow_few_repeats says so: at 4 or
# fewer, each bound's t quantile at the rule's level (99.9% and beyond) is so wide that the run
# decides little but large changes.
MIN_REPEATS = 5
FEWEST_REPEATS = 2  # a spread needs two; under MIN_REPEATS only with measure.allow_few_repeats
MAX_ROUNDS = 8  # rounds of a run, the first included: alpha is split over them
MAX_STEPS = 100_000
MAX_PROFILE_STEPS = 10_000
MAX_BATCH_SIZE = 4096
MAX_TIMEOUT_S = 86_400  # a day
# A threshold this large switches the guard off, so it is refused wherever it is set (a config, a
# thresholds file, a calibration's suggestion): GPU ms per step at 25% or more lets a decode a
# quarter slower pass; tok/s at 50% or more lets one twice as slow pass, its tokens per second halved.
REFUSED_GPU_MS_PCT = 25.0
REFUSED_TOK_PER_S_PCT = 50.0
REFUSED_END_TO_END_PCT = 50.0  # the step time as felt, host included: noisier than GPU ms, as tok/s is
REFUSED_INSTRUCTIONS_PCT = 50.0  # the host's work per step half as much again
# What the user feels (end-to-end ms, tok/s), as a calibration writes it: what the runner resolves,
# however coarse, since a run holds the metric to it while GPU ms gates at its own (rule 5); past a
# step eleven times as long the figure only says the runner cannot tell (calibrate writes none)
MAX_CALIBRATED_FELT_PCT = 1000.0
# tok/s's threshold is a fall, under 100% (tok/s cannot fall by all of itself): the same cap is the
# fall of a step eleven times as long, 1 - 1/11 of tok/s
MAX_CALIBRATED_TOK_FALL_PCT = 100.0 * MAX_CALIBRATED_FELT_PCT / (100.0 + MAX_CALIBRATED_FELT_PCT)


def felt_cap_pct(metric: str) -> float:
    """The coarsest threshold a calibration writes for a felt metric (tok_per_s or end_to_end_ms)."""
    return MAX_CALIBRATED_TOK_FALL_PCT if metric == "tok_per_s" else MAX_CALIBRATED_FELT_PCT
# Host instructions per step: their A/A spread is far under 1%, so their threshold is set by what a user
# would feel, not by noise: where the host bounds a step, 2% more instructions is about 2% more host
# time, twice GPU ms's default (docs/notebook/decision-rule.md, "Host instructions per step")
INSTRUCTIONS_THRESHOLD_PCT = 2.0
# what steadies a runner, so that a calibration can suggest a threshold that guards
STEADY_RUNNER = (
    "quiet the runner (no other jobs on it, a GPU of its own), pin the harness to CPUs (measure.cpus), "
    "raise measure.repeats, or lengthen the timed pass (workload.steps)"
)
MAX_WORLD_SIZE = 64  # ranks on one host: a GPU each on a GPU machine
MAX_HOST_SECONDS = 600  # seconds of decode per batch size and process, for tok/s or its warmup
_BRANCH_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._/-]*$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _distinct_at_least(
    values: list[int], least: int, too_small: str, what: str, most: int | None = None
) -> list[int]:
    """A list of whole numbers, each `least` or more (and `most` or less), none twice."""
    if any(v < least for v in values):
        raise ValueError(too_small)
    if most is not None and any(v > most for v in values):
        raise ValueError(f"every one of the {what} must be {most} or less")
    if len(set(values)) != len(values):
        raise ValueError(f"{what} must not repeat")
    return values


MAX_MIX_SIZES = 64
MIX_SUM_TOLERANCE = 1e-6


def mix_problem(mix: dict[int, float]) -> str | None:
    """What is wrong with a batch-size mix (sizes to shares); None when nothing is."""
    if not mix:
        return "at least one batch size with its share, e.g. { 1 = 0.5, 2 = 0.5 }"
    if len(mix) > MAX_MIX_SIZES:
        return f"at most {MAX_MIX_SIZES} batch sizes"
    bad_size = next((size for size in mix if not 1 <= size <= MAX_BATCH_SIZE), None)
    if bad_size is not None:
        return f"batch sizes from 1 to {MAX_BATCH_SIZE}, not {bad_size}"
    bad_share = next((size for size, share in mix.items() if not (math.isfinite(share) and share > 0)), None)
    if bad_share is not None:
        return f"every share above 0 (batch size {bad_share} has {mix[bad_share]!r})"
    total = math.fsum(mix.values())
    if abs(total - 1.0) > MIX_SUM_TOLERANCE:
        return f"shares that sum to 1 (these sum to {total:.9g}); divide each by their sum"
    return None


def _in_repository(value: str | None, suffix: str, example: str) -> str | None:
    """A path read from the config's own commit: relative, inside it, ending in `suffix`."""
    problem = value and relative_path_problem(value, suffix)
    if problem:
        raise ValueError(f"{problem} (e.g. '{example}')")
    return value


def threshold_refusal(metric: Literal["gpu_ms", "end_to_end_ms", "tok_per_s", "instructions"],
                      value: float) -> str | None:
    """Why a threshold of `value` percent is refused for `metric`; None when it is not."""
    if metric == "gpu_ms" and value >= REFUSED_GPU_MS_PCT:
        return (f"a threshold under {REFUSED_GPU_MS_PCT:g}% in GPU ms per step ({value:g}% would let a decode a "
                f"quarter slower pass); {STEADY_RUNNER}, then use the threshold `guard calibrate` suggests")
    if metric == "end_to_end_ms" and value >= REFUSED_END_TO_END_PCT:
        return (f"a threshold under {REFUSED_END_TO_END_PCT:g}% in end-to-end ms per step ({value:g}% would let a "
                f"decode half as slow again pass); {STEADY_RUNNER}, then use the threshold `guard calibrate` suggests")
    if metric == "tok_per_s" and value >= REFUSED_TOK_PER_S_PCT:
        return (f"a threshold under {REFUSED_TOK_PER_S_PCT:g}% in tok/s ({value:g}% would let a decode twice as slow "
                f"pass); {STEADY_RUNNER}, then use the threshold `guard calibrate` suggests")
    if metric == "instructions" and value >= REFUSED_INSTRUCTIONS_PCT:
        return (f"a threshold under {REFUSED_INSTRUCTIONS_PCT:g}% in host instructions per step ({value:g}% would let "
                f"the host's work per step grow by half again); the default, {INSTRUCTIONS_THRESHOLD_PCT:g}%, is "
                "already far above their noise")
    return None


def _finite(value: Any) -> bool:
    """No nan or inf anywhere in `value` (its nesting is bounded by the TOML reader)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Workload(BaseModel):
    """The decode workload a run replays on both arms, as the config states it, the harness
    is given it and the report records it: one model, each stage adding what is its own."""

    entry: str = Field(
        default="bench/guard_workload.py:make",
        description="Entry point returning a workload: 'pkg.module:make' or 'path/file.py:make'.",
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments passed to the entry point."
    )
    batch_sizes: list[int] = Field(default=[1, 2], min_length=1, max_length=64)
    steps: int = Field(default=256, ge=1, le=MAX_STEPS, description="Timed decode steps per batch size.")
    warmup_steps: int = Field(default=32, ge=0, le=MAX_STEPS, description="Untimed steps at the start of every pass.")
    # 0.3 s: tok/s spreads between processes, not inside one, so a longer floor bought no
    # steadier figure and cost each process about 0.7 s per batch size
    # (docs/measurements/host-spread-h200.md, measured when tok/s was a median of windows)
    tok_per_s_min_s: float = Field(
        default=0.3, ge=0, le=MAX_HOST_SECONDS,
        description="Seconds of decode per batch size that tok/s is measured over, at the least: passes of `steps` "
        "are repeated, each from setup() and warmup_steps, until they add up to this (0: one pass). tok/s is their "
        "tokens over their summed time.",
    )
    warmup_max_s: float = Field(
        default=1.0, ge=0, le=MAX_HOST_SECONDS,
        description="Most seconds of untimed decode per batch size before its timed passes; the warmup ends sooner "
        "once the rolling median tok/s of its 100 ms windows settles (0: warmup_steps alone).",
    )
    profile_steps: int = Field(
        default=64, ge=0, le=MAX_PROFILE_STEPS,
        description="Steps of the separate profiled pass on a GPU, and on a CPU for several ranks (there at most "
        "`steps`); 0: no profiling.",
    )
    profile_repeats: int = Field(
        default=1, ge=0, le=MAX_REPEATS,
        description="Processes per arm that run the profiled pass, the first ones; a confirmation round adds none "
        "unless this is more than measure.repeats (0: every one). Each costs its process several seconds on a GPU.",
    )
    batch_mix: dict[int, float] | None = Field(
        default=None,
        description="Batch sizes to their shares of decode steps: a mix pass after the fixed batch sizes, its "
        "active batch size drawn per step by a seeded schedule (harness/_mix.py).",
    )
    batch_mix_file: str | None = Field(
        default=None,
        description="Text file in the repository (read from the base commit), one batch size per line, one line "
        "per step, in the order production saw them: the mix pass's schedule instead of batch_mix.",
    )
    batch_mix_seed: int = Field(default=0, ge=0, le=2**32 - 1, description="Seed of the mix's schedule.")
    world_size: int = Field(
        default=1, ge=1, le=MAX_WORLD_SIZE, exclude_if=lambda value: value == 1,  # no key for one process
        description="Ranks the workload decodes on, one harness process each on this host (torch.distributed: NCCL "
        "and a GPU per rank on a GPU machine, gloo on a CPU); a step's time is its slowest rank's (1: one process).",
    )


class WorkloadConfig(_Section, Workload):
    """[workload] of guard.toml: the workload, checked as the input it is here."""

    reference_file: str | None = Field(
        default=None,
        description="Reference-tokens JSON in the repository (read from the base commit) whose ids force every "
        "step's input; default: a free-running greedy pass of the base build, in its own process.",
    )

    @field_validator("entry")
    @classmethod
    def _entry_shape(cls, value: str) -> str:
        problem = entry_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("options")
    @classmethod
    def _json_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        # they reach the harness as JSON, which has no dates or times
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise ValueError("options must be strings, numbers, booleans, arrays and tables, not dates "
                             "or times (quote a date to pass it as a string)") from None
        return value

    @field_validator("options")
    @classmethod
    def _finite_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not _finite(value):
            raise ValueError("finite numbers (no nan or inf)")
        return value

    @field_validator("batch_sizes")
    @classmethod
    def _positive_unique(cls, value: list[int]) -> list[int]:
        return _distinct_at_least(value, 1, "every batch size must be 1 or more", "batch sizes", MAX_BATCH_SIZE)

    @field_validator("reference_file")
    @classmethod
    def _reference_path(cls, value: str | None) -> str | None:
        return _in_repository(value, ".json", "bench/reference-tokens.json")

    @field_validator("batch_mix_file")
    @classmethod
    def _mix_path(cls, value: str | None) -> str | None:
        return _in_repository(value, ".txt", "bench/batch-sizes.txt")

    @field_validator("batch_mix")
    @classmethod
    def _mix_shares(cls, value: dict[int, float] | None) -> dict[int, float] | None:
        if value is None:
            return None
        problem = mix_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _one_mix(self) -> WorkloadConfig:
        if self.batch_mix is not None and self.batch_mix_file is not None:
            raise ValueError("batch_mix and batch_mix_file both set: give the shares or the file, one of them")
        return self


_GPUS_RE = re.compile(r"^(auto|all|none|[A-Za-z0-9-]+(,[A-Za-z0-9-]+)*)$")
_BUILD_ARG_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class DockerConfig(_Section):
    """build.method "docker": each arm an image from its Dockerfile, measured in a locked-down container."""

    dockerfile: str = Field(default="Dockerfile", description="The arm's Dockerfile, relative to its repository.")
    build_args: dict[str, str] = Field(
        default_factory=dict, max_length=64,
        description="Build arguments, BASE_IMAGE among them (e.g. a CUDA PyTorch image the runner has).",
    )
    build_network: Literal["none", "host", "default"] = Field(
        default="none", description="The network the image's RUN steps get; 'none' unless they must download.",
    )
    python: str = Field(default="python3", pattern=r"^[A-Za-z0-9_./-]+$",
                        description="The interpreter in the image that runs the harness.")
    gpus: str = Field(
        default="auto", pattern=_GPUS_RE.pattern,
        description="GPUs given to the container: 'auto' (all, where the host has any), 'all', 'none', "
        "or device indices or UUIDs separated by commas.",
    )
    user: str = Field(default="65534:65534", pattern=r"^[0-9]+(:[0-9]+)?$",
                      description="uid:gid the harness runs as in the container; never 0.")
    cpus: float | None = Field(default=None, gt=0, le=4096,
                               description="CPU quota of a container, in CPUs; default: no quota.")
    memory_mb: int = Field(default=65536, ge=256, le=1 << 24, description="Memory limit of a container, no swap.")
    pids_limit: int = Field(default=4096, ge=16, le=1 << 22, description="Most processes and threads in a container.")
    shm_mb: int = Field(default=1024, ge=64, le=1 << 20, description="Size of the container's /dev/shm.")
    tmpfs_mb: int = Field(default=4096, ge=64, le=1 << 20, description="Size of the container's scratch /tmp.")

    @field_validator("dockerfile")
    @classmethod
    def _relative(cls, value: str) -> str:
        problem = relative_path_problem(value, "")
        if problem:
            raise ValueError(problem.replace("a  file", "a file"))
        return value

    @field_validator("build_args")
    @classmethod
    def _arg_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [name for name in value if not _BUILD_ARG_RE.match(name)]
        if bad:
            raise ValueError(f"build argument names are letters, digits and _: {', '.join(repr(n) for n in bad)}")
        return value

    @field_validator("user")
    @classmethod
    def _not_root(cls, value: str) -> str:
        if int(value.partition(":")[0]) == 0:
            raise ValueError("uid 0 is root in the container; give an unprivileged uid such as 65534")
        return value


class BuildConfig(_Section):
    method: Literal["venv", "none", "docker"] = "venv"
    install: str = Field(
        default="pip install --no-deps .",
        description="Shell command run in the arm's worktree with its venv active.",
    )
    python: str | None = Field(
        default=None,
        description="Interpreter the arm venvs are made from; default: the one running the guard.",
    )
    timeout_s: float = Field(default=1800, gt=0, le=MAX_TIMEOUT_S)
    max_checkout_mib: int = Field(
        default=2048, ge=1, le=1_048_576,
        description="Most MiB an arm's commit may hold, its files' sizes as git records them, read before "
        "anything is checked out: a small pack can hold a tree of gigabytes.",
    )
    max_checkout_files: int = Field(
        default=200_000, ge=1, le=10_000_000,
        description="Most files and links an arm's commit may hold, read before anything is checked out.",
    )
    pass_env: list[str] = Field(
        default_factory=list, max_length=256,
        description=(
            "Variables the arm's build and workload may see besides the allowlist (PATH, HOME, locale, CUDA, "
            "torch, proxies...), passed as they are, e.g. HF_TOKEN. Never name a write token here."
        ),
    )
    user: str = Field(
        default="guard-pr",
        pattern=r"^([a-z_][a-z0-9_-]{0,31})?$",
        description=(
            "Unprivileged user the build and workload run as when the guard runs as root, created if missing; "
            "'' runs them as root, which lets them read every process's environment and write the cache."
        ),
    )
    isolation: Literal["kernel", "auto", "none"] = Field(
        default="kernel",
        description="'kernel': each process of the pull request in a cgroup v2 and PID, IPC and mount namespaces of "
        "its own, with private temp folders; run as root, the guard stops before building where the host cannot "
        "give them, and says what it lacks. 'auto': those where the host gives them, and the report and the "
        "comment say what it did not. 'none': none of them (the report and the comment say so).",
    )
    docker: DockerConfig = Field(default_factory=DockerConfig)


class MeasureConfig(_Section):
    repeats: int = Field(default=5, ge=FEWEST_REPEATS, le=MAX_REPEATS,
                         description="Fresh processes per arm, interleaved.")
    threshold_pct: float = Field(
        default=1.0, gt=0, description="Smallest slowdown, in percent, reported as a regression "
        f"(under {REFUSED_GPU_MS_PCT:g}%: it is GPU ms per step's, too).",
    )
    end_to_end_threshold_pct: float | None = Field(
        default=None, gt=0,
        description="Smallest slowdown, in percent, of end-to-end ms per step (unheld, the host's launch time "
        "included; GPU only) reported as a regression; default threshold_pct. It decides where the run's "
        "processes can detect it, and otherwise a slowdown whose whole interval is past it.",
    )
    instructions_threshold_pct: float = Field(
        default=INSTRUCTIONS_THRESHOLD_PCT, gt=0,
        description="Smallest rise, in percent, of the host's user-mode instructions per step (the main thread's, "
        "in the end-to-end passes) reported as a regression where every process of base and head counted them; "
        "only a rise whose whole interval is past it decides. Not calibrated: set by what a user would feel.",
    )
    at_threshold: Literal["neutral", "fail"] = Field(
        default="neutral",
        description="What a slowdown shown but not told from the threshold sets: undecided, as inconclusive is (a "
        "pending commit status, the service's undecided Check Run, exit 4), or a failure (exit 1), as a regression is.",
    )
    alpha: float = Field(
        default=0.01, gt=0, lt=0.5,
        description="Error level of the verdict: spent over the looks the time budget holds (a Pocock-type "
        "function), split over 2 families (GPU ms; end-to-end ms with tok/s) x the batch sizes; each one-sided bound "
        "of a change is wrong at most its share of the time (docs/decision-rule.md).",
    )
    confirm: bool = Field(
        default=True, description="Batch sizes the first round leaves undecided get more rounds of repeats "
        "(measure.max_rounds, measure.confirm_budget_s); false: the first round decides.",
    )
    max_rounds: int = Field(
        default=4, ge=1, le=MAX_ROUNDS,
        description="Rounds a run may take, the first included, while a batch size (or the mix) is undecided; "
        "alpha is split over all of them.",
    )
    confirm_budget_s: float = Field(
        default=180.0, ge=0, le=MAX_TIMEOUT_S,
        description="Seconds of measuring the confirmation rounds may take together; a round is run only "
        "where the process times of the round before say it fits in what is left.",
    )
    allow_few_repeats: bool = Field(
        default=False,
        description=f"Allow measure.repeats under {MIN_REPEATS} (quick local tries, CPU tests): the run then "
        "decides only large changes.",
    )
    thresholds_file: str | None = Field(
        default=None,
        description="TOML written by `guard calibrate`, beside the config (in its commit, or its folder); "
        "its thresholds replace threshold_pct per metric.",
    )
    confidence: float = Field(default=0.95, gt=0.5, lt=1)
    timeout_s: float = Field(default=1800, gt=0, le=MAX_TIMEOUT_S, description="Limit for one harness process.")
    compile_cache: bool = Field(
        default=True,
        description="The processes of an arm share torch.compile's caches (inductor, AOTAutograd, Triton) and "
        "the interpreter's bytecode in a folder of that arm's for the run, so only its first process compiles "
        "from scratch; false: every process compiles in its own temp folder.",
    )
    cpus: list[int] = Field(
        default_factory=list, max_length=4096,
        description="CPU ids every harness process is pinned to (Linux), e.g. cores near the GPU; "
        "empty: not pinned. The host side of a step then runs on the same cores in every process.",
    )

    @property
    def looks(self) -> int:
        """The rounds a run may take, which alpha is split over."""
        return self.max_rounds if self.confirm else 1

    @field_validator("threshold_pct")
    @classmethod
    def _guards(cls, value: float) -> float:
        problem = threshold_refusal("gpu_ms", value)  # it sets both metrics' thresholds; GPU ms's limit is lower
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("end_to_end_threshold_pct")
    @classmethod
    def _guards_end_to_end(cls, value: float | None) -> float | None:
        problem = value is not None and threshold_refusal("end_to_end_ms", value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("instructions_threshold_pct")
    @classmethod
    def _guards_instructions(cls, value: float) -> float:
        problem = threshold_refusal("instructions", value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("thresholds_file")
    @classmethod
    def _thresholds_path(cls, value: str | None) -> str | None:
        return _in_repository(value, ".toml", "guard-thresholds.toml")

    @field_validator("cpus")
    @classmethod
    def _cpu_ids(cls, value: list[int]) -> list[int]:
        return _distinct_at_least(value, 0, "CPU ids are 0 or more", "CPU ids", 65_535)


class CaptureConfig(_Section):
    globs: list[str] = Field(
        default_factory=list, max_length=256,
        description="Files that hold graph capture code, besides those found by CUDA graph API names.",
    )


class ArmConfig(_Section):
    """An ablation arm: base or head built again, run with environment overrides."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    source: Literal["base", "head"] = Field(alias="from")
    env: dict[str, str] = Field(default_factory=dict)
    label: str = Field(default="", description="What the arm is, for the comment's table.")

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value in ("base", "head"):
            raise ValueError("'base' and 'head' are the built-in arms; pick another name")
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        # a process environment cannot hold `=` in a name, nor a NUL anywhere
        bad = [name for name in value if not _ENV_NAME_RE.match(name)]
        if bad:
            raise ValueError(f"environment variable names are letters, digits and _, not starting with a digit: "
                             f"{', '.join(repr(n) for n in bad)}")
        if any("\0" in text for text in value.values()):
            raise ValueError("an environment variable's value cannot hold a NUL character")
        return value


class GuardConfig(_Section):
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    build: BuildConfig = Field(default_factory=BuildConfig)
    measure: MeasureConfig = Field(default_factory=MeasureConfig)
    capture: CaptureConfig = Field(default_factory=CaptureConfig)
    arms: list[ArmConfig] = Field(default_factory=list, max_length=16)
    target_branch: str = Field(default="main", description="Branch whose merge-base with head is the default base.")

    @field_validator("target_branch")
    @classmethod
    def _branch_name(cls, value: str) -> str:
        # a branch, never a revision expression such as HEAD or main~3: the base must not move with the head
        if not _BRANCH_RE.match(value) or ".." in value or value.rpartition("/")[2].endswith("HEAD"):
            raise ValueError("a branch name such as 'main' or 'origin/main' (letters, digits and . _ / -; not HEAD)")
        return value

    @model_validator(mode="after")
    def _enough_repeats(self) -> GuardConfig:
        repeats = self.measure.repeats
        if repeats < MIN_REPEATS and not self.measure.allow_few_repeats:
            raise ValueError(
                f"measure.repeats {repeats} is under {MIN_REPEATS} processes per arm, too few for the decision rule "
                f"to decide a change near the threshold; use {MIN_REPEATS} or more, or set "
                "measure.allow_few_repeats = true for a quick try")
        return self

    @model_validator(mode="after")
    def _ranks_fit(self) -> GuardConfig:
        world = self.workload.world_size
        if world > 1 and self.build.method == "docker":
            raise ValueError(f"workload.world_size {world} runs a process per rank on the runner: use build.method "
                             "'venv' or 'none' (the docker mode runs one process per container)")
        if world > 1 and self.measure.cpus and len(self.measure.cpus) < world:
            raise ValueError(f"measure.cpus lists {len(self.measure.cpus)} CPU(s) for workload.world_size {world}: "
                             "the ranks share them out, so list at least one per rank, or none")
        return self

    @field_validator("arms")
    @classmethod
    def _unique_arms(cls, value: list[ArmConfig]) -> list[ArmConfig]:
        names = [a.name for a in value]
        if len(set(names)) != len(names):
            raise ValueError("arm names must not repeat")
        return value
