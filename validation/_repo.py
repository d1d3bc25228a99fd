"""The throwaway repository: base is the reference engine as `guard demo` commits it, and
each head branch changes one of its defaults (or only a comment, for A/A)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Callable

from guard._errors import GitError
from guard._git import run_git
from guard.config import MIN_REPEATS
from guard.demo import make_demo_repo

from ._models import SPLIT_ONLY, Kind, RunSettings

BASE_BRANCH = "main"
ENGINE_FILE = "refengine/engine.py"
MODEL_FILE = "refengine/model.py"
IDLE_DEFAULT = "os.environ.get(IDLE_ENV, 0.0)"
SPLIT_DEFAULT = "split: bool | None = None,"
LONG_KV_LAYERS_RE = re.compile(r"^    long_kv_layers: int = (\d+)$", re.MULTILINE)
LONG_KV_LEN_RE = re.compile(r"^    long_kv_len: int = (\d+)$", re.MULTILINE)
AA_COMMENT = "\n# The decode step above is unchanged; this comment is the whole change.\n"
# The thing measured: the workload the demo repository commits (it decodes with refengine).
ENTRY = "bench/guard_workload.py:make"
VENV_INSTALL = "pip install --no-deps --no-build-isolation --no-index ."
IDENTITY = ("-c", "user.name=Validation", "-c", "user.email=validation@example.invalid")


def make_engine_repo(repo: Path, settings: RunSettings) -> str:
    """Create the repository at `repo`, or reuse one this script made there; return base's sha."""
    if not (repo / ENGINE_FILE).is_file():
        make_demo_repo(repo, settings.steps, settings.warmup_steps, settings.repeats, settings.options_toml)
    return _git(repo, "rev-parse", BASE_BRANCH)


def base_long_kv_len(repo: Path) -> int:
    """The KV cache length the long layers get, as base declares it."""
    found = LONG_KV_LEN_RE.search(_read_at(repo, BASE_BRANCH, MODEL_FILE))
    if found is None:
        raise GitError(f"{MODEL_FILE} no longer declares 'long_kv_len: int = N'; update validation/_repo.py")
    return int(found.group(1))


def head_branch(repo: Path, kind: Kind, setting: float | None) -> str:
    """The branch whose one commit injects `kind` at `setting`; made on first use."""
    if kind.injection == "none":
        branch, path, change, message = "validate/aa", ENGINE_FILE, _add_comment, "engine: a comment, nothing else"
    elif kind.injection == "idle" and setting == SPLIT_ONLY:
        branch, path = "validate/split", ENGINE_FILE
        message = "engine: capture decode as two graphs"

        def change(text: str) -> str:
            return _replace(text, SPLIT_DEFAULT, "split: bool | None = True,", path)
    elif kind.injection == "idle":
        assert setting is not None
        branch, path = f"validate/idle-{setting:g}us", ENGINE_FILE
        message = f"engine: capture decode as two graphs and hold the host {setting:g} us between them"

        def change(text: str) -> str:
            return _replace(text, IDLE_DEFAULT, f"os.environ.get(IDLE_ENV, {float(setting)!r})", path)
    else:
        assert setting is not None
        layers = int(setting)
        branch, path = f"validate/long-kv-{layers}", MODEL_FILE
        message = f"model: the first {layers} layer(s) attend over a longer static KV cache"

        def change(text: str) -> str:
            found = LONG_KV_LAYERS_RE.search(text)
            if found is None:
                raise GitError(f"{path} no longer declares 'long_kv_layers: int = N'; "
                               "update validation/_repo.py")
            return text[: found.start(1)] + str(layers) + text[found.end(1):]

    if run_git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").returncode != 0:
        _commit_change(repo, branch, path, change, message)
    return branch


def write_config(
    path: Path, settings: RunSettings, thresholds: Path | None, batch_mix: dict[int, float] | None = None,
    purpose: str = "the configuration of every validation pair",
) -> None:
    """The guard.toml a pair runs with (`guard run --config` reads the same file); `batch_mix`
    replays a mix of sizes to shares instead of the fixed batch size alone."""
    build = (
        f'method = "venv"\ninstall = "{VENV_INSTALL}"\n' if settings.build == "venv" else 'method = "none"\n'
    )
    thresholds_line = ""
    if thresholds is not None:
        # a config names files beside itself: the calibrated thresholds are copied there
        if thresholds.exists() and thresholds.resolve() != (path.parent / thresholds.name).resolve():
            shutil.copyfile(thresholds, path.parent / thresholds.name)
        thresholds_line = f'thresholds_file = "{thresholds.name}"\n'
    mix_line = ""
    if batch_mix is not None:
        mix_line = "batch_mix = { " + ", ".join(f"{size} = {share}" for size, share in batch_mix.items()) + " }\n"
    path.write_text(
        f"# Written by python -m validation injected: {purpose}.\n"
        f'target_branch = "{BASE_BRANCH}"\n\n'
        "[workload]\n"
        f'entry = "{ENTRY}"\n'
        f"batch_sizes = [{settings.batch_size}]\n"
        f"steps = {settings.steps}\n"
        f"warmup_steps = {settings.warmup_steps}\n"
        f"profile_steps = {settings.profile_steps}\n"
        f"profile_repeats = {settings.profile_repeats}\n"
        f"options = {{ {settings.options_toml} }}\n"
        + "".join(f"{name} = {value:g}\n" for name, value in (("tok_per_s_min_s", settings.tok_per_s_min_s),
                                                               ("warmup_max_s", settings.warmup_max_s))
                  if value is not None)
        + mix_line
        + f"\n[build]\n{build}\n"
        "[measure]\n"
        f"repeats = {settings.repeats}\n"
        + ("allow_few_repeats = true\n" if settings.repeats < MIN_REPEATS else "")
        + f"alpha = {settings.alpha}\n"
        f"confidence = {settings.confidence}\n"
        f"confirm = {'true' if settings.confirm else 'false'}\n"
        f"max_rounds = {settings.max_rounds}\n"
        f"timeout_s = {settings.timeout_s}\n"
        + thresholds_line
    )


def _commit_change(repo: Path, branch: str, path: str, change: Callable[[str], str], message: str) -> None:
    _git(repo, "checkout", "--quiet", "-b", branch, BASE_BRANCH)
    try:
        target = repo / path
        target.write_text(change(target.read_text()))
        _git(repo, *IDENTITY, "commit", "--quiet", "-am", message)
    finally:
        _git(repo, "checkout", "--quiet", BASE_BRANCH)


def _add_comment(text: str) -> str:
    return text + AA_COMMENT


def _replace(text: str, old: str, new: str, path: str) -> str:
    if old not in text:
        raise GitError(f"{path} no longer contains {old!r}; update validation/_repo.py")
    return text.replace(old, new)


def _read_at(repo: Path, ref: str, path: str) -> str:
    return _git(repo, "show", f"{ref}:{path}")


def _git(repo: Path, *args: str) -> str:
    proc = run_git(repo, *args)
    if proc.returncode != 0:
        raise GitError(f"{repo}: git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()
