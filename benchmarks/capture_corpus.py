"""Precision and recall of capture-change detection on real commits of public inference engines.

Usage: python benchmarks/capture_corpus.py [--markdown] [--guard-root DIR]
       python benchmarks/capture_corpus.py add --mirror GIT_DIR --repo OWNER/NAME --sha SHA
                                               --label capture|other --reason TEXT [--only PATH ...]

The corpus (tests/fixtures/capture_corpus/) holds one diff per commit and an index.json with
each commit's repository, full sha, subject, label and the reason for the label. A diff keeps
whole files as context where they are small and whole enclosing defs where they are not, so
the files can be rebuilt without the repository: each commit's base and head versions are
written, lines the diff does not show left blank, into a fresh git repository, and
`find_capture_changes` runs on that pair as it would on a pull request. A commit is
predicted positive when detection names at least one changed place.

`--guard-root` imports `guard` from another checkout (e.g. an older version exported with
`git archive REV guard | tar -x -C DIR`), to measure that detector on the same corpus.
`add` writes one commit's diff from a local bare mirror and appends it to the index.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "capture_corpus"
INDEX = CORPUS / "index.json"

Label = Literal["capture", "other"]

# Python files up to this many lines keep the whole file as context; larger ones their enclosing defs.
FULL_FILE_LINES = 2500
# A file section larger than this after the def-level context falls back to a few lines around each change.
MAX_SECTION_BYTES = 60_000
FALLBACK_CONTEXT_LINES = 25
# Paths never kept: generated files whose size says nothing about capture.
SKIPPED = re.compile(r"(\.lock|\.json|\.snap|\.svg|\.png|\.jpg|\.ipynb)$|(^|/)(uv|poetry|Cargo)\.lock$")

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "corpus", "GIT_AUTHOR_EMAIL": "corpus@example.invalid",
    "GIT_COMMITTER_NAME": "corpus", "GIT_COMMITTER_EMAIL": "corpus@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
}
# git's own function-name rules per language, so a large file keeps the def around each change
_DRIVERS = (("py", "python"), ("pyi", "python"), ("rs", "rust"), ("cpp", "cpp"), ("cu", "cpp"), ("h", "cpp"))
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class CorpusCommit:
    repo: str
    sha: str
    subject: str
    label: Label
    reason: str
    diff: str  # file name under the corpus folder: the gzipped diff
    files: list[dict[str, str]] = field(default_factory=list)  # path and the context it was written with
    omitted: list[str] = field(default_factory=list)  # paths of the commit left out of the diff

    @property
    def name(self) -> str:
        return f"{self.repo.split('/')[-1]}-{self.sha[:12]}"


@dataclass
class CorpusResult:
    true_positives: list[CorpusCommit] = field(default_factory=list)
    false_positives: list[tuple[CorpusCommit, list[str]]] = field(default_factory=list)
    true_negatives: list[CorpusCommit] = field(default_factory=list)
    false_negatives: list[CorpusCommit] = field(default_factory=list)

    @property
    def precision(self) -> float:
        found = len(self.true_positives) + len(self.false_positives)
        return len(self.true_positives) / found if found else 0.0

    @property
    def recall(self) -> float:
        positives = len(self.true_positives) + len(self.false_negatives)
        return len(self.true_positives) / positives if positives else 0.0

    def misclassified(self) -> list[str]:
        lines = [f"missed  {c.name}: {c.subject} -- {c.reason}" for c in self.false_negatives]
        lines += [f"flagged {c.name}: {c.subject} -- {c.reason} (found in {', '.join(places)})"
                  for c, places in self.false_positives]
        return lines


def load_corpus(index: Path = INDEX) -> list[CorpusCommit]:
    data = json.loads(index.read_text())
    return [CorpusCommit(**entry) for entry in data["commits"]]


# --- rebuilding the two versions ----------------------------------------------------------


@dataclass
class _Side:
    path: str | None
    lines: dict[int, str] = field(default_factory=dict)

    def text(self) -> str:
        last = max(self.lines, default=0)
        return "".join(self.lines.get(n, "\n") for n in range(1, last + 1))


def _sides(diff_text: str) -> list[tuple[_Side, _Side]]:
    """(base, head) of every file in a diff with context: the lines it shows, at their numbers."""
    files: list[tuple[_Side, _Side]] = []
    base = head = None
    old_no = new_no = 0
    for raw in diff_text.splitlines(keepends=True):
        line = raw.rstrip("\n")
        if line.startswith("diff --git "):
            a, b = line[len("diff --git "):].split(" b/", 1)
            base, head = _Side(a.removeprefix("a/")), _Side(b)
            files.append((base, head))
            continue
        if base is None or head is None:
            continue
        if line.startswith("new file mode"):
            base.path = None
        elif line.startswith("deleted file mode"):
            head.path = None
        elif line.startswith("rename from "):
            base.path = line[len("rename from "):]
        elif line.startswith("rename to "):
            head.path = line[len("rename to "):]
        elif (match := _HUNK.match(line)) is not None:
            old_no, new_no = int(match[1]), int(match[3])
        elif line.startswith(("--- ", "+++ ", "index ", "similarity ", "old mode", "new mode", "\\")):
            continue
        elif raw[:1] == "-":
            base.lines[old_no] = raw[1:] if raw.endswith("\n") else raw[1:] + "\n"
            old_no += 1
        elif raw[:1] == "+":
            head.lines[new_no] = raw[1:] if raw.endswith("\n") else raw[1:] + "\n"
            new_no += 1
        elif raw[:1] == " " or raw == "\n":
            text = raw[1:] if raw[:1] == " " else "\n"
            text = text if text.endswith("\n") else text + "\n"
            base.lines[old_no], head.lines[new_no] = text, text
            old_no, new_no = old_no + 1, new_no + 1
    return files


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, env=os.environ | _GIT_ENV, capture_output=True, text=True,
                          check=True)
    return proc.stdout.strip()


def _write(repo: Path, side: Literal["base", "head"], files: list[tuple[_Side, _Side]]) -> str:
    for old, new in files:
        for version in (old, new):
            if version.path is not None:
                (repo / version.path).unlink(missing_ok=True)
    for old, new in files:
        version = old if side == "base" else new
        if version.path is None:
            continue
        target = repo / version.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(version.text())
    _git(repo, "add", "-A")
    _git(repo, "commit", "--quiet", "--allow-empty", "-m", side)
    return _git(repo, "rev-parse", "HEAD")


def rebuild(commit: CorpusCommit, workdir: Path, corpus: Path = CORPUS) -> tuple[Path, str, str]:
    """A git repository holding the commit's base and head as far as its diff shows them: (repo, base, head)."""
    files = _sides(gzip.decompress((corpus / commit.diff).read_bytes()).decode())
    repo = workdir / commit.name
    repo.mkdir(parents=True)
    _git(repo, "init", "--quiet", "--initial-branch=main")
    base = _write(repo, "base", files)
    head = _write(repo, "head", files)
    return repo, base, head


