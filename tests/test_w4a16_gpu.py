"""GPU tier for gn_mm.w4a16_mm: symmetric and asymmetric, every group size, fp16 and bf16, M from decode to
prefill, ragged N and K within the format's rules, against float64 dequantise-then-matmul.

The mma.sync kernel multiplies activations by the exact integers (q - zero) and applies each group's scale in
fp32, so every output must match the float64 truth to within one output rounding plus fp32 accumulation error,
element by element. The wgmma kernel (sm_90, the default there) rounds each dequantised weight once to 16 bits
(as fp16 matmul on the dequantised weight does): its bound adds that rounding, relative to sum |a| |w|.
Outputs are poisoned before launch.
"""

import dataclasses

import pytest
import torch

import gn_mm
from gn_mm import sm80_w4a16, sm90_w4a16, w4a16_decode, w4a16_formats as fmt

pytestmark = pytest.mark.gpu
DTYPES = (torch.float16, torch.bfloat16)
EPS = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}
MS = (1, 3, 16, 64, 255, 2048)
# (K, N) per group size: K a multiple of G (G = K: any K), N a multiple of 8 but not of 16 or 64.
SHAPES = {32: (160, 1000), 64: (320, 72), 128: (640, 264), "K": (204, 8)}
HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
ROUNDS = HOPPER  # the default kernel on this GPU rounds the dequantised weight
FAMILIES = [sm80_w4a16] + ([sm90_w4a16] if HOPPER else [])


def make_weight(k, n, g, asym, dtype, device="cuda", seed=0):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    q = torch.randint(0, 16, (k, n), generator=gen)
    groups = k // g
    scales = (torch.rand(groups, n, generator=gen) * 0.05 + 0.005).to(dtype)
    zeros = torch.randint(0, 16, (groups, n), generator=gen)
    qweight = fmt.pack_nibbles(q, dim=1).to(device)
    qzeros = fmt.pack_nibbles(zeros, dim=1).to(device) if asym else None
    return qweight, scales.to(device), qzeros


def check(out, a, qweight, scales, qzeros, g, bias=None, rounds=ROUNDS):
    w64 = fmt.dequantize_gptq(qweight, scales, qzeros, group_size=g)
    a64 = a.double()
    truth = a64 @ w64 + (bias.double() if bias is not None else 0.0)
    mag = a64.abs() @ w64.abs() + (bias.double().abs() if bias is not None else 0.0)
    assert not torch.isnan(out).any(), "unwritten or NaN outputs"
    o = out.double()
    # One rounding to the output dtype, plus fp32 accumulation (and the fold) relative to sum |a| |w|.
    bound = EPS[a.dtype] * truth.abs() + (2e-5 + (EPS[a.dtype] if rounds else 0.0)) * mag + 1e-6
    excess = (o - truth).abs() - bound
    assert excess.max() <= 0, f"max error {(o - truth).abs().max():.3e} beyond bound at {excess.argmax()}"


def poisoned(m, n, dtype):
    return torch.full((m, n), float("nan"), dtype=dtype, device="cuda")


@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
@pytest.mark.parametrize("g", [32, 64, 128, "K"])
@pytest.mark.parametrize("asym", [False, True], ids=["sym", "asym"])
@pytest.mark.parametrize("m", MS)
def test_w4a16_matrix(dtype, g, asym, m):
    k, n = SHAPES[g]
    group = k if g == "K" else g
    qweight, scales, qzeros = make_weight(k, n, group, asym, dtype, seed=m)
    a = torch.randn(m, k, device="cuda").to(dtype)
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=group)
    out = gn_mm.w4a16_mm(a, w, out=poisoned(m, n, dtype))
    check(out, a, qweight, scales, qzeros, group, rounds=ROUNDS and m > w4a16_decode.MAX_M)


# Decode configs the heuristic can pick, and corners: one strip per CTA, 16 rows with a deep ring.
DECODE = list(w4a16_decode.HEURISTIC_CONFIGS) + [
    w4a16_decode.DecodeConfig(8, 1, 4, 2), w4a16_decode.DecodeConfig(16, 4, 2, 8)]


