"""Reference decode engine: a small decoder-only transformer with a static KV cache.

It implements the workload protocol (docs/workload-protocol.md) and is the embedded
default for `guard demo` and the tests. It imports torch and nothing of the guard, and
uses relative imports only, so the demo can copy it into a repository as its own package.
"""

from .engine import RefEngine, make
from .model import ModelSpec

__all__ = ["ModelSpec", "RefEngine", "make"]
