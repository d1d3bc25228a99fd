"""Settings of common inference engines that turn CUDA graphs on or off or size them.

The names are those of vLLM, SGLang, TensorRT-LLM, TGI, LightLLM and LMDeploy (and of the
smaller engines that copy them), spelt as a keyword, a field, a CLI flag (`--enforce-eager`)
or an environment variable (`CUDA_GRAPHS`). A block of changed lines counts for a setting
only when the setting's value differs between its removed and added lines:
`LLM(path, enforce_eager=True, tp=1)` -> `LLM(path, enforce_eager=True, tp=2)` leaves it as it was.
"""

from __future__ import annotations

import re
from collections import Counter

# Names without "cuda_graph"/"cudagraph" in them; those are matched by the broad name row of
# _patterns and compared here all the same.
ENGINE_SETTINGS: tuple[str, ...] = (
    "enforce_eager",  # vLLM, nano-vllm: no CUDA graphs at all
    "compilation_config",  # vLLM: the compile level, cudagraph mode and capture sizes
    "max_seq_len_to_capture",  # vLLM (v0): longest context a captured graph covers
    "max_capture_size",  # vLLM: largest batch captured
    "splitting_ops",  # vLLM: ops the piecewise graphs are split at
    "enable_torch_compile",  # SGLang
    "torch_compile_max_bs",  # SGLang
    "torch_compile_enabled",  # TensorRT-LLM (PyTorch backend)
    "torch_compile_fullgraph",  # TensorRT-LLM
    "graph_max_batch_size",  # LightLLM
    "graph_max_len_in_batch",  # LightLLM
    "eager_mode",  # LMDeploy
)

_BROAD = r"\w[\w-]*cuda[_-]?graph[\w-]*|cuda[_-]?graph[\w-]*"
_NAME = re.compile(
    r"(?<![\w-])(?:--)?(" + "|".join(n.replace("_", "[_-]") for n in ENGINE_SETTINGS) + "|" + _BROAD + r")(?![\w-])",
    re.IGNORECASE,
)
def canonical(name: str) -> str:
    """One spelling per setting: `--enforce-eager`, `ENFORCE_EAGER` and `enforce_eager` are one."""
    return name.lstrip("-").replace("-", "_").lower()


def is_setting(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


def unchanged_settings(removed: str, added: str) -> set[str]:
    """Settings named on both sides of a block with the same values: the block leaves them as they were."""
    before, after = _uses(removed), _uses(added)
    names = {n for n, _ in before} & {n for n, _ in after}
    return {n for n in names if _of(before, n) == _of(after, n)}


def _uses(text: str) -> Counter[tuple[str, str]]:
    """(setting, what it is given, or the line it is read on) for every setting named in `text`."""
    uses: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        for match in _NAME.finditer(line):
            uses[(canonical(match[1]), _given(line, match.start(), match.end()))] += 1
    return uses


def _given(line: str, start: int, end: int) -> str:
    """`=True` for `enforce_eager=True, ...`, `16` for `--cuda-graph-max-bs 16`, else the whole line."""
    rest = line[end:]
    stripped = rest.lstrip()
    if line[start:].startswith("--"):
        return re.sub(r"\s+", "", re.split(r"\s--", rest, maxsplit=1)[0]).rstrip("\\")
    if not stripped or stripped[0] not in "=:" or stripped.startswith(("==", "::")):
        return re.sub(r"\s+", "", line)
    depth = 0
    for i, char in enumerate(stripped):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                return re.sub(r"\s+", "", stripped[:i])
            depth -= 1
        elif char == "," and depth == 0:
            return re.sub(r"\s+", "", stripped[:i])
    return re.sub(r"\s+", "", stripped)


def _of(uses: Counter[tuple[str, str]], name: str) -> Counter[str]:
    return Counter({value: count for (n, value), count in uses.items() if n == name})
