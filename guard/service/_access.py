"""Who may read the service: the dashboard and the JSON API show private repositories'
subjects, shas and job logs, so a read needs the service's read token, sent as
`Authorization: Bearer TOKEN` or as the password of HTTP Basic (what a browser prompts for;
any user name). Anyone may read only where the operator said so (`--public-read`). The
webhook and the ingest keep their own checks (the delivery's signature, the repository's
ingest token); /healthz shows no repository's data and stays open for load balancers."""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Awaitable, Callable
from functools import wraps

from starlette.requests import Request
from starlette.responses import Response

from guard.service._settings import ServiceSettings
from guard.service._webhook import refuse

Handler = Callable[[Request], Awaitable[Response]]
REALM = "regression-guard"


def _given(request: Request) -> str | None:
    """The token a request sends: a Bearer token, or a Basic password."""
    scheme, _, value = request.headers.get("authorization", "").strip().partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer":
        return value or None
    if scheme.lower() == "basic":
        try:
            pair = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return pair.partition(":")[2] or None
    return None


def may_read(settings: ServiceSettings, request: Request) -> bool:
    if settings.public_read:
        return True
    if settings.read_token is None:
        return False
    given = _given(request)
    return given is not None and hmac.compare_digest(given.encode(), settings.read_token.get_secret_value().encode())


def readers_only(handler: Handler) -> Handler:
    """`handler` for those who may read; anyone else gets a 401 that a browser answers with a prompt."""

    @wraps(handler)
    async def guarded(request: Request) -> Response:
        settings: ServiceSettings = request.app.state.guard.settings
        if may_read(settings, request):
            return await handler(request)
        if settings.read_token is None:
            message = ("this service has no read token, so nothing here can be read: its operator sets "
                       "GUARD_READ_TOKEN or --read-token-file (or --public-read to let anyone read)")
        else:
            message = ("reading this service needs its read token: send `Authorization: Bearer TOKEN`, or give "
                       "the token as the password when the browser asks")
        answer = refuse(401, "no-read-access", message)
        answer.headers["WWW-Authenticate"] = f'Basic realm="{REALM}", charset="UTF-8"'
        return answer

    return guarded
