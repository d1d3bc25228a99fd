"""python -m validation injected|engines ARGS: one of the two suites (see the package's docstring)."""

from __future__ import annotations

import sys

USAGE = "usage: python -m validation {injected,engines} [--help | ARGS]"


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("injected", "engines"):
        print(f"{USAGE}\nvalidation: error: name the suite to run: injected or engines", file=sys.stderr)
        return 2
    if argv[0] == "injected":
        from validation._injected import main as suite
    else:
        from validation._engines import main as suite
    return suite(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