@pytest.mark.parametrize("config", DECODE, ids=lambda c: c.name)
@pytest.mark.parametrize("splits", [None, 1, 3])
@pytest.mark.parametrize("g", [32, 64, 128, "K"])
def test_decode_configs(config, splits, g):
    """The decode kernel: every M it serves up to its row count, K splits (deterministic: repeated calls are
    bit-identical), both dtypes, with and without zero points; its fold is exact up to fp32 accumulation."""
    k, n = SHAPES[g]
    group = k if g == "K" else g
    for dtype in DTYPES:
        for asym in (False, True):
            for m in sorted({1, config.mrows - 3, config.mrows}):
                qweight, scales, qzeros = make_weight(k, n, group, asym, dtype, seed=m)
                a = torch.randn(m, k, device="cuda").to(dtype)
                w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=group)
                out = gn_mm.w4a16_mm(a, w, config=config, splits=splits, out=poisoned(m, n, dtype))
                check(out, a, qweight, scales, qzeros, group, rounds=False)
                assert torch.equal(gn_mm.w4a16_mm(a, w, config=config, splits=splits), out)


def test_decode_sized_m_takes_cluster_plans_where_they_win():
    """On an H100-class GPU (w4a16_decode.cedes_to_clusters) a decode-sized call on a 4M+ value weight runs the wgmma
    kernel's cluster plan where its pick is one and fills the SMs or streams short shares (1 x 4096 x 4096; 1 x 14336
    x 4096 in KSPLIT pairs, NOTES W4A16 74), the decode kernel where the pick is no cluster plan (1 x 14336 x 5120),
    leaves SMs idle with long shares (1 x 14336 x 1024 in sixes) or on a small weight (1 x 1024 x 1024). Results stay
    exact."""
    from gn_mm import runtime, w4a16, w4a16_decode
    from gn_mm.arch import Arch

    if Arch.of_device(torch.device("cuda")).cc != 90:
        pytest.skip("sm_90 only: the cluster plans are the wgmma kernel's")
    tbs = runtime.dram_bandwidth(torch.cuda.current_device()) / 1e12
    for k, n, cedes_on_h100 in ((4096, 4096, True), (14336, 4096, True), (14336, 5120, False), (14336, 1024, False),
                                (1024, 1024, False)):
        plan = w4a16._plan(torch.bfloat16, 128, False, 1, n, k // 64, torch.cuda.current_device(), None, None)
        cedes = cedes_on_h100 and 0 < tbs < w4a16_decode.FAST_DRAM_TBS
        assert isinstance(plan, w4a16_decode.Plan) != cedes, (k, n, type(plan))
        if cedes:
            assert plan.config.cluster_k > 1
        qweight, scales, qzeros = make_weight(k, n, 128, False, torch.bfloat16)
        a = torch.randn(1, k, device="cuda").bfloat16()
        check(gn_mm.w4a16_mm(a, qweight, scales, group_size=128, out=poisoned(1, n, torch.bfloat16)), a, qweight,
              scales, None, 128)


def test_outgrown_tickets_stay_allocated():
    """A stream's ticket counters grow by replacement; a CUDA graph captured before still points at the old set, so it
    must never return to the allocator (a replay would count in someone else's memory)."""
    from gn_mm import split_k

    dev = torch.device("cuda")
    old = split_k.tickets(dev, 16)
    new = split_k.tickets(dev, old.numel() + 1)
    assert new.data_ptr() != old.data_ptr() and not new.any()
    assert any(t.data_ptr() == old.data_ptr() for t in split_k._retired)
    assert split_k.tickets(dev, 16) is new


@pytest.mark.parametrize("m", [1, 16, 70])
def test_k_tail_past_the_row_is_never_read(m):
    """Rows 16-byte aligned but K not a multiple of 8: the 16-byte chunk holding the last values also covers
    memory past K (here NaN), which the kernels must not multiply in."""
    k, n = 204, 40
    qweight, scales, qzeros = make_weight(k, n, k, True, torch.bfloat16)
    big = torch.full((m, 208), float("nan"), device="cuda").bfloat16()
    big[:, :k] = torch.randn(m, k, device="cuda").bfloat16()
    a = big[:, :k]
    out = gn_mm.w4a16_mm(a, qweight, scales, qzeros, group_size=k, out=poisoned(m, n, torch.bfloat16))
    check(out, a, qweight, scales, qzeros, k)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
def test_gptq_tensors_directly_bias_and_zp_bias(dtype):
    k, n, g, m = 256, 96, 64, 5
    qweight, scales, _ = make_weight(k, n, g, False, dtype)
    a = torch.randn(m, k, device="cuda").to(dtype)
    bias = torch.randn(n, device="cuda").to(dtype)
    out = gn_mm.w4a16_mm(a, qweight, scales, group_size=g, bias=bias, zp_bias=7)
    w64 = fmt.dequantize_gptq(qweight, scales, None, group_size=g, zp_bias=7)
    zeros7 = fmt.pack_nibbles(torch.full((k // g, n), 7), dim=1).cuda()  # the same weight, explicit zeros
    assert torch.equal(w64, fmt.dequantize_gptq(qweight, scales, zeros7, group_size=g))
    check(out, a, qweight, scales, zeros7, g, bias)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.STEM)
@pytest.mark.parametrize("splits", [1, 2, 3, 7])
@pytest.mark.parametrize("m", [4, 70])
def test_split_k_is_deterministic_and_correct(splits, family, m):
    k, n, g = 7 * 64 + 128, 200, 64
    qweight, scales, qzeros = make_weight(k, n, g, True, torch.float16)
    a = torch.randn(m, k, device="cuda").half()
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=g)
    cfg = family.choose(m) if family is sm80_w4a16 else family.choose(m, n, 132, g, k // 64)
    first = gn_mm.w4a16_mm(a, w, splits=splits, config=cfg, out=poisoned(m, n, torch.float16))
    check(first, a, qweight, scales, qzeros, g, rounds=family is sm90_w4a16)
    for _ in range(3):  # tickets reset themselves: repeated calls stay right and bit-identical
        assert torch.equal(gn_mm.w4a16_mm(a, w, splits=splits, config=cfg), first)


# Every config the heuristics can pick, and a 4-consumer wgmma tile (no register rebalancing).
ALL_CONFIGS = [c for _, c in sm80_w4a16.CONFIGS] + list(dict.fromkeys(
    c for _, cs in sm90_w4a16.CONFIGS for c in cs)) + [sm90_w4a16.Sm90W4A16Config(16, 4, 1, 8)]


@pytest.mark.parametrize("config", ALL_CONFIGS, ids=lambda c: c.name)
@pytest.mark.parametrize("asym", [False, True], ids=["sym", "asym"])
def test_every_config(config, asym):
    wgmma = isinstance(config, sm90_w4a16.Sm90W4A16Config)
    if wgmma and not HOPPER:
        pytest.skip("wgmma configs need sm_90")
    # (256-value stages need K in whole stages: three of them; 384 gives the others an odd count of their stages.)
    k, n, g, m = 768 if wgmma and config.k_sub == 4 else 384, 328, 128, 77
    for dtype in DTYPES:
        qweight, scales, qzeros = make_weight(k, n, g, asym, dtype)
        a = torch.randn(m, k, device="cuda").to(dtype)
        w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=g)
        out = gn_mm.w4a16_mm(a, w, config=config, out=poisoned(m, n, dtype))
        check(out, a, qweight, scales, qzeros, g, rounds=wgmma)


@pytest.mark.skipif(not HOPPER, reason="the wgmma kernel needs sm_90")
@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
@pytest.mark.parametrize("g, asym", [(128, True), ("K", False)], ids=["g128-asym", "perchannel"])
@pytest.mark.parametrize("config, splits", [("w4a16wg_64x64_c1_s4_k256_p1", None), ("w4a16wg_64x64_c1_s4_k256_p1", 3),
                                            ("w4a16wg_32x64_c1_s4_k256_x2_p1", None), ("w4a16wg_16x64_c2_s8_k256_p1", 7),
                                            ("w4a16wg_8x64_c2_s4_k256_p1", 4), ("w4a16wg_16x64_c2_s8_k256_p1", 1)])
def test_256_value_stages(dtype, g, asym, config, splits):
    """Two groups a stage at G = 128 (each half folded with its own scales), one per-channel; K = 2560: 10 stages in
    a ring of 4 (slots refilled), whole tiles, stream-K parts and a cluster pair; ragged M and N. Two consumers that
    split K (`ksplit`): stream-K segments of odd length and of one stage (the second consumer then has none), a ring
    of 4 (both consumers' slots refilled) and whole tiles; M = 45 spans several row tiles."""
    k, n, m = 2560, 200, 45
    group = k if g == "K" else g
    qweight, scales, qzeros = make_weight(k, n, group, asym, dtype, seed=7)
    a = torch.randn(m, k, device="cuda").to(dtype)
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=group)
    out = gn_mm.w4a16_mm(a, w, config=config, splits=splits, out=poisoned(m, n, dtype))
    check(out, a, qweight, scales, qzeros, group, rounds=False)


@pytest.mark.skipif(not HOPPER, reason="the wgmma kernel needs sm_90")
@pytest.mark.parametrize("splits", [1, None], ids=["whole", "own-schedule"])
def test_k_split_consumers_across_segments(splits):
    """Two consumers splitting K (`ksplit`) where a CTA runs several segments that start at an odd stage count: 150
    tiles of 5 stages (K = 1280) for the SMs, so CTAs take a second tile whose stages begin at an odd count (each
    consumer keeps the stages of its parity, the 4-deep ring wraps)."""
    k, n, m, g = 1280, 64 * 150, 8, 128
    qweight, scales, qzeros = make_weight(k, n, g, True, torch.bfloat16, seed=11)
    a = torch.randn(m, k, device="cuda").bfloat16()
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=g)
    out = gn_mm.w4a16_mm(a, w, config="w4a16wg_8x64_c2_s4_k256_p1", splits=splits, out=poisoned(m, n, torch.bfloat16))
    check(out, a, qweight, scales, qzeros, g, rounds=False)


