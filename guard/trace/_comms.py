"""Which activities of a trace are communication: the one classifier every rank's trace goes through.

On a GPU, communication is a kernel of a collective or point-to-point library:

- NCCL and RCCL: `ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)`, `ncclDevKernel_SendRecv(...)`,
  and the older `ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)`;
- the custom all-reduce of vLLM, SGLang and aiter: `void vllm::cross_device_reduce_1stage<...>(...)`;
- PyTorch's symmetric-memory collectives: `one_shot_all_reduce_kernel`, `multimem_all_reduce_kernel`, ...;
- DeepEP's expert-parallel dispatch and combine: `void deep_ep::intranode::dispatch<...>(...)`.

On a CPU-only trace (gloo), a collective runs on the host: gloo's own threads record it as
`gloo:all_reduce` (`gloo:all_to_all`, `gloo:broadcast`, ...), and the calling thread records the
c10d op that starts it (`c10d::allreduce_`) and, for functional collectives, the wait for it.
Anything else is compute.
"""

from __future__ import annotations

import re

# The function's name with its namespaces: after "void ", before its template or argument list
_QUALIFIED = re.compile(r"^\s*(?:void\s+)?([^<(]*)")
_ANONYMOUS = "(anonymous namespace)::"
_SYMMETRIC_MEMORY = re.compile(
    r"^(?:multimem_|one_shot_|two_shot_)+\w*(?:all_reduce|all_gather|reduce_scatter)\w*_kernel$"
)
_KERNEL_NAMESPACES = ("deep_ep::",)
_HOST_PREFIXES = ("gloo:", "nccl:", "c10d::", "_c10d_functional::", "c10d_functional::")
_HOST_NAMES = frozenset({"record_param_comms"})


def is_communication_kernel(name: str) -> bool:
    """Whether the GPU kernel `name` (as the profiler writes it) moves data between ranks."""
    qualified = _QUALIFIED.match(name.replace(_ANONYMOUS, ""))
    function = qualified.group(1).strip() if qualified else name
    base = function.rsplit("::", 1)[-1]
    return (
        base.startswith("nccl")
        or base.startswith("cross_device_reduce_")
        or bool(_SYMMETRIC_MEMORY.match(base))
        or function.startswith(_KERNEL_NAMESPACES)
    )


def is_communication_host_op(name: str) -> bool:
    """Whether the CPU op or annotation `name` is a collective's work or its call, on a CPU-only trace."""
    return name.startswith(_HOST_PREFIXES) or name in _HOST_NAMES
