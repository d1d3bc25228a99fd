"""Built-in workloads for engines that have none of their own yet.

- `guard.workloads.compiled:make`: a Llama-like decoder compiled with torch.compile.
- `guard.workloads.hf:make`: a Hugging Face transformers causal LM over a static KV cache.

Each module is imported on its own, inside the arm's environment: this package imports
nothing, so that neither needs what the other does (transformers).
"""
