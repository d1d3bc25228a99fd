"""One factual sentence for the comment's Cause section: where capture changed and how, in
words, from the cause stage's facts.

It reports what the diff does (APIs added or removed, settings changed) and never says
that the change caused the slowdown: that is for the measurements to show.
"""

from __future__ import annotations

from guard._markdown import code, text
from guard.cause import (
    DEFAULT_SERVER, CaptureChange, CaptureChanges, CaptureHunk, CaptureSetting, CompileReach, CompileSite, GraphSplit,
    format_place, reads_as_call,
)

MAX_FILES = 3
MAX_PLACES = 3


def capture_summary(
    changes: CaptureChanges,
    *,
    github_repo: str | None = None,
    sha: str | None = None,
    server_url: str = DEFAULT_SERVER,
    captured_same: bool = False,
) -> str | None:
    """E.g. "`engine/graph.py:118-128` (`_upload_graph`) changes CUDA graph capture: it adds a
    `cuGraphUpload` call." None when nothing touches capture. `captured_same`: the profiled
    steps replayed the same kernels and graph launches on both sides (the explanation's
    `capture_unchanged`), so a setting the diff changes is not called a capture setting."""
    if not changes.files:
        return None
    link = {"github_repo": github_repo, "sha": sha or changes.head_sha, "server_url": server_url}
    if github_repo is None:
        link["sha"] = None
    shown = changes.files[:MAX_FILES]
    if len(changes.files) == 1:
        change = shown[0]
        if captured_same and _settings(change) and not _api_hunks(change):
            verb = _verb("changes", _place_count(change) > 1)
            return (f"{_places(change, link)} {verb} {_settings_phrase(_settings(change), _reaches(change))}, read "
                    "at graph capture, but the graphs replayed the same kernels on both sides.")
        return f"{_places(change, link)} {_predicate(change, plural=_place_count(change) > 1)}."
    parts = [f"{_places(c, link)} {_what(c, plural=_place_count(c) > 1)}" for c in shown]
    rest = len(changes.files) - len(shown)
    if rest:
        parts.append(f"{rest} more file{'s' if rest > 1 else ''} also touch{'' if rest > 1 else 'es'} it")
    return f"CUDA graph capture changes in {len(changes.files)} files: " + "; ".join(parts) + "."


def _predicate(change: CaptureChange, plural: bool) -> str:
    """ "changes CUDA graph capture: it adds ..." for one file alone."""
    verb = _verb("changes", plural)
    if _api_hunks(change) or not (_settings(change) or change.glob):
        return f"{verb} CUDA graph capture: {'they' if plural else 'it'} {_what(change, plural)}"
    if _settings(change):
        return f"{verb} settings that CUDA graph capture reads: {_settings_phrase(_settings(change), _reaches(change))}"
    return f"{verb} a file listed in the capture globs ({code(change.glob)})"


def _what(change: CaptureChange, plural: bool) -> str:
    """What the file's changes do to capture, as a verb phrase: "adds a `cuGraphUpload` call"."""
    hunks = change.hunks
    added = _unique(a for h in hunks for a in h.added_apis)
    removed = _unique(a for h in hunks for a in h.removed_apis)
    # an API on both sides is a changed line (new arguments, say), not one added and one removed
    changed = [a for a in added if a in removed]
    clauses: list[str] = []
    for verb, names in (
        ("adds", [a for a in added if a not in changed]),
        ("changes", changed),
        ("removes", [a for a in removed if a not in changed]),
    ):
        if names:
            clauses.append(f"{_verb(verb, plural)} {_apis_phrase(names)}")
    if not clauses:
        scoped = [h for h in hunks if h.scope_apis]
        if scoped:
            clauses.append(_scope_phrase(scoped, plural))
    named_compile = any("torch.compile" in a for a in (*added, *removed))
    clauses += _compile_phrases([r for h in hunks for r in h.compile], plural, named_compile)
    clauses += _split_phrases([s for h in hunks for s in h.splits], plural)
    if _settings(change):
        clauses.append(f"{_verb('changes', plural)} {_settings_phrase(_settings(change), _reaches(change))}")
    if not clauses:
        what = "a binary file" if change.binary else "a file"
        clauses.append(f"{_verb('changes', plural)} {what} listed in the capture globs ({code(change.glob)})")
    return _join(clauses)


