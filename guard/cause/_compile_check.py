"""How a block of changed lines reaches the torch.compile sites of its file, in head and in the merge base.

A block reaches a site when its added lines (in head) or removed lines (in base)
 - are the call or decorator itself ("call-site"), and the site captures in either version;
 - assign a value that flows into one of its arguments ("argument"): always for `mode`,
   `options`, `backend` and `**kwargs`, which decide whether it captures at all; for
   `fullgraph`, `dynamic` and the conditions around the call only when it captures;
 - are code inside a def the capturing site traces ("compiled-code", see _region);
 - call what a capturing site returned ("captured-call": which graph replays, and with what).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from guard.cause._compile import DECIDING_ARGUMENTS, CompileView, Site
from guard.cause._models import CaptureSetting, CompileReach
from guard.cause._patterns import find_region_apis
from guard.cause._values import Source


@dataclass
class BlockReach:
    reaches: list[CompileReach] = field(default_factory=list)
    settings: list[CaptureSetting] = field(default_factory=list)
    added_apis: list[str] = field(default_factory=list)  # graph breaks and the like, named inside compiled code
    removed_apis: list[str] = field(default_factory=list)


class CompileCheck:
    """The compile views of a file's two versions, asked about many blocks."""

    def __init__(self, head: CompileView | None, base: CompileView | None) -> None:
        self.head, self.base = head, base

    def block(self, added: dict[int, str], removed: dict[int, str]) -> BlockReach:
        """`added`/`removed`: the block's code lines (no blanks or comments) by their line number."""
        found = BlockReach()
        seen: set[tuple[object, ...]] = set()

        def add(reach: CompileReach, setting: CaptureSetting | None = None) -> None:
            site = reach.head or reach.base
            key = (reach.how, reach.argument, reach.function, site.line if site is not None else 0)
            if key not in seen:
                seen.add(key)
                found.reaches.append(reach)
            if setting is not None and setting not in found.settings:
                found.settings.append(setting)

        in_region = False
        versions = (("head", added, self.head, self.base), ("base", removed, self.base, self.head))
        for side, lines, view, other in versions:
            if view is None or not lines:
                continue
            start, end = min(lines), max(lines)
            for site in view.sites_touching(start, end):
                touched = any(site.statement[0] <= n <= site.statement[1] for n in lines)
                if touched and self._captures(site, view, other):
                    add(self._reach("call-site", side, site, view, other))
            for site, argument, source in view.sources_touching(start, end):
                if not any(source.start <= n <= source.end for n in lines) or self._kept(site, source, view, other):
                    continue
                deciding = argument in DECIDING_ARGUMENTS or argument.startswith("**")
                if deciding or self._captures(site, view, other):
                    add(self._reach("argument", side, site, view, other, argument=argument),
                        CaptureSetting(name=source.name, reader=site.caller, via=source.via, argument=argument))
            for number in lines:
                if any(s.statement[0] <= number <= s.statement[1] for s in view.sites):
                    continue
                for site, region_def in view.region_at(number):
                    in_region = True
                    add(self._reach("compiled-code", side, site, view, other, function=region_def.scope.qualname,
                                    chain=list(region_def.chain)))
            for site, line in view.captured_calls(start, end):
                if not any(n == line for n in lines):
                    continue
                holder = view.index.chain(line)
                add(self._reach("captured-call", side, site, view, other,
                                function=holder[-1].qualname if holder else None))
        if in_region:
            found.added_apis = [a.name for a in find_region_apis("\n".join(added.values()))]
            found.removed_apis = [a.name for a in find_region_apis("\n".join(removed.values()))]
        return found

    def _kept(self, site: Site, source: Source, view: CompileView, other: CompileView | None) -> bool:
        """Whether the other version has the same value as written: the change is elsewhere on its lines."""
        paired = _pair(site, view, other)
        return paired is not None and any(s.name == source.name and s.text == source.text
                                          for _, s in paired.sources())

    def _captures(self, site: Site, view: CompileView, other: CompileView | None) -> bool:
        paired = _pair(site, view, other)
        return site.captures or (paired is not None and paired.captures)

    def _reach(self, how: str, side: str, site: Site, view: CompileView, other: CompileView | None,
               **extra: object) -> CompileReach:
        paired = _pair(site, view, other)
        head, base = (site, paired) if side == "head" else (paired, site)
        return CompileReach(
            how=how,  # type: ignore[arg-type]
            head=head.model() if head is not None else None,
            base=base.model() if base is not None else None,
            **extra,  # type: ignore[arg-type]
        )


def _pair(site: Site, view: CompileView, other: CompileView | None) -> Site | None:
    """The same site in the other version: same form, caller and target; the n-th of several."""
    if other is None:
        return None
    key = site.key()
    ordinal = [s for s in view.sites if s.key() == key].index(site)
    candidates = [s for s in other.sites if s.key() == key]
    return candidates[min(ordinal, len(candidates) - 1)] if candidates else None
