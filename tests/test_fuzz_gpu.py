"""GPU tier: seeded random problems that cross the heuristics' boundaries (tile and family choice, split-K in a
workspace or inside a cluster, widened decode tiles, the decode kernel / wgmma crossover of W4A16) with random
layouts, outputs, scales and bias, each against a float64 (or exact integer) reference. The fixed-shape tests
cover every variant and config; these cover the shapes nobody thought of. A failure names its test and seed:
rerun it with `pytest tests/test_fuzz_gpu.py -k "test_mm_random[<seed>]"` (or test_w4a16_random).
"""

import math
import random

import pytest
import torch

import gn_mm
from gn_mm import sm80_w4a16, variant_table as variants, w4a16, w4a16_decode
from gn_mm.arch import Arch
from gn_mm.config import sm80_candidates
from gn_mm.dtypes import BY_NAME, OUT_DTYPES
from gn_mm.sm90_config import SM90_CONFIGS, SPLIT_CLUSTERS, Sm90Config

from test_mm_gpu import _check, _poison, _rand, extra_tol
from test_w4a16_gpu import ROUNDS, check as w4a16_check, make_weight

pytestmark = pytest.mark.gpu


ROUND = (16, 32, 64, 128, 256, 1000, 1024, 2048, 4096, 5120, 8192)  # sizes the heuristics' thresholds sit near


def _size(rng: random.Random, hi: int) -> int:
    """Log-uniform in [1, hi], or (a third of the time) a round size near a heuristic threshold, off by a little."""
    if rng.random() < 0.35:
        return max(1, min(hi, rng.choice(ROUND)) + rng.choice((0, 0, -1, 3, -8)))
    return int(math.exp(rng.uniform(0.0, math.log(hi + 1))))


