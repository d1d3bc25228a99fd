"""The environment of pull-request code (its build and its workload) and of the guard itself:
an allowlist of what a build and a workload need, never the runner's step files or tokens.

A variable reaches pull-request code when its name is on the allowlist, does not look like
a credential, and its value carries no URL credentials (`https://user:pass@host`); or when
`build.pass_env` names it, which passes it as it is. The guard's own environment is the
same plus the two names it reads for links."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from guard._errors import ConfigError

# What a build and a workload need: where programs and home are, locale and time zone,
# temp and terminal, the dynamic loader's path (CUDA libraries), compilers and their flags
# (C++/CUDA extensions), certificate bundles (TLS through a company proxy) and the
# Hugging Face cache and offline switches (model weights already on the runner).
_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
    "LD_LIBRARY_PATH",
    "CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "MAX_JOBS",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE",
    "TRANSFORMERS_CACHE", "HF_HUB_DISABLE_TELEMETRY", "XDG_CACHE_HOME",
})
# Families of settings: locale, CUDA and the GPU driver, torch and its compilers, NCCL,
# OpenMP and MKL threads, the interpreter (PYTHONPATH, PYTHONDONTWRITEBYTECODE...) and pip
# (an index or a wheel folder; one with a password in its URL is dropped like any other).
_PREFIXES = (
    "LC_", "CUDA_", "CUDNN_", "CUBLAS_", "NVIDIA_", "TORCH_", "TORCHINDUCTOR_", "PYTORCH_", "NCCL_", "TRITON_",
    "OMP_", "MKL_", "KMP_", "PYTHON", "PIP_",
)
# Where torch.compile, Triton, torch's JIT extensions, the CUDA driver and the interpreter
# (its bytecode) keep what they compiled, and the folder of each in an arm's compile cache
# (guard.measure's compile_cache). Never passed from the runner's environment (only when
# build.pass_env names one): a folder there is shared by base, head and every later pull
# request, whose code writes it, and a .pyc planted there runs in the next one's processes.
COMPILE_CACHES = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton",
                  "TORCH_EXTENSIONS_DIR": "torch_extensions", "CUDA_CACHE_PATH": "cuda",
                  "PYTHONPYCACHEPREFIX": "bytecode"}
# Within those families, a name of a credential all the same (NVIDIA_API_KEY, PIP_CLIENT_CERT).
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|PASS$|PASSPHRASE|CREDENTIAL|API_?KEY|_KEY$|^KEY|ACCESS_KEY|PRIVATE|AUTH|COOKIE|SESSION"
    r"|DSN|WEBHOOK|CLIENT_CERT|SIGNING|CERT_KEY",
    re.IGNORECASE,
)
# `scheme://user:password@host` or `scheme://token@host`: credentials inside a URL.
_URL_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s]*@")

# Never passed, not even when build.pass_env names them: the runner's step files (a
# write to GITHUB_ENV or GITHUB_PATH runs in every later step of the job, the one with
# the token among them), the Actions runtime's tokens and the job's tokens.
STEP_FILES = ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_STEP_SUMMARY")
_NEVER = frozenset({*STEP_FILES, "GITHUB_TOKEN", "GH_TOKEN"})
_NEVER_PREFIXES = ("ACTIONS_",)

# What `guard run` itself reads from its environment, besides the allowlist: the links of
# the comment (--github-repo's default and the server), and where the Docker engine of
# build.method "docker" is. None is a secret; the engine's are never passed on to the arms.
_GUARD_NAMES = frozenset({"GITHUB_REPOSITORY", "GITHUB_SERVER_URL", "DOCKER_HOST", "DOCKER_TLS_VERIFY",
                          "DOCKER_CERT_PATH"})


def is_allowed(name: str, value: str) -> bool:
    """Whether `name=value` may reach pull-request code without being named in pass_env."""
    listed = (name in _NAMES or name.startswith(_PREFIXES)) and name not in COMPILE_CACHES
    return listed and not _SECRET_NAME.search(name) and not _URL_CREDENTIALS.search(value)


def never_passed(name: str) -> bool:
    return name in _NEVER or name.startswith(_NEVER_PREFIXES) or (
        name.startswith("RUNNER_") and bool(_SECRET_NAME.search(name))
    )


def check_pass_env(pass_env: Iterable[str]) -> None:
    refused = sorted({name for name in pass_env if never_passed(name)})
    if refused:
        raise ConfigError(
            f"build.pass_env names {', '.join(refused)}, which the guard never passes to pull-request code "
            "(the runner's step files and the job's tokens); remove them from build.pass_env"
        )


def pr_environment(pass_env: Iterable[str] = (), source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of pull-request code: the allowlisted part of `source` (default
    os.environ) and the variables `pass_env` names."""
    names = list(pass_env)
    check_pass_env(names)
    source = os.environ if source is None else source
    keep = set(names)
    return {name: value for name, value in source.items() if name in keep or is_allowed(name, value)}


def guard_environment(
    pass_env: Iterable[str] = (), source: Mapping[str, str] | None = None, extra: Iterable[str] = ()
) -> dict[str, str]:
    """The environment `guard run` runs with: pull-request code's, and the names the guard
    reads for its links (and `extra`, its own marker)."""
    source = os.environ if source is None else source
    own = _GUARD_NAMES | set(extra)
    return pr_environment(pass_env, source) | {name: source[name] for name in own if name in source}
