"""Links to the workflow run that measured and to its artifact, for the comment and the job
summary. Made from the run's own URL, which the workflow passes from GitHub's context when
it posts, and the artifact's numeric id: never from a report's strings."""

from __future__ import annotations

import re

from pydantic import BaseModel

from guard._errors import GuardError

# https://HOST/OWNER/NAME/actions/runs/ID, as github.server_url and the run's html_url give it:
# no character that could end a Markdown link or start another.
RUN_URL = re.compile(r"^https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/actions/runs/[0-9]+$")


class RunLinks(BaseModel):
    run_url: str
    artifact_url: str | None = None  # the artifact that holds report.json, the picture and the traces


def run_links(run_url: str | None, artifact_id: int | None = None) -> RunLinks | None:
    """None without a run URL; a GuardError (exit 2) for one that is not a run's URL."""
    if not run_url:
        return None
    if not RUN_URL.match(run_url):
        raise GuardError(f"--run-url {run_url[:200]!r} is not the URL of a workflow run; "
                         "give SERVER/OWNER/NAME/actions/runs/RUN_ID, as the action does")
    artifact = f"{run_url}/artifacts/{artifact_id}" if artifact_id is not None else None
    return RunLinks(run_url=run_url, artifact_url=artifact)
