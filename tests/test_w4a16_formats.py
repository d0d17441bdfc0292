"""W4A16 formats: every converter round-trips and matches a float64 dequantise reference; w4a16_mm's argument
checks that need no GPU (CPU)."""

import contextlib
import gc

import pytest
import torch

import gn_mm
from gn_mm import runtime, w4a16, w4a16_formats as f
from gn_mm.errors import ArchError, LayoutError, UnsupportedError


def _ground_truth(k, n, g, asym, dtype=torch.float16):
    torch.manual_seed(k * 7 + n + g)
    q = torch.randint(0, 16, (k, n))
    zero = torch.randint(0, 16, (k // g, n)) if asym else torch.full((k // g, n), 8)
    scales = (torch.rand(k // g, n) * 0.02 + 0.001).to(dtype)
    w = (q - zero[torch.arange(k) // g]).double() * scales.double()[torch.arange(k) // g]
    return q, zero, scales, w


@pytest.mark.parametrize("g", [32, 64, 128, 256])
@pytest.mark.parametrize("asym", [False, True])
def test_gptq_pack_and_dequantize(g, asym):
    k, n = 256, 48
    q, zero, scales, w = _ground_truth(k, n, g, asym)
    qweight = f.pack_nibbles(q, dim=1)
    assert qweight.shape == (k, n // 8) and qweight.dtype == torch.int32
    assert int(qweight[0, 0]) & 0xF == int(q[0, 0]) and (int(qweight[0, 0]) >> 28) & 0xF == int(q[0, 7])
    qzeros = f.pack_nibbles(zero, dim=1) if asym else None
    assert f.check_gptq(qweight, scales, qzeros, group_size=g) == []
    assert torch.equal(f.dequantize_gptq(qweight, scales, qzeros, group_size=g), w)
    assert torch.equal(f.unpack_nibbles(qweight, dim=1).long(), q)


@pytest.mark.parametrize("asym", [False, True])
def test_from_compressed_tensors(asym):
    k, n, g = 256, 64, 64
    q, zero, scales, w = _ground_truth(k, n, g, asym, torch.bfloat16)
    # The checkpoint layout: [N, K // 8] packed along K, [N, K // G] scales, [N // 8, K // G] zero points.
    weight_packed = f.pack_nibbles(q.t(), dim=1)
    weight_zero_point = f.pack_nibbles(zero.t(), dim=0) if asym else None
    qweight, s, qz, group = f.from_compressed_tensors(weight_packed, scales.t().contiguous(), weight_zero_point)
    assert group == g and qweight.shape == (k, n // 8) and s.shape == (k // g, n)
    assert (qz is None) == (not asym)
    assert torch.equal(f.dequantize_gptq(qweight, s, qz, group_size=group), w)


def test_from_int4_k_packed():
    k, n = 64, 16
    v = torch.randint(-8, 8, (k, n))
    packed = ((v[0::2] & 0xF) | ((v[1::2] & 0xF) << 4)).to(torch.uint8).view(torch.int8)
    qweight, scales, qzeros, group = f.from_int4_k_packed(packed)
    assert group == k and qzeros is None and scales.shape == (1, n)
    assert torch.equal(f.dequantize_gptq(qweight, scales, None, group_size=group), v.double())


def test_check_names_each_problem():
    qweight = torch.zeros(256, 8, dtype=torch.int32)
    ok_scales = torch.ones(2, 64, dtype=torch.float16)
    assert "group_size: 96 is not supported" in f.check_gptq(qweight, ok_scales, group_size=96)[0]
    assert "scales: expected shape (2, 64)" in f.check_gptq(qweight, torch.ones(3, 64, dtype=torch.float16),
                                                           group_size=128)[0]
    assert "scales: expected a float16 or bfloat16" in f.check_gptq(qweight, ok_scales.float(), group_size=128)[0]
    assert "qzeros: expected shape (2, 8)" in f.check_gptq(qweight, ok_scales, torch.zeros(2, 7, dtype=torch.int32),
                                                          group_size=128)[0]
    assert "g_idx: act-order" in f.check_gptq(qweight, ok_scales, group_size=128, g_idx=torch.arange(256))[0]
    assert "qweight: expected a 2-D torch.int32" in f.check_gptq(qweight.float(), ok_scales, group_size=128)[0]
    with pytest.raises(LayoutError, match="group_size"):
        f.dequantize_gptq(qweight, ok_scales, group_size=96)
    with pytest.raises(LayoutError, match="not a multiple of 8"):
        f.pack_nibbles(torch.zeros(3, 7, dtype=torch.uint8), dim=1)


def test_converters_refuse_n_not_a_multiple_of_8():
    with pytest.raises(LayoutError, match="weight_packed: N = 12"):
        f.from_compressed_tensors(torch.zeros(12, 4, dtype=torch.int32), torch.ones(12, 1))
    with pytest.raises(LayoutError, match="w: N = 12"):
        f.from_int4_k_packed(torch.zeros(16, 12, dtype=torch.int8))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("k,n,g,asym", [(256, 48, 32, True), (200, 24, 200, False), (384, 64, 128, True)])
def test_prepare_round_trips_and_puts_each_nibble_in_its_fragment(dtype, k, n, g, asym):
    q = torch.randint(0, 16, (k, n))
    qweight = f.pack_nibbles(q, dim=1)
    scales = torch.rand(k // g, n).to(dtype)
    qzeros = f.pack_nibbles(torch.randint(0, 16, (k // g, n)), dim=1) if asym else None
    w = f.prepare(qweight, scales, qzeros, group_size=g, layout="nv_fragments")
    assert torch.equal(f.dequantize_prepared(w), f.dequantize_gptq(qweight, scales, qzeros, group_size=g))
    # Lane 4g + t, k16 step s of stage c: nibble p + 4h is column 16b + g + 8 (p % 2), k 64c + 16s + 2t + h + 8 (p // 2).
    for c, b, lane, step in [(0, 0, 5, 1), (k // 64 - 1, n // 16 - 1, 31, 3)]:
        word = int(w.packed[c, b, lane, step]) & 0xFFFFFFFF
        for p in range(4):
            for h in range(2):
                kk = 64 * c + 16 * step + 2 * (lane % 4) + h + 8 * (p // 2)
                nn = 16 * b + lane // 4 + 8 * (p % 2)
                if kk < k and nn < n:
                    assert (word >> (4 * (p + 4 * h))) & 15 == int(q[kk, nn])


def test_wgmma_family_choice_and_refusal():
    from gn_mm import sm80_w4a16, sm90_w4a16, w4a16
    from gn_mm.arch import Arch
    from gn_mm.errors import ArchError

    assert w4a16.family(Arch(90)) is sm90_w4a16 and w4a16.family(Arch(80)) is sm80_w4a16
    assert w4a16.family(Arch(90), sm80_w4a16.choose(1)) is sm80_w4a16  # an explicit mma.sync config
    with pytest.raises(ArchError, match="config: w4a16wg_8x128_c2_s8_k128_p3 is a wgmma"):
        w4a16.family(Arch(89), sm90_w4a16.choose(1))
    # 128-column tiles where they need no more rounds of the SMs than 256-column ones (M = 16 at N = 14336: 112
    # tiles); 256 columns where 128 would take two rounds (N = 28672: 112 tiles instead of 224); K = 4096.
    assert sm90_w4a16.choose(16, 14336, 132, 128, 64).block_n == 128
    assert sm90_w4a16.choose(16, 28672, 132, 128, 64).block_n == 256
    assert sm90_w4a16.choose(1, 28672, 132).name == "w4a16wg_8x256_c2_s5_k128"
    # Of a class's candidates, the one whose tiles need the fewest rounds of the SMs: the one-consumer 128 x 64 tile at
    # N = 4096 (128 tiles); past it, at M = 129..2048, the two-consumer tile whose plan `mid_m_plan` costs least.
    assert sm90_w4a16.choose(256, 4096, 132, 128, 64).block_m == 128
    assert sm90_w4a16.choose(256, 14336, 132, 128, 64).block_m == 256
    # A weight of 32 MiB or more (K x N / 2 bytes) at M = 129..256 streams once, in one row block fitted to M (FITTED)
    # or of 256 rows; 128-row tiles where the weight fits in L2 (4096 x 8192) or one round of 128 x 64 tiles does.
    for m, k, n, rows in [(129, 8192, 8192, 144), (256, 8192, 8192, 256), (200, 28672, 8192, 200),
                          (240, 28672, 8192, 256), (200, 8192, 8448, 200), (128, 8192, 8192, 128),
                          (256, 4096, 8192, 128), (256, 8192, 4096, 128)]:
        assert sm90_w4a16.choose(m, n, 132, 128, k // 64).block_m == rows, (m, k, n)
    assert sm90_w4a16.Sm90W4A16Config.parse("w4a16wg_64x256_c2_s6") == sm90_w4a16.Sm90W4A16Config(64, 2, 2, 6)
    pre = sm90_w4a16.Sm90W4A16Config.parse("w4a16wg_16x128_c2_s8_k128_p3")
    assert pre == sm90_w4a16.Sm90W4A16Config(16, 2, 1, 8, 2, prefetch=3) and pre.name == "w4a16wg_16x128_c2_s8_k128_p3"
    # the L2 prefetch depth is a launch argument: one build for every value
    assert sm90_w4a16.spec(torch.float16, 128, False, pre).source() == \
        sm90_w4a16.spec(torch.float16, 128, False, sm90_w4a16.Sm90W4A16Config(16, 2, 1, 8, 2)).source()
    two = sm90_w4a16.Sm90W4A16Config.parse("w4a16wg_8x256_c2_s6_k128")
    assert two == sm90_w4a16.Sm90W4A16Config(8, 2, 2, 6, 2) and two.name == "w4a16wg_8x256_c2_s6_k128"
    assert two.problem(128, 64) is None and two.problem(0, 4) is None
    assert "group size" in two.problem(64, 64) and "multiple of 128" in two.problem(0, 3)
    assert sm90_w4a16.choose(1, 4096, 132, 64, 64).k_sub == 1 and sm90_w4a16.choose(1, 4096, 132, 128, 64).k_sub == 2


@pytest.mark.parametrize("tiles,k_stages,grid,stream", [
    (112, 128, 132, True), (16, 64, 132, True), (1, 9, 7, True), (2, 9, 14, True), (3, 2, 5, True),
    (224, 128, 132, False), (5, 7, 5, False)])
def test_wgmma_w4a16_work_covers_every_stage_once(tiles, k_stages, grid, stream):
    """The kernel's Work (mirrored by sm90_w4a16.segments): every (tile, K stage) iteration belongs to exactly
    one CTA; a tile's parts are numbered 0..parts-1 by consecutive CTAs; stream-K shares stages evenly."""
    from gn_mm import sm90_w4a16

    seen, parts_of, load = {}, {}, []
    for b in range(grid):
        load.append(0)
        for tile, kt0, k_tiles, part, parts in sm90_w4a16.segments(b, grid, tiles, k_stages, stream):
            assert k_tiles >= 1 and kt0 + k_tiles <= k_stages and 0 <= part < parts
            for kt in range(kt0, kt0 + k_tiles):
                assert (tile, kt) not in seen
                seen[tile, kt] = b
            parts_of.setdefault(tile, {})[part] = (b, parts)
            load[-1] += k_tiles
    assert len(seen) == tiles * k_stages
    for tile, ps in parts_of.items():
        (count,) = {p for _, p in ps.values()}
        assert sorted(ps) == list(range(count))
        assert [b for b, _ in (ps[i] for i in range(count))] == list(range(ps[0][0], ps[0][0] + count))
    if stream:
        assert max(load) - min(load) <= 1


def test_wgmma_w4a16_schedule():
    from gn_mm import sm90_w4a16

    C = sm90_w4a16.Sm90W4A16Config
    # Decode at 8192 x 28672: 112 tiles of 256 columns leave 20 of 132 SMs idle as whole tiles: stream-K.
    assert sm90_w4a16.schedule(C(8, 2, 2, 8), 1, 28672, 128, 132) == (132, True)
    # With 128-value stages (64 of them) the same 112 tiles run whole: the fix-ups cost more than the idle SMs.
    assert sm90_w4a16.schedule(C(8, 2, 2, 6, 2), 1, 28672, 64, 132) == (112, False)
    # Where M's row costs the config (M <= 128), the small-M time model's fastest plain plan (`model_plan`). It keeps
    # what the 8- and 16-row 128-column tiles measured on the H100 (w4a16_small_m_whole_vs_stream_probe_h100.json):
    # stream-K over the SMs at 72 tiles (N = 9216), and at 86 with long K; whole tiles from 108 (~110 such CTAs take
    # the DRAM) and at K = 4096. (Its miss there: 96 tiles at K = 14336 run whole, 39.3 us at M = 16 against 37.9 and
    # 37.4 / 36.6 at M = 1.) Scaled to an H200's peak (4.8 TB/s; not measured there) it keeps stream-K at 108 with long
    # K.
    d8, d16 = C(8, 2, 1, 8, 2, 3), C(16, 2, 1, 8, 2, 3)
    for cfg, m, n, k, want in [
            (d8, 1, 9216, 4096, (132, True)), (d8, 1, 11008, 4096, (86, False)), (d16, 16, 10240, 4096, (80, False)),
            (d8, 1, 11008, 8192, (132, True)), (d8, 8, 12288, 8192, (96, False)), (d16, 16, 13824, 8192, (108, False)),
            (d8, 1, 13824, 14336, (108, False)), (d16, 16, 14336, 14336, (112, False))]:
        assert sm90_w4a16.schedule(cfg, m, n, k // 128, 132) == want, (cfg.name, m, n, k)
        assert sm90_w4a16.model_plan(cfg, m, n, k // 128, 132, 3.35) == want
    assert sm90_w4a16.schedule(d8, 1, 13824, 14336 // 128, 132, dram_tbs=4.8) == (132, True)
    # A 64 x 128 tile at 11008 x 4096, M = 64: 4 unequal shares of its 86 stages (128 CTAs) 16.0 us, against 18.6 in 3
    # (96) and 23.9 in 2 (w4a16_small_m_grids_probe_h100.json): no aligned split of 86 stages fits.
    assert sm90_w4a16.schedule(C(64, 2, 1, 7, 2, 2), 64, 4096, 86, 132) == (128, True)
    # The 128-row tiles (M = 65..128): straddled shares where whole ones leave SMs idle (72 tiles of 128 x 128) or
    # make a thin second round (148); not at 112 (85%); a tile or two, or one stage: whole tiles.
    wide, narrow, tall = C(128, 2, 1, 8), C(128, 1, 1, 8), C(256, 2, 1, 4)
    for cfg, m, n, k_stages, want in [
            (wide, 128, 9216, 64, (132, True)), (wide, 128, 18944, 64, (132, True)), (wide, 128, 14336, 64, (112, False)),
            (narrow, 128, 4096, 64, (128, True)), (wide, 128, 256, 1, (2, False)), (wide, 128, 256, 4, (2, False)),
            (wide, 128, 18944, 1, (132, False)), (wide, 128, 4096, 64, (128, True))]:
        assert sm90_w4a16.schedule(cfg, m, n, k_stages, 132) == want, (cfg.name, m, n, k_stages)
    # Elsewhere (stage-times, `cta_cost`): enough tiles (720 of 256 x 128 at M = 2560): data-parallel; at M <= 256 the
    # MID_M estimate.
    for cfg, m, n, k_stages, want in [(tall, 2560, 9216, 64, (132, False)), (tall, 256, 9216, 64, (132, True))]:
        assert sm90_w4a16.schedule(cfg, m, n, k_stages, 132) == want, (cfg.name, m, n, k_stages)
    # M = 129..2048: the cheaper of whole tiles and stream-K by `mid_m_plan`; `choose` takes the tile height whose plan
    # costs least: two 144-row blocks for M = 288 (not two of 192 or 256) split over the SMs, four 192-row ones at
    # M = 768 x 4096 (128 tiles, one round; 256-row tiles would fill 96 SMs), three 224-row ones at M = 640 x 14336
    # split over the SMs, whole 256-row ones at M = 1024 x 8192 (256 tiles: two full rounds); past 1024 rows no
    # FITTED heights (1280 x 4096: 256 rows, not 8 x 160).
    wide192 = C(192, 2, 1, 6)
    assert sm90_w4a16.schedule(wide192, 288, 6144, 64, 132) == (132, True)
    assert sm90_w4a16.schedule(tall, 640, 14336, 64, 132) == (132, True)
    assert sm90_w4a16.schedule(tall, 512, 9216, 64, 132) == (132, True)  # 144 tiles: a thin second round
    assert sm90_w4a16.schedule(tall, 1024, 8192, 128, 132) == (132, False)
    assert sm90_w4a16.schedule(tall, 1536, 9216, 64, 132) == (132, True)  # 432 tiles: 3.3 rounds
    # Past 1024 rows a weight of 32 MiB or more runs whole tiles (stream-K CTAs at different K offsets would stream
    # each of its column blocks from DRAM once per row block).
    assert sm90_w4a16.schedule(tall, 1792, 28672, 128, 132) == (132, False)
    assert sm90_w4a16.schedule(tall, 1024, 28672, 128, 132) == (132, True)
    # M = 129..256 too, unless the one-consumer 128 x 64 tile takes one round (4096 x 4096): one 160-row block at
    # N = 14336 and 5120 (M = 150-160), 128 rows split over the SMs at M = 224 x 5120.
    assert sm90_w4a16.schedule(C(128, 2, 1, 8), 160, 5120, 64, 132) == (132, True)
    for m, k, n, want in [(160, 4096, 14336, C(160, 2, 1, 7)), (160, 4096, 4096, narrow),
                          (150, 4096, 5120, C(160, 2, 1, 7)), (224, 4096, 5120, C(128, 2, 1, 8)),
                          (288, 4096, 6144, C(144, 2, 1, 7)), (768, 4096, 4096, wide192),
                          (640, 4096, 14336, C(224, 2, 1, 5)), (600, 8192, 28672, C(200, 2, 1, 6)),
                          (512, 8192, 8192, tall), (1024, 8192, 8192, tall), (1280, 4096, 4096, tall),
                          (2049, 4096, 4096, tall)]:
        assert sm90_w4a16.choose(m, n, 132, 128, k // 64) == want, (m, k, n)
    # Overrides: 1 whole tiles; s > 1 stream-K over tiles x s CTAs.
    assert sm90_w4a16.schedule(C(8, 2, 2, 8), 4, 200, 9, 132, splits=1) == (1, False)
    assert sm90_w4a16.schedule(C(8, 2, 2, 8), 4, 200, 9, 132, splits=7) == (7, True)
    # Stream-K positions are 32-bit in the kernel: a problem too large for them runs whole tiles.
    assert sm90_w4a16.schedule(C(256, 2, 1, 4), 1 << 20, 28672, 128, 132, splits=2) == (132, False)


# ---- checkpoint converters, against reference packers written from each project's documented layout ----------
# AutoGPTQ / GPTQModel (qlinear pack): qweight [K // 8, N], word (i, n) holds q[8i + j, n] at bits 4j; qzeros
# [K // G, N // 8], word (g, i) holds the stored zero of column 8i + j at bits 4j; v1 stores zero - 1.
# AutoAWQ (WQLinear_GEMM.from_linear): word (k, i) holds at bits 4j the value of column 8i + AWQ_PACK_ORDER[j].
AWQ_PACK_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def _int32(words: torch.Tensor) -> torch.Tensor:
    """uint32 values held in int64 -> the int32 a checkpoint stores (two's complement)."""
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def _gptq_checkpoint(q, zero, stored_offset):
    k, n = q.shape
    qweight = torch.zeros(k // 8, n, dtype=torch.int64)
    for j in range(8):
        qweight |= q[j::8].long() << (4 * j)          # rows 8i + j
    stored = (zero.long() - stored_offset) & 0xF       # v1: zero - 1 (a zero of 0 is stored as 15)
    qzeros = torch.zeros(zero.shape[0], n // 8, dtype=torch.int64)
    for j in range(8):
        qzeros |= stored[:, j::8] << (4 * j)           # columns 8i + j
    return _int32(qweight), _int32(qzeros)


def _awq_words(v):
    rows, n = v.shape
    words = torch.zeros(rows, n // 8, dtype=torch.int64)
    for j, col in enumerate(AWQ_PACK_ORDER):
        words |= v[:, col::8].long() << (4 * j)        # column 8i + col at bits 4j
    return _int32(words)


def test_reference_packers_match_the_documented_words():
    # symmetric GPTQ v1 checkpoints hold 0x77777777 zero words; AWQ puts columns 0..7 as nibbles 0 2 4 6 1 3 5 7
    _, qzeros = _gptq_checkpoint(torch.zeros(8, 8, dtype=torch.long), torch.full((1, 8), 8), 1)
    assert int(qzeros[0, 0]) == 0x77777777
    assert int(_awq_words(torch.arange(8).view(1, 8))[0, 0]) & 0xFFFFFFFF == 0x75316420


@pytest.mark.parametrize("g", [32, 128, -1])
@pytest.mark.parametrize("zeros", ["sym", "asym"])
@pytest.mark.parametrize("version", [1, 2])
def test_from_gptq(g, zeros, version):
    k, n = 256, 48
    group = k if g == -1 else g
    q, zero, scales, w = _ground_truth(k, n, group, zeros == "asym")
    if zeros == "asym":
        zero[0, :3] = torch.tensor([0, 15, 1])  # the v1 wrap: 0 is stored as 15
    w = (q - zero[torch.arange(k) // group]).double() * scales.double()[torch.arange(k) // group]
    ck_qweight, ck_qzeros = _gptq_checkpoint(q, zero, stored_offset=1 if version == 1 else 0)
    g_idx = (torch.arange(k) // group).int()  # what every non-act-order layer carries
    qweight, s, qz, group_out = f.from_gptq(ck_qweight, scales, ck_qzeros, g_idx, group_size=g,
                                            zero_offset=1 if version == 1 else 0)
    assert group_out == group and qweight.shape == (k, n // 8) and s.shape == (k // group, n)
    assert (qz is None) == (zeros == "sym"), "all-8 zero points take the no-zero-point path"
    assert torch.equal(f.dequantize_gptq(qweight, s, qz, group_size=group_out), w)
    prepared = f.prepare(qweight, s, qz, group_size=group_out, layout="nv_fragments")
    assert torch.equal(f.dequantize_prepared(prepared), w)


def test_from_gptq_refuses_act_order_and_bad_inputs():
    k, n, g = 128, 16, 32
    q, zero, scales, _ = _ground_truth(k, n, g, True)
    qweight, qzeros = _gptq_checkpoint(q, zero, 1)
    with pytest.raises(UnsupportedError, match="g_idx: act-order"):
        f.from_gptq(qweight, scales, qzeros, torch.randperm(k) // g, group_size=g)
    with pytest.raises(LayoutError, match="g_idx: expected a 1-D integer tensor of K = 128"):
        f.from_gptq(qweight, scales, qzeros, torch.arange(k).float(), group_size=g)
    with pytest.raises(LayoutError, match="zero_offset"):
        f.from_gptq(qweight, scales, qzeros, group_size=g, zero_offset=2)
    with pytest.raises(LayoutError, match="group_size: expected an int that divides K = 128"):
        f.from_gptq(qweight, scales, qzeros, group_size=48)
    with pytest.raises(LayoutError, match=r"qzeros: expected int32 of shape \(4, 2\)"):
        f.from_gptq(qweight, scales, qzeros[:, :1], group_size=g)
    with pytest.raises(LayoutError, match=r"scales: expected shape \(4, 16\)"):
        f.from_gptq(qweight, scales.t(), qzeros, group_size=g)
    with pytest.raises(LayoutError, match=r"qweight: expected a 2-D torch.int32 tensor \[K // 8, N\]"):
        f.from_gptq(qweight.float(), scales, qzeros, group_size=g)


@pytest.mark.parametrize("g", [64, -1])
@pytest.mark.parametrize("asym", [False, True])
def test_from_awq(g, asym):
    k, n = 128, 40
    group = k if g == -1 else g
    q, zero, scales, w = _ground_truth(k, n, group, asym)
    qweight, s, qz, group_out = f.from_awq(_awq_words(q), scales, _awq_words(zero), group_size=g)
    assert group_out == group and qweight.shape == (k, n // 8) and (qz is None) == (not asym)
    assert torch.equal(f.dequantize_gptq(qweight, s, qz, group_size=group_out), w)
    with pytest.raises(LayoutError, match="qzeros: expected int32"):
        f.from_awq(_awq_words(q), scales, None, group_size=g)


def test_zero_sized_shapes_are_layout_errors():
    scales = torch.ones(1, 64, dtype=torch.float16)
    assert "qweight: K must be at least 1" in f.check_gptq(torch.zeros(0, 8, dtype=torch.int32), scales,
                                                           group_size=-1)[0]
    assert "qweight: N must be at least 8" in f.check_gptq(torch.zeros(128, 0, dtype=torch.int32), scales,
                                                           group_size=128)[0]
    for qweight in (torch.zeros(0, 8, dtype=torch.int32), torch.zeros(128, 0, dtype=torch.int32)):
        with pytest.raises(LayoutError, match="must be at least"):
            f.prepare(qweight, scales, group_size=128)
    with pytest.raises(LayoutError, match="weight_packed: N must be at least 8"):
        f.from_compressed_tensors(torch.zeros(0, 4, dtype=torch.int32), torch.ones(0, 1))
    with pytest.raises(LayoutError, match="weight_packed: K must be at least 1"):
        f.from_compressed_tensors(torch.zeros(8, 0, dtype=torch.int32), torch.ones(8, 0))
    with pytest.raises(LayoutError, match="weight_scale"):  # no groups: not a division by zero
        f.from_compressed_tensors(torch.zeros(8, 4, dtype=torch.int32), torch.ones(8, 0))
    with pytest.raises(LayoutError, match="w: K must be at least 1"):
        f.from_int4_k_packed(torch.zeros(0, 8, dtype=torch.int8))
    with pytest.raises(LayoutError, match="w: N must be at least 8"):
        f.from_int4_k_packed(torch.zeros(8, 0, dtype=torch.int8))
    with pytest.raises(LayoutError, match="qweight: K must be at least 1"):
        f.from_gptq(torch.zeros(0, 8, dtype=torch.int32), scales, torch.zeros(1, 1, dtype=torch.int32), group_size=-1)
    with pytest.raises(LayoutError, match="qweight: N must be at least 8"):
        f.from_awq(torch.zeros(8, 0, dtype=torch.int32), scales, torch.zeros(1, 0, dtype=torch.int32), group_size=-1)


# ---- g_idx, group_size = -1 and scalar argument types ---------------------------------------------------------
def test_trivial_g_idx_is_accepted_and_act_order_refused():
    k, g = 256, 64
    qweight = torch.zeros(k, 8, dtype=torch.int32)
    scales = torch.ones(k // g, 64, dtype=torch.float16)
    for trivial in ((torch.arange(k) // g).int(), torch.arange(k) // g):  # int32 (AutoGPTQ) and int64
        assert f.check_gptq(qweight, scales, group_size=g, g_idx=trivial) == []
    assert f.prepare(qweight, scales, group_size=g, g_idx=(torch.arange(k) // g).int()).group_size == g
    perm = (torch.arange(k) // g).flip(0)
    assert f.check_gptq(qweight, scales, group_size=g, g_idx=perm) == [f.ACT_ORDER]
    for bad in (torch.arange(k - 1) // g, (torch.arange(k) // g).float(), (torch.arange(k) // g).view(4, -1),
                [0] * k):
        (line,) = f.check_gptq(qweight, scales, group_size=g, g_idx=bad)
        assert line.startswith("g_idx: expected a 1-D integer tensor of K = 256 entries"), line
    with pytest.raises(LayoutError, match="g_idx: act-order"):
        f.prepare(qweight, scales, group_size=g, g_idx=perm)


def test_group_size_minus_one_means_per_channel():
    k, n = 200, 24
    q, _, scales, w = _ground_truth(k, n, k, False)
    qweight = f.pack_nibbles(q, dim=1)
    assert f.check_gptq(qweight, scales, group_size=-1) == []
    assert f.check_gptq(qweight, scales, group_size=-1, g_idx=torch.zeros(k, dtype=torch.int32)) == []
    assert torch.equal(f.dequantize_gptq(qweight, scales, group_size=-1), w)
    prepared = f.prepare(qweight, scales, group_size=-1, layout="nv_fragments")
    assert prepared.group_size == k and torch.equal(f.dequantize_prepared(prepared), w)
    assert gn_mm.w4a16_can_implement(None, qweight, scales, group_size=-1) == []


def test_bad_group_size_gives_no_derived_shape_lines():
    qweight = torch.zeros(256, 8, dtype=torch.int32)
    scales = torch.ones(2, 64, dtype=torch.float16)
    for g in (96, 0, -2, 512):
        problems = f.check_gptq(qweight, scales, torch.zeros(2, 8, dtype=torch.int32), group_size=g)
        assert len(problems) == 1 and problems[0].startswith("group_size:"), problems


@pytest.mark.parametrize("value", ["128", 128.0, None, True])
def test_group_size_must_be_an_int(value):
    qweight = torch.zeros(256, 8, dtype=torch.int32)
    (line,) = f.check_gptq(qweight, torch.ones(2, 64, dtype=torch.float16), group_size=value)
    assert line.startswith("group_size: expected an int"), line
    with pytest.raises(LayoutError, match="group_size: expected an int"):
        f.prepare(qweight, torch.ones(2, 64, dtype=torch.float16), group_size=value)


def test_numpy_ints_are_ints():
    np = pytest.importorskip("numpy")
    qweight = torch.zeros(256, 8, dtype=torch.int32)
    w = f.prepare(qweight, torch.ones(2, 64, dtype=torch.float16), group_size=np.int64(128), zp_bias=np.int32(7))
    assert type(w.group_size) is int and w.group_size == 128 and type(w.zp_bias) is int and w.zp_bias == 7


@pytest.mark.parametrize("value", [None, "8", 8.0, False])
def test_zp_bias_must_be_an_int(value):
    qweight = torch.zeros(128, 8, dtype=torch.int32)
    scales = torch.ones(1, 64, dtype=torch.float16)
    with pytest.raises(LayoutError, match="zp_bias: expected an int 0..15"):
        f.prepare(qweight, scales, group_size=128, zp_bias=value)
    assert any(p.startswith("zp_bias: expected an int") for p in
               gn_mm.w4a16_can_implement(None, qweight, scales, group_size=128, zp_bias=value))


def test_prepared_weight_refuses_what_it_fixed():
    k, g = 128, 64
    w = f.prepare(torch.zeros(k, 8, dtype=torch.int32), torch.ones(2, 64, dtype=torch.float16), group_size=g)
    assert gn_mm.w4a16_can_implement(None, w) == []
    assert gn_mm.w4a16_can_implement(None, w, g_idx=(torch.arange(k) // g).int()) == []
    assert gn_mm.w4a16_can_implement(None, w, g_idx=torch.arange(k) % 2) == [f.ACT_ORDER]
    for z in (4, None, "8"):
        (line,) = gn_mm.w4a16_can_implement(None, w, zp_bias=z)
        assert line == "zp_bias: fixed when the weight was prepared (it is 8); pass the default"


# ---- w4a16_mm's errors without a GPU ----------------------------------------------------------------------------
def _prepared(k=128, n=64, g=64):
    q = torch.randint(0, 16, (k, n))
    return f.prepare(f.pack_nibbles(q, dim=1), torch.rand(k // g, n).half(), group_size=g, layout="nv_fragments")


def test_cpu_activations_raise_arch_error():
    w = _prepared()
    a = torch.randn(2, 128).half()
    for call in (lambda: gn_mm.w4a16_mm(a, w),
                 lambda: gn_mm.w4a16_mm(a, f.pack_nibbles(torch.zeros(128, 64, dtype=torch.long), dim=1),
                                        torch.ones(2, 64).half(), group_size=64),
                 lambda: gn_mm.w4a16_mm(a, w, config=["unhashable"]),   # not a raw TypeError from the fast path
                 lambda: gn_mm.w4a16_mm(a, w, splits={"x": 1})):
        with pytest.raises(gn_mm.ArchError, match="a: on cpu; w4a16_mm runs on a CUDA or ROCm GPU"):
            call()
    with pytest.raises(gn_mm.UnsupportedError, match="a: dtype torch.float32"):  # what no GPU would run either
        gn_mm.w4a16_mm(a.float(), w)


def test_device_problems_name_the_arch_and_the_layout(monkeypatch):
    from gn_mm.arch import Arch

    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    monkeypatch.setattr(Arch, "of_device", classmethod(lambda cls, device=None: cls(75)))
    rocm = f.prepare(torch.zeros(128, 8, dtype=torch.int32), torch.ones(1, 64).half(), group_size=128,
                     layout="gptq")
    problems = w4a16._device_problems(torch.device("cuda", 0), rocm)
    assert problems[0] == ("a: on cuda:0, an sm_75 GPU; w4a16_mm needs sm_80 or newer (mma.sync m16n8k16 on "
                           "fp16/bf16)")
    assert problems[1].startswith("qweight: prepared in the 'gptq' layout (for ROCm)")
    assert w4a16._error_class(problems) is ArchError
    assert w4a16._error_class(problems[1:]) is LayoutError
    monkeypatch.setattr(Arch, "of_device", classmethod(lambda cls, device=None: cls(80)))
    assert w4a16._device_problems(torch.device("cuda", 0), _prepared()) == []


def test_config_splits_and_empty_m_past_the_checks(monkeypatch):
    """With can_implement mocked (CPU tensors stand in for GPU ones): config= and splits= errors are LayoutErrors
    naming the argument, and M = 0 returns an empty output."""
    monkeypatch.setattr(w4a16, "can_implement", lambda *a, **k: [])
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    w = _prepared()
    a = torch.randn(2, 128).half()
    accepted = "W4A16Config / Sm90W4A16Config / DecodeConfig"
    for bad in ("nope", "w4a16wg_8x256_c0_s4", 3, {"block_m": 16}):
        with pytest.raises(LayoutError, match=f"config: .*{accepted}"):
            gn_mm.w4a16_mm(a, w, config=bad)
    for bad in ("2", 2.0, 0, True):
        with pytest.raises(LayoutError, match="splits: expected None or an int >= 1"):
            gn_mm.w4a16_mm(a, w, splits=bad)
    out = gn_mm.w4a16_mm(torch.randn(0, 128).half(), w)
    assert out.shape == (0, 64) and out.dtype == torch.float16


def test_on_device_switches_only_for_another_gpu(monkeypatch):
    monkeypatch.setattr(runtime, "current_device", lambda: 0)
    assert isinstance(w4a16._on_device(torch.device("cuda", 0)), contextlib.nullcontext)
    assert isinstance(w4a16._on_device(torch.device("cpu")), contextlib.nullcontext)
    guard = w4a16._on_device(torch.device("cuda", 1))
    assert isinstance(guard, torch.cuda.device) and guard.idx == 1


def test_fast_path_cache_holds_weights_weakly():
    key, other = ("test", "weakly-held"), ("test", "weakly-held", 2)
    w, w2 = _prepared(), _prepared()
    w4a16._remember(key, w, plan=None, device_index=0)
    w4a16._remember(other, w, plan=None, device_index=0)
    assert w4a16._fast[key][0]() is w and w4a16._fast[key][2] == 0
    del w
    gc.collect()
    assert key not in w4a16._fast and other not in w4a16._fast, "a dead weight's entries must go"
    w1 = _prepared()
    w4a16._remember(key, w1, plan=None, device_index=0)
    w4a16._remember(key, w2, plan=None, device_index=0)  # a newer entry under the same key
    del w1
    gc.collect()
    assert w4a16._fast[key][0]() is w2, "an older weight's death must not drop a newer entry"
    w4a16._fast.pop(key)


def test_prepared_weight_accepts_its_own_zp_bias():
    q = torch.randint(0, 16, (128, 16), dtype=torch.int32)
    qweight = f.pack_nibbles(q, dim=1)
    scales = torch.rand(1, 16).half()
    w = gn_mm.prepare_w4a16(qweight, scales, None, group_size=128, zp_bias=7)
    assert gn_mm.w4a16_can_implement(None, w, zp_bias=7) == []
    assert any(p.startswith("zp_bias") for p in gn_mm.w4a16_can_implement(None, w, zp_bias=5))
