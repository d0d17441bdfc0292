import dataclasses

import pytest
import torch

import gn_mm
from gn_mm import config, variant_table as variants
from gn_mm.arch import Arch


@pytest.mark.parametrize("signed,lo,hi", [(True, -8, 8), (False, 0, 16)])
def test_pack_roundtrip(signed, lo, hi):
    x = torch.randint(lo, hi, (5, 37), dtype=torch.int8)  # odd K: padded with a zero nibble
    p = gn_mm.pack_int4(x, signed=signed)
    assert p.data.dtype == torch.uint8 and p.data.shape == (5, 19)
    assert p.shape == (5, 38) and p.t().shape == (38, 5)
    u = p.unpack()
    assert torch.equal(u[:, :37], x) and torch.all(u[:, 37] == 0)
    # Low nibble holds the even k.
    assert int(p.data[0, 0]) == (int(x[0, 0]) & 0xF) | ((int(x[0, 1]) & 0xF) << 4)


def test_pack_range_checks():
    with pytest.raises(ValueError, match=r"\[-8, 7\]"):
        gn_mm.pack_int4(torch.tensor([[8, -1]]), signed=True)
    assert not gn_mm.pack_int4(torch.tensor([[15, 0]])).signed  # inferred uint4


def test_variant_table_is_complete_and_consistent():
    names = {v.name for v in variants.MMA_SYNC}
    for a, b, acc in [("bf16", "bf16", "f32"), ("f16", "f16", "f32"), ("f16", "f16", "f16"),
                      ("e4m3", "e5m2", "f32"), ("e5m2", "e4m3", "f16"), ("s8", "u8", "s32"),
                      ("u4", "s4", "s32"), ("tf32", "tf32", "f32")]:
        assert f"{a}x{b}->{acc}" in names
    for v in variants.MMA_SYNC:
        assert v.instr.startswith("mma.sync.aligned.m16n8k")
        assert (".satfinite" in v.instr) == (v.acc == "s32")
    assert variants.find("e4m3", "e4m3", "f32").min_arch == 89
    assert 90 in variants.find("s4", "s4", "s32").emulated_on


def test_heuristic_picks_legal_configs():
    for arch in (Arch(80), Arch(86), Arch(89), Arch(90), Arch(120)):
        for m, n, k in [(1, 4096, 4096), (16, 14336, 4096), (4096, 4096, 4096), (8192, 8192, 8192), (7, 7, 7)]:
            for emulated in (False, True):
                for acc in ("f16", "f32", "s32"):
                    c = config.choose_sm80(m, n, arch, 132, emulated=emulated, acc=acc)
                    c.check(arch)
                    assert c.warp_tile <= config.max_warp_tile(16 if acc == "f16" else 32, emulated)


def test_tma_ring_reorders_the_preference_on_sm90():
    """sm_90's TMA-filled ring ranks configs differently (H200 sweep): large problems take TMA_FIRST's
    choice per accumulator kind there, and the cp.async ranking elsewhere."""
    for acc, first in config.TMA_FIRST.items():
        assert config.choose_sm80(4096, 4096, Arch(90), 132, acc=acc).name == first[0]
        cp_async = config.sm80_candidates(Arch(80), acc=acc)
        assert cp_async == [c for c in config.SM80_CONFIGS if c in cp_async]  # the table's own order
        assert config.choose_sm80(4096, 4096, Arch(80), 108, acc=acc) == cp_async[0]