def measure(detector: Callable[..., Any], commits: list[CorpusCommit] | None = None,
            corpus: Path = CORPUS) -> CorpusResult:
    """Runs `detector(repo, base, head, [])` on every commit of the corpus and sorts the outcomes."""
    result = CorpusResult()
    with tempfile.TemporaryDirectory(prefix="capture-corpus-") as tmp:
        for commit in commits if commits is not None else load_corpus(corpus / "index.json"):
            repo, base, head = rebuild(commit, Path(tmp), corpus)
            found = detector(repo, base, head, []).files
            places = [f"{f.path}:{','.join(str(h.range.start) for h in f.hunks)}" for f in found]
            if commit.label == "capture":
                (result.true_positives if found else result.false_negatives).append(commit)
            elif found:
                result.false_positives.append((commit, places))
            else:
                result.true_negatives.append(commit)
    return result


# --- reporting ----------------------------------------------------------------------------


def report(result: CorpusResult, markdown: bool) -> str:
    tp, fp = len(result.true_positives), len(result.false_positives)
    tn, fn = len(result.true_negatives), len(result.false_negatives)
    total = tp + fp + tn + fn
    if not markdown:
        lines = [
            f"commits {total}: {tp + fn} capture, {tn + fp} other",
            f"precision {result.precision:.3f} ({tp}/{tp + fp})  recall {result.recall:.3f} ({tp}/{tp + fn})",
            f"true positives {tp}  false positives {fp}  true negatives {tn}  false negatives {fn}",
        ]
        return "\n".join(lines + result.misclassified())
    lines = [
        "| commits | capture | other | precision | recall | TP | FP | TN | FN |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {total} | {tp + fn} | {tn + fp} | {result.precision:.3f} ({tp}/{tp + fp}) "
        f"| {result.recall:.3f} ({tp}/{tp + fn}) | {tp} | {fp} | {tn} | {fn} |",
        "",
    ]
    if result.false_negatives:
        lines += ["Missed (labelled capture, nothing found):", ""]
        lines += [f"- `{c.name}` {c.subject}: {c.reason}" for c in result.false_negatives]
        lines.append("")
    if result.false_positives:
        lines += ["Flagged (labelled other, something found):", ""]
        lines += [f"- `{c.name}` {c.subject}: {c.reason}; found at {', '.join(f'`{p}`' for p in places)}"
                  for c, places in result.false_positives]
        lines.append("")
    return "\n".join(lines)


# --- adding a commit ----------------------------------------------------------------------


