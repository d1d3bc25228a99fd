"""The trust label taken off a public repository's pull request when new commits come (or it
is reopened): the label said a maintainer read the code up to the commit labelled, not what
came after. The App deletes the label after the delivery was answered, and the delivery keeps
what happened as its reason; a maintainer who has read the new commits labels again to run.

Nothing here starts a measurement: only `labeled` does, so a label that could not be taken off
lets nothing run; it only still claims a review that did not happen."""

from __future__ import annotations

import logging
from urllib.parse import quote

from sqlalchemy import update
from sqlalchemy.orm import sessionmaker

from guard._errors import GuardError
from guard.service._events import StaleTrustLabel
from guard.service._github_app import GitHubApp
from guard.service._tables import Delivery

logger = logging.getLogger("guard.service")

REMOVED = "trust-label-removed"
GONE = "trust-label-gone"  # taken off already (by a maintainer, or a replay's first copy)
NOT_REMOVED = "trust-label-not-removed"  # the API refused or failed: the log says why


def remove_stale_label(sessions: sessionmaker, app: GitHubApp, delivery: str, stale: StaleTrustLabel) -> str:
    """DELETE /repos/{o}/{r}/issues/{n}/labels/{name} as the App; returns the reason stored."""
    path = f"/repos/{stale.repo}/issues/{stale.pr}/labels/{quote(stale.label, safe='')}"
    try:
        rest = app.rest(app.installation(stale.repo, stale.installation_id))
        answer = rest.request("DELETE", path, ok=(404,))
        reason = GONE if answer.status_code == 404 else REMOVED
    except GuardError as exc:
        logger.warning("delivery %s: the trust label stays on %s#%d: %s", delivery, stale.repo, stale.pr,
                       exc.message)
        reason = NOT_REMOVED
    with sessions() as session:
        session.execute(update(Delivery).where(Delivery.id == delivery).values(reason=reason))
        session.commit()
    return reason
