"""The environment the guard hands to pull-request code (its build and its workload): the
runner's, without anything that looks like a credential. A token in the job's
environment must not reach code from an untrusted pull request."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

# Names that carry credentials on CI runners: tokens, secrets, passwords, keys; and the
# Actions runtime's own endpoints, which come with a token of their own.
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_KEY|PRIVATE_KEY|AUTH|COOKIE", re.IGNORECASE)
_SECRET_PREFIXES = ("ACTIONS_RUNTIME_", "ACTIONS_ID_TOKEN_", "ACTIONS_CACHE_", "ACTIONS_RESULTS_", "INPUT_")


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) or name.upper().startswith(_SECRET_PREFIXES)


def untrusted_env(pass_env: Iterable[str] = (), base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default os.environ) without secret-looking names, except those in `pass_env`,
    which a config names on purpose (a model-download token on a private runner, say)."""
    keep = set(pass_env)
    source = os.environ if base is None else base
    return {name: value for name, value in source.items() if name in keep or not is_secret_name(name)}
