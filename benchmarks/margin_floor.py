"""How far from a tie the reference engine's outputs were where a head of the same function, rounded
otherwise, chose another token; and where another function did (measure/_margins.py's floor).

Usage: python benchmarks/margin_floor.py [LAYERS]   (default 4; bf16 on the CPU, batch size 4,
300 forced steps). Per head: its disagreements with a free-running reference of base, and the
reference's margin at each, in bf16 ulps at the larger of the top two logits.
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import guard.engine.model as M  # noqa: E402
from guard.engine.engine import RefEngine  # noqa: E402
from guard.measure import margin_ulps  # noqa: E402


def margin(pair: list[float]) -> float:
    return margin_ulps("bfloat16", pair[0], pair[1])


def run(opts, steps, bs, forced=None, patch=None):
    old = M._rotate, M._rms_norm
    if patch:
        patch()
    eng = RefEngine(device='cpu', **opts)
    eng.setup(bs)
    toks, tops = [], []
    for k in range(steps):
        t = None if forced is None or k == 0 else torch.tensor(forced[k-1])
        out = eng.step(t).tolist()
        lg = eng.step_logits().float()
        v = lg.topk(2, -1).values.tolist()
        toks.append(out)
        tops.append(v)
    M._rotate, M._rms_norm = old
    return toks, tops


def flip():
    def r(x, cos, sin):
        half = x.shape[-1] // 2
        rotated = torch.cat([x[..., half:], -x[..., :half]], dim=-1)
        return x * cos + rotated * sin
    M._rotate = r


def norm32():
    def n(x, w):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w
    M._rms_norm = n


base = dict(layers=int(sys.argv[1]) if len(sys.argv) > 1 else 4, dtype="bfloat16", max_len=512)
steps, bs = 300, 4
ref, tops = run(base, steps, bs)
every = sorted(margin(pair) for row in tops for pair in row)
print("reference margins, ulps, at quantiles 0 .05 .1 .25 .5 .75 .9:",
      [round(every[int(q * (len(every) - 1))], 1) for q in (0, .05, .1, .25, .5, .75, .9)])
heads = [("aa", base, None), ("splits8", base | dict(head_splits=8), None), ("norm32", base, norm32),
         ("flip", base, flip)]
for name, opts, patch in heads:
    toks, _ = run(opts, steps, bs, forced=ref, patch=patch)
    at = sorted(margin(tops[k][j]) for k in range(steps) for j in range(bs) if toks[k][j] != ref[k][j])
    print(f"{name}: {len(at)} of {steps * bs} outputs differ; largest reference margins there {at[-5:]}; "
          f"above 4, 8, 16 ulps: {sum(m > 4 for m in at)}, {sum(m > 8 for m in at)}, {sum(m > 16 for m in at)}")
