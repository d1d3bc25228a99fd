"""The commit status that carries the verdict, context `regression-guard`."""

from __future__ import annotations

from typing import Any, Literal

from guard.publish._client import GitHub, body_json

STATUS_CONTEXT = "regression-guard"
_STATE: dict[str, Literal["success", "failure", "error"]] = {
    "pass": "success",
    "improvement": "success",
    # undecided is not a failure: the description and the comment say "at threshold" or
    # "inconclusive", never pass, with what it would take to decide
    "at_threshold": "success",
    "inconclusive": "success",
    "regression": "failure",
    "invalid": "error",
}
MAX_DESCRIPTION_CHARS = 140  # GitHub's limit


def status_state(verdict: str) -> Literal["success", "failure", "error"]:
    return _STATE[verdict]


def set_status(
    gh: GitHub, repo: str, sha: str, verdict: str, description: str, target_url: str | None, key: str = "default"
) -> dict[str, Any]:
    context = STATUS_CONTEXT if key == "default" else f"{STATUS_CONTEXT} ({key})"
    payload: dict[str, Any] = {
        "state": status_state(verdict),
        "context": context,
        "description": _fit(description),
    }
    if target_url:
        payload["target_url"] = target_url
    # Posting a status twice leaves one state for the context, so it is retried like a GET.
    path = f"/repos/{repo}/statuses/{sha}"
    status = body_json(gh.request("POST", path, json=payload, idempotent=True), "POST", path)
    if not isinstance(status, dict):
        return {}
    # what is shown of it; anything else GitHub says is not needed
    return {k: v for k, v in status.items() if k in ("state", "context") and isinstance(v, str)}


def _fit(text: str) -> str:
    return text if len(text) <= MAX_DESCRIPTION_CHARS else text[: MAX_DESCRIPTION_CHARS - 3] + "..."