def _mirror_git(mirror: Path, *args: str) -> str:
    proc = subprocess.run(["git", f"--git-dir={mirror}", *args], capture_output=True, text=True, check=True)
    return proc.stdout


_DIFF = ("-c", "core.quotePath=false", "diff", "--no-color", "--no-ext-diff", "--no-textconv", "--find-renames",
         "--src-prefix=a/", "--dst-prefix=b/")


def file_diff(mirror: Path, sha: str, path: str, old_path: str | None) -> tuple[str, str]:
    """The diff of one file of commit `sha`, with as much context as fits: (diff, context used)."""
    sizes = [len(_mirror_git(mirror, "show", f"{rev}:{p}").splitlines())
             for rev, p in ((f"{sha}^", old_path), (sha, path)) if p is not None and _exists(mirror, rev, p)]
    paths = ["--", *([old_path] if old_path and old_path != path else []), path]
    if path.endswith((".py", ".pyi")) and max(sizes, default=0) <= FULL_FILE_LINES:
        return _mirror_git(mirror, *_DIFF, "--unified=100000", f"{sha}^", sha, *paths), "full file"
    with tempfile.NamedTemporaryFile("w", suffix=".attributes", delete=False) as attrs:
        attrs.write("".join(f"*.{ext} diff={driver}\n" for ext, driver in _DRIVERS))
    try:
        text = _mirror_git(mirror, "-c", f"core.attributesFile={attrs.name}", *_DIFF, "--function-context",
                           f"{sha}^", sha, *paths)
    finally:
        os.unlink(attrs.name)
    if len(text.encode()) <= MAX_SECTION_BYTES:
        return text, "enclosing defs"
    return _mirror_git(mirror, *_DIFF, f"--unified={FALLBACK_CONTEXT_LINES}", f"{sha}^", sha, *paths), (
        f"{FALLBACK_CONTEXT_LINES} lines")


def _exists(mirror: Path, rev: str, path: str) -> bool:
    proc = subprocess.run(["git", f"--git-dir={mirror}", "cat-file", "-e", f"{rev}:{path}"], capture_output=True)
    return proc.returncode == 0


def add(mirror: Path, repo: str, sha: str, label: Label, reason: str, only: list[str] | None) -> CorpusCommit:
    sha = _mirror_git(mirror, "rev-parse", f"{sha}^{{commit}}").strip()
    subject = _mirror_git(mirror, "log", "-1", "--format=%s", sha).strip()
    status = _mirror_git(mirror, "diff", "--name-status", "--find-renames", "-z", f"{sha}^", sha).split("\0")
    changed: list[tuple[str, str | None]] = []
    i = 0
    while i < len(status) - 1:
        kind = status[i]
        if kind.startswith(("R", "C")):
            changed.append((status[i + 2], status[i + 1]))
            i += 3
        else:
            changed.append((status[i + 1], status[i + 1] if not kind.startswith("A") else None))
            i += 2
    parts, files, omitted = [], [], []
    for path, old_path in changed:
        if SKIPPED.search(path) or (only and path not in only):
            omitted.append(path)
            continue
        text, context = file_diff(mirror, sha, path, old_path)
        parts.append(text)
        files.append({"path": path, "context": context})
    commit = CorpusCommit(repo=repo, sha=sha, subject=subject, label=label, reason=reason, diff="", files=files,
                          omitted=omitted)
    commit = CorpusCommit(**{**commit.__dict__, "diff": f"{commit.name}.diff.gz"})
    CORPUS.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same diff always makes the same bytes
    (CORPUS / commit.diff).write_bytes(gzip.compress("".join(parts).encode(), mtime=0))
    data = json.loads(INDEX.read_text()) if INDEX.exists() else {"commits": []}
    data["commits"] = [c for c in data["commits"] if c["sha"] != sha] + [commit.__dict__]
    INDEX.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return commit


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print a markdown table and lists")
    parser.add_argument("--guard-root", type=Path, help="import guard from this directory instead of this checkout")
    sub = parser.add_subparsers(dest="command")
    adding = sub.add_parser("add", help="add one commit from a local bare mirror")
    adding.add_argument("--mirror", type=Path, required=True)
    adding.add_argument("--repo", required=True)
    adding.add_argument("--sha", required=True)
    adding.add_argument("--label", choices=["capture", "other"], required=True)
    adding.add_argument("--reason", required=True)
    adding.add_argument("--only", nargs="*", help="keep only these paths of the commit")
    args = parser.parse_args()
    if args.command == "add":
        commit = add(args.mirror, args.repo, args.sha, args.label, args.reason, args.only)
        print(f"{commit.diff}: {len(commit.files)} files, {len(commit.omitted)} left out")
        return 0
    sys.path.insert(0, str(args.guard_root.resolve() if args.guard_root else ROOT))
    from guard.cause import find_capture_changes

    print(report(measure(find_capture_changes), args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
