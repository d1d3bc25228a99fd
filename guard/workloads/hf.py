"""A Hugging Face transformers causal LM as a guard workload: `guard.workloads.hf:make`.

The model is either read from a local directory (`model="path/to/dir"`, never downloaded)
or built from a config with seeded random weights (`config={...}`, or `model_type` and the
size options; by default a small Llama). Decode runs over transformers' StaticCache; on a
GPU the decode forward is compiled with torch.compile (mode "reduce-overhead": CUDA
graphs), on a CPU it runs eagerly.

Imports the standard library, torch and transformers, and of the guard only the
stdlib-and-torch helpers of `guard.workloads.compiled`: it runs in the arm's environment.
"""

from __future__ import annotations

from pathlib import Path

import torch

from .compiled import (
    WARMUP_CALLS,
    BuiltinDecode,
    check_options,
    decode_settings,
    fill_seeded,
    next_input,
    positive_int,
    seeded_prompt,
)

# The size options and the config keys they set; the defaults make a small Llama.
SIZE_KEYS = {
    "layers": "num_hidden_layers",
    "d_model": "hidden_size",
    "n_heads": "num_attention_heads",
    "n_kv_heads": "num_key_value_heads",
    "ffn": "intermediate_size",
    "vocab": "vocab_size",
}
DEFAULT_SIZES = {"layers": 8, "d_model": 1024, "n_heads": 16, "ffn": 2816, "vocab": 32000}


def _transformers():  # type: ignore[no-untyped-def]
    try:
        import transformers
    except ImportError as exc:
        raise ValueError(
            "guard.workloads.hf needs transformers in the arm's environment (pip install transformers)"
        ) from exc
    return transformers


