"""Smoke test of the wgmma path on one GPU: each wgmma type family once, small and large, with timing.

    python scripts/sm90_smoke.py
"""

import time

import torch

import gn_mm
from gn_mm.timing import bench

dev = torch.device("cuda")
gpu = gn_mm.api._gpu(0)
for cfg in gn_mm.SM90_CONFIGS:
    plan = gn_mm.api._plan(gn_mm.variant_table.find("bf16", "bf16", "f32"), "bf16", 8192, 8192, 16384, gpu, cfg, None)
    print(cfg.name, "persistent grid", plan.grid, flush=True)
for dt, acc in [(torch.bfloat16, None), (torch.float16, torch.float16), (torch.float8_e4m3fn, None),
                (torch.int8, None), (torch.float32, None)]:
    for m, n, k in [(256, 256, 256), (1000, 700, 320), (4096, 4096, 4096)]:
        if dt == torch.int8:
            a = torch.randint(-8, 8, (m, k), device=dev, dtype=torch.int8)
            w = torch.randint(-8, 8, (n, k), device=dev, dtype=torch.int8)
        else:
            a = (torch.randn(m, k, device=dev) * 0.5).to(dt)
            w = (torch.randn(n, k, device=dev) * 0.5).to(dt)
        t0 = time.time()
        c = gn_mm.mm(a, w.t(), acc_dtype=acc)
        torch.cuda.synchronize()
        first = time.time() - t0
        ref = a.double() @ w.double().t()
        err = float((c.double() - ref).norm() / ref.norm())
        t = bench(lambda i: gn_mm.mm(a, w.t(), acc_dtype=acc), reps=20)["median_ms"]
        print(f"{str(dt):22} acc={acc} {m}x{n}x{k}: rel err {err:.2e}, first call {first:.2f}s, "
              f"{2 * m * n * k / t / 1e9:.0f} TFLOP/s", flush=True)