def _mm_case(seed: int):
    """(variant, out, m, n, k, family, splits, scales, layouts) for one seed, among the variants with f32 or s32
    accumulation this GPU runs (f16 accumulation needs its own reference: test_mm_gpu), 16-bit and fp8 inputs drawn
    more often than the rest."""
    rng = random.Random(seed)
    arch = Arch.of_device(torch.cuda.current_device())
    runnable = [v for v in variants.MMA_SYNC if v.runs_on(arch.cc) and v.acc != "f16"]
    weights = [4 if v.a in ("bf16", "f16") else 2 if v.a == "e4m3" else 1 for v in runnable]
    v = rng.choices(runnable, weights)[0]
    out = rng.choice(v.outs)
    m, n, k = _size(rng, 4096), _size(rng, 8192), _size(rng, 8192)
    if v.a in ("s4", "u4"):
        k = -(-k // 2) * 2
    family = rng.choice(["default", "default", "mma.sync"])
    if rng.random() < 0.4:  # an explicit config (of either family), and sometimes a split count
        family, splits = _explicit_config(rng, v, k, arch), None
        if not (isinstance(family, Sm90Config) and family.cluster_k > 1):
            splits = rng.choice([None, 1, 2, 3, 7])
    else:
        splits = None
    scales = rng.choice(["none", "tensor", "rows_cols"]) if v.a in variants.SCALED_TYPES and out != "s32" else "none"
    layout = dict(out=rng.choice(["new", "exact", "right_pad", "offset"]), a=rng.choice(["k", "k", "m"]),
                  b=rng.choice(["k", "k", "n"]), shapes=rng.choice(["flat", "2d"]), bias=rng.random() < 0.5)
    return v, out, m, n, k, family, splits, scales, layout


def _explicit_config(rng: random.Random, v, k: int, arch: Arch):
    """A config gn_mm.mm accepts for this variant and K: any mma.sync config that fits the GPU and the accumulator's
    registers, or on sm_90 any wgmma config (a split inside a cluster needs a K step per CTA)."""
    if arch.cc == 90 and rng.random() < 0.6:
        k_tiles = -(-k * max(BY_NAME[v.a].bits, 8) // 8 // 128)  # int4 runs unpacked to int8 on Hopper
        return rng.choice([c for c in SM90_CONFIGS + SPLIT_CLUSTERS if c.cluster_k <= k_tiles])
    return rng.choice(sm80_candidates(arch, emulated=arch.cc in v.emulated_on, acc=v.acc))


@pytest.mark.parametrize("seed", range(120))
def test_mm_random(seed):
    """Layouts: a K-major (a view of padded storage) or M-major; b as w.t() or a contiguous [K, N]; out new, an exact
    out=, or a view of a wider buffer (padding on the right, or also one column on the left: a misaligned start),
    whose other columns must stay untouched; scales and bias flat or 2-D."""
    v, out, m, n, k, family, splits, scales, lay = _mm_case(seed)
    dev = torch.device("cuda")
    a, a64 = _rand(BY_NAME[v.a], m, k, dev)
    w, w64 = _rand(BY_NAME[v.b], n, k, dev)
    b = w.t()
    # Packed int4 comes as gn_mm.Int4Tensor, K-major only. K = 1 makes any [M, 1] K-contiguous, with rows one value
    # apart: the documented LayoutError (README, Layouts), so the copied layouts need K > 1.
    if v.a not in ("s4", "u4") and k > 1:
        a = a.t().contiguous().t() if lay["a"] == "m" else a
        b = w.t().contiguous() if lay["b"] == "n" else b
    ref, kw = a64 @ w64.t(), {}
    two_d = lay["shapes"] == "2d"
    if scales == "tensor":
        kw = dict(scale_a=torch.rand((1,) if two_d else (), device=dev) + 0.5, scale_b=torch.rand(1, device=dev) * 0.01)
    elif scales == "rows_cols":
        kw = dict(scale_a=torch.rand((m, 1) if two_d else (m,), device=dev) + 0.5,
                  scale_b=torch.rand((1, n) if two_d else (n,), device=dev) * 0.01)
    if kw:
        ref = ref * kw["scale_a"].double().reshape(-1, 1) * kw["scale_b"].double().reshape(1, -1)
    if lay["bias"] and out != "s32":
        kw["bias"] = torch.randn((1, n) if two_d else (n,), device=dev)
        ref = ref + kw["bias"].double().reshape(1, -1)
    dtype = OUT_DTYPES[out]
    config = None if family == "default" else family
    kw["splits"] = splits
    if lay["out"] == "new":
        c = gn_mm.mm(a, b, out_dtype=dtype, config=config, **kw)
    else:
        left = 1 if lay["out"] == "offset" else 0
        padded = _poison(m, n + left + (0 if lay["out"] == "exact" else 3), dtype, dev)
        c = padded[:, left:left + n]
        gn_mm.mm(a, b, out=c, config=config, **kw)
        rest = torch.cat([padded[:, :left].flatten(), padded[:, left + n:].flatten()])
        assert rest.isnan().all() if rest.is_floating_point() else (rest == -(2**31) + 7).all(), "wrote outside out"
    path = "default" if family == "default" or isinstance(family, Sm90Config) else "mma.sync"
    _check(c, ref, out, extra_tol(v.a, path))


def _w4a16_case(seed: int):
    rng = random.Random(10_000 + seed)
    g = rng.choice([32, 64, 128, 128, "K"])
    if g == "K":
        k = rng.choice([8, 24, 200, 1000, 4104])
    else:
        k = g * max(1, _size(rng, 14336) // g)
    n = 8 * max(1, _size(rng, 14336) // 8)
    m = rng.choice([_size(rng, 16), _size(rng, 600)])
    k_stages = -(-k // 64)
    splits = rng.randint(1, min(8, k_stages)) if rng.random() < 0.2 else None
    return dict(m=m, k=k, n=n, g=g, asym=rng.random() < 0.5, dtype=rng.choice([torch.float16, torch.bfloat16]),
                bias=rng.random() < 0.3, wseed=rng.randrange(1 << 30), splits=splits,
                a=rng.choice(["contiguous", "contiguous", "padded_rows", "offset"]), out=rng.choice(["new", "out"]))


@pytest.mark.parametrize("seed", range(48))
def test_w4a16_random(seed):
    """Activations contiguous, rows of a wider buffer, or starting off a 16-byte boundary (copied); a new or given
    output; sometimes a forced split count."""
    c = _w4a16_case(seed)
    m, k, n, dtype = c["m"], c["k"], c["n"], c["dtype"]
    group = k if c["g"] == "K" else c["g"]
    qweight, scales, qzeros = make_weight(k, n, group, c["asym"], dtype, seed=c["wseed"])
    wide = torch.randn(m, k + 16, device="cuda").to(dtype)
    a = {"contiguous": wide[:, :k].contiguous(), "padded_rows": wide[:, :k], "offset": wide[:, 3:k + 3]}[c["a"]]
    bias = torch.randn(n, device="cuda").to(dtype) if c["bias"] else None
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=group)
    given = torch.full((m, n), float("nan"), dtype=dtype, device="cuda") if c["out"] == "out" else None
    out = gn_mm.w4a16_mm(a, w, bias=bias, splits=c["splits"], out=given)
    assert given is None or out.data_ptr() == given.data_ptr()
    # The decode kernel multiplies exact (q - zero); the wgmma kernel rounds each dequantised weight once (the bound
    # allows for that where ROUNDS). Which one ran is the plan's choice, not a function of M alone.
    plan = w4a16._plan(w.dtype, sm80_w4a16.kernel_group_size(w), w.zeros is not None, m, w.n, w.packed.shape[0],
                       torch.cuda.current_device(), None, c["splits"])
    w4a16_check(out, a, qweight, scales, qzeros, group, bias=bias,
                rounds=ROUNDS and not isinstance(plan, w4a16_decode.Plan))
