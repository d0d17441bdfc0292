"""GPU tier, Hopper: the wgmma + TMA kernel (sm90_mm) on every config, against float64 / exact references,
across tiles shared by persistent CTAs, and agreeing with the mma.sync path on the same inputs."""

import dataclasses

import pytest
import torch

import gn_mm
from gn_mm import api, config as sm80_config, variant_table as variants
from gn_mm.arch import Arch
from gn_mm.dtypes import BY_NAME, OUT_DTYPES
from gn_mm.sm90_config import (DECODE, DECODE_SPLITS, FIT_CONFIGS, LARGE, LONG_K_CONFIGS, NARROW, PAIR_CONFIGS,
                               SM90_CONFIGS, TALL_FIT, WHOLE_K, Sm90Config, deepest)

from test_mm_gpu import INPUT_TOL, _check, _epilogue_ref, _poison, _rand

pytestmark = [pytest.mark.gpu]


@pytest.fixture(autouse=True)
def _hopper():
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("sm90_mm needs an sm_90 GPU")


COMBOS = [("bf16", "bf16", "f32", "bf16"), ("f16", "f16", "f32", "f32"), ("f16", "f16", "f16", "f16"),
          ("e4m3", "e5m2", "f32", "bf16"), ("e5m2", "e5m2", "f16", "f16"), ("s8", "u8", "s32", "s32"),
          ("u8", "u8", "s32", "f16"), ("tf32", "tf32", "f32", "f32")]


@pytest.mark.parametrize("cfg", SM90_CONFIGS, ids=[c.name for c in SM90_CONFIGS])
@pytest.mark.parametrize("combo", COMBOS, ids=["{}x{}->{}->{}".format(*c) for c in COMBOS])
@pytest.mark.parametrize("shape", [(1100, 2900, 520), (300, 130, 1000)])
def test_every_config(cfg, combo, shape):
    """(1100, 2900): more tiles than SMs, so persistent CTAs run several; every tail is ragged."""
    a_t, b_t, acc, out = combo
    m, n, k = shape
    dev = torch.device("cuda")
    a, a64 = _rand(BY_NAME[a_t], m, k, dev)
    w, w64 = _rand(BY_NAME[b_t], n, k, dev)
    if acc == "f16" and a.dtype == torch.float16:  # keep f16 sums well inside range
        a.mul_(0.25)
        a64 = a.double()
    kw, ref = _epilogue_ref(a64, w64, m, n, dev, a_t in ("e4m3", "u8") and out != "s32")
    c = _poison(m, n, OUT_DTYPES[out], dev)
    gn_mm.mm(a, w.t(), out=c, config=cfg, acc_dtype=torch.float16 if acc == "f16" else None, **kw)
    _check(c, ref, out, INPUT_TOL.get(a_t, 0.0) + (2e-2 if acc == "f16" else 0.0))


FIT_COMBOS = [COMBOS[0], COMBOS[2], COMBOS[3], COMBOS[5], COMBOS[7]]


FIT_AND_PAIRS = tuple(dict.fromkeys(FIT_CONFIGS + PAIR_CONFIGS[1:] + TALL_FIT))  # TALL is in both


@pytest.mark.parametrize("cfg", FIT_AND_PAIRS, ids=[c.name for c in FIT_AND_PAIRS])
@pytest.mark.parametrize("combo", FIT_COMBOS, ids=["{}x{}->{}->{}".format(*c) for c in FIT_COMBOS])
@pytest.mark.parametrize("m", [100, 200])
def test_every_fit_config(cfg, combo, m):
    """The tiles `fit` sizes to the SMs (64 rows x 32-256 columns, 128 rows x 80-256 alone or in pairs) and
    `pair_tile`'s 64-row pairs 80-176 wide and `tall_fit`'s 192-row tiles 112-192 wide: ragged row blocks (one
    128-row block at M = 100, the pair's second CTA without rows; two 64-row pairs at M = 200; a 192-row tile whose
    third consumer has no rows at M = 100), and N ragged for every width."""
    a_t, b_t, acc, out = combo
    n, k = 1000, 520
    dev = torch.device("cuda")
    a, a64 = _rand(BY_NAME[a_t], m, k, dev)
    w, w64 = _rand(BY_NAME[b_t], n, k, dev)
    if acc == "f16":
        a.mul_(0.25)
        a64 = a.double()
    kw, ref = _epilogue_ref(a64, w64, m, n, dev, a_t == "e4m3")
    c = _poison(m, n, OUT_DTYPES[out], dev)
    gn_mm.mm(a, w.t(), out=c, config=cfg, acc_dtype=torch.float16 if acc == "f16" else None, **kw)
    _check(c, ref, out, INPUT_TOL.get(a_t, 0.0) + (2e-2 if acc == "f16" else 0.0))