def _places(change: CaptureChange, link: dict[str, str | None]) -> str:
    if not change.hunks:
        return format_place(change, None, **link)  # type: ignore[arg-type]
    places = []
    named: str | None = None
    for number, hunk in enumerate(change.hunks[:MAX_PLACES]):
        # a function is named once for a run of places inside it
        function = hunk.function if hunk.function != named else None
        named = hunk.function
        places.append(format_place(change, hunk.range, short=number > 0, function=function, **link))  # type: ignore[arg-type]
    more = len(change.hunks) - MAX_PLACES
    if more > 0:
        places.append(f"{more} more place{'s' if more > 1 else ''}")
    return _join(places)


def _place_count(change: CaptureChange) -> int:
    return max(len(change.hunks), 1)


def _api_hunks(change: CaptureChange) -> list[CaptureHunk]:
    return [h for h in change.hunks if "api" in h.matched_by]


def _settings(change: CaptureChange) -> list[CaptureSetting]:
    return [s for h in change.hunks for s in h.settings]


def _reaches(change: CaptureChange) -> list[CompileReach]:
    """The compile arguments the file's changed values reach."""
    return [r for h in change.hunks for r in h.compile if r.how == "argument"]


def _apis_phrase(names: list[str]) -> str:
    quoted = [code(n) for n in names]
    if all(reads_as_call(n) for n in names):
        return f"a {quoted[0]} call" if len(names) == 1 else f"calls to {_join(quoted)}"
    return _join(quoted)


def _scope_phrase(hunks: list[CaptureHunk], plural: bool) -> str:
    apis = _join([code(a) for a in _unique(a for h in hunks for a in h.scope_apis)])
    functions = _unique(h.function for h in hunks if h.function)
    edits = _verb("edits", plural)
    if not functions:
        return f"{edits} code that uses {apis}"
    return f"{edits} {_join([code(f) for f in functions])}, which use{'s' if len(functions) == 1 else ''} {apis}"


def _settings_phrase(settings: list[CaptureSetting], reaches: list[CompileReach] | None = None) -> str:
    by_name: dict[str, list[CaptureSetting]] = {}
    for setting in settings:
        by_name.setdefault(setting.name, []).append(setting)
    parts = []
    for name, uses in by_name.items():
        use = uses[0]  # the first reader is enough to say why it counts
        via = f" through {code(use.via)}" if use.via else ""
        label = f"the default of {code(name[:-1])}" if name.endswith("=") else code(name)  # a parameter's default
        if use.argument is not None:
            what = "a condition around" if use.argument == "condition" else f"the {code(use.argument)} of"
            reach = next((r for r in reaches or [] if r.argument == use.argument), None)
            change = _mode_change(reach) if reach is not None and use.argument == "mode" else ""
            parts.append(f"{label} ({what} the `torch.compile` in {code(use.reader)}{via}{change})")
        elif use.gates:
            parts.append(f"{label} (decides the {code(use.gates)} call in {code(use.reader)}{via})")
        else:
            parts.append(f"{label} (read by {code(use.reader)}{via})")
    return _join(parts)


def _compile_phrases(reaches: list[CompileReach], plural: bool, named: bool) -> list[str]:
    """Clauses for the compile sites the changes reach: the calls, the code they trace, calls of what they return."""
    clauses = []
    sites = [r for r in reaches if r.how == "call-site"]
    if sites and not named:
        reach = sites[0]
        verb = "adds" if reach.base is None else "removes" if reach.head is None else "changes"
        clauses.append(f"{_verb(verb, plural)} {_site_phrase(reach)}{_mode_change(reach)}")
    traced = _unique_reaches([r for r in reaches if r.how == "compiled-code"], lambda r: r.function)
    if traced:
        parts = []
        for reach in traced[:MAX_PLACES]:
            via = f" (called from {code(reach.chain[-2])})" if len(reach.chain) > 1 else ""
            parts.append(f"{code(reach.function)}{via}")
        site = traced[0].head or traced[0].base
        clauses.append(f"{_verb('edits', plural)} {_join(parts)}, traced by {_site_phrase(traced[0], site)}")
    calls = _unique_reaches([r for r in reaches if r.how == "captured-call"], lambda r: _site(r).line)
    if calls:
        clauses.append(f"{_verb('changes', plural)} a call of what {_site_phrase(calls[0])} returns")
    return clauses


