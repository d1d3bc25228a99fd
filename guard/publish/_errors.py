"""Errors of the publish stage."""

from __future__ import annotations

from guard._errors import GuardError


class PublishError(GuardError):
    """Talking to GitHub failed in a way retrying here will not fix."""


class MaybeApplied(PublishError):
    """A write got no clear answer: it may or may not have happened. Check before writing again."""
