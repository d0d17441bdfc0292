"""A small, ragged case of every variant family (split-K included; on sm_90 every wgmma config too, and K split
inside clusters), whole and edge tiles of the mma.sync kernel, and the W4A16 kernels (decode; split-K and stream-K
fix-ups), and repeated calls that replay recorded launches, for compute-sanitizer:

    compute-sanitizer --tool memcheck python scripts/sanitize_cases.py
    compute-sanitizer --tool racecheck python scripts/sanitize_cases.py --racecheck
    compute-sanitizer --tool memcheck python scripts/sanitize_cases.py --w4a16   # the W4A16 kernels only
"""

import sys

import torch

import gn_mm
from gn_mm import variant_table as variants
from gn_mm.sm90_config import FIT_CONFIGS, SHARE_A_CONFIGS, SPLIT_CLUSTERS, SWAP_CONFIGS

dev = torch.device("cuda")
hopper = torch.cuda.get_device_capability() == (9, 0)
w4a16_only = "--w4a16" in sys.argv
done = set()
for v in variants.MMA_SYNC if not w4a16_only else ():
    if (v.a, v.acc) in done:
        continue
    done.add((v.a, v.acc))
    m, n, k = 300, 47, 300  # three 128-row tiles: a CTA pair and a lone CTA on the clustered configs
    if v.a in ("s4", "u4"):
        a = gn_mm.pack_int4(torch.randint(0, 8, (m, 320), device=dev))
        w = gn_mm.pack_int4(torch.randint(0, 8, (n, 320), device=dev))
    else:
        dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "tf32": torch.float32, "e4m3": torch.float8_e4m3fn,
                 "e5m2": torch.float8_e5m2, "s8": torch.int8, "u8": torch.uint8}[v.a]
        per16 = 16 // torch.empty(0, dtype=dtype).element_size()
        kp = -(-k // per16) * per16
        a = torch.randn(m, kp, device=dev).clamp(-3, 3).to(dtype)[:, :k]
        w = torch.randn(n, kp, device=dev).clamp(-3, 3).to(dtype)[:, :k]
    acc = {"f32": torch.float32, "f16": torch.float16, "s32": torch.int32}[v.acc]
    for splits in (1, 3) if v.acc != "f16" else (1,):
        gn_mm.mm(a, w.t(), acc_dtype=acc, splits=splits)
        if hopper:  # the mma.sync kernel with its TMA-filled ring
            gn_mm.mm(a, w.t(), acc_dtype=acc, splits=splits, config="mma.sync")
    if hopper:  # int4 too: unpacked to int8 for the s8 wgmma when a wgmma config is given
        # and samples of the fit tiles (chunk tails, pairs) and of the clusters along N (3 of 4 CTAs past N = 47)
        # swapped tiles: N = 47 columns of C is a ragged tile row block, its 94-byte rows stored directly (no TMA)
        for cfg in gn_mm.SM90_CONFIGS + FIT_CONFIGS[::5] + SHARE_A_CONFIGS[::6] + SWAP_CONFIGS[::3]:
            gn_mm.mm(a, w.t(), acc_dtype=acc, config=cfg)
        if v.acc != "f16" and v.a not in ("s4", "u4"):  # K split in clusters of 2-8 CTAs: 16+ K steps
            reps = 16 // a.element_size() if a.element_size() < 4 else 8
            a4, w4 = torch.cat([a] * reps, dim=1), torch.cat([w] * reps, dim=1)
            for cfg in SPLIT_CLUSTERS:
                gn_mm.mm(a4, w4.t(), acc_dtype=acc, config=cfg)
# `balance`'s tiles past M = 256 as the heuristic picks them: ragged row tiles, chunk tails stored directly,
# persistent CTAs that take a second tile.
if hopper and not w4a16_only:
    # 3016 / 6096: TMA stores, tails partly past N; 5000 / 7000: 128 x 240 / 224 (direct tails of 48 / 32 columns);
    # 807 x 4500: 126 menu tiles of 128 x 256 with the whole K
    for m, n in ((1500, 3000), (700, 3016), (383, 6096), (700, 5000), (900, 7000), (807, 4500)):
        a = torch.randn(m, 200, device=dev).bfloat16()
        w = torch.randn(n, 200, device=dev).bfloat16()
        gn_mm.mm(a, w.t())
        gn_mm.mm(a, w.t(), config=SWAP_CONFIGS[-1])  # swapped: transposed TMA stores, rows and columns ragged
    # The TMA epilogue's builds with column terms (per-column scales, a bias; a swapped tile's per-row scales) beside
    # the plain ones, on fp8 with ragged row and column tiles
    for m, n, k in ((300, 1000, 320), (320, 4096, 1024)):
        a8 = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        w8 = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn)
        sa, sb, one = torch.rand(m, device=dev), torch.rand(n, device=dev), torch.ones((), device=dev)
        bias = torch.randn(n, device=dev)
        for kw in ({}, dict(scale_a=one, scale_b=sb, bias=bias), dict(scale_a=sa, scale_b=one),
                   dict(scale_a=sa, scale_b=sb, bias=bias)):
            gn_mm.mm(a8, w8.t(), **kw)
