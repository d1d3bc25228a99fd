"""Sends `guard serve` a signed pull_request delivery, as GitHub would on a pull request's
push, for a repository on this machine: its clone URL is the repository's path.

Usage: GUARD_WEBHOOK_SECRET=... python tools/service/send_delivery.py --url URL --repo-path PATH
           --base REF --head REF [--repo OWNER/NAME] [--pr N] [--installation ID]"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
from githubkit.webhooks import sign


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the service, e.g. http://127.0.0.1:8080")
    parser.add_argument("--repo-path", type=Path, required=True)
    parser.add_argument("--base", required=True)
    parser.add_argument("--head", required=True)
    parser.add_argument("--repo", default="octo/engine")
    parser.add_argument("--pr", type=int, default=1)
    parser.add_argument("--installation", type=int, default=77)
    args = parser.parse_args()
    secret = os.environ.get("GUARD_WEBHOOK_SECRET")
    if not secret:
        parser.error("set GUARD_WEBHOOK_SECRET to the service's webhook secret")

    def sha(ref: str) -> str:
        return subprocess.run(["git", "-C", str(args.repo_path), "rev-parse", "--verify", f"{ref}^{{commit}}"],
                              capture_output=True, text=True, check=True).stdout.strip()

    payload = {
        "action": "opened", "number": args.pr, "installation": {"id": args.installation},
        "repository": {"full_name": args.repo, "private": True, "clone_url": str(args.repo_path.resolve()),
                       "default_branch": "main"},
        "pull_request": {"number": args.pr, "head": {"sha": sha(args.head)}, "base": {"sha": sha(args.base)}},
    }
    body = json.dumps(payload).encode()
    answer = httpx.post(f"{args.url.rstrip('/')}/github/webhook", content=body, timeout=30, headers={
        "content-type": "application/json", "x-github-event": "pull_request",
        "x-github-delivery": str(uuid.uuid4()), "x-hub-signature-256": sign(secret, body, "sha256"),
    })
    print(answer.status_code, answer.text)
    return 0 if answer.status_code == 202 else 2


if __name__ == "__main__":
    sys.exit(main())
