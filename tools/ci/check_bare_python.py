"""Refuse to test through an interpreter that has packages installed by hand.

Usage: BARE_PYTHON tools/ci/check_bare_python.py

The test run makes its venv with --system-site-packages (so a GPU runner's own torch stays
visible), which also reaches every package of the base interpreter. A base that already has
torch or pydantic would hide a missing set-up step, so CI checks first that the base holds
only the standard library and the distribution's own packages (Debian's dist-packages).
Exit code 0: bare; 2: not bare, with what was found and where.
"""

from __future__ import annotations

import importlib.util
import site
import sys
import sysconfig
import tomllib
from pathlib import Path

# import names of what the project installs itself (pyproject's dependencies and test extra,
# and the torch the Makefile adds); a distribution name is not always its import name
IMPORT_NAMES = {"nvidia-ml-py": "pynvml", "pyyaml": "yaml", "regression-guard": "guard"}
NOT_PACKAGES = {"__pycache__", "README.txt"}
DISTRO_DIRS = ("/usr/lib/python3/dist-packages", "/usr/lib/python3.{minor}/dist-packages")


def project_imports(pyproject: Path) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    requirements = list(project["dependencies"]) + [r for extra in project["optional-dependencies"].values()
                                                    for r in extra]
    names = [_name(r) for r in requirements] + ["torch", "regression-guard"]
    return sorted({IMPORT_NAMES.get(n, n.replace("-", "_")) for n in names})


def _name(requirement: str) -> str:
    for i, ch in enumerate(requirement):
        if not (ch.isalnum() or ch in "-_."):
            return requirement[:i].lower()
    return requirement.lower()


def distro_dirs() -> list[Path]:
    return [Path(d.format(minor=sys.version_info.minor)) for d in DISTRO_DIRS]


def within(path: Path, dirs: list[Path]) -> bool:
    return any(path == d or d in path.parents for d in dirs)


def by_hand(imports: list[str]) -> list[str]:
    """'NAME (PATH)' for each import that resolves outside the standard library and the distro's dirs."""
    allowed = distro_dirs() + [Path(sysconfig.get_path("stdlib")), Path(sysconfig.get_path("platstdlib"))]
    found = []
    for name in imports:
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        origin = Path(spec.origin or next(iter(spec.submodule_search_locations or []), ""))
        if not within(origin.resolve(), allowed):
            found.append(f"{name} ({origin})")
    return found


def hand_site_dirs() -> list[str]:
    """Site dirs outside the distro's own that hold anything (pip's /usr/local, the user site)."""
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    busy = []
    for d in dict.fromkeys(dirs):
        path = Path(d)
        if within(path, distro_dirs()) or not path.is_dir():
            continue
        # a .pth file adds paths, not packages (the sandbox's CA bundle hook is one); what it
        # could make importable, the import check above sees
        entries = sorted(p.name for p in path.iterdir() if p.name not in NOT_PACKAGES and p.suffix != ".pth")
        if entries:
            busy.append(f"{path}: {', '.join(entries[:8])}{' ...' if len(entries) > 8 else ''}")
    return busy


def main() -> int:
    if sys.prefix != sys.base_prefix:
        print(f"{sys.executable} is a venv (its base is {sys.base_prefix}); CI needs a base interpreter "
              "with nothing installed by hand: set BARE_PYTHON to one, e.g. Debian's /usr/bin/python3",
              file=sys.stderr)
        return 2
    imports = project_imports(Path(__file__).resolve().parents[2] / "pyproject.toml")
    problems = [f"importable: {f}" for f in by_hand(imports)] + [f"site dir in use: {d}" for d in hand_site_dirs()]
    if problems:
        print(f"{sys.executable} is not bare, so the tests could pass on packages a fresh machine lacks:\n  "
              + "\n  ".join(problems)
              + "\nset BARE_PYTHON to an interpreter with nothing installed by hand (Debian's /usr/bin/python3 "
              "from apt), or remove those packages", file=sys.stderr)
        return 2
    print(f"{sys.executable}: bare (checked {len(imports)} project imports and its site dirs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
