"""The commit status that carries the verdict, context `regression-guard`."""

from __future__ import annotations

from typing import Any, Literal

from guard.publish._client import GitHub, body_json
from guard.report import Gate

STATUS_CONTEXT = "regression-guard"
# A commit status has no undecided state: an undecided gate (at_threshold, inconclusive) is left
# pending, neither green nor red, with the description saying why; a branch protection that
# requires the status holds the merge until a run decides it.
_STATE: dict[Gate, Literal["success", "pending", "failure", "error"]] = {
    "success": "success",
    "undecided": "pending",
    "failure": "failure",
    "error": "error",
}
MAX_DESCRIPTION_CHARS = 140  # GitHub's limit


def status_state(gated: Gate) -> Literal["success", "pending", "failure", "error"]:
    return _STATE[gated]


def set_status(
    gh: GitHub, repo: str, sha: str, gated: Gate, description: str, target_url: str | None, key: str = "default"
) -> dict[str, Any]:
    context = STATUS_CONTEXT if key == "default" else f"{STATUS_CONTEXT} ({key})"
    payload: dict[str, Any] = {
        "state": status_state(gated),
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