# The mma.sync kernel's staged epilogue (whole tiles through the drained ring) beside edge tiles stored from
# registers: 300 x 520 has both for every config; with scales and bias, and as split-K partials.
for dtype, acc in ((torch.bfloat16, torch.float32), (torch.int8, torch.int32)) if not w4a16_only else ():
    a = torch.randn(300, 256, device=dev).clamp(-3, 3).to(dtype)
    w = torch.randn(520, 256, device=dev).clamp(-3, 3).to(dtype)
    sa, sb, bias = torch.rand(300, device=dev), torch.rand(520, device=dev), torch.randn(520, device=dev)
    for splits in (1, 2):
        gn_mm.mm(a, w.t(), acc_dtype=acc, splits=splits, config="mma.sync")
    scales = dict(scale_a=sa, scale_b=sb) if dtype == torch.int8 else {}  # scales: fp8 and int8 only
    gn_mm.mm(a, w.t(), acc_dtype=acc, config="mma.sync", bias=bias, out_dtype=torch.bfloat16, **scales)
# W4A16 decode kernel, every config the heuristic can pick: ragged N and K (K past the row end is NaN and must not
# be read), every group kind, zero points, K splits (workspace + tickets).
from gn_mm import w4a16_decode, w4a16_formats as fmt  # noqa: E402