@pytest.mark.skipif(not HOPPER, reason="the wgmma kernel needs sm_90")
@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
def test_128_value_stages_need_an_even_number_of_slices(dtype):
    k, n, m = 190, 40, 2  # per-channel, K padded to three 64-value slices
    qweight, scales, qzeros = make_weight(k, n, k, True, dtype)
    a = torch.randn(m, k, device="cuda").to(dtype)
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=k)
    two = next(c for c in sm90_w4a16.CONFIGS[0][1] if c.k_sub == 2)
    assert sm90_w4a16.choose(m, n, 132, 0, 3).k_sub == 1
    check(gn_mm.w4a16_mm(a, w, out=poisoned(m, n, dtype)), a, qweight, scales, qzeros, k)
    with pytest.raises(gn_mm.LayoutError, match="multiple of 128"):
        gn_mm.w4a16_mm(a, w, config=two)


@pytest.mark.skipif(not HOPPER, reason="the wgmma kernel needs sm_90")
@pytest.mark.parametrize("m", [100, 128])
def test_stream_k_over_idle_two_consumer_tiles(m):
    """148 tiles of 128 x 128 (a thin second round): the heuristic runs equal stream-K shares over the SMs, fewer
    CTAs than tiles, each straddling two tiles."""
    k, n, g = 2048, 18944, 128
    qweight, scales, qzeros = make_weight(k, n, g, False, torch.bfloat16, seed=m)
    a = torch.randn(m, k, device="cuda").bfloat16()
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=g)
    cfg = sm90_w4a16.choose(m, n, 132, g, k // 64)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert cfg.consumers == 2 and sm90_w4a16.schedule(cfg, m, n, k // 64 // cfg.k_sub, sms)[1]
    check(gn_mm.w4a16_mm(a, w, out=poisoned(m, n, torch.bfloat16)), a, qweight, scales, qzeros, g)


@pytest.mark.skipif(not HOPPER, reason="the wgmma kernel needs sm_90")
@pytest.mark.parametrize("m,asym,rows", [(129, False, 144), (200, True, 200), (250, False, 256)])
def test_two_row_blocks_of_a_large_weight_run_as_one(m, asym, rows):
    """32 MiB of weight at N = 8192: one row block (the weight streamed once; a FITTED height up to M = 224) split
    2 ways along K, rows past M in its ragged box."""
    k, n, g = 8192, 8192, 128
    qweight, scales, qzeros = make_weight(k, n, g, asym, torch.bfloat16, seed=m)
    a = torch.randn(m, k, device="cuda").bfloat16()
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=g)
    cfg = sm90_w4a16.choose(m, n, 132, g, k // 64)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert cfg.block_m == rows and sm90_w4a16.schedule(cfg, m, n, k // 64 // cfg.k_sub, sms) == (128, True)
    check(gn_mm.w4a16_mm(a, w, out=poisoned(m, n, torch.bfloat16)), a, qweight, scales, qzeros, g)


@pytest.mark.skipif(not HOPPER, reason="the wgmma kernel needs sm_90")
@pytest.mark.parametrize("m,k,n,asym,rows,stream", [
    (300, 2048, 6144, False, 160, False), (610, 2048, 14336, True, 224, False), (330, 14336, 4096, True, 168, True),
    (150, 4096, 5120, True, 160, True), (170, 4096, 14336, False, 192, False), (1100, 2048, 4096, True, 192, True),
    (1100, 2048, 5120, False, 192, False), (1700, 4096, 5120, True, 256, True), (287, 2048, 6144, True, 144, False),
    (770, 2048, 4096, False, 200, False), (230, 4096, 5120, False, 128, True)])
def test_mid_m_tiles_and_plans(m, k, n, asym, rows, stream):
    """M = 129..2048: the tile height (FITTED ones up to 1024 rows) and plan `mid_m_plan` costs least (ragged row
    blocks, whole tiles and stream-K parts, whose part 0 of a tile of 128 rows or more waits for the others instead
    of publishing)."""
    g = 128
    qweight, scales, qzeros = make_weight(k, n, g, asym, torch.bfloat16, seed=m)
    a = torch.randn(m, k, device="cuda").bfloat16()
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=g)
    cfg = sm90_w4a16.choose(m, n, 132, g, k // 64)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert cfg.block_m == rows and sm90_w4a16.schedule(cfg, m, n, k // 64 // cfg.k_sub, sms)[1] == stream
    check(gn_mm.w4a16_mm(a, w, out=poisoned(m, n, torch.bfloat16)), a, qweight, scales, qzeros, g)


@pytest.mark.skipif(not HOPPER, reason="the wgmma kernel needs sm_90")
@pytest.mark.parametrize("m,k,n,asym,splits,rows", [
    (50, 2048, 1000, False, None, 32), (64, 4096, 4096, True, None, 64), (37, 11008, 1032, True, None, 64),
    (64, 1408, 456, False, 3, 64), (41, 1024, 200, True, 1, 64), (13, 1024, 4096, False, None, 16),
    (30, 4096, 1032, True, None, 32), (11, 2048, 2000, True, None, 16), (27, 2048, 2040, False, None, 32),
    (9, 640, 264, True, 2, 16), (17, 1152, 328, False, 5, 32), (64, 4096, 512, True, None, 32)])
def test_one_consumer_64_column_tiles(m, k, n, asym, splits, rows):
    """M = 9..64 on 64-column one-consumer tiles of 16, 32 or 64 rows (the heuristic's pick at these shapes, or forced
    with `splits`): whole tiles, aligned and unequal stream-K parts, ragged M and N, two row blocks, bias."""
    g = 128
    cfg = sm90_w4a16.C(rows, 1, 1, 8, 2, prefetch=3 if rows == 16 else 2)
    if splits is None:
        assert sm90_w4a16.choose(m, n, 132, g, k // 64) == cfg
    qweight, scales, qzeros = make_weight(k, n, g, asym, torch.float16 if asym else torch.bfloat16, seed=m)
    a = torch.randn(m, k, device="cuda").to(scales.dtype)
    bias = torch.randn(n, device="cuda").to(scales.dtype)
    out = gn_mm.w4a16_mm(a, qweight, scales, qzeros, group_size=g, bias=bias, config=cfg.name, splits=splits,
                         out=poisoned(m, n, scales.dtype))
    check(out, a, qweight, scales, qzeros, g, bias=bias)


@pytest.mark.skipif(not HOPPER, reason="the wgmma kernel needs sm_90")
@pytest.mark.parametrize("cfg", [c.name for c in sm90_w4a16.FITTED])
@pytest.mark.parametrize("splits", [1, 3])
def test_fitted_tile_heights(cfg, splits):
    """Tiles fitted to M (144 .. 240 rows: output chunks of 40 .. 56 rows) with a ragged last row block, ragged N,
    whole tiles and stream-K parts."""
    c = sm90_w4a16.Sm90W4A16Config.parse(cfg)
    m, k, n, g, asym = 2 * c.block_m - 5, 1024, 456, 128, splits == 3
    qweight, scales, qzeros = make_weight(k, n, g, asym, torch.float16 if asym else torch.bfloat16, seed=m)
    a = torch.randn(m, k, device="cuda").to(scales.dtype)
    bias = torch.randn(n, device="cuda").to(scales.dtype)
    out = gn_mm.w4a16_mm(a, qweight, scales, qzeros, group_size=g, bias=bias, config=cfg, splits=splits,
                         out=poisoned(m, n, scales.dtype))
    check(out, a, qweight, scales, qzeros, g, bias=bias)


@pytest.mark.skipif(not HOPPER, reason="the wgmma kernel needs sm_90")
@pytest.mark.parametrize("cfg,m,k,n,g,asym", [
    ("w4a16wg_16x128_c2_s8_k128_x4", 13, 4096, 1000, 128, False), ("w4a16wg_64x64_c1_s8_k128_x2", 64, 2048, 456, 128, True),
    ("w4a16wg_32x64_c1_s8_k128_x3", 27, 1408, 200, "K", True), ("w4a16wg_8x128_c2_s8_k128_x8", 5, 2048, 264, 128, False),
    ("w4a16wg_128x64_c1_s8_x2", 100, 1024, 328, 128, True), ("w4a16wg_16x128_c2_s8_x4", 16, 640, 136, 32, True),
    ("w4a16wg_128x64_c1_s7_x3", 77, 1536, 200, 32, False), ("w4a16wg_128x128_c2_s6_x2", 128, 1024, 264, 64, True),
    ("w4a16wg_16x64_c2_s8_k256_x8_p1", 13, 4096, 456, 128, True), ("w4a16wg_8x64_c2_s8_k256_x2_p1", 3, 2560, 200, 128, False),
    ("w4a16wg_8x64_c2_s8_k256_x3_p1", 8, 2816, 136, "K", True)])
def test_tiles_split_in_clusters(cfg, m, k, n, g, asym):
    """K split inside a cluster, the sums added on chip: ragged M and N, unequal shares (k_stages not a multiple of the
    cluster), every kind of stage (128-value FOLD, 64-value, G = 32's two groups per stage), bias; and bit for bit the
    sums of the same aligned split through the stream-K workspace (the same parts added in the same order)."""
    c = sm90_w4a16.Sm90W4A16Config.parse(cfg)
    for dtype in DTYPES:
        qweight, scales, qzeros = make_weight(k, n, k if g == "K" else g, asym, dtype, seed=m)
        gs = k if g == "K" else g
        a = torch.randn(m, k, device="cuda").to(dtype)
        bias = torch.randn(n, device="cuda").to(dtype)
        w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=gs)
        out = gn_mm.w4a16_mm(a, w, bias=bias, config=c, out=poisoned(m, n, dtype))
        check(out, a, qweight, scales, qzeros, gs, bias=bias)
        for _ in range(2):  # nothing left behind between calls
            assert torch.equal(gn_mm.w4a16_mm(a, w, bias=bias, config=c), out)
        stages = -(-k // 64) // c.k_sub
        if stages % c.cluster_k == 0:
            flat = dataclasses.replace(c, cluster_k=1)
            assert torch.equal(gn_mm.w4a16_mm(a, w, bias=bias, config=flat, splits=c.cluster_k), out)
    with pytest.raises(gn_mm.LayoutError, match="splits"):
        gn_mm.w4a16_mm(a, w, config=c, splits=1)


@pytest.mark.skipif(not HOPPER, reason="the wgmma kernel needs sm_90")
def test_unaligned_out_and_bad_wgmma_config_name():
    k, n, g, m = 256, 64, 128, 3
    qweight, scales, qzeros = make_weight(k, n, g, False, torch.bfloat16)
    a = torch.randn(m, k, device="cuda").bfloat16()
    buf = poisoned(m * n + 1, 1, torch.bfloat16).view(-1)
    out = buf[1:].view(m, n)  # starts 2 bytes past a 16-byte boundary: TMA cannot store there
    gn_mm.w4a16_mm(a, qweight, scales, group_size=g, out=out)
    check(out, a, qweight, scales, qzeros, g)
    with pytest.raises(ValueError, match="cannot parse"):
        gn_mm.w4a16_mm(a, qweight, scales, group_size=g, config="w4a16wg_8x100_c2_s4")
    for bad in ("w4a16wg_12x128_c2_s4", "w4a16_16x256_w1x8_s1", "w4a16dec_m8_s2x8_d5"):  # refused before NVRTC
        with pytest.raises(gn_mm.LayoutError, match="config: " + bad):
            gn_mm.w4a16_mm(a, qweight, scales, group_size=g, config=bad)


def test_strided_and_unaligned_activations():
    k, n, g = 128, 64, 32
    qweight, scales, qzeros = make_weight(k, n, g, False, torch.float16)
    big = torch.randn(9, k + 3, device="cuda").half()
    a = big[:, 1 : k + 1]  # rows start 2 bytes off a 16-byte boundary
    check(gn_mm.w4a16_mm(a, qweight, scales, group_size=g), a, qweight, scales, qzeros, g)
    at = torch.randn(k, 9, device="cuda").half().t()  # column-major activations
    check(gn_mm.w4a16_mm(at, qweight, scales, group_size=g), at, qweight, scales, qzeros, g)


def test_converters_feed_the_kernel():
    k, n, g, m = 256, 64, 128, 3
    gen = torch.Generator().manual_seed(1)
    q = torch.randint(0, 16, (n, k), generator=gen)
    zero = torch.randint(0, 16, (n, k // g), generator=gen)
    scale = (torch.rand(n, k // g, generator=gen) * 0.05).half()
    qweight, scales, qzeros, group = fmt.from_compressed_tensors(
        fmt.pack_nibbles(q, dim=1).cuda(), scale.cuda(), fmt.pack_nibbles(zero, dim=0).cuda())
    a = torch.randn(m, k, device="cuda").half()
    check(gn_mm.w4a16_mm(a, qweight, scales, qzeros, group_size=group), a, qweight, scales, qzeros, group)
    v = torch.randint(-8, 8, (k, n), generator=gen)
    packed = ((v[0::2] & 0xF) | ((v[1::2] & 0xF) << 4)).to(torch.uint8).view(torch.int8).cuda()
    qweight, scales, qzeros, group = fmt.from_int4_k_packed(packed)
    out = gn_mm.w4a16_mm(a, qweight, scales, qzeros, group_size=group)
    torch.testing.assert_close(out.double(), a.double() @ v.double().cuda(), rtol=2e-3, atol=2e-3)


def test_errors_on_the_gpu():
    qweight, scales, _ = make_weight(128, 64, 64, False, torch.float16)
    a = torch.randn(2, 128, device="cuda").half()
    with pytest.raises(gn_mm.UnsupportedError, match="a: dtype torch.float32"):
        gn_mm.w4a16_mm(a.float(), qweight, scales, group_size=64)
    with pytest.raises(gn_mm.LayoutError, match=r"a: expected shape \[M, K\] with K = 128"):
        gn_mm.w4a16_mm(a[:, :64], qweight, scales, group_size=64)
    with pytest.raises(gn_mm.ArchError, match="a: on cpu"):  # as gn_mm.mm: a CPU fallback catches ArchError
        gn_mm.w4a16_mm(a.cpu(), qweight, scales, group_size=64)
    with pytest.raises(gn_mm.UnsupportedError, match="g_idx: act-order"):
        gn_mm.w4a16_mm(a, qweight, scales, group_size=64, g_idx=torch.arange(128, device="cuda"))
    with pytest.raises(gn_mm.LayoutError, match="bias: expected a \\[64\\] tensor"):
        gn_mm.w4a16_mm(a, qweight, scales, group_size=64, bias=torch.zeros(63, device="cuda").half())
    with pytest.raises(gn_mm.LayoutError, match="splits"):
        gn_mm.w4a16_mm(a, qweight, scales, group_size=64, splits=5)


def test_cuda_graph_capture():
    k, n, g, m = 512, 256, 128, 1
    qweight, scales, qzeros = make_weight(k, n, g, True, torch.float16)
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=g)
    a = torch.randn(m, k, device="cuda").half()
    expected = gn_mm.w4a16_mm(a, w, splits=4)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            out = gn_mm.w4a16_mm(a, w, splits=4)
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, expected)


def test_repeated_calls_take_the_fast_path_and_stay_right():
    from gn_mm import w4a16

    k, n, g, m = 256, 128, 64, 5
    qweight, scales, qzeros = make_weight(k, n, g, True, torch.bfloat16)
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=g)
    a = torch.randn(m, k, device="cuda").bfloat16()
    check(gn_mm.w4a16_mm(a, w), a, qweight, scales, qzeros, g)
    assert any(v[0]() is w for v in w4a16._fast.values()), "a checked call should be remembered"
    a = torch.randn(m, k, device="cuda").bfloat16()  # the fast path, fresh data
    check(gn_mm.w4a16_mm(a, w), a, qweight, scales, qzeros, g)
    buf = torch.randn(m * k + 1, device="cuda").bfloat16()
    shifted = buf[1:].view(m, k)  # same signature, rows 2 bytes off alignment: must leave the fast path
    check(gn_mm.w4a16_mm(shifted, w), shifted, qweight, scales, qzeros, g)
    with pytest.raises(gn_mm.UnsupportedError, match="a: dtype"):  # still checked after a fast call
        gn_mm.w4a16_mm(a.half(), w)


@pytest.mark.parametrize("m, config", [(1, None), (5, None), (16, None), (64, None), (16, "w4a16_16x256_w1x8_s4"),
                                       (16, "w4a16wg_16x64_c1_s8_k128_p3")],
                         ids=["m1", "m5", "m16", "m64", "mma.sync-m16", "stream-k-m16"])
def test_replayed_launches_follow_the_data(m, config):
    """A fast call that repeats an earlier call's pointers replays its recorded launches (runtime.Replays), K-split
    / stream-K workspaces and tickets included (or K split inside clusters, the heuristic's pick at M = 16 and 64
    here): new values at the same pointers are read, and a side stream (its own tickets) gets its own record."""
    from gn_mm import w4a16

    k, n, g = 2048, 512, 128  # few output tiles, long K: every kernel splits K here
    qweight, scales, qzeros = make_weight(k, n, g, True, torch.bfloat16)
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=g)
    a = torch.empty(m, k, device="cuda").bfloat16()
    bias = torch.empty(n, device="cuda").bfloat16()
    for _ in range(3):
        a.copy_(torch.randn_like(a))
        bias.copy_(torch.randn_like(bias))
        check(gn_mm.w4a16_mm(a, w, bias=bias, config=config, splits=4 if config else None), a, qweight, scales,
              qzeros, g, bias, rounds=True)
    (hit,) = [v for v in w4a16._fast.values() if v[0]() is w]
    assert hit[3].table and (hit[1].workspace(a) is not None or getattr(hit[1].config, "cluster_k", 1) > 1), \
        "expected a recorded launch with a K split"
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = gn_mm.w4a16_mm(a, w, bias=bias, config=config, splits=4 if config else None)
    torch.cuda.current_stream().wait_stream(side)
    check(out, a, qweight, scales, qzeros, g, bias, rounds=True)
    given = torch.empty(m, n, device="cuda").bfloat16()
    for _ in range(3):  # a given output: the fast path, keyed by its pointer
        a.copy_(torch.randn_like(a))
        given.fill_(float("nan"))
        assert gn_mm.w4a16_mm(a, w, bias=bias, config=config, splits=4 if config else None, out=given) is given
        check(given, a, qweight, scales, qzeros, g, bias, rounds=True)
    assert sum(1 for v in w4a16._fast.values() if v[0]() is w) == 2, "the call with out= should be remembered too"


def test_fast_path_lets_go_of_deleted_weights():
    import gc

    from gn_mm import w4a16

    k, n, g = 1024, 1024, 128
    qweight, scales, qzeros = make_weight(k, n, g, True, torch.float16)
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=g)
    a = torch.randn(3, k, device="cuda").half()
    gn_mm.w4a16_mm(a, w)
    gn_mm.w4a16_mm(a, w)
    assert any(v[0]() is w for v in w4a16._fast.values())
    torch.cuda.synchronize()
    held, packed_bytes = torch.cuda.memory_allocated(), w.packed.numel() * 4
    del w
    gc.collect()
    assert torch.cuda.memory_allocated() <= held - packed_bytes, "the cache kept the deleted weight's memory"


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_gpu_while_the_first_is_current():
    """a and the weight on cuda:1 while cuda:0 is current: planned and launched on cuda:1, the same result as
    with cuda:1 current; a fast-path entry recorded there replays only while cuda:1 is current."""
    from gn_mm import w4a16

    k, n, g, m = 512, 256, 128, 5
    qweight, scales, qzeros = make_weight(k, n, g, True, torch.float16, device="cuda:1")
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=g)
    a = torch.randn(m, k, device="cuda:1").half()
    with torch.cuda.device(1):
        expected = gn_mm.w4a16_mm(a, w)
        torch.cuda.synchronize()
    check(expected, a, qweight, scales, qzeros, g, rounds=True)
    torch.cuda.set_device(0)
    for _ in range(3):
        out = gn_mm.w4a16_mm(a, w)
        torch.cuda.synchronize(1)
        assert out.device == a.device and torch.equal(out, expected)
    raw = gn_mm.w4a16_mm(a, qweight, scales, qzeros, group_size=g)
    torch.cuda.synchronize(1)
    assert torch.equal(raw, expected)
    with torch.cuda.device(1):
        for _ in range(2):  # the fast path now (cuda:1 current)
            assert torch.equal(gn_mm.w4a16_mm(a, w), expected)
    assert all(v[2] == 1 for v in w4a16._fast.values() if v[0]() is w)


def test_dram_bandwidth_matches_the_datasheet():
    """The decode / wgmma crossover reads the GPU's peak DRAM bandwidth from the driver (memory clock x bus
    width): it must agree with the datasheet where gn_mm knows the GPU."""
    from gn_mm import datasheet, runtime

    got = runtime.dram_bandwidth(torch.cuda.current_device()) / 1e9  # GB/s
    assert 100 < got < 50000
    known = datasheet.lookup(torch.cuda.get_device_name())
    if known is not None:
        assert abs(got / known[1]["bw"] - 1) < 0.1, (got, known)