class HFDecode(BuiltinDecode):
    """Greedy decode of a transformers causal LM over a StaticCache; the workload protocol."""

    def __init__(
        self,
        model: str | None = None,
        config: dict[str, object] | None = None,
        model_type: str = "llama",
        layers: int | None = None,
        d_model: int | None = None,
        n_heads: int | None = None,
        n_kv_heads: int | None = None,
        ffn: int | None = None,
        vocab: int | None = None,
        max_len: int = 1024,
        prompt_len: int = 32,
        dtype: str = "bfloat16",
        seed: int = 0,
        mode: str | None = None,
        fullgraph: bool = False,
        attn_implementation: str = "sdpa",
        device: str | None = None,
        compile_on_cpu: bool = False,
    ) -> None:
        transformers = _transformers()
        self.transformers_version = transformers.__version__
        sizes = {"layers": layers, "d_model": d_model, "n_heads": n_heads, "n_kv_heads": n_kv_heads,
                 "ffn": ffn, "vocab": vocab}
        sizes = {name: positive_int(name, value) for name, value in sizes.items() if value is not None}
        super().__init__(decode_settings(prompt_len, max_len, seed, dtype, device, mode, fullgraph, compile_on_cpu))
        self.max_len = max_len

        if model is not None:
            if config is not None or sizes:
                raise ValueError("give either model (a local model directory) or config and size options, not both")
            self.source = str(model)
            self.model = self._load(transformers, model, attn_implementation)
        else:
            self.model = self._build(transformers, config, model_type, sizes, attn_implementation)
            self.source = f"random {self.model.config.model_type}"
        self.model = self.model.to(device=self.device).eval().requires_grad_(False)
        text_config = self.model.config.get_text_config(decoder=True)
        self.config = text_config
        max_positions = getattr(text_config, "max_position_embeddings", None)
        if max_positions is not None and max_len > max_positions:
            raise ValueError(f"max_len ({max_len}) is more than the model's max_position_embeddings ({max_positions})")
        if getattr(text_config, "sliding_window", None):
            raise ValueError(
                "models with sliding-window attention are not supported: their StaticCache layers count positions "
                "on the host, so the compiled step would recompile every step; set sliding_window to null"
            )

        self._decode = self._decode_one
        if self.compiled:
            self._decode = torch.compile(self._decode_one, mode=self.mode, fullgraph=self.fullgraph)
        self._caches: dict[int, object] = {}  # one StaticCache per batch size, reused
        self._buffers: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # (input_ids, last) per batch size
        self.cache: object | None = None
        self.input_ids: torch.Tensor | None = None
        self.last: torch.Tensor | None = None
        self.batch_size = 0
        self.position = 0

    # -- building -------------------------------------------------------------------

    def _load(self, transformers, model: str, attn_implementation: str):  # type: ignore[no-untyped-def]
        path = Path(model).expanduser()
        if not (path / "config.json").is_file():
            raise ValueError(
                f"model={model!r}: no local model directory with a config.json at {path.resolve()} "
                "(relative paths are from the arm's worktree; nothing is downloaded)"
            )
        return transformers.AutoModelForCausalLM.from_pretrained(
            str(path), local_files_only=True, dtype=self.dtype, attn_implementation=attn_implementation
        )

    def _build(self, transformers, config, model_type, sizes, attn_implementation):  # type: ignore[no-untyped-def]
        if config is not None and not isinstance(config, dict):
            raise ValueError(f"config must be a table of config keys (a dict), not {type(config).__name__}")
        fields: dict[str, object] = {SIZE_KEYS[name]: value for name, value in DEFAULT_SIZES.items()}
        fields["max_position_embeddings"] = max(2048, self.max_len)
        fields |= dict(config or {})
        fields |= {SIZE_KEYS[name]: value for name, value in sizes.items()}
        fields.setdefault("num_key_value_heads", fields["num_attention_heads"])
        kind = str(fields.pop("model_type", model_type))
        try:
            hf_config = transformers.AutoConfig.for_model(kind, **fields)
        except ValueError as exc:
            raise ValueError(f"model_type {kind!r}: {exc}") from exc
        # Built on the device, in the dtype (transformers keeps its rotary tables in float32), and
        # filled from the seed there, rather than initialised and filled on the host first.
        with torch.device(self.device):
            built = transformers.AutoModelForCausalLM.from_config(
                hf_config, dtype=self.dtype, attn_implementation=attn_implementation
            )
        fill_seeded(built, self.seed)
        return built

    def _decode_one(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[batch] ids at the cache's next position -> [batch] greedy next ids, and the
        [batch, vocab] logits they were chosen from."""
        out = self.model(input_ids=tokens[:, None], past_key_values=self.cache, use_cache=True)
        logits = out.logits[:, -1]
        return logits.argmax(dim=-1), logits

    # -- protocol ---------------------------------------------------------------------

    @torch.no_grad()
    def setup(self, batch_size: int) -> None:
        positive_int("batch_size", batch_size)
        first = batch_size not in self._caches
        if first:
            transformers = _transformers()
            self._caches[batch_size] = transformers.StaticCache(config=self.model.config, max_cache_len=self.max_len)
            buffers = (torch.zeros(batch_size, dtype=torch.int64, device=self.device),
                       torch.zeros(batch_size, dtype=torch.int64, device=self.device))
            for tensor in buffers:
                torch._dynamo.mark_static_address(tensor)
                torch._dynamo.mark_static(tensor)
            self._buffers[batch_size] = buffers
        self.batch_size = batch_size
        self.cache = self._caches[batch_size]
        self.input_ids, self.last = self._buffers[batch_size]
        self._prefill()  # the first prefill also allocates the cache's tensors
        if first:
            for layer in self.cache.layers:  # type: ignore[attr-defined]
                # fixed shapes: a second batch size compiles its own static graph
                torch._dynamo.mark_static(layer.keys)
                torch._dynamo.mark_static(layer.values)
        if first and self.compiled:
            for _ in range(WARMUP_CALLS):  # compiles, and with CUDA graphs records them
                self.input_ids.copy_(self.last)
                self._call_decode()
            self._prefill()

    @torch.no_grad()
    def step(self, tokens: torch.Tensor | None = None) -> torch.Tensor:
        if self.input_ids is None or self.last is None:
            raise RuntimeError("step() before setup(batch_size)")
        next_input(self.input_ids, self.last, tokens, self.position, self.max_len, self.prompt_len, "StaticCache")
        ids, self._logits = self._call_decode()
        self.last.copy_(ids)
        self.position += 1
        return self.last

    def describe(self) -> dict[str, object]:
        cfg = self.config
        engine = {"engine": "guard.workloads.hf", "model": self.source, "architecture": type(self.model).__name__,
                  "transformers": self.transformers_version}
        return self._described(engine, {
            "attn_implementation": self.model.config._attn_implementation,
            "layers": cfg.num_hidden_layers,
            "d_model": cfg.hidden_size,
            "n_heads": cfg.num_attention_heads,
            "n_kv_heads": getattr(cfg, "num_key_value_heads", cfg.num_attention_heads),
            "ffn": getattr(cfg, "intermediate_size", None),
            "vocab": cfg.vocab_size,
            "max_len": self.max_len,
        })

    def teardown(self) -> None:
        self._caches.clear()
        self._buffers.clear()
        self.cache = self.input_ids = self.last = self._logits = None
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()

    # -- internals --------------------------------------------------------------------

    def _call_decode(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()  # the last step's graph outputs may be overwritten
        return self._decode(self.input_ids)

    def _prefill(self) -> None:
        """The fixed prompt in one eager forward; leaves the token it predicts as the last output."""
        assert self.last is not None
        self.cache.reset()  # type: ignore[attr-defined]
        prompt = seeded_prompt(self.batch_size, self.prompt_len, self.config.vocab_size, self.seed).to(self.device)
        out = self.model(input_ids=prompt, past_key_values=self.cache, use_cache=True, logits_to_keep=1)
        self.last.copy_(out.logits[:, -1].argmax(dim=-1))
        self.position = self.prompt_len


def make(**options: object) -> HFDecode:
    """Entry point of the workload protocol: `guard.workloads.hf:make`."""
    check_options(HFDecode, options, "guard.workloads.hf")
    return HFDecode(**options)  # type: ignore[arg-type]