for group, k in ((32, 160), (128, 640), (None, 204), (128, 2048)):
    n = 1000
    g = group or k
    q = torch.randint(0, 16, (k, n), device=dev)
    scales = (torch.rand(k // g, n, device=dev) * 0.05).bfloat16()
    zeros = fmt.pack_nibbles(torch.randint(0, 16, (k // g, n), device=dev), dim=1)
    w = gn_mm.prepare_w4a16(fmt.pack_nibbles(q, dim=1), scales, zeros, group_size=g)
    for m in (1, 5, 8):
        big = torch.full((m, k + 8), float("nan"), device=dev).bfloat16()
        big[:, :k] = torch.randn(m, k, device=dev).bfloat16()
        for cfg in w4a16_decode.HEURISTIC_CONFIGS:
            for splits in (None, 3, 1):  # 1 with K = 2048: warps long enough to issue their L2 prefetches
                out = gn_mm.w4a16_mm(big[:, :k], w, config=cfg, splits=splits)
                assert not out.isnan().any()
# The W4A16 GEMM kernels' split-K / stream-K fix-ups (parts published to a workspace, the last adds them): every
# mma.sync config with 3 splits and, on sm_90, every wgmma config with its own schedule and with 3 parts per tile.
from gn_mm import sm80_w4a16, sm90_w4a16  # noqa: E402

k, n = 640, 1000
q = torch.randint(0, 16, (k, n), device=dev)
scales = (torch.rand(k // 128, n, device=dev) * 0.05).bfloat16()
w = gn_mm.prepare_w4a16(fmt.pack_nibbles(q, dim=1), scales, group_size=128)
for cfg in [c for _, c in sm80_w4a16.CONFIGS]:
    for m in (5, cfg.block_m - 3):  # 5: fragments whose rows do not exist (not published, not read back)
        gn_mm.w4a16_mm(torch.randn(m, k, device=dev).bfloat16(), w, config=cfg, splits=3)
if hopper:
    # K = 2048 unsplit: 16-32 stages per CTA, so every ring's slots are refilled after consumers read them. Under
    # racecheck (--racecheck) K stays within each ring instead: racecheck reports every refill of a slot that
    # consumer lanes read with plain shared loads and lane 0 released (a bulk copy after the producer's wait on
    # the slot's empty barrier) as a WAR hazard, with or without a __syncwarp before the release (NOTES W4A16 39).
    ring_reuse = "--racecheck" not in sys.argv
    weights = {(k, n): w}  # the mma.sync cases' weight; other shapes are made on first use
    for cfg in dict.fromkeys(c for _, cs in sm90_w4a16.CONFIGS for c in cs):
        cases = [(k, n, None), (k, n, 3), (2048, 256, 1)]  # N = 1000: a ragged last column tile
        if cfg.k_sub == 4:  # 256-value stages: K in whole stages (640 -> 768: three, split 3 ways in stream-K)
            cases = [(max(768, kk // 256 * 256), nn, splits) for kk, nn, splits in cases]
        if cfg.ksplit and ring_reuse:  # two consumers splitting K, 150 tiles of 5 stages: CTAs whose second tile
            cases.append((1280, 64 * 150, 1))  # starts at an odd stage count (each consumer keeps its parity's stages)
        for kk, nn, splits in cases:
            kk = kk if ring_reuse else min(kk, cfg.stages * cfg.k_sub * 64 // 128 * 128)
            if (kk, nn) not in weights:
                qk = torch.randint(0, 16, (kk, nn), device=dev)
                weights[kk, nn] = gn_mm.prepare_w4a16(fmt.pack_nibbles(qk, dim=1), (torch.rand(
                    kk // 128, nn, device=dev) * 0.05).bfloat16(), group_size=128)
            gn_mm.w4a16_mm(torch.randn(cfg.block_m - 3, kk, device=dev).bfloat16(), weights[kk, nn], config=cfg,
                           splits=splits)
    # K split inside clusters (the others' sums pushed into the first CTA's shared memory): every cluster config the
    # heuristic can pick, two stages per CTA (within every ring), a ragged last row and column tile.
    for cfg in sm90_w4a16.CLUSTER_CONFIGS:
        kk = 2 * cfg.cluster_k * cfg.k_sub * 64
        if (kk, n) not in weights:
            weights[kk, n] = gn_mm.prepare_w4a16(fmt.pack_nibbles(torch.randint(0, 16, (kk, n), device=dev), dim=1),
                                                 (torch.rand(kk // 128, n, device=dev) * 0.05).bfloat16(), group_size=128)
        gn_mm.w4a16_mm(torch.randn(cfg.block_m - 3, kk, device=dev).bfloat16(), weights[kk, n], config=cfg)
# Recorded launches (runtime.Replays): a repeated call with the same pointers replays the packed launches of its
# second call; each must give the first call's result. Split-K workspaces and stream tickets are in the key.
k, n = 640, 1000
w = gn_mm.prepare_w4a16(fmt.pack_nibbles(torch.randint(0, 16, (k, n), device=dev), dim=1),
                        (torch.rand(k // 128, n, device=dev) * 0.05).bfloat16(), group_size=128)
a8 = torch.randn(40, 640, device=dev).to(torch.float8_e4m3fn)
s8 = torch.ones(40, device=dev), torch.ones(1000, device=dev)
a16, b16 = torch.randn(40, 640, device=dev).bfloat16(), torch.randn(1000, 640, device=dev).bfloat16()
calls = [lambda: gn_mm.w4a16_mm(a16[:1], w), lambda: gn_mm.w4a16_mm(a16[:16], w), lambda: gn_mm.w4a16_mm(a16, w)]
if not w4a16_only:
    calls += [lambda: gn_mm.mm(a16, b16.t()), lambda: gn_mm.mm(a16, b16.t(), splits=3),
              lambda: gn_mm.mm(a16, b16.t(), config="mma.sync", splits=2),
              lambda: gn_mm.mm(a8, a8.t(), scale_a=s8[0], scale_b=s8[0][:40], out_dtype=torch.float32)]
for call in calls:
    first = call()
    for _ in range(3):
        assert torch.equal(call(), first), "a replayed launch changed the result"
torch.cuda.synchronize()
print(f"ran {len(done)} variant families, the W4A16 kernels and {len(calls)} replayed calls")
