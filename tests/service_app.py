"""A GitHub App for the service's tests: a fresh RSA key, its id and key in files as
`guard serve` reads them, the stand-in serving as its GitHub, and a repository on disk
with a base and a head commit for its jobs to fetch."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import commit_all, git
from tests.github_standin import GitHubStandIn, StandInApp

APP_ID = "4242"
INSTALLATION = 77
REPO = "octo/engine"
JOB_COMMAND = f"{sys.executable} {Path(__file__).resolve().parent / 'service_job.py'}"


@dataclass
class AppHost:
    api: GitHubStandIn
    id_file: Path
    key_file: Path

    def args(self) -> list[str]:
        return ["--app-id-file", str(self.id_file), "--app-key-file", str(self.key_file), "--api-url", self.api.url]


def app_host(folder: Path) -> AppHost:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    folder.mkdir(parents=True, exist_ok=True)
    id_file, key_file = folder / "app-id", folder / "app.pem"
    id_file.write_text(APP_ID + "\n")
    key_file.write_text(private)
    os.chmod(key_file, 0o600)
    api = GitHubStandIn({}, app=StandInApp(app_id=APP_ID, public_key_pem=public, installations={REPO: INSTALLATION}))
    return AppHost(api=api, id_file=id_file, key_file=key_file)


def origin(folder: Path) -> tuple[Path, str, str]:
    """A repository with two commits: (path, base sha, head sha)."""
    folder.mkdir(parents=True)
    git(folder, "init", "--quiet", "-b", "main")
    (folder / "engine.py").write_text("STEP_MS = 1\n")
    base = commit_all(folder, "base")
    (folder / "engine.py").write_text("STEP_MS = 2\n")
    head = commit_all(folder, "head")
    return folder, base, head
