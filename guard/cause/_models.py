"""What capture-change detection hands on: the changed places that touch CUDA graph capture."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

MatchedBy = Literal["api", "glob", "capture-setting", "compile", "compiled-code", "imported-code"]
MATCH_ORDER: tuple[MatchedBy, ...] = ("api", "glob", "capture-setting", "compile", "compiled-code", "imported-code")
FileStatus = Literal["added", "modified", "deleted", "renamed", "copied"]
CompileForm = Literal["call", "decorator"]
# Where a compile argument's value comes from; "default": the argument is not given.
ModeSource = Literal[
    "literal", "constant", "environment", "parameter", "attribute", "config", "argument", "unknown", "default"
]
# How a changed block reaches a compile site: it edits the call or decorator, a value one of
# its arguments reads, code the compiled target traces, or a call of what the site returned.
CompileHow = Literal["call-site", "argument", "compiled-code", "captured-call"]
# How sure it is that a capturing torch.compile of another file traces a changed graph split:
# "traced": the calls from its compiled target were followed to the def holding it.
Reachability = Literal["traced", "possibly"]
# Why a split is only possibly traced: the compiled code calls into its module but the calls
# followed do not lead to its def; the compiling file imports the module but no call from its
# compiled code into it could be followed; only a module the compiling file imports imports it;
# it sits at module level (it runs on import and applies wherever what it names is called).
PossibleReason = Literal["entered-elsewhere", "imported-not-called", "imported-indirectly", "module-level"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class LineRange(_Frozen):
    """Lines start..end of the head version of a file.

    A change that only removes lines has no head lines of its own: then `deletion` is
    true and start == end == the head line the removed lines followed (0: the top of the file).
    """

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    deletion: bool = False

    def as_tuple(self) -> tuple[int, int]:
        return (self.start, self.end)


class CaptureSetting(_Frozen):
    """A module-level name the change assigns, and the capture code that reads it."""

    name: str
    reader: str = Field(description="Qualified name of the def that reads it, or 'module level'.")
    gates: str | None = Field(
        default=None,
        description="The capture call whose condition reads it, e.g. '_capture()'; None: a capture def reads it.",
    )
    via: str | None = Field(default=None, description="The self attribute it is read through, if any.")
    argument: str | None = Field(
        default=None,
        description="The torch.compile argument it reaches: 'mode', 'options', 'backend', 'fullgraph', 'dynamic', "
        "'**<name>', or 'condition' (an if around the call); None: capture code reads it.",
    )


class CompileSite(_Frozen):
    """A torch.compile call or decorator in one version of a file, as far as that file tells."""

    line: int = Field(ge=1, description="First line of the call or decorator in that version.")
    caller: str = Field(description="Qualified name of the def holding the call, or 'module level'.")
    form: CompileForm
    target: str | None = Field(
        default=None,
        description="What it compiles: the qualified name of a def ('Decoder.forward' for a module), "
        "or the argument's text when the file does not show the def.",
    )
    mode: str | None = Field(
        default=None, description="The mode the file gives it (an environment or parameter default counts); "
        "None: no mode given, or not known.")
    mode_known: bool = Field(description="The file fixes the mode: a literal, a constant, or none given.")
    mode_source: ModeSource
    env_var: str | None = Field(default=None, description="The environment variable that can override the mode.")
    backend: str | None = None
    fullgraph: bool | None = None
    dynamic: bool | None = None
    cudagraphs_option: bool | None = Field(default=None, description='options["triton.cudagraphs"], when given.')
    captures_graphs: bool = Field(description="A capturing mode or option, or a mode the file does not fix.")


class CompileReach(_Frozen):
    """How a changed block reaches a torch.compile site (at least one of head and base is set)."""

    how: CompileHow
    head: CompileSite | None = Field(default=None, description="The site in head, if it is there.")
    base: CompileSite | None = Field(default=None, description="The site in the merge base, if it was there.")
    argument: str | None = Field(default=None, description="For 'argument': which argument the value reaches.")
    function: str | None = Field(
        default=None, description="For 'compiled-code': the traced def the change sits in; for 'captured-call': "
        "the def holding the call.")
    chain: list[str] = Field(
        default_factory=list, description="For 'compiled-code': the defs from the compiled target down to `function`.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def mode_before(self) -> str | None:
        return self.base.mode if self.base is not None else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def mode_after(self) -> str | None:
        return self.head.mode if self.head is not None else None


class GraphSplit(_Frozen):
    """A graph-splitting call (see _patterns.REGION_PATTERNS) the change adds or removes in a module
    that a capturing torch.compile in another file of the same commit reaches, traced or possibly."""

    api: str = Field(description="The call, e.g. 'torch._dynamo.graph_break'.")
    side: Literal["added", "removed"]
    line: int = Field(ge=1, description="Its line: in head when added, in the merge base when removed.")
    function: str | None = Field(default=None, description="The def holding it; None: module level.")
    site_path: str = Field(description="The file holding the capturing torch.compile.")
    site: CompileSite = Field(description="That site, in the version the line is in.")
    import_line: int = Field(ge=1, description="The line of site_path whose import leads to the changed module.")
    through: list[str] = Field(default_factory=list, description="Files the import passes through, in order.")
    reachable: Reachability
    reason: PossibleReason | None = Field(default=None, description="Why only possibly; None when traced.")
    compiled_chain: list[str] = Field(
        default_factory=list, description="Defs of site_path from the compiled target to the one calling into "
        "the module (empty when the target itself is the module's).")
    call_line: int | None = Field(default=None, description="The line of site_path whose call enters the module.")
    chain: list[str] = Field(
        default_factory=list, description="Defs of the changed module from where that call enters down to "
        "`function`.")


class CaptureHunk(_Frozen):
    """One block of consecutive changed lines that touches capture."""

    range: LineRange
    base_start: int = Field(ge=0, description="First removed line in the merge-base version (or the line it follows).")
    base_lines: int = Field(ge=0, description="How many lines were removed.")
    matched_by: list[MatchedBy]
    added_apis: list[str] = Field(default_factory=list, description="Graph APIs named by added lines.")
    removed_apis: list[str] = Field(default_factory=list, description="Graph APIs named by removed lines.")
    scope_apis: list[str] = Field(
        default_factory=list, description="Graph APIs the enclosing def calls, or its def/class names say."
    )
    settings: list[CaptureSetting] = Field(default_factory=list)
    compile: list[CompileReach] = Field(default_factory=list, description="The torch.compile sites it reaches.")
    splits: list[GraphSplit] = Field(
        default_factory=list, exclude_if=lambda value: not value,
        description="Graph splits it adds or removes that a torch.compile of another file reaches.")
    function: str | None = Field(default=None, description="Qualified name of the enclosing def or class.")
    excerpt: list[str] = Field(default_factory=list, description="The first changed lines, '+'/'-' prefixed.")


class CaptureChange(_Frozen):
    """One changed file whose changes touch capture."""

    path: str = Field(description="Repository-relative path in head (for a deleted file, in base).")
    old_path: str | None = Field(default=None, description="The path before a rename or copy.")
    status: FileStatus = "modified"
    binary: bool = False
    glob: str | None = Field(default=None, description="The [capture] glob that matched the file, if any.")
    hunks: list[CaptureHunk] = Field(default_factory=list, description="Empty for a binary or rename-only change.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ranges(self) -> list[tuple[int, int]]:
        return [h.range.as_tuple() for h in self.hunks]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def apis(self) -> list[str]:
        """Every graph API the changed lines or their enclosing defs name, in order, once each."""
        return list(dict.fromkeys(a for h in self.hunks for a in (*h.added_apis, *h.removed_apis, *h.scope_apis)))

    @computed_field  # type: ignore[prop-decorator]
    @property
    def matched_by(self) -> list[MatchedBy]:
        found = {m for h in self.hunks for m in h.matched_by}
        if self.glob is not None:
            found.add("glob")  # also when there are no text hunks: a binary change, a pure rename
        return [m for m in MATCH_ORDER if m in found]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def functions(self) -> list[str]:
        return list(dict.fromkeys(h.function for h in self.hunks if h.function))

    @computed_field  # type: ignore[prop-decorator]
    @property
    def excerpts(self) -> list[str]:
        return [line for h in self.hunks for line in h.excerpt]


class CaptureChanges(_Frozen):
    """Capture-touching changes of `git diff base...head`."""

    base_sha: str
    head_sha: str
    merge_base: str = Field(description="The commit the diff starts from: where head left base.")
    files: list[CaptureChange] = Field(default_factory=list)
    changed_files: list[str] = Field(default_factory=list, description="Every file the diff touches.")
