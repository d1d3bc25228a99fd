"""The table of CUDA graph API names that mark a line as capture code, and the matcher over it."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from guard.cause._engines import ENGINE_SETTINGS, canonical


@dataclass(frozen=True)
class ApiPattern:
    """One row: what to look for, how a match is named, and why it marks capture code."""

    regex: re.Pattern[str]
    name: str | None  # None: report the matched text itself (e.g. the exact cudaGraph* function)
    is_call: bool  # True when the name reads naturally as "a `name` call" in prose
    reason: str
    spell: Callable[[re.Match[str]], str] | None = None  # how a match is named, when `name` is None
    # True for the row of names that only say "cuda graph" (CUDAGraphRunner, capture_cudagraph):
    # calling such a def is not itself a graph API call
    name_only: bool = False


def _row(pattern: str, name: str | None, is_call: bool, reason: str, flags: int = 0,
         spell: Callable[[re.Match[str]], str] | None = None, name_only: bool = False) -> ApiPattern:
    return ApiPattern(re.compile(pattern, flags), name, is_call, reason, spell, name_only)


# torch._dynamo (and torch.compiler) settings that decide where a compiled graph is split, or
# whether a function stays compiled at all (a recompile limit hit runs it eagerly).
DYNAMO_SPLIT_SETTINGS = (
    "capture_scalar_outputs", "capture_dynamic_output_shape_ops", "suppress_errors", "recompile_limit",
    "accumulated_recompile_limit", "cache_size_limit", "accumulated_cache_size_limit", "fail_on_recompile_limit_hit",
    "specialize_int", "specialize_float", "assume_static_by_default", "automatic_dynamic_shapes",
    "force_parameter_static_shapes", "inline_inbuilt_nn_modules", "nested_graph_breaks", "graph_break_on_nn_param_ctor",
    "capture_autograd_function", "capture_func_transforms",
)
_DYNAMO_NAMES = "|".join(DYNAMO_SPLIT_SETTINGS)
_INDUCTOR_GRAPH_SETTING = r"(?:triton\.)?\w*cudagraph\w*|graph_partition"


def _dynamo_name(match: re.Match[str]) -> str:
    return "torch._dynamo.config." + next(g for g in (match["attr"], match["key"], match["kw"]) if g)


# Order matters: a match inside the span of an earlier row's match is not reported again,
# so the specific rows come before the broad "cuda_graph"/"cudagraph" name row.
API_PATTERNS: tuple[ApiPattern, ...] = (
    _row(r"\btorch\.cuda\.graph\b(?!s)", "torch.cuda.graph", True,
         "the context manager that captures the work inside it into a CUDA graph"),
    _row(r"\bCUDAGraph\b", "CUDAGraph", False,
         "torch.cuda.CUDAGraph, the graph object capture fills and replay launches"),
    _row(r"\bcapture_(?:begin|end)\b", None, True,
         "the low-level CUDAGraph calls that open and close a capture"),
    _row(r"\b\w*graph\w*(?:\[[^\]\n]*\])?\.replay\s*\(", "graph.replay", True,
         "replaying a captured graph (the receiver's name must say graph)", re.IGNORECASE),
    _row(r"\bcudaGraph\w*", None, True,
         "CUDA runtime graph API: instantiate, upload, launch, update a graph"),
    _row(r"\bcuGraph[A-Z]\w*", None, True,
         "CUDA driver graph API (cuGraphUpload, cuGraphLaunch...); lowercase 'cugraph' is RAPIDS, not this"),
    _row(r"\bhipGraph[A-Z]\w*", None, True, "ROCm's graph API, the same thing on AMD GPUs"),
    _row(r"\b(?:cu|cuda|hip)Stream(?:Begin|End)Capture\w*", None, True,
         "stream capture, the mechanism every CUDA graph capture runs on"),
    _row(r"\b(?:cuda|hip)StreamIsCapturing\b|\bis_current_stream_capturing\b", None, True,
         "code that behaves differently while a capture is under way"),
    _row(r"\bmake_graphed_callables\b", "make_graphed_callables", True,
         "torch's helper that captures modules or functions into graphs"),
    _row(r"\bgraph_pool_handle\b", "graph_pool_handle", True,
         "the memory pool graphs share; changing it changes what captured graphs can reuse"),
    _row(r"""\bmode\s*=\s*(["'])(?:reduce-overhead|max-autotune(?:-no-cudagraphs)?)\1""", None, False,
         "torch.compile modes that capture CUDA graphs (or, -no-cudagraphs, turn them off)"),
    _row(r"\b(?:torch\.compiler\.|torch\._inductor\.)?cudagraph_mark_step_begin\b",
         "torch.compiler.cudagraph_mark_step_begin", True,
         "tells cudagraph trees a new step begins, so the outputs of the last replay may be overwritten"),
    _row(r"\b(?:torch\._inductor\.config|inductor_config|inductor\.config)\.(?P<setting>" + _INDUCTOR_GRAPH_SETTING
         + r")\b|(?P<q>[\"'])(?P<setting2>triton\.\w*cudagraph\w*)(?P=q)", None, False,
         "inductor's CUDA graph settings (triton.cudagraphs, cudagraph_trees...), set directly or in config.patch",
         spell=lambda m: "torch._inductor.config." + (m["setting"] or m["setting2"])),
    _row(r"\btorch\.(?:_dynamo|compiler)\.config\.(?:(?P<attr>" + _DYNAMO_NAMES + r")\b|patch\(\s*(?:[\"'](?P<key>"
         + _DYNAMO_NAMES + r")[\"']|(?P<kw>" + _DYNAMO_NAMES + r")\s*=))", None, False,
         "dynamo settings that decide where compiled graphs split or whether they stay compiled",
         spell=_dynamo_name),
    _row(r"(?<![\w-])(?:--)?(?:" + "|".join(n.replace("_", "[_-]") for n in ENGINE_SETTINGS) + r")(?![\w-])", None,
         False, "engine settings that turn CUDA graphs off or size them (enforce_eager, eager_mode...)",
         re.IGNORECASE, spell=lambda m: canonical(m[0])),
    _row(r"\w*cuda[_-]?graph\w*", None, False,
         "names such as CUDAGraphRunner, cuda_graph_max_bs, enable_cudagraph", re.IGNORECASE, name_only=True),
)

