"""The GitHub App: its JWT and installation tokens through githubkit, each token kept in
githubkit's cache until a minute before it expires. The REST calls made with a token go
through guard.publish's client, whose retries never repeat a write that may have happened."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

from githubkit import AppAuthStrategy, GitHub
from githubkit.cache import MemCacheStrategy
from githubkit.exception import GitHubException

from guard.publish import GitHub as RestClient
from guard.publish import PublishError
from guard.service._settings import AppCredentials

TOKEN_MARGIN = timedelta(minutes=1)  # a token this close to expiry is replaced, not used
WRITE_PERMISSIONS = ("admin", "maintain", "write")


class AppError(PublishError):
    """The App could not authenticate, or is not installed where it was asked to act."""


class GitHubApp:
    def __init__(self, credentials: AppCredentials, api_url: str) -> None:
        self.api_url = api_url.rstrip("/")
        self._cache = MemCacheStrategy()
        self._jwt_client = GitHub(
            AppAuthStrategy(credentials.app_id, credentials.private_key.get_secret_value()),
            base_url=self.api_url + "/",
            cache_strategy=self._cache, http_cache=False, auto_retry=True, timeout=30.0,
        )
        self.app_id = credentials.app_id
        self._login: str | None = None
        self._lock = threading.Lock()  # one mint per installation at a time, from any worker

    def login(self) -> str:
        """The App's bot login, as its comments carry it: SLUG[bot]."""
        if self._login is None:
            slug = self._call(lambda: self._jwt_client.rest.apps.get_authenticated()).get("slug")
            if not isinstance(slug, str) or not slug:
                raise AppError("GET /app answered without the App's slug; check --api-url")
            self._login = f"{slug}[bot]"
        return self._login

    def installation(self, repo: str, hint: int | None = None) -> int:
        """The installation that covers `repo`: the one the delivery named, else the API's."""
        if hint is not None:
            return hint
        owner, name = repo.split("/", 1)
        found = self._call(lambda: self._jwt_client.rest.apps.get_repo_installation(owner, name)).get("id")
        if type(found) is not int:
            raise AppError(f"the App is not installed on {repo}: install it there, with access to the repository")
        return found

    def token(self, installation_id: int) -> str:
        """An installation token, minted once and reused until TOKEN_MARGIN before it expires."""
        storage = self._cache.get_cache_storage()
        key = f"regression-guard:installation:{self.app_id}:{installation_id}"
        with self._lock:
            cached = storage.get(key)
            if cached:
                return cached
            answer = self._call(
                lambda: self._jwt_client.rest.apps.create_installation_access_token(installation_id))
            token, expires = answer.get("token"), answer.get("expires_at")
            if not isinstance(token, str) or not isinstance(expires, str):
                raise AppError(f"the token for installation {installation_id} came without token or expires_at")
            left = datetime.fromisoformat(expires.replace("Z", "+00:00")) - datetime.now(timezone.utc)
            if left > TOKEN_MARGIN:
                storage.set(key, token, left - TOKEN_MARGIN)
            return token

    def rest(self, installation_id: int) -> RestClient:
        return RestClient(self.token(installation_id), self.api_url)

    def can_write(self, rest: RestClient, repo: str, login: str) -> bool:
        """Whether `login` may push to `repo` (admin, maintain or write), as the API says now."""
        answer = rest.request("GET", f"/repos/{repo}/collaborators/{login}/permission", ok=(404,))
        if answer.status_code == 404:
            return False
        body = answer.json()
        return isinstance(body, dict) and (body.get("permission") in WRITE_PERMISSIONS
                                           or body.get("role_name") in WRITE_PERMISSIONS)

    def _call(self, call: Any) -> dict[str, Any]:
        try:
            body = call().json()
        except GitHubException as exc:
            raise AppError(f"the GitHub App's call to {self.api_url} failed: {exc}; check the App id, its key "
                           "and --api-url") from exc
        if not isinstance(body, dict):
            raise AppError(f"{self.api_url} answered the App with {type(body).__name__}, not an object")
        return body