def test_split_heuristic():
    big = config.choose_sm80(4096, 4096, Arch(90), 132)
    assert config.choose_splits(4096, 4096, 8192, big, 132, "f32") == 1  # enough tiles already
    small = config.choose_sm80(16, 4096, Arch(90), 132)
    s = config.choose_splits(16, 4096, 8192, small, 132, "f32")
    assert s > 1
    k_tiles = -(-8192 // small.block_k_bytes)
    per = -(-k_tiles // s)
    assert (s - 1) * per < k_tiles  # no empty split
    assert config.choose_splits(16, 4096, 8192, small, 132, "f16") == 1
    assert config.choose_splits(16, 4096, 64, small, 132, "f32") == 1  # a single K tile cannot split


def test_int4_unpack_kernel_compiles_offline(fresh_cache):
    """The Hopper path's int4 -> int8 kernel builds for every arch with NVRTC alone, without spills."""
    from gn_mm import int4_unpack, runtime

    for signed in (True, False):
        for arch in ("sm_80", "sm_90a", "sm_120"):
            built = runtime.build(int4_unpack.spec(signed, Arch.parse(arch)), backend="bindings")
            assert built.cubin[:4] == b"\x7fELF" and not built.ptxas.spills and not built.ptxas.stack_bytes


@pytest.mark.gpu
@pytest.mark.parametrize("name,lo,hi", [("s4", -8, 8), ("u4", 0, 16)])
@pytest.mark.parametrize("rows,k,pad", [(5, 64, 0), (5, 40, 0), (3, 33, 0), (70, 1000, 8), (2, 4099, 24), (1, 16, 0)])
def test_int4_unpacks_for_the_s8_wgmma(name, lo, hi, rows, k, pad):
    """The Hopper path's unpacking kernel: exact values, rows padded to a 16-byte (TMA) stride, packed rows read
    through a padded row stride (vector chunks and the byte-by-byte tail)."""
    from gn_mm import int4_unpack

    dev = torch.device("cuda")
    v = torch.randint(lo, hi, (rows, k), dtype=torch.int8, device=dev)
    packed = gn_mm.pack_int4(v, signed=name == "s4").data
    if pad:  # the same bytes at a wider row stride
        wide = torch.full((rows, packed.shape[1] + pad), 0x5A, dtype=torch.uint8, device=dev)
        wide[:, :packed.shape[1]] = packed
        packed = wide[:, :packed.shape[1]]
    cc = torch.cuda.get_device_capability()
    out, ld = int4_unpack.unpack_rows(packed, k, name == "s4", Arch(cc[0] * 10 + cc[1]))
    torch.cuda.synchronize()
    assert torch.equal(out, v) and ld % 16 == 0 and out.stride(0) == ld


def test_sm90_tile_choice_wastes_no_sms_on_small_m():
    """Decode never gets 128-row or clustered tiles (a 2-CTA cluster over one 128-row tile leaves half its CTAs
    without rows: 16 x 28672 x 8192 bf16 took 192 us that way on an H200, 134 us with 64 x 128 tiles); no
    cluster without two row tiles to share B; 64-column tiles only for short K, or in pairs for two row tiles
    whose pairs fill most SMs without a K split."""
    from gn_mm.sm90_config import (FIT_CONFIGS, NARROW, NARROW_MAX_K_BYTES, NARROW_PAIR, PAIR_MAX_K_BYTES,
                                   PAIR_MIN_K_BYTES, choose_sm90)

    for n in (1024, 4096, 14336, 28672, 57344):
        for m in (1, 16, 32):
            cfg = choose_sm90(m, n, 8192, 132)
            assert (cfg.block_m, cfg.cluster_m) == (64, 1), (m, n, cfg.name)
            assert cfg.block_n == 128 or cfg in FIT_CONFIGS, (m, n, cfg.name)
        for m in (33, 64, 100, 128, 200, 300, 4096):
            cfg = choose_sm90(m, n, 8192, 132)
            assert cfg.cluster_m == 1 or -(-m // cfg.block_m) >= 2, (m, n, cfg.name)
    assert choose_sm90(8192, 8192, 16384, 132).name == "sm90_128x256_s4_g8_c2"
    assert (choose_sm90(128, 28672, 16384, 132).block_m, choose_sm90(128, 28672, 16384, 132).cluster_m) == (128, 1)
    assert choose_sm90(128, 2048, NARROW_MAX_K_BYTES, 132) == NARROW  # 64 CTAs: no pairs
    assert choose_sm90(128, 2048, NARROW_MAX_K_BYTES + 128, 132).block_n == 128
    for m, n in ((65, 4096), (128, 4096), (100, 3072)):
        assert choose_sm90(m, n, PAIR_MIN_K_BYTES - 128, 132) == NARROW
        assert choose_sm90(m, n, PAIR_MIN_K_BYTES, 132) == NARROW_PAIR  # H100 DRAM (the default 3.35 TB/s)
        assert choose_sm90(m, n, NARROW_MAX_K_BYTES, 132) == NARROW_PAIR
        assert choose_sm90(m, n, NARROW_MAX_K_BYTES, 132, dram_tbs=4.8) == NARROW  # H200: pairs past 8 KB only
        assert choose_sm90(m, n, NARROW_MAX_K_BYTES + 128, 132, dram_tbs=4.8) == NARROW_PAIR
        assert choose_sm90(m, n, PAIR_MAX_K_BYTES, 132) == NARROW_PAIR
        assert choose_sm90(m, n, PAIR_MAX_K_BYTES + 128, 132).block_n == 128
    for m, n in ((64, 4096), (129, 4096), (128, 5120)):  # one row tile; three; 64 x 64 pairs would take two rounds
        assert choose_sm90(m, n, 16384, 132) != NARROW_PAIR
    # past them, pairs as wide as one round needs (pair_tile), which long_k's one-block splits leave alone
    from gn_mm.sm90_config import PAIR_CONFIGS, long_k
    for n, w in ((5120, 80), (6144, 96), (8192, 128), (11008, 176)):
        cfg = choose_sm90(128, n, 16384, 132, dram_tbs=4.8)
        assert cfg == PAIR_CONFIGS[(w - 64) // 16] and cfg.block_n == w, (n, cfg.name)
        assert long_k(cfg, 1, 128, n, 16384, 132, 4.8) == ()
    assert choose_sm90(128, 12288, 16384, 132).block_m == 128  # 64 x 192 pairs were not measured: 128-row fit tiles


def test_fit_tiles_fill_one_round_of_the_sms():
    """M <= 256 where the menu's tiles left SMs idle or made a thin second round: tiles just wide enough for one
    round (128-row ones in pairs over two row tiles; two rounds for those where one cannot hold them); unchanged
    where the SMs were mostly busy or a second round mostly full, and for larger M."""
    from gn_mm.sm90_config import FIT_CONFIGS, choose_sm90

    assert choose_sm90(128, 11008, 2048, 132).name == "sm90_128x96_s6_g8_c1"  # 86 -> 115 CTAs (short K: no pairs)
    assert choose_sm90(128, 11008, 8192, 132).name == "sm90_64x176_s6_g8_c2"  # pairs of 63 x 2 (pair_tile)
    assert choose_sm90(80, 9216, 2048, 132).name == "sm90_128x80_s7_g8_c1"
    assert choose_sm90(80, 9216, 8192, 132).name == "sm90_64x144_s8_g8_c2"
    assert choose_sm90(128, 18944, 8192, 132).name == "sm90_128x144_s5_g8_c1"  # 148 CTAs -> 132
    assert choose_sm90(256, 11008, 8192, 132).name == "sm90_128x176_s5_g8_c2"
    assert choose_sm90(16, 5120, 8192, 132).name == "sm90_64x48_s14_g8_c1"  # 40 decode tiles -> 107
    assert choose_sm90(64, 18944, 8192, 132).name == "sm90_64x144_s8_g8_c1"  # 74 of 128 x 256 -> 132
    for m in (1, 16, 64):  # 32 decode tiles (64 of 64 x 64 at M = 64, split K) -> 128 with the whole K
        assert choose_sm90(m, 4096, 4096, 132).name == "sm90_64x32_s16_g8_c1"
        # on a GPU with faster memory (an H200) only up to 4 KB of K; past it 64 x 48 is the narrowest
        assert choose_sm90(m, 4096, 4096, 132, 4.8).name == "sm90_64x32_s16_g8_c1"
        slow_pick = "sm90_64x64_s13_g8_c1" if m == 64 else "sm90_64x128_s8_g8_c1"  # split K, as before the fit tiles
        assert choose_sm90(m, 4096, 4097, 132, 4.8).name == slow_pick
        assert choose_sm90(m, 4096, 4097, 132, 4.0).name == "sm90_64x32_s16_g8_c1"  # an H100 NVL keeps the H100 rule
        assert choose_sm90(m, 4096, 4097, 132, 3.35).name == "sm90_64x32_s16_g8_c1"
        assert choose_sm90(m, 5120, 8192, 132, 4.8).name == "sm90_64x48_s14_g8_c1"
    # two row blocks past a one-round fit (a thin second round of 128 x 256 pairs): two full rounds of narrower pairs
    for m in (193, 256):
        assert choose_sm90(m, 18944, 8192, 132).name == "sm90_128x144_s5_g8_c2"  # 148 CTAs -> 2 x 132
    # one 192-row block (M = 129..192): 192-row tiles of one round (two full ones) from 112 columns, where they fill
    # 90% of the SMs; not for the variants whose 192-row kernel spills (tall=False)
    for m in (129, 192):
        assert choose_sm90(m, 18944, 8192, 132).name == "sm90_192x144_s4_g8_c1"  # 132 CTAs
        assert choose_sm90(m, 16384, 8192, 132).name == "sm90_192x128_s4_g8_c1"  # 128
        assert choose_sm90(m, 14336, 8192, 132).name == "sm90_128x224_s4_g8_c2"  # under TALL_FIT_MIN_COLS: pairs
        assert choose_sm90(m, 28672, 8192, 132).name == "sm90_192x112_s4_g8_c1"  # 2 x 128
        assert choose_sm90(m, 18944, 8192, 132, tall=False).name == "sm90_128x144_s5_g8_c2"
        assert choose_sm90(m, 12288, 8192, 132).name == "sm90_128x192_s4_g8_c2"  # under TALL_FIT_MIN_COLS
        assert choose_sm90(m, 16912, 8192, 132).block_m == 128  # 118 CTAs of 192 x 144: under TALL_FIT_FILL
    from gn_mm.sm90_config import LARGE, fit
    assert fit(LARGE[2], 300, 8192, 8192, 132) == LARGE[2]  # past FIT_MAX_M fit leaves every tile alone
    assert choose_sm90(256, 25000, 8192, 132).name == "sm90_128x192_s4_g8_c2"
    assert choose_sm90(256, 28672, 8192, 132).name == "sm90_128x256_s4_g8_c2"  # 1.7 rounds: not thin
    assert choose_sm90(128, 40000, 8192, 132).name == "sm90_128x256_s4_g8_c1"  # one row block: never measured
    assert choose_sm90(128, 12288, 16384, 132).name == "sm90_128x96_s6_g8_c1"  # one row block 72.7% busy -> 97%
    for m in (1, 16, 32, 64):  # 112 decode tiles of 64 x 128 (85% of the SMs) -> 128 of 64 x 112
        assert choose_sm90(m, 14336, 8192, 132).name == "sm90_64x112_s9_g8_c1"
    assert choose_sm90(192, 6144, 8192, 132).name == "sm90_128x96_s6_g8_c2"  # two blocks of 128-row tiles: 96 -> 128
    assert choose_sm90(256, 8192, 8192, 132).name == "sm90_128x128_s6_g8_c2"  # 128 CTAs, now in pairs sharing B
    for m, n in ((128, 12800), (192, 5120), (128, 28672), (128, 14336), (128, 5120), (16, 3072),
                 (1, 2048), (32, 15360), (16, 28672), (64, 3072)):
        cfg = choose_sm90(m, n, 8192, 132)
        assert cfg not in FIT_CONFIGS, (m, n, cfg.name)


def test_balance_evens_out_the_rounds_past_fit():
    """M > FIT_MAX_M: 128-row tiles of 80-256 columns, without clusters, where the menu's tiles make a thin last
    round (768 x 3072: 144 tiles of 128 x 128 on 132 SMs, two rounds; 132 of 128 x 144, one); the menu tile where
    it is as good, as at the squares and the LLM benchmark's M = 4096."""
    from gn_mm.config import choose_splits
    from gn_mm.sm90_config import (FIT_CONFIGS, LARGE, PAIR_CONFIGS, SM90_CONFIGS, TALL_FIT, choose_sm90, deepest,
                                   whole_k)

    assert choose_sm90(768, 3072, 28672, 132).name == "sm90_128x144_s5_g8_c1"
    assert choose_sm90(384, 6144, 8192, 132).name == "sm90_128x144_s5_g8_c1"
    assert choose_sm90(1536, 3072, 8192, 132).name == "sm90_192x192_s3_g8_c1"  # 264 of 128 x 144, 2 rounds -> 128, 1
    assert choose_sm90(512, 11008, 8192, 132).name == "sm90_128x176_s5_g8_c1"
    assert choose_sm90(896, 7168, 8192, 132).name == "sm90_128x208_s4_g8_c1"  # 224 of 128 x 256 pairs -> 245, 2
    assert choose_sm90(384, 3072, 8192, 132).name == "sm90_128x80_s7_g8_c1"  # 72 of 128 x 128, split 3 ways -> 117
    assert choose_sm90(384, 2048, 8192, 132).name == "sm90_64x128_s8_g8_c1"  # 64-row menu tiles stay
    # 240 of 128 x 128 in two rounds -> 132 of 128 x 240 in one; 126 lone 128 x 256 (fewer CTAs than SMs); 336 pairs
    # of 128 x 256 in three rounds (2.55) -> 384 of 128 x 224 (2.9)
    assert choose_sm90(768, 5120, 28672, 132).name == "sm90_128x240_s4_g8_c1"
    assert choose_sm90(807, 4500, 8192, 132) == LARGE[1] and whole_k(LARGE[1], 807, 4500, 8192, 132)
    assert choose_sm90(768, 14336, 8192, 132).name == "sm90_128x224_s4_g8_c1"
    # whole K where choose_splits would split: 112 CTAs of 128 x 128 (85% of the SMs; it would take 7 splits), but not
    # 67 of 128 x 112 (51%) at a tall, narrow 8449 x 112 with 200 KB of K
    cfg = choose_sm90(896, 2048, 57344, 132)
    assert cfg == LARGE[2] and choose_splits(896, 2048, 57344, cfg, 132, "f32") > 1 and whole_k(cfg, 896, 2048, 57344, 132)
    cfg = choose_sm90(8449, 112, 200000, 132)
    assert cfg.tiles(8449, 112) == 67 and not whole_k(cfg, 8449, 112, 204800, 132)
    assert not whole_k(LARGE[1], 256, 40000, 8192, 132) and not whole_k(deepest(64, 128), 768, 40000, 8192, 132)
    assert whole_k(FIT_CONFIGS[0], 16, 4096, 8192, 132)
    # 64-row tiles with short K keep it whole from 32 CTAs (<= 3 KB) or 40 and N >= 2048 (<= 4 KB); fewer are split
    narrow = choose_sm90(64, 3072, 4096, 132)
    assert narrow.block_m == 64 and choose_splits(64, 3072, 4096, narrow, 132, "f32") > 1
    assert whole_k(narrow, 64, 3072, 4096, 132) and whole_k(narrow, 64, 2048, 3072, 132)
    assert not whole_k(narrow, 64, 2048, 4096, 132) and not whole_k(narrow, 64, 1536, 3072, 132)
    assert not whole_k(narrow, 64, 3072, 8192, 132)
    assert whole_k(narrow, 128, 1536, 3072, 132) and not whole_k(narrow, 128, 1536, 4096, 132)
    for m, n in ((4096, 4096), (8192, 8192), (4096, 14336), (8192, 28672), (2048, 2048), (4096, 11008)):
        assert choose_sm90(m, n, 8192, 132) in LARGE, (m, n)
    for m in range(257, 1100, 37):
        for n in range(1024, 40000, 3000):
            cfg = choose_sm90(m, n, 8192, 132)
            assert cfg in SM90_CONFIGS or cfg in FIT_CONFIGS, (m, n, cfg.name)
            assert cfg.cluster_m == 1 or cfg in SM90_CONFIGS, (m, n, cfg.name)
    for m in list(range(1, 257, 7)) + [16, 32, 64]:
        for n in range(1024, 40000, 1000):
            cfg = choose_sm90(m, n, 8192, 132)
            assert cfg in SM90_CONFIGS + FIT_CONFIGS + PAIR_CONFIGS + TALL_FIT, (m, n, cfg.name)
            assert cfg.cluster_m == 1 or -(-m // cfg.block_m) >= 2, (m, n, cfg.name)


def test_split_inside_a_cluster_only_for_short_nonempty_shares():
    from gn_mm.errors import LayoutError
    from gn_mm.sm90_config import CLUSTER_K_MAX_SHARE, DECODE, LARGE, NARROW, Sm90Config, in_cluster

    assert in_cluster(DECODE, 1, 8192, 16) is None  # nothing to split
    assert in_cluster(DECODE, 6, 8192, 16).cluster_k == 4  # rounded down to a cluster size
    assert in_cluster(DECODE, 16, 8192, 16).cluster_k == 8
    assert in_cluster(DECODE, 2, 2 * 128 * (CLUSTER_K_MAX_SHARE + 1), 64) is None  # long shares: workspace route
    assert in_cluster(DECODE, 2, 2 * 128 * (CLUSTER_K_MAX_SHARE + 1), 32) is not None  # decode: up to twice as long
    assert in_cluster(DECODE, 2, 2 * 128 * (2 * CLUSTER_K_MAX_SHARE + 1), 32) is None
    assert in_cluster(DECODE, 8, 7 * 128, 16) is None  # 7 K steps cannot feed 8 CTAs
    assert in_cluster(DECODE, 8, 9 * 128, 16).cluster_k == 8  # balanced shares of 1-2 steps
    assert in_cluster(LARGE[0], 2, 8192, 256) is None  # 2-CTA B-multicast clusters split through the workspace
    from gn_mm.sm90_config import HALF_CLUSTER_MAX_SHARE, half_cluster
    k8 = in_cluster(DECODE, 8, 4096, 16)  # 32 K steps
    k4 = half_cluster(k8, 4096, 16)
    assert k4.cluster_k == 4 and half_cluster(k4, 4096, 16).cluster_k == 2  # shares of 8, then 16 steps
    assert half_cluster(half_cluster(k4, 4096, 16), 4096, 16) is None  # no cluster of one
    assert half_cluster(k4, 8192, 16).name == "sm90_64x64_s13_g8_c1_k2"  # 2 CTAs would take 32 steps: half-width tiles
    assert half_cluster(half_cluster(k4, 8192, 16), 8192, 16) is None
    assert half_cluster(in_cluster(NARROW, 4, 8192, 16), 8192, 16) is None  # 64 x 64 tiles do not narrow
    assert half_cluster(k8, 128 * 4 * (HALF_CLUSTER_MAX_SHARE + 1), 16) is None  # shares too long for 4 CTAs
    assert half_cluster(k4, 14336, 128).name == "sm90_64x64_s13_g8_c1_k2"  # 56 steps: faster at M = 128
    assert half_cluster(k4, 14336, 256) is None and half_cluster(k4, 8192, 256) is not None  # not at M = 192-256
    from gn_mm.sm90_config import SM90_CONFIGS, SPLIT_CLUSTERS
    for cfg in SM90_CONFIGS:  # whatever in_cluster gives, halved, is a compiled (offline-tested) config
        for splits in (2, 4, 8):
            c = in_cluster(cfg, splits, 128 * 8, 64)
            while c is not None:
                assert c in SPLIT_CLUSTERS, c.name
                c = half_cluster(c, 128 * 8, 64)
    cfg = in_cluster(DECODE, 4, 8192, 16)
    assert Sm90Config.parse(cfg.name) == cfg and cfg.name.endswith("_k4") and cfg.threads == DECODE.threads
    for bad in (dict(cluster_k=3), dict(cluster_k=2, cluster_m=2), dict(cluster_k=8, block_n=8),
                dict(cluster_k=8, block_n=48)):
        with pytest.raises(LayoutError, match="cluster_k"):
            dataclasses.replace(DECODE, **bad).check()


def test_long_k_splits_mid_m_tiles_in_clusters_only_where_they_measured_faster():
    """long_k (NOTES sm90 58-60, 72): 128-row tiles split 4 ways in clusters in place of 3+ workspace splits from 128
    k-steps (no pairs: the same tiles split 2 ways through the workspace beat them, and split_wider takes those
    shapes), nothing where the padded tiles count more work (N = 1024) or outside M = 257..1024 (and one 128-row
    block, M = 65..128); every candidate is a compiled (offline-tested) config."""
    from gn_mm.config import choose_splits
    from gn_mm.sm90_config import LONG_K_CONFIGS, choose_sm90, long_k, whole_k

    def picks(m, n, k_bytes, dram_tbs=3.35):
        cfg = choose_sm90(m, n, k_bytes, 132, dram_tbs)
        splits = 1 if whole_k(cfg, m, n, k_bytes, 132) else choose_splits(m, n, k_bytes, cfg, 132, "f32")
        return [c.name for c in long_k(cfg, splits, m, n, k_bytes, 132, dram_tbs)]

    # One 128-row block (M = 65..128, NOTES sm90 62): 32- and 48-column pairs everywhere, wider ones only with the
    # H200's DRAM (they lost up to 7.5% on an H100); nothing at M <= 64 or past 128 below fit's M.
    assert picks(128, 3072, 28672) == ["sm90_128x48_s8_g8_c1_k2"]
    assert picks(72, 2048, 4096) == ["sm90_128x32_s9_g8_c1_k2"]
    assert picks(128, 3072, 4096) == []  # 48 columns at 32 steps: 1.05 on the H100
    assert picks(128, 3072, 4096, 4.8) == ["sm90_128x48_s8_g8_c1_k2"]
    assert picks(128, 4096, 28672) == [] and picks(128, 4096, 28672, 4.8) == ["sm90_128x64_s8_g8_c1_k2"]
    assert picks(128, 8192, 8192, 4.8) == []  # 128 columns at 64 steps: up to 1.28
    assert picks(64, 2048, 8192) == picks(200, 2048, 28672) == []

    assert picks(384, 2048, 28672)[-1] == "sm90_128x208_s4_g8_c1_k4"  # 64 x 128 split 4 ways: 3 rounds
    assert picks(384, 3072, 57344) == picks(1024, 1024, 57344) == []  # no pairs (split_wider's shapes)
    assert picks(320, 1024, 28672) == []  # 128 x 112 in fours counts 1.38x the work of 64 x 128 split 3 ways
    assert picks(256, 2048, 28672) == picks(1040, 2048, 57344) == []  # fit's M, past LONG_K_MAX_M
    assert picks(320, 2048, 128 * 128)[-1] == "sm90_128x208_s4_g8_c1_k4"  # 128 steps, in place of 3 splits
    assert picks(320, 2048, 128 * 127) == []
    assert picks(384, 2048, 128 * 128) == []  # 64 x 128 tiles keep the whole K: fours only replace splits
    assert picks(608, 768, 28672) == []  # nor 2 splits in one round
    assert picks(768, 1024, 57344)[-1] == "sm90_128x208_s4_g8_c1_k4" and picks(640, 2560, 57344) == []
    for m in range(257, 1025, 37):
        for n in range(1024, 6145, 512):
            for k_bytes in (28672, 57344, 114688):
                cands = long_k(choose_sm90(m, n, k_bytes, 132), 1, m, n, k_bytes, 132)
                assert all(c in LONG_K_CONFIGS and c.cluster_k == 4 for c in cands)
                assert all(0.8 * 132 <= c.ctas(m, n) * c.cluster_k <= 132 for c in cands)


def test_split_wider_takes_twice_the_tile_split_two_ways_where_measured():
    """split_wider (NOTES sm90 71): past FIT_MAX_M, a lone 64 x 128 / 128 x 80 pick with the whole K in one round runs
    as a tile of twice its area or more split 2 ways from 20 KB of K (128 x 96 picks from 48 KB), the split's CTAs one
    round filling WHOLE_K_FILL of it; never wider picks, clusters, or splits already taken. Two 128-row blocks (M =
    129..256) whose 64 x 128 tile is split 3+ ways take the 128-row tile with the most CTAs split 2 ways (90% fill)."""
    from gn_mm.config import choose_splits
    from gn_mm.sm90_config import (BALANCE_TILES, WHOLE_K_FILL, Sm90Config, choose_sm90, deepest, heuristic_configs,
                                   split_wider, whole_k)

    def pick(m, n, k_bytes):
        cfg = choose_sm90(m, n, k_bytes, 132)
        splits = 1 if whole_k(cfg, m, n, k_bytes, 132) else choose_splits(m, n, k_bytes, cfg, 132, "f32")
        wider = split_wider(cfg, splits, m, n, k_bytes, 132)
        return cfg.name, wider and wider.name

    assert pick(1024, 1024, 28672) == ("sm90_64x128_s8_g8_c1", "sm90_128x128_s6_g8_c1")  # 0.79x the time
    assert pick(512, 2048, 20480) == ("sm90_64x128_s8_g8_c1", "sm90_128x128_s6_g8_c1")
    assert pick(384, 3072, 28672) == ("sm90_128x80_s7_g8_c1", "sm90_128x160_s5_g8_c1")
    assert pick(1280, 1024, 28672) == ("sm90_128x80_s7_g8_c1", "sm90_128x176_s5_g8_c1")  # 120 CTAs, not 96 of 128 x 192
    assert pick(1024, 1024, 16384)[1] is None and pick(384, 3072, 20479)[1] is None  # 16 KB: up to 1.16x
    assert pick(768, 2048, 40960) == ("sm90_128x96_s6_g8_c1", None)  # 128 x 96: 0.83-1.05 at 40 KB
    assert pick(768, 2048, 57344) == ("sm90_128x96_s6_g8_c1", "sm90_128x192_s4_g8_c1")
    assert pick(640, 2560, 57344) == ("sm90_128x112_s6_g8_c1", None)  # twice 128 x 112: e4m3 1.035x (NOTES sm90 72)
    assert pick(768, 3072, 57344)[1] is None and pick(1024, 2048, 57344)[1] is None  # wider picks lost
    assert pick(256, 3072, 28672) == ("sm90_64x128_s8_g8_c1", "sm90_128x96_s6_g8_c1")  # M = 129..256: 0.87-0.99x
    assert pick(140, 4000, 28672)[1] == "sm90_128x128_s6_g8_c1"
    assert pick(192, 2048, 28672)[1] is None  # 104 CTAs of 128 x 80 split 2 ways: 1.00-1.06x
    assert pick(256, 3072, 16384)[1] is None and pick(128, 3072, 28672)[1] is None  # short K; one row block
    # below 20 KB the same 64 x 128 tiles keep the whole K where they fill half the SMs (WHOLE_K_MID, NOTES sm90 74)
    from gn_mm.sm90_config import DECODE
    assert whole_k(DECODE, 256, 2560, 14336, 132) and whole_k(DECODE, 130, 3584, 10240, 132)  # 80 / 84 CTAs
    assert not whole_k(DECODE, 192, 2048, 14336, 132)  # 48 CTAs: choose_splits' 2-way split stays
    assert not whole_k(DECODE, 256, 2560, 20480, 132) and not whole_k(DECODE, 128, 3072, 14336, 132)
    lone = deepest(64, 128)
    assert split_wider(lone, 2, 1024, 1024, 28672, 132) is None  # already split
    from dataclasses import replace
    assert split_wider(replace(lone, cluster_n=2), 1, 1024, 1024, 28672, 132) is None  # clustered
    assert split_wider(Sm90Config(64, 128, 8), 1, 1024, 4096, 28672, 132) is None  # two rounds of the pick
    menu = set(heuristic_configs("f32", "bf16"))
    for m in range(257, 3073, 61):
        for n in range(1024, 8193, 256):
            for k_bytes in (20480, 28672, 57344):
                cfg = choose_sm90(m, n, k_bytes, 132)
                wider = split_wider(cfg, 1, m, n, k_bytes, 132)
                if wider is not None:
                    assert wider in BALANCE_TILES and wider in menu
                    assert wider.block_m * wider.block_n >= 2 * cfg.block_m * cfg.block_n
                    assert WHOLE_K_FILL * 132 <= 2 * wider.ctas(m, n) <= 132


def test_tall_tiles_are_checked_and_picked_from_their_min_m():
    """192-row tiles: three consumers compile for 128 registers per thread, so at most 192 columns and no clusters;
    `balance` offers the 192 x 192 one from TALL_MIN_M rows, with the whole K."""
    from gn_mm.errors import LayoutError
    from gn_mm.sm90_config import FIT_CONFIGS, TALL, TALL_MIN_M, Sm90Config, choose_sm90, whole_k

    assert TALL[0].name == "sm90_192x192_s3_g8_c1" and TALL[0].threads == 512 and TALL[0] in FIT_CONFIGS
    for bad in (dict(block_n=208), dict(cluster_m=2), dict(cluster_k=2, block_n=192)):
        with pytest.raises(LayoutError, match="192-row tiles"):
            Sm90Config(**{"block_m": 192, "block_n": 192, "stages": 3, **bad}).check()
    with pytest.raises(LayoutError, match="block_m must be 64, 128 or 192"):
        Sm90Config(256, 128, 2).check()
    assert choose_sm90(768, 6144, 8192, 132) == TALL[0] and whole_k(TALL[0], 768, 6144, 8192, 132)  # 258 of 128 x 144 -> 128
    assert choose_sm90(TALL_MIN_M - 1, 12288, 8192, 132).block_m == 128  # 2 x 64 would fit one round, measured slower
    assert choose_sm90(768, 6144, 8192, 132, tall=False).block_m == 128  # int32 sums into bf16 / fp16 (TALL_SPILLS)


def test_decode_splits_take_the_most_ctas_whose_clusters_fit():
    from gn_mm.sm90_config import DECODE, DECODE_SPLITS, NARROW, in_cluster, split_tiles

    k4, k8 = in_cluster(DECODE, 4, 8192, 16), in_cluster(DECODE, 8, 16384, 16)
    names = lambda cs: [c.name.replace("sm90_", "") for c in cs]  # noqa: E731
    # N = 4096: 64 x 96 and every cluster of 8 need more CTAs than SMs; 32 of 64 x 128 first (the caller finds 30 fit
    # on an H100), then 29 tiles of 144 columns
    assert names(split_tiles(k4, 16, 4096, 8192, 132)[:3]) == ["64x128_s8_g8_c1_k4", "64x144_s8_g8_c1_k4", "64x160_s7_g8_c1_k4"]
    # N = 2048: 16 of 64 x 128 in clusters of 8 first (the caller finds 15 fit on an H100), then 13 of 160 columns
    assert names(split_tiles(k8, 16, 2048, 8192, 132)[:3]) == ["64x128_s8_g8_c1_k8", "64x160_s7_g8_c1_k8", "64x96_s10_g8_c1_k4"]
    assert split_tiles(k4, 1, 2880, 8192, 132)[0].name == "sm90_64x96_s10_g8_c1_k4"  # 120 CTAs, not 92 of 64 x 128
    assert split_tiles(k4, 16, 2304, 8192, 132)[0].name == "sm90_64x160_s7_g8_c1_k8"  # 120 CTAs against 96 of 64 x 96
    pair = dataclasses.replace(NARROW, cluster_k=2)  # 128 CTAs either way at N = 4096: the narrower tile first
    assert names(split_tiles(pair, 64, 4096, 8192, 132)[:2]) == ["64x64_s13_g8_c1_k2", "64x128_s8_g8_c1_k4"]
    assert split_tiles(k4, 128, 2048, 8192, 132) == (k4,)  # two row blocks: half_cluster's route
    k2 = in_cluster(DECODE, 2, 8192, 16)
    assert split_tiles(k2, 16, 14336, 8192, 132) == (k2,)  # nothing else fits one round
    # N = 4608: 32 of 64 x 144 in fours (30 fit on an H100), then 29 of 64 x 160 (116 CTAs), not 36 of 64 x 128 in pairs
    assert names(split_tiles(k2, 16, 4608, 8192, 132)[:2]) == ["64x144_s8_g8_c1_k4", "64x160_s7_g8_c1_k4"]
    # under 64 K steps only a 4-way split of 64 x 128 widens
    assert split_tiles(k2, 16, 4608, 4096, 132) == (k2,)
    assert names(split_tiles(k4, 16, 4096, 4096, 132)) == ["64x128_s8_g8_c1_k4", "64x144_s8_g8_c1_k4",
                                                            "64x160_s7_g8_c1_k4", "64x176_s6_g8_c1_k4"]
    assert split_tiles(k8, 16, 2048, 4096, 132) == (k8,)
    assert split_tiles(k8, 16, 2048, 128 * 63, 132) == (k8,)  # 63 steps
    for c in DECODE_SPLITS:
        c.check()
        assert c.block_m == 64 and c.cluster_k in (4, 8) and c.stages >= 5 and c.block_n % (4 * c.cluster_k) == 0


def test_share_a_clusters_along_n_where_measured():
    """`share_a`: one 64-128-row block across one round of 112+ tiles of 128+ columns runs in clusters of 4 along N
    sharing A (name suffix `_n4`, parsed back); 16 rows, 104 or 224 tiles, narrow tiles, pairs and M > 128 stay alone;
    cluster_n is
    checked (2 or 4, never with cluster_m / cluster_k, 1 KB parts of A)."""
    from gn_mm.errors import LayoutError
    from gn_mm.sm90_config import (LARGE, SHARE_A_CONFIGS, Sm90Config, choose_sm90, share_a)

    for m, n, want in ((128, 14336, "sm90_128x128_s6_g8_c1_n4"), (96, 14336, "sm90_128x128_s6_g8_c1_n4"),
                       (64, 15360, "sm90_64x128_s8_g8_c1_n4"), (64, 30720, "sm90_128x256_s4_g8_c1_n4")):
        cfg = share_a(choose_sm90(m, n, 8192, 132), m, n, 132)
        assert cfg.name == want and cfg in SHARE_A_CONFIGS and Sm90Config.parse(cfg.name) == cfg, (m, n, cfg.name)
        assert cfg.cluster == 4
    for m, n in ((16, 14336), (128, 6144), (128, 13312), (128, 4096), (100, 11008), (200, 14336), (4096, 4096),
                 (128, 28672)):  # 13312: 104 tiles of 128 x 128, under SHARE_A_MIN_TILES of the SMs
        cfg = choose_sm90(m, n, 8192, 132)
        assert share_a(cfg, m, n, 132) is cfg, (m, n, cfg.name)
    assert Sm90Config.parse("sm90_128x80_s7_g8_c1_n2").cluster_n == 2
    for bad in (dict(cluster_n=3), dict(cluster_n=2, cluster_m=2), dict(cluster_n=4, cluster_k=2)):
        with pytest.raises(LayoutError, match="cluster_n|cluster_k"):
            dataclasses.replace(LARGE[1], **bad).check()
    Sm90Config(64, 128, 4, cluster_n=4).check()  # quarters of 16 rows (2 KB)
    with pytest.raises(LayoutError, match="cluster_n"):
        Sm90Config(64, 128, 4, cluster_n=8).check()
    with pytest.raises(LayoutError, match="192-row tiles"):
        Sm90Config(192, 128, 3, cluster_n=2).check()


def test_every_sm90_pick_is_one_the_offline_test_compiles():
    """Whatever the Hopper heuristic can return for a signature (choose_sm90, then share_a, a split in clusters and its
    halves and split_tiles, long_k: the candidates gn_mm.api._plan tries) is in `heuristic_configs` for its accumulator
    and output, which tests/test_compile_offline.py compiles and checks for spills; names round-trip."""
    import dataclasses

    from gn_mm.config import choose_splits
    from gn_mm.sm90_config import (Sm90Config, choose_sm90, half_cluster, heuristic_configs, in_cluster, long_k,
                                   share_a, split_tiles, whole_k)

    pairs = [("f32", "bf16", 16), ("f16", "f16", 16), ("s32", "s32", 8), ("s32", "bf16", 8), ("f32", "f32", 32)]
    menus = {(acc, out): set(heuristic_configs(acc, out)) for acc, out, _ in pairs}
    for acc, out, bits in pairs:
        for m in (1, 16, 33, 64, 65, 100, 128, 129, 192, 256, 300, 768, 4096):
            for n in range(512, 40000, 1536):
                for kb in (1024, 4096, 16384, 65536):
                    for dram in (3.35, 4.8):
                        cfg = choose_sm90(m, n, kb, 132, dram, (acc, out) not in {("s32", "bf16"), ("s32", "f16")})
                        picks = [cfg, share_a(cfg, m, n, 132)]
                        splits = 1 if whole_k(cfg, m, n, kb, 132) else choose_splits(m, n, kb, cfg, 132, acc)
                        cand = in_cluster(cfg, splits, kb, m) if splits > 1 and acc != "f16" else None
                        while cand is not None:
                            picks += [cand, *split_tiles(cand, m, n, kb, 132)]
                            cand = half_cluster(cand, kb, m)
                        if acc != "f16":
                            picks += long_k(cfg, splits, m, n, kb, 132, dram)
                        for p in picks:
                            assert p in menus[(acc, out)], (acc, out, m, n, kb, dram, p.name)
                            assert Sm90Config.parse(p.name) == p and dataclasses.replace(p) == p
                            assert p.cluster_k <= -(-kb // 128), (m, n, kb, p.name)  # every CTA gets K steps


def test_swap_ab_where_128_row_blocks_pad_the_tokens():
    """swap_ab (NOTES sm90 75): a lone 128-row tile with the whole K that pads M runs as the swapped tile (C^T = B A^T)
    of 160-256 columns with the least padded area on its busiest SMs, in no more rounds (so does a pair along M); not
    below 257 rows, not for other clusters or 64-row picks, not where the padding saves under 5%."""
    from gn_mm.sm90_config import SWAP_CONFIGS, Sm90Config, swap_ab

    pick = Sm90Config.parse
    assert swap_ab(pick("sm90_128x192_s4_g8_c1"), 320, 8192, 132).name == "sm90_128x160_s5_g8_c1_t"
    assert swap_ab(pick("sm90_128x96_s6_g8_c1"), 320, 4096, 132).name == "sm90_64x160_s7_g8_c1_t"
    assert swap_ab(pick("sm90_128x256_s4_g8_c1"), 400, 8192, 132).name == "sm90_128x208_s4_g8_c1_t"
    assert swap_ab(pick("sm90_128x224_s4_g8_c1"), 480, 14336, 132) is None  # two rounds of 240-wide tiles: no gain
    assert swap_ab(pick("sm90_128x256_s4_g8_c1"), 4096, 8192, 132) is None  # nothing padded
    assert swap_ab(pick("sm90_128x256_s4_g8_c2"), 960, 8192, 132).name == "sm90_128x240_s4_g8_c1_t"  # pairs along M
    assert swap_ab(pick("sm90_128x128_s6_g8_c1_n4"), 320, 8192, 132) is None  # clusters sharing A stay
    assert swap_ab(pick("sm90_64x128_s8_g8_c1"), 320, 2048, 132) is None
    assert swap_ab(pick("sm90_128x192_s4_g8_c1"), 200, 8192, 132) is None  # below SWAP_MIN_M
    for c in SWAP_CONFIGS:
        c.check()
        assert c.swap and Sm90Config.parse(c.name) == c and c.name.endswith("_t")
        assert c.tiles(320, 8192) == -(-8192 // c.block_m) * -(-320 // c.block_n)  # rows along N, columns along M
    with pytest.raises(gn_mm.LayoutError, match="without clusters"):
        dataclasses.replace(SWAP_CONFIGS[0], cluster_m=2).check()


def test_dependent_launch_except_for_the_tiles_that_lose_their_placement():
    """dependent_launch (NOTES sm90 76): programmatic dependent launch except for lone 64 x 128 and 128 x 96 tiles
    over more than one row tile in calls of PDL_MIN_US or more on more than half the SMs (their main loops lose to
    the placement a dependent launch gets)."""
    from gn_mm.sm90_config import Sm90Config, dependent_launch

    pick = Sm90Config.parse
    assert not dependent_launch(pick("sm90_64x128_s8_g8_c1"), 1024, 1024, 8192, 128, 132, 3.35)  # ~20 us
    assert not dependent_launch(pick("sm90_128x96_s6_g8_c1"), 2048, 768, 28672, 128, 132, 3.35)
    assert dependent_launch(pick("sm90_64x128_s8_g8_c1"), 320, 2048, 2048, 128, 132, 3.35)  # ~4 us
    assert dependent_launch(pick("sm90_64x128_s8_g8_c1"), 64, 8192, 8192, 128, 132, 3.35)  # one row tile: decode
    assert dependent_launch(pick("sm90_64x128_s8_g8_c1_k8"), 1024, 1024, 8192, 128, 132, 3.35)  # clusters
    assert dependent_launch(pick("sm90_64x128_s8_g8_c2"), 1024, 1024, 8192, 128, 132, 3.35)
    assert dependent_launch(pick("sm90_128x256_s4_g8_c1"), 4096, 4096, 8192, 128, 132, 3.35)  # wider tiles
    assert dependent_launch(pick("sm90_64x64_s13_g8_c1"), 512, 1024, 8192, 128, 132, 3.35)
    assert dependent_launch(pick("sm90_128x96_s6_g8_c1_t"), 2048, 768, 28672, 128, 132, 3.35)  # swapped
    assert dependent_launch(pick("sm90_64x128_s8_g8_c1"), 512, 768, 28672, 48, 132, 3.35)  # a third of the SMs