# Calls that split what dynamo traces into a graph, or leave a function out of it, and so
# change capture only inside code a capturing torch.compile traces (in its file or, imported,
# in another): a graph break ends the captured graph and starts another; a disabled or
# disallowed function runs eagerly between two graphs; allow_in_graph puts a function in the
# graph unopened (removing it can break the graph there); a stance can run compiled code eagerly.
REGION_PATTERNS: tuple[ApiPattern, ...] = (
    _row(r"\b(?:torch\._dynamo\.|torch\.compiler\.|dynamo\.)?graph_break\b", "torch._dynamo.graph_break", True,
         "ends the captured graph here and starts another after it"),
    _row(r"\btorch\.(?:_dynamo|compiler)\.disable\b", None, True,
         "runs a function eagerly inside compiled code: the graph breaks around it"),
    _row(r"\btorch\._dynamo\.(?:disallow|forbid)_in_graph\b", None, True,
         "keeps a function out of the graph: the graph breaks at each call of it"),
    _row(r"\btorch\.(?:_dynamo|compiler)\.allow_in_graph\b", None, True,
         "puts a function in the graph without tracing it; taking it out can break the graph there"),
    _row(r"\btorch\._dynamo\.skip_frame\b", None, True, "leaves the calling frame uncompiled"),
    _row(r"\btorch\.compiler\.set_stance\b", None, True,
         "can run compiled code eagerly (force_eager) or fail on a recompile"),
)

# Files whose changes are prose, not code: an API named in a README does not change capture.
_DOC_SUFFIXES = frozenset({".md", ".markdown", ".rst", ".txt", ".adoc", ".html", ".htm", ".ipynb"})
_HASH_COMMENT_SUFFIXES = frozenset({".py", ".pyi", ".pyx", ".pxd", ".sh", ".toml", ".yaml", ".yml", ".cfg", ".ini"})
_SLASH_COMMENT_SUFFIXES = frozenset(
    {".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".inl", ".rs", ".go", ".js", ".ts"}
)
PYTHON_SUFFIXES = frozenset({".py", ".pyi"})


@dataclass(frozen=True)
class ApiMatch:
    name: str
    is_call: bool
    name_only: bool = False


def find_apis(text: str, rows: tuple[ApiPattern, ...] = API_PATTERNS) -> list[ApiMatch]:
    """Graph API names in `text`, first occurrence order, each once."""
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, ApiMatch]] = []
    for row in rows:
        for match in row.regex.finditer(text):
            start, end = match.span()
            if any(s <= start and end <= e for s, e in taken):
                continue
            taken.append((start, end))
            found.append((start, ApiMatch(_display(row, match), row.is_call, row.name_only)))
    seen: set[str] = set()
    ordered: list[ApiMatch] = []
    for _, api in sorted(found, key=lambda item: item[0]):
        if api.name not in seen:
            seen.add(api.name)
            ordered.append(api)
    return ordered


def find_region_apis(text: str) -> list[ApiMatch]:
    """Names that change capture inside code a capturing torch.compile traces (see REGION_PATTERNS)."""
    return find_apis(text, REGION_PATTERNS)


def _display(row: ApiPattern, match: re.Match[str]) -> str:
    matched = match.group(0)
    if row.name is not None:
        return row.name
    if row.spell is not None:
        return row.spell(match)
    if matched.startswith("mode"):
        # normalise spacing and quotes so the same mode reads the same everywhere
        mode = matched.split("=", 1)[1].strip().strip("\"'")
        return f'torch.compile(mode="{mode}")'
    return matched


def is_doc_path(path: str) -> bool:
    return PurePosixPath(path).suffix.lower() in _DOC_SUFFIXES


def is_python_path(path: str) -> bool:
    return PurePosixPath(path).suffix.lower() in PYTHON_SUFFIXES


def is_comment_line(line: str, path: str) -> bool:
    """A whole-line comment: changing it changes no behaviour, so its words do not count."""
    suffix = PurePosixPath(path).suffix.lower()
    stripped = line.strip()
    if suffix in _HASH_COMMENT_SUFFIXES:
        return stripped.startswith("#")
    if suffix in _SLASH_COMMENT_SUFFIXES:
        # a leading '#' here is the preprocessor, which is code
        return stripped.startswith(("//", "/*", "*"))
    return False


def code_text(lines: list[str], path: str) -> str:
    """The lines joined, whole-line comments left out."""
    return "\n".join(line for line in lines if not is_comment_line(line, path))


def reads_as_call(name: str) -> bool:
    """Whether a reported API name reads as "a `name` call" (cuGraphUpload) or not (CUDAGraph)."""
    matches = find_apis(name) or find_region_apis(name)
    return bool(matches) and matches[0].is_call