def _split_phrases(splits: list[GraphSplit], plural: bool) -> list[str]:
    """Clauses for graph splits that a torch.compile of another file traces, or possibly traces."""
    clauses = []
    for split in _unique_splits(splits)[:MAX_PLACES]:
        edited = code(split.function) if split.function else "module-level code"
        site = _site_phrase(None, split.site, split.site_path)
        if split.reachable == "traced":
            caller = (code(split.chain[-2]) if len(split.chain) > 1 else
                      f"{code(split.compiled_chain[-1])}, {code(f'{split.site_path}:{split.call_line}')}"
                      if split.compiled_chain else None)
            via = f" (called from {caller})" if caller else ""
            clauses.append(f"{_verb('edits', plural)} {edited}{via}, traced by {site}")
        else:
            clauses.append(f"{_verb('edits', plural)} {edited}, possibly traced by {site}: {_possible(split)}")
    return clauses


def _possible(split: GraphSplit) -> str:
    """Why a split is only possibly traced, from its typed reason."""
    imports = f"that file imports this module (line {split.import_line})"
    if split.reason == "imported-indirectly":
        return (f"that file imports this module through {_join([code(p) for p in split.through])} "
                f"(line {split.import_line})")
    if split.reason == "module-level":
        return f"{imports}, and the call runs when it is imported"
    if split.reason == "entered-elsewhere":
        return f"{imports} and its compiled code calls into it, but no call followed from there reaches this def"
    return f"{imports}, but no call from its compiled code into it could be followed"


def _unique_splits(splits: list[GraphSplit]) -> list[GraphSplit]:
    seen: dict[tuple[str | None, str, int], GraphSplit] = {}
    for split in splits:
        seen.setdefault((split.function, split.site_path, split.site.line), split)
    return list(seen.values())


def _site_phrase(reach: CompileReach | None, site: CompileSite | None = None, path: str | None = None) -> str:
    """ "the `torch.compile` of `decode_one_token` (line 352, mode "reduce-overhead")"; `path`: the
    file holding it, when not the changed one."""
    site = site or _site(reach)  # type: ignore[arg-type]
    target = f" of {code(site.target)}" if site.target else ""
    target += f" in {code(path)}" if path else ""
    if site.env_var:
        mode = f"mode from {code(site.env_var)}" + (f', default "{text(site.mode)}"' if site.mode else "")
    else:
        mode = f'mode "{text(site.mode)}"' if site.mode else "no mode" if site.mode_known else "mode not known"
    return f"the `torch.compile`{target} (line {site.line}, {mode})"


def _mode_change(reach: CompileReach) -> str:
    before, after = reach.mode_before, reach.mode_after
    if reach.base is None or reach.head is None or before == after:
        return ""
    return f': mode "{text(before)}" -> "{text(after)}"' if before and after else ""


def _site(reach: CompileReach) -> CompileSite:
    site = reach.head or reach.base
    assert site is not None
    return site


def _unique_reaches(reaches: list[CompileReach], key: object) -> list[CompileReach]:
    seen: dict[object, CompileReach] = {}
    for reach in reaches:
        seen.setdefault(key(reach), reach)  # type: ignore[operator]
    return list(seen.values())


def _verb(third_person: str, plural: bool) -> str:
    """ "adds" for one place, "add" for several."""
    return third_person[:-1] if plural else third_person


def _unique(items: object) -> list[str]:
    return list(dict.fromkeys(items))  # type: ignore[call-overload]


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
