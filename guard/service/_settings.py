"""What `guard serve` runs with. Secrets come from the environment or from files, never
from the command line, where any user of the host can read them in the process list."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, SecretStr

from guard._errors import GuardError
from guard._comment_mode import DEFAULT_COMMENT_MODE, CommentMode
from guard._types import is_repo_name

DEFAULT_MAX_BODY_BYTES = 25 << 20  # GitHub caps a webhook payload at 25 MB
DEFAULT_LEASE_S = 60.0
DEFAULT_TRUST_LABEL = "safe-to-test"  # the label the Action's public-repository workflows use
MIN_TOKEN_CHARS = 20  # a token a person could guess is no token
UndecidedConclusion = Literal["action_required", "failure"]
UNDECIDED_CONCLUSIONS: tuple[UndecidedConclusion, ...] = ("action_required", "failure")
DEFAULT_UNDECIDED_CONCLUSION: UndecidedConclusion = "action_required"


class SettingsError(GuardError):
    """A setting of `guard serve` is missing or wrong."""


class AppCredentials(BaseModel):
    app_id: str
    private_key: SecretStr  # PEM; SecretStr: never in a repr or a log line


class ServiceSettings(BaseModel):
    db_url: str
    work_dir: Path  # checkouts, job outputs (reports, traces) and the ingest uploads
    webhook_secret: SecretStr | None = None  # None: deliveries are refused, as nothing can verify them
    app: AppCredentials | None = None  # None: nothing is posted
    api_url: str = "https://api.github.com"
    ingest_tokens: dict[str, SecretStr] = {}  # OWNER/NAME -> the token its CI sends to POST /api/v1/runs
    # the dashboard's and the API's readers send this (guard.service._access); None: nobody reads,
    # unless public_read, the operator's explicit choice
    read_token: SecretStr | None = None
    public_read: bool = False
    workers: int = 1  # one per GPU; 0: this process queues and serves only
    gpus: list[str] = []  # CUDA_VISIBLE_DEVICES per worker, as many as workers; empty on CPU
    lease_s: float = DEFAULT_LEASE_S
    max_attempts: int = 3
    job_command: list[str] | None = None  # None: `guard run`; else this, with the job in GUARD_JOB_* variables
    job_timeout_s: float = 4 * 3600.0
    # after each job, its repository's builds no job used for this many days go; None: kept
    cache_unused_days: float | None = 14.0
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    trust_label: str = DEFAULT_TRUST_LABEL
    comment_mode: CommentMode = DEFAULT_COMMENT_MODE
    # the Check Run of an undecided verdict (at_threshold, inconclusive): never neutral, which a
    # required check takes as passing; action_required (its details URL says what would decide
    # it), or failure where the operator wants a red check
    undecided_conclusion: UndecidedConclusion = DEFAULT_UNDECIDED_CONCLUSION
    # workflows whose completed runs carry a report to ingest: their files in .github/workflows,
    # without .yml (a name is no proof: any workflow may take it)
    report_workflows: list[str] = ["regression-guard", "regression-guard-measure"]
    # workflow_dispatch mode: jobs are sent to this workflow on the repository's self-hosted runners
    dispatch_workflow: str | None = None
    dispatch_ref: str = "main"
    # procrastinate: jobs go to procrastinate's queue in the PostgreSQL database, for `guard worker` hosts
    queue: Literal["embedded", "procrastinate"] = "embedded"


def read_secret_file(path: Path, what: str) -> str:
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise SettingsError(f"cannot read the {what} file {path}: {exc.strerror}") from exc
    if not text:
        raise SettingsError(f"the {what} file {path} is empty")
    return text


def webhook_secret(secret_file: Path | None) -> SecretStr | None:
    """GUARD_WEBHOOK_SECRET, else the file; both set is a mistake worth saying."""
    from_env = os.environ.get("GUARD_WEBHOOK_SECRET") or None
    if from_env and secret_file is not None:
        raise SettingsError("the webhook secret is set twice: GUARD_WEBHOOK_SECRET and --webhook-secret-file; "
                            "keep one")
    secret = from_env or (read_secret_file(secret_file, "webhook secret") if secret_file else None)
    return SecretStr(secret) if secret else None


def read_token(token_file: Path | None, public: bool) -> SecretStr | None:
    """GUARD_READ_TOKEN, else the file: the token the dashboard's and the API's readers send."""
    from_env = os.environ.get("GUARD_READ_TOKEN") or None
    if from_env and token_file is not None:
        raise SettingsError("the read token is set twice: GUARD_READ_TOKEN and --read-token-file; keep one")
    token = from_env or (read_secret_file(token_file, "read token") if token_file else None)
    if token is None:
        return None
    if public:
        raise SettingsError("--public-read lets anyone read, so the read token would guard nothing: keep one of "
                            "them")
    if len(token) < MIN_TOKEN_CHARS:
        raise SettingsError(f"the read token has {len(token)} characters; give one of {MIN_TOKEN_CHARS} or more "
                            "(for example: python3 -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return SecretStr(token)


def cannot_yet(settings: ServiceSettings) -> list[dict[str, str]]:
    """What the settings leave the service unable to do, each with the setting that enables it."""
    found = []
    if settings.webhook_secret is None:
        found.append({"what": "verify-deliveries", "why": "no-webhook-secret",
                      "fix": "set GUARD_WEBHOOK_SECRET or --webhook-secret-file"})
    if settings.app is None:
        found.append({"what": "post-comments", "why": "no-app-credentials",
                      "fix": "give --app-id-file and --app-key-file"})
        found.append({"what": "check-write-access", "why": "no-app-credentials",
                      "fix": "give --app-id-file and --app-key-file"})
    if not settings.ingest_tokens:
        found.append({"what": "ingest-reports", "why": "no-ingest-tokens", "fix": "give --ingest-tokens-file"})
    if settings.read_token is None and not settings.public_read:
        found.append({"what": "show-dashboard", "why": "no-read-token",
                      "fix": "set GUARD_READ_TOKEN or --read-token-file (or --public-read)"})
    return found


def app_credentials(id_file: Path | None, key_file: Path | None) -> AppCredentials | None:
    if id_file is None and key_file is None:
        return None
    if id_file is None or key_file is None:
        raise SettingsError("the GitHub App needs both --app-id-file and --app-key-file")
    app_id = read_secret_file(id_file, "App id")
    if not app_id.isdigit():
        raise SettingsError(f"the App id file {id_file} must hold the App's numeric id")
    key = read_secret_file(key_file, "App private key")
    if "PRIVATE KEY-----" not in key:
        raise SettingsError(f"the App key file {key_file} is not a PEM private key (the .pem GitHub gave)")
    return AppCredentials(app_id=app_id, private_key=SecretStr(key))


def ingest_tokens(path: Path | None) -> dict[str, SecretStr]:
    """One `OWNER/NAME TOKEN` per line; # starts a comment."""
    if path is None:
        return {}
    tokens: dict[str, SecretStr] = {}
    for number, line in enumerate(read_secret_file(path, "ingest tokens").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or not is_repo_name(parts[0]) or len(parts[1]) < MIN_TOKEN_CHARS:
            raise SettingsError(f"{path}:{number}: expected `OWNER/NAME TOKEN` with a token of {MIN_TOKEN_CHARS} "
                                "or more characters")
        tokens[parts[0]] = SecretStr(parts[1])
    return tokens


def gpu_devices() -> list[str]:
    """This host's GPUs by index, through NVML; none where there is no NVIDIA driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001  # no driver, no library: a CPU host
        return []
    try:
        return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()
