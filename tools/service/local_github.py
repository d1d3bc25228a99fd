"""A local GitHub for trying `guard serve` without one: the test suite's GitHub stand-in
(tests/github_standin.py) on loopback, as the host of a GitHub App made here, its id and
private key written where `guard serve` reads them.

Usage: python tools/service/local_github.py --app-dir DIR --repo OWNER/NAME [--port P]

Prints the API URL to give `guard serve --api-url`, then serves until interrupted. What the
App posts can be read back from it, e.g. GET API/repos/OWNER/NAME/issues/1/comments with
`Authorization: Bearer reader`."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.service_app import APP_ID, INSTALLATION, app_host  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--app-dir", type=Path, required=True, help="where the App's id and key files go")
    parser.add_argument("--repo", default="octo/engine", help="the repository the App is installed on")
    args = parser.parse_args()
    host = app_host(args.app_dir)
    host.api.state.app.installations = {args.repo: INSTALLATION}
    host.api.state.users["reader"] = "reader"  # a token to read back what the App posted
    with host.api:
        print(f"API URL {host.api.url}; App {APP_ID}, installation {INSTALLATION} on {args.repo}; "
              f"id in {host.id_file}, key in {host.key_file}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main())