SHARED_A = [dataclasses.replace(LARGE[2], cluster_n=4), dataclasses.replace(DECODE, cluster_n=4),
            Sm90Config.parse("sm90_128x144_s5_g8_c1_n2"), dataclasses.replace(LARGE[1], cluster_n=2)]


@pytest.mark.parametrize("cfg", SHARED_A, ids=[c.name for c in SHARED_A])
@pytest.mark.parametrize("combo", FIT_COMBOS, ids=["{}x{}->{}->{}".format(*c) for c in FIT_COMBOS])
@pytest.mark.parametrize("shape", [(100, 1100, 520), (40, 1000, 300), (2100, 2900, 520)])
def test_clusters_along_n_share_a(cfg, combo, shape):
    """CLUSTER_N (each CTA multicasts a part of the A tile its cluster shares): parts of A partly or wholly past M
    (M = 100: a 128-row tile's last quarter; M = 40: two or three of four parts), clusters whose last CTAs lie past N
    (1100 columns: 9 tiles of 128 in clusters of 4), persistent clusters taking several tiles (2100 x 2900: more
    cluster tiles than clusters resident at once, so TMA-store chunk turns run across a cluster's tiles)."""
    a_t, b_t, acc, out = combo
    m, n, k = shape
    dev = torch.device("cuda")
    if m == 2100:
        gpu = api._gpu(torch.cuda.current_device())
        plan = api._plan(variants.find(a_t, b_t, acc), out, m, n, k * BY_NAME[a_t].bits // 8, gpu, cfg, None)
        assert plan.splits == 1 and plan.grid < cfg.ctas(m, n), (cfg.name, plan.grid)
    a, a64 = _rand(BY_NAME[a_t], m, k, dev)
    w, w64 = _rand(BY_NAME[b_t], n, k, dev)
    if acc == "f16":
        a.mul_(0.25)
        a64 = a.double()
    kw, ref = _epilogue_ref(a64, w64, m, n, dev, a_t == "e4m3")
    c = _poison(m, n, OUT_DTYPES[out], dev)
    gn_mm.mm(a, w.t(), out=c, config=cfg, acc_dtype=torch.float16 if acc == "f16" else None, **kw)
    _check(c, ref, out, INPUT_TOL.get(a_t, 0.0) + (2e-2 if acc == "f16" else 0.0))


def test_heuristic_swaps_padded_token_counts():
    """M = 320 over wide N: 128-row blocks would pad M to 384; the heuristic runs 128 x 160 swapped tiles (two cover
    the 320 rows), and the result is right."""
    dev = torch.device("cuda")
    m, n, k = 320, 8192, 4096
    a, a64 = _rand(BY_NAME["bf16"], m, k, dev)
    w, w64 = _rand(BY_NAME["bf16"], n, k, dev)
    plan = api._plan(variants.find("bf16", "bf16", "f32"), "bf16", m, n, k * 2, api._gpu(torch.cuda.current_device()),
                     None, None)
    assert plan.config.swap and (plan.config.block_m, plan.config.block_n) == (128, 160), plan.config.name
    _check(gn_mm.mm(a, w.t()), a64 @ w64.t(), "bf16")


def test_heuristic_shares_a_in_clusters_of_4():
    """128 x 14336: the heuristic's 112 tiles of 128 x 128 run in 28 clusters of 4 along N with the whole K; exact
    for int8, and the same clusters with a forced 3-way split-K through the workspace."""
    gpu = api._gpu(torch.cuda.current_device())
    dev = torch.device("cuda")
    for name, m in (("s8", 128), ("bf16", 96)):
        v = variants.find(name, name, "s32" if name == "s8" else "f32")
        plan = api._plan(v, v.outs[0], m, 14336, 4096 * BY_NAME[name].bits // 8, gpu, None, None)
        assert (plan.config.cluster_n, plan.splits, plan.grid) == (4, 1, 112), plan.config.name
    a, a64 = _rand(BY_NAME["s8"], 128, 4096, dev)
    w, w64 = _rand(BY_NAME["s8"], 14336, 4096, dev)
    c = _poison(128, 14336, torch.int32, dev)
    gn_mm.mm(a, w.t(), out=c)
    _check(c, a64 @ w64.t(), "s32")
    c2 = _poison(128, 14336, torch.int32, dev)
    gn_mm.mm(a, w.t(), out=c2, config=dataclasses.replace(LARGE[2], cluster_n=4), splits=3)
    assert torch.equal(c, c2)


WGMMA_OUTS = [(v, out) for v in variants.WGMMA for out in v.outs]


@pytest.mark.parametrize("v,out", WGMMA_OUTS, ids=[f"{v.name}->{o}" for v, o in WGMMA_OUTS])
def test_both_paths_agree(v, out):
    m, n, k = 257, 390, 1000
    dev = torch.device("cuda")
    a, _ = _rand(BY_NAME[v.a], m, k, dev)
    w, _ = _rand(BY_NAME[v.b], n, k, dev)
    if v.acc == "f16" and a.dtype == torch.float16:
        a.mul_(0.25)
    acc = {"f16": torch.float16, "f32": None, "s32": None}[v.acc]
    dt = OUT_DTYPES[out]
    wg = gn_mm.mm(a, w.t(), acc_dtype=acc, out_dtype=dt)
    sm80 = sm80_config.choose_sm80(m, n, Arch.of_device(), torch.cuda.get_device_properties().multi_processor_count)
    ms = gn_mm.mm(a, w.t(), acc_dtype=acc, out_dtype=dt, config=sm80)
    if out == "s32":
        assert torch.equal(wg, ms)
    else:  # integer sums overflow f16 outputs: the same entries must be inf on both paths
        finite = torch.isfinite(ms)
        assert torch.equal(finite, torch.isfinite(wg)) and torch.equal(wg[~finite], ms[~finite])
        if finite.any():  # u8 x u8 sums overflow f16 everywhere
            wg, ms = wg[finite].double(), ms[finite].double()
            err = float((wg - ms).norm() / ms.norm())
            assert err < (3e-2 if v.acc == "f16" else 1e-2), err


def test_default_path_is_wgmma_for_every_variant():
    gpu = api._gpu(torch.cuda.current_device())
    for a, b, acc in [("bf16", "bf16", "f32"), ("s4", "u4", "s32"), ("tf32", "tf32", "f32")]:
        v = variants.find(a, b, acc)
        assert api._plan(v, "s32" if acc == "s32" else "f32", 4096, 4096, 8192, gpu, None, None).__class__.__module__ \
            == "gn_mm.sm90_mm"
    # int4 with small M stays on the mma.sync path (unpacking would cost more than it saves)
    s4 = variants.find("s4", "s4", "s32")
    assert api._plan(s4, "s32", 16, 4096, 2048, gpu, None, None).__class__.__module__ == "gn_mm.sm80_mm"


@pytest.mark.parametrize("types", [("s4", "s4"), ("s4", "u4"), ("u4", "u4")])
@pytest.mark.parametrize("shape", [(7, 17, 64), (600, 520, 1000), (1100, 2900, 4096)])
@pytest.mark.parametrize("cfg", [None, NARROW], ids=["heuristic", "forced-wgmma"])
def test_int4_runs_unpacked_on_s8_wgmma_exactly(types, shape, cfg):
    m, n, k = shape
    dev = torch.device("cuda")
    a, a64 = _rand(BY_NAME[types[0]], m, k, dev)
    w, w64 = _rand(BY_NAME[types[1]], n, k, dev)
    c = _poison(m, n, torch.int32, dev)
    gn_mm.mm(a, w.t(), out=c, config=cfg)
    _check(c, a64 @ w64.t(), "s32")


def test_whole_k_tiles_are_not_split():
    """The tiles the heuristic sizes to one round of the SMs keep the whole K (choose_splits would split the pairs
    at N = 3072 four ways), and give the right answer there; at M = 128 the one-block pairs of long_k take over."""
    gpu = api._gpu(torch.cuda.current_device())
    bf16 = variants.find("bf16", "bf16", "f32")
    for m, n, k in ((128, 3072, 14336), (100, 9216, 2048), (16, 5120, 2048)):
        plan = api._plan(bf16, "bf16", m, n, k * 2, gpu, None, None)
        if m == 128:  # one 128-row block with a long K: 128 x 48 pairs split in clusters instead (NOTES sm90 62)
            assert plan.config.name == "sm90_128x48_s8_g8_c1_k2" and plan.splits == 1, plan.config.name
            continue
        assert plan.config in WHOLE_K and plan.splits == 1, (m, n, k, plan.config.name)
    dev = torch.device("cuda")
    a, a64 = _rand(BY_NAME["bf16"], 128, 14336, dev)
    w, w64 = _rand(BY_NAME["bf16"], 3072, 14336, dev)
    c = _poison(128, 3072, torch.bfloat16, dev)
    gn_mm.mm(a, w.t(), out=c)
    _check(c, a64 @ w64.t(), "bf16")


def test_balanced_tiles_past_fit():
    """M > 256 where the menu's tiles would make a thin last round: `balance`'s tiles (no clusters), ragged in M
    and N, with the whole K, against float64; 700 x 5000 takes 128 x 240 tiles (3 bf16 chunks and a 48-column direct
    tail), 807 x 4500 126 lone menu tiles of 128 x 256 (fewer CTAs than SMs), 1500 x 3000 192 x 192 ones."""
    gpu = api._gpu(torch.cuda.current_device())
    bf16 = variants.find("bf16", "bf16", "f32")
    dev = torch.device("cuda")
    for m, n, k in ((700, 3016, 1000), (383, 6096, 1000), (1500, 3000, 2000), (700, 5000, 3000), (807, 4500, 3000)):
        plan = api._plan(bf16, "bf16", m, n, k * 2, gpu, None, None)  # 3016 / 6096: TMA stores with a live tail
        assert (plan.config in FIT_CONFIGS or plan.config == LARGE[1]) and plan.config.cluster_m == 1, (m, n, k)
        assert plan.splits == 1, (m, n, k, plan.config.name)
        a, a64 = _rand(BY_NAME["bf16"], m, k, dev)
        w, w64 = _rand(BY_NAME["bf16"], n, k, dev)
        c = _poison(m, n, torch.bfloat16, dev)
        gn_mm.mm(a, w.t(), out=c)
        _check(c, a64 @ w64.t(), "bf16")


@pytest.mark.parametrize("case", [("bf16", "bf16", "f32", "bf16", 1000, 1000, 10248, "sm90_128x128_s6_g8_c1"),
                                  ("bf16", "bf16", "f32", "f32", 380, 3050, 14336, "sm90_128x160_s5_g8_c1"),
                                  ("s8", "u8", "s32", "s32", 1000, 1000, 20488, "sm90_128x128_s6_g8_c1"),
                                  ("e4m3", "e4m3", "f32", "bf16", 1270, 1000, 28680, "sm90_128x176_s5_g8_c1"),
                                  ("f16", "f16", "f32", "f16", 700, 2000, 24576, "sm90_128x192_s4_g8_c1"),
                                  ("tf32", "tf32", "f32", "f32", 1000, 1000, 5128, "sm90_128x128_s6_g8_c1"),
                                  ("bf16", "bf16", "f32", "bf16", 200, 3000, 14336, "sm90_128x96_s6_g8_c1"),
                                  ("s8", "u8", "s32", "s32", 250, 2500, 28680, "sm90_128x80_s7_g8_c1")],
                         ids=lambda c: "{}x{}->{}->{} {}x{}x{}".format(*c[:7]))
def test_split_wider_picks_split_two_ways(case):
    """Past fit's M with a long K, narrow lone picks run as a tile of twice the area split 2 ways through the workspace
    (split_wider, NOTES sm90 71): the heuristic's plan, and the result against float64 / exact references, ragged in
    M, N and K, with per-row / per-column scales and a bias for the 8-bit inputs into floats."""
    ta, tb, acc, out, m, n, k, name = case
    gpu = api._gpu(torch.cuda.current_device())
    v = variants.find(ta, tb, acc)
    plan = api._plan(v, out, m, n, k * BY_NAME[ta].bits // 8, gpu, None, None)
    assert plan.config.name == name and plan.splits == 2, (plan.config.name, plan.splits)
    dev = torch.device("cuda")
    a, a64 = _rand(BY_NAME[ta], m, k, dev)
    w, w64 = _rand(BY_NAME[tb], n, k, dev)
    kw, ref = _epilogue_ref(a64, w64, m, n, dev, ta == "e4m3")
    c = _poison(m, n, OUT_DTYPES[out], dev)
    gn_mm.mm(a, w.t(), out=c, **kw)
    _check(c, ref, out, INPUT_TOL.get(ta, 0.0))


def test_decode_shapes_split_k_on_wgmma():
    gpu = api._gpu(torch.cuda.current_device())
    bf16 = variants.find("bf16", "bf16", "f32")
    plan = api._plan(bf16, "bf16", 16, 2048, 8192, gpu, None, None)
    assert plan.__class__.__module__ == "gn_mm.sm90_mm" and (plan.splits > 1 or plan.config.cluster_k > 1)
    f16acc = variants.find("f16", "f16", "f16")
    assert api._plan(f16acc, "f16", 16, 2048, 8192, gpu, None, None).splits == 1


@pytest.mark.parametrize("cfg", SM90_CONFIGS, ids=[c.name for c in SM90_CONFIGS])
@pytest.mark.parametrize("splits", [2, 5])
def test_split_k_every_config(cfg, splits):
    m, n, k = 300, 520, 3000
    dev = torch.device("cuda")
    a, a64 = _rand(BY_NAME["e4m3"], m, k, dev)
    w, w64 = _rand(BY_NAME["e4m3"], n, k, dev)
    kw, ref = _epilogue_ref(a64, w64, m, n, dev, True)
    c = _poison(m, n, torch.bfloat16, dev)
    gn_mm.mm(a, w.t(), out=c, config=cfg, splits=splits, **kw)
    _check(c, ref, "bf16")


@pytest.mark.parametrize("cfg", [SM90_CONFIGS[0], NARROW], ids=lambda c: c.name)
@pytest.mark.parametrize("m", [16, 33])
def test_split_k_is_deterministic_in_graphs_and_into_unaligned_out(cfg, m):
    """Split-K (raw sums per split, then mm_reduce adds them in split order): bit-identical across runs and
    graph replays, and an out= view whose rows are not 16-byte aligned gets the same values and nothing past
    its columns. m = 16 / 33 leave whole 64-row blocks and warps past M."""
    n, k, splits = 1000, 5000, 6
    dev = torch.device("cuda")
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    first = gn_mm.mm(a, w.t(), config=cfg, splits=splits)
    _check(first, a.double() @ w.double().t(), "bf16")
    for _ in range(3):
        assert torch.equal(gn_mm.mm(a, w.t(), config=cfg, splits=splits), first)
    padded = _poison(m, n + 3, torch.bfloat16, dev)  # rows 2006 bytes apart: no TMA store
    gn_mm.mm(a, w.t(), config=cfg, splits=splits, out=padded[:, :n])
    assert torch.equal(padded[:, :n], first) and padded[:, n:].isnan().all()
    out = _poison(m, n, torch.bfloat16, dev)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        gn_mm.mm(a, w.t(), config=cfg, splits=splits, out=out)
    for _ in range(3):
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, first)


CLUSTER_K = [dataclasses.replace(DECODE, cluster_k=k) for k in (2, 4, 8)] + [
    dataclasses.replace(NARROW, cluster_k=4), dataclasses.replace(LARGE[1], cluster_k=2),
    dataclasses.replace(LARGE[2], cluster_k=2), *[c for c in DECODE_SPLITS if (c.block_n, c.cluster_k) in ((96, 4), (144, 4), (176, 4), (160, 8))], LONG_K_CONFIGS[0],
    dataclasses.replace(deepest(128, 208), cluster_k=4), dataclasses.replace(deepest(128, 32), cluster_k=2),
    dataclasses.replace(deepest(128, 48), cluster_k=2)]
SPLIT_COMBOS = [("bf16", "bf16", "f32", "bf16"), ("e4m3", "e5m2", "f32", "bf16"), ("s8", "u8", "s32", "s32"),
                ("tf32", "tf32", "f32", "f32")]


@pytest.mark.parametrize("cfg", CLUSTER_K, ids=lambda c: c.name)
@pytest.mark.parametrize("combo", SPLIT_COMBOS, ids=["{}x{}->{}->{}".format(*c) for c in SPLIT_COMBOS])
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (16, 1000, 3000), (33, 522, 1032), (130, 300, 9000)])
def test_split_k_inside_a_cluster(cfg, combo, shape):
    """Split-K across the CTAs of a cluster, sums added on chip in rank order: every output correct (ragged M,
    N, K; K shares of unequal length; M past one 64-row block), nothing written past M or N."""
    a_t, b_t, _, out = combo
    m, n, k = shape
    dev = torch.device("cuda")
    a, a64 = _rand(BY_NAME[a_t], m, k, dev)
    w, w64 = _rand(BY_NAME[b_t], n, k, dev)
    padded = _poison(m + 1, n + 3, OUT_DTYPES[out], dev)
    c = padded[:m, :n]
    k_tiles = -(-k * BY_NAME[a_t].bits // 8 // 128)
    if k_tiles < cfg.cluster_k:
        with pytest.raises(gn_mm.UnsupportedError, match="some CTAs would get none"):
            gn_mm.mm(a, w.t(), out=c, config=cfg)
        return
    gn_mm.mm(a, w.t(), out=c, config=cfg)
    _check(c, a64 @ w64.t(), out, INPUT_TOL.get(a_t, 0.0) + (2e-3 if a_t.startswith("e") else 0.0))
    rest = torch.cat([padded[m:].flatten(), padded[:m, n:].flatten()])
    assert rest.isnan().all() if rest.is_floating_point() else (rest == -(2**31) + 7).all()


@pytest.mark.parametrize("combo", SPLIT_COMBOS[:3:2], ids=["{}x{}->{}->{}".format(*c) for c in SPLIT_COMBOS[:3:2]])
@pytest.mark.parametrize("ck", [4, 8])
def test_split_k_inside_a_cluster_over_many_tiles(combo, ck):
    """More tiles than resident clusters: each cluster takes several tiles in turn, its ring refilled after
    every on-chip reduction."""
    a_t, b_t, _, out = combo
    cfg = dataclasses.replace(DECODE, cluster_k=ck)
    m, n, k = 300, 2000, 2048
    dev = torch.device("cuda")
    a, a64 = _rand(BY_NAME[a_t], m, k, dev)
    w, w64 = _rand(BY_NAME[b_t], n, k, dev)
    c = _poison(m, n, OUT_DTYPES[out], dev)
    gn_mm.mm(a, w.t(), out=c, config=cfg)
    v = variants.find_path(a_t, b_t, "s32" if a_t == "s8" else "f32", "wgmma")
    plan = api._plan(v, out, m, n, k * BY_NAME[a_t].bits // 8, api._gpu(torch.cuda.current_device()), cfg, None)
    assert plan.grid < cfg.tiles(m, n) * ck  # clusters take more than one tile
    _check(c, a64 @ w64.t(), out)


def test_split_k_inside_a_cluster_scales_bias_determinism_and_saturation():
    dev = torch.device("cuda")
    cfg = dataclasses.replace(DECODE, cluster_k=4)
    m, n, k = 16, 4096, 4104
    a, a64 = _rand(BY_NAME["e4m3"], m, k, dev)
    w, w64 = _rand(BY_NAME["e4m3"], n, k, dev)
    kw, ref = _epilogue_ref(a64, w64, m, n, dev, True)
    first = gn_mm.mm(a, w.t(), config=cfg, **kw)
    _check(first, ref, "bf16", 2e-3)
    out = _poison(m, n, torch.bfloat16, dev)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        gn_mm.mm(a, w.t(), config=cfg, out=out, **kw)
    for _ in range(3):
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, first)
    big = torch.full((16, 135_168), 255, dtype=torch.uint8, device=dev)
    assert int(gn_mm.mm(big, big.t(), config=cfg).min()) == 2**31 - 1


def test_decode_heuristic_splits_inside_a_cluster():
    gpu = api._gpu(torch.cuda.current_device())
    bf16 = variants.find("bf16", "bf16", "f32")
    for n in (1024, 4608):  # 8 tiles: 8 clusters fit at once; 36 tiles: split in pairs, re-tiled as 29 of 64 x 160 in fours
        plan = api._plan(bf16, "bf16", 16, n, 8192, gpu, None, None)
        assert plan.config.cluster_k > 1 and plan.splits == 1 and plan.reduce is None
        assert plan.grid == plan.config.tiles(16, n) * plan.config.cluster_k
    with pytest.raises(gn_mm.UnsupportedError, match="some CTAs would get none"):
        gn_mm.mm(torch.randn(16, 64, device="cuda", dtype=torch.bfloat16),
                 torch.randn(64, 64, device="cuda", dtype=torch.bfloat16), config=CLUSTER_K[2])
    x = torch.randn(16, 520, device="cuda", dtype=torch.bfloat16)  # 9 K steps over 8 CTAs, by name
    _check(gn_mm.mm(x, x.t(), config=CLUSTER_K[2].name), x.double() @ x.double().t(), "bf16")
    with pytest.raises(gn_mm.UnsupportedError, match="already splits K"):
        x = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
        gn_mm.mm(x, x.t(), config=CLUSTER_K[1], splits=2)


def test_split_k_integers_are_exact_and_saturate():
    dev = torch.device("cuda")
    a, a64 = _rand(BY_NAME["s8"], 70, 9000, dev)
    w, w64 = _rand(BY_NAME["u8"], 300, 9000, dev)
    for cfg in (SM90_CONFIGS[0], NARROW):
        c = _poison(70, 300, torch.int32, dev)
        gn_mm.mm(a, w.t(), out=c, config=cfg, splits=5)
        _check(c, a64 @ w64.t(), "s32")
    big = torch.full((16, 135_168), 255, dtype=torch.uint8, device=dev)
    assert int(gn_mm.mm(big, big.t(), splits=7).min()) == 2**31 - 1


@pytest.mark.parametrize("out", ["bf16", "f32"])
def test_tiles_not_whole_store_chunks_wide(out):
    """A 48-column tile is not whole 128-byte TMA-store chunks wide (64 bf16 / 32 fp32 columns): bf16 stores it all
    directly, fp32 one chunk through TMA and the 16 columns past it directly; every column must be written."""
    m, n, k = 130, 200, 312
    dev = torch.device("cuda")
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    c = _poison(m, n, OUT_DTYPES[out], dev)
    gn_mm.mm(a, w.t(), out=c, config=gn_mm.Sm90Config.parse("sm90_64x48_s8_g8_c1"))
    _check(c, a.double() @ w.double().t(), out)


@pytest.mark.parametrize("cfg,out", [("sm90_64x64_s13_g8_c1", "bf16"), ("sm90_128x80_s7_g8_c1", "bf16"),
                                     ("sm90_128x192_s4_g8_c1", "bf16"), ("sm90_128x144_s5_g8_c1", "bf16"),
                                     ("sm90_128x176_s5_g8_c1", "s32"), ("sm90_128x112_s6_g8_c1", "s32"),
                                     ("sm90_128x240_s4_g8_c1", "bf16"), ("sm90_128x208_s4_g8_c1", "s32"),
                                     ("sm90_192x192_s3_g8_c1", "bf16")])
def test_store_chunks_across_tiles_exact(cfg, out):
    """Persistent CTAs running many short-K tiles, so a tile's first TMA-store chunk follows the previous tile's last
    store closely: the two chunk buffers must alternate across tiles (tiles of an odd chunk count, 1 / 3 / 5, once
    refilled a buffer its last store was still reading: 536 M wrong outputs of 8192^2 at 128 x 80). Small integers:
    exact sums, compared for equality; N = 3016 leaves the last tile's direct-store tail partly inside N."""
    m, n, k = 4096, 3016, 64
    dev = torch.device("cuda")
    dt = torch.bfloat16 if out == "bf16" else torch.int8
    a = torch.randint(-4, 5, (m, k), device=dev).to(dt)
    w = torch.randint(-4, 5, (n, k), device=dev).to(dt)
    ref = a.double() @ w.double().t()
    ref = ref.to(torch.bfloat16) if out == "bf16" else ref.to(torch.int32)
    for _ in range(5):
        c = _poison(m, n, OUT_DTYPES[out], dev)
        gn_mm.mm(a, w.t(), out=c, config=gn_mm.Sm90Config.parse(cfg))
        assert torch.equal(c, ref), (cfg, int((c != ref).sum()))


@pytest.mark.parametrize("out,n", [("bf16", 1029), ("f32", 7393), ("f32", 257)])
@pytest.mark.parametrize("cfg", [LARGE[0], DECODE], ids=lambda c: c.name)
def test_out_view_with_aligned_rows_but_ragged_n_gets_nothing_past_n(out, n, cfg):
    """An out= view of a wider buffer whose rows start 16 bytes apart while N x itemsize is no multiple of 16: the
    TMA store wrote the rest of each row's last 16 bytes past N (into the view's padding); such rows store
    directly. Found by tests/test_fuzz_gpu.py (seed 56: 77 x 7393 x 8, tf32 -> f32)."""
    m, k = 77, 40
    dev = torch.device("cuda")
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    pad = -n % (128 // torch.finfo(OUT_DTYPES[out]).bits)  # to the next 16-byte row
    padded = _poison(m, n + pad, OUT_DTYPES[out], dev)
    assert (padded.stride(0) * padded.element_size()) % 16 == 0 and (n * padded.element_size()) % 16
    gn_mm.mm(a, w.t(), out=padded[:, :n], config=cfg)
    _check(padded[:, :n], a.double() @ w.double().t(), out)
    assert padded[:, n:].isnan().all()


SWAPPED = [Sm90Config.parse(name) for name in ("sm90_128x160_s5_g8_c1_t", "sm90_64x80_s11_g8_c1_t",
                                               "sm90_128x256_s4_g8_c1_t", "sm90_128x16_s10_g8_c1_t",
                                               "sm90_128x48_s8_g8_c1_t")]


@pytest.mark.parametrize("cfg", SWAPPED, ids=[c.name for c in SWAPPED])
@pytest.mark.parametrize("combo", COMBOS, ids=["{}x{}->{}->{}".format(*c) for c in COMBOS])
@pytest.mark.parametrize("shape", [(1100, 2900, 520), (300, 130, 1000), (16, 1000, 300)])
def test_swapped_tiles(cfg, combo, shape):
    """C^T = B A^T (tile rows along N, columns along M): every variant and output, per-row / per-column scales and
    a bias trading places, ragged M and N in both tile dimensions, persistent CTAs over several tiles; the TMA
    stores write nothing past M or N of a padded view."""
    a_t, b_t, acc, out = combo
    m, n, k = shape
    dev = torch.device("cuda")
    a, a64 = _rand(BY_NAME[a_t], m, k, dev)
    w, w64 = _rand(BY_NAME[b_t], n, k, dev)
    if acc == "f16" and a.dtype == torch.float16:
        a.mul_(0.25)
        a64 = a.double()
    kw, ref = _epilogue_ref(a64, w64, m, n, dev, a_t in ("e4m3", "u8") and out != "s32")
    padded = _poison(m + 3, n + 8, OUT_DTYPES[out], dev)
    c = padded[:m, :n]
    gn_mm.mm(a, w.t(), out=c, config=cfg, acc_dtype=torch.float16 if acc == "f16" else None, **kw)
    _check(c, ref, out, INPUT_TOL.get(a_t, 0.0) + (2e-2 if acc == "f16" else 0.0))
    rest = torch.cat([padded[m:].flatten(), padded[:m, n:].flatten()])
    assert rest.isnan().all() if rest.is_floating_point() else (rest == -(2**31) + 7).all()


@pytest.mark.parametrize("out", ["bf16", "f32"])
def test_swapped_tiles_unaligned_out_and_per_tensor_scales(out):
    """Swapped tiles into an out= view whose rows are not 16-byte aligned (direct stores, no TMA), per-tensor
    scales; and no K splits with them."""
    dev = torch.device("cuda")
    m, n, k = 333, 517, 1000
    cfg = SWAPPED[0]
    a, a64 = _rand(BY_NAME["e4m3"], m, k, dev)
    w, w64 = _rand(BY_NAME["e4m3"], n, k, dev)
    sa, sb, bias = torch.tensor(0.5, device=dev), torch.tensor(0.25, device=dev), torch.randn(n, device=dev)
    padded = _poison(m, n + 1, OUT_DTYPES[out], dev)
    c = padded[:, 1:]
    gn_mm.mm(a, w.t(), out=c, config=cfg, scale_a=sa, scale_b=sb, bias=bias)
    _check(c, (a64 @ w64.t()) * 0.125 + bias.double(), out, 2e-3)  # fp8 wgmma's ~14-bit sums (INPUT_TOL's note)
    assert padded[:, 0].isnan().all()
    with pytest.raises(gn_mm.UnsupportedError, match="without K splits"):
        gn_mm.mm(a, w.t(), config=cfg, splits=2)


@pytest.mark.parametrize("swap", [False, True], ids=["plain", "swapped"])
def test_epilogue_builds_follow_each_call(swap):
    """A plan's epilogue build is picked per call (sm90_mm.store_for; NOTES sm90 79): one plan made for calls without
    terms runs calls with none, per-row and per-column scales, a bias, and scales with a bias (the TMA builds without and
    with column terms, the second built on that call's launch; for a swapped tile the per-row scales are its column
    terms and the bias is per tile row), in alternating order, then into an out= view whose rows do not suit a tensor
    map (the direct build); the same calls through gn_mm.mm, whose plans are made for their terms. A call that ran a
    build without the terms it has would be wrong: every result against float64."""
    from gn_mm import sm90_mm

    dev = torch.device("cuda")
    m, n, k = (320, 4096, 1024) if swap else (2000, 3000, 1000)
    gpu = api._gpu(torch.cuda.current_device())
    e4m3 = variants.find("e4m3", "e4m3", "f32")
    plan = api._plan(e4m3, "bf16", m, n, k, gpu, None, None, (False, False))
    assert plan.config.swap == swap and plan.splits == 1 and plan.store == sm90_mm.STORE_TMA, plan.config.name
    a, a64 = _rand(BY_NAME["e4m3"], m, k, dev)
    w, w64 = _rand(BY_NAME["e4m3"], n, k, dev)
    sa, sb, bias = torch.rand(m, device=dev) + 0.5, torch.rand(n, device=dev) * 0.01 + 0.01, torch.randn(n, device=dev)
    one = torch.ones((), device=dev)
    ref = a64 @ w64.t()
    cases = [({}, ref), (dict(scale_a=sa, scale_b=one), ref * sa.double()[:, None]),
             (dict(scale_a=one, scale_b=sb), ref * sb.double()[None, :]), (dict(bias=bias), ref + bias.double()),
             (dict(scale_a=sa, scale_b=sb, bias=bias), ref * sa.double()[:, None] * sb.double()[None, :] + bias.double())]
    lds = dict(m=m, n=n, k_bytes=k, lda_bytes=a.stride(0), ldb_bytes=w.stride(0))  # (fp8: bytes; _rand pads rows)
    for kw, expect in cases + cases[::-1]:
        c = _poison(m, n, torch.bfloat16, dev)
        plan.launch(a, w, c, **lds, **kw)
        _check(c, expect, "bf16", INPUT_TOL["e4m3"])
        c = _poison(m, n, torch.bfloat16, dev)
        gn_mm.mm(a, w.t(), out=c, **kw)
        _check(c, expect, "bf16", INPUT_TOL["e4m3"])
    assert set(plan.builds) == {sm90_mm.STORE_TMA_COLS}
    wide = _poison(m, n + 3, torch.bfloat16, dev)  # rows of n + 3 values: not whole 16-byte units
    gn_mm.mm(a, w.t(), out=wide[:, :n], bias=bias)
    _check(wide[:, :n], ref + bias.double(), "bf16", INPUT_TOL["e4m3"])
    assert torch.isnan(wide[:, n:].float()).all(), "the view's padding was written"
    plan.launch(a, w, wide[:, :n], **lds, scale_a=sa, scale_b=one)
    _check(wide[:, :n], ref * sa.double()[:, None], "bf16", INPUT_TOL["e4m3"])
    assert set(plan.builds) == {sm90_mm.STORE_TMA_COLS, sm90_mm.STORE_DIRECT}
