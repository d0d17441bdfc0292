"""W4A16 benchmark: gn_mm.w4a16_mm against fp16 torch.matmul on the dequantised weight (cuBLAS) and
torch._weight_int4pack_mm (tinygemm, bf16), with the memory floor from a copy bandwidth measured in the same run.

Times are device-event medians of CUDA-graph replays (each graph holds CALLS calls cycling through input sets
that exceed L2), i.e. GPU time per call, the way serving engines run decode; eager times (host launch cost
included) are recorded beside them. Used by scripts/w4a16_bench.py and `python -m gn_mm w4a16-bench`.
"""

from __future__ import annotations

import argparse
import platform

import torch

from . import report, w4a16_formats as fmt
from .sol import copy_bandwidth
from .timing import bench, graph_time, rotation_sets
from .w4a16 import w4a16_mm

SHAPES = ((4096, 4096), (4096, 14336), (14336, 4096), (8192, 28672))  # (K, N)
MS = (1, 16, 64, 256, 2048)
TARGETS = {1: 3.0, 16: 3.0, 64: 2.0, 256: 1.0, 2048: 0.85}  # ratio over fp16 torch.matmul (issue 4)
CALLS = 10


def _weights(k: int, n: int, group: int, dtype, device, sets: int):
    """`sets` random symmetric GPTQ weights: (gn_mm prepared, fp16/bf16 dequantised [N, K], tinygemm pack)."""
    out = []
    for _ in range(sets):
        q = torch.randint(0, 16, (k, n), device=device, dtype=torch.int32)
        scales = (torch.rand(k // group, n, device=device) * 0.01 + 0.001).to(dtype)
        qweight = fmt.pack_nibbles(q, dim=1)
        prepared = fmt.prepare(qweight, scales, None, group_size=group)
        dense = fmt.dequantize_gptq(qweight, scales, None, group_size=group, dtype=torch.float32).to(dtype)
        tiny = None
        if dtype == torch.bfloat16 and hasattr(torch, "_weight_int4pack_mm"):
            # tinygemm: w = (q - 8) * scale + zero on uint4 packed two per byte along K of an [N, K] weight.
            qt = q.t().contiguous()
            packed = ((qt[:, 0::2] << 4) | qt[:, 1::2]).to(torch.uint8)
            tiny_w = torch._convert_weight_to_int4pack(packed, 8)
            sz = torch.stack((scales, torch.zeros_like(scales)), dim=-1).contiguous()  # [K // G, N, 2]
            tiny = (tiny_w, sz)
        out.append((prepared, dense.t().contiguous(), tiny))
        del q, qweight, dense  # keep only what the timed calls read
    return out


def measure_shape(k: int, n: int, ms, dtype, group: int, device, reps: int, bw_gbs: float) -> list[dict]:
    w_bytes = k * n // 2 + (k // group) * n * 2
    # Enough sets that the smallest weight (ours) misses L2 too: every contender streams from DRAM.
    weights = _weights(k, n, group, dtype, device, rotation_sets(w_bytes, device))
    rows = []
    for m in ms:
        acts = [torch.randn(m, k, device=device).to(dtype) for _ in range(len(weights))]
        ours = lambda i: w4a16_mm(acts[i], weights[i][0])  # noqa: E731
        peer = lambda i: torch.nn.functional.linear(acts[i], weights[i][1])  # noqa: E731
        ref = peer(0).float()
        err = ((ours(0).float() - ref).norm() / ref.norm()).item()
        row = {"k": k, "n": n, "m": m, "dtype": str(dtype)[6:], "group": group, "rel_err_vs_fp16": err,
               "weight_bytes": w_bytes}
        n_sets = len(weights)
        row["ours_us"] = graph_time(ours, n_sets, reps, CALLS)["median_ms"] * 1e3
        row["fp16_us"] = graph_time(peer, n_sets, reps, CALLS)["median_ms"] * 1e3
        row["ours_eager_us"] = bench(ours, n_sets, reps=reps)["median_ms"] * 1e3
        row["fp16_eager_us"] = bench(peer, n_sets, reps=reps)["median_ms"] * 1e3
        row["ratio_fp16"] = row["fp16_us"] / row["ours_us"]
        if weights[0][2] is not None:
            tiny = lambda i: torch._weight_int4pack_mm(acts[i], weights[i][2][0], group, weights[i][2][1])  # noqa
            try:
                t_err = ((tiny(0).float() - ref).norm() / ref.norm()).item()
                row["int4pack_us"] = graph_time(tiny, n_sets, reps, CALLS)["median_ms"] * 1e3
                row["int4pack_rel_err_vs_fp16"] = t_err
                row["ratio_int4pack"] = row["int4pack_us"] / row["ours_us"]
            except RuntimeError as exc:  # not every torch build has tinygemm for this shape
                row["int4pack_error"] = str(exc).splitlines()[0]
        floor_bytes = w_bytes + m * k * 2 + m * n * 2
        row["floor_us"] = floor_bytes / bw_gbs / 1e3
        row["ratio_floor"] = row["ours_us"] / row["floor_us"]
        row["target_fp16"] = TARGETS.get(m)
        rows.append(row)
    torch.cuda.empty_cache()
    return rows


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [f"# W4A16 on {env['gpu']} ({result['dtype']}, G = {result['group']}, symmetric)", "",
             f"Copy bandwidth (same run): {result['bandwidth_gbs']:.0f} GB/s. Times: GPU time per call "
             f"(CUDA-graph replay), inputs rotated past L2; eager in the last columns.", "",
             "| K x N | M | gn_mm us | fp16 matmul us | ratio | target | int4pack us | vs int4pack | floor us "
             "| gn_mm / floor | eager gn_mm / fp16 us |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        tiny = f"{r['int4pack_us']:.1f}" if "int4pack_us" in r else "n/a"
        vs = f"{r['ratio_int4pack']:.2f}x" if "ratio_int4pack" in r else "n/a"
        target = f">= {r['target_fp16']}" if r.get("target_fp16") else ""
        lines.append(f"| {r['k']} x {r['n']} | {r['m']} | {r['ours_us']:.1f} | {r['fp16_us']:.1f} | "
                     f"{r['ratio_fp16']:.2f}x | {target} | {tiny} | {vs} | {r['floor_us']:.1f} | "
                     f"{r['ratio_floor']:.2f} | {r['ours_eager_us']:.1f} / {r['fp16_eager_us']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gn_mm w4a16-bench", description=__doc__.splitlines()[0])
    p.add_argument("--out", default="w4a16_bench", help="output stem: <out>.json, .md, .png")
    p.add_argument("--dtype", default="bfloat16", choices=("float16", "bfloat16"))
    p.add_argument("--group", type=int, default=128)
    p.add_argument("--ms", type=report.int_list, default=tuple(MS), help="token counts M, e.g. 1,16,64")
    p.add_argument("--shapes", type=report.shape_list, default=None, help="K x N list, e.g. 4096x4096,4096x14336")
    p.add_argument("--reps", type=int, default=30)
    args = p.parse_args(argv)
    if report.no_gpu("w4a16-bench", "times kernels"):
        return 2
    device = torch.device("cuda")
    dtype = getattr(torch, args.dtype)
    shapes = args.shapes or SHAPES
    ms = list(args.ms)
    bw = copy_bandwidth(device, 1 << 30, trials=3)["gbs"]
    rows = []
    for k, n in report.progress_bar(shapes, "w4a16 shapes"):
        rows += measure_shape(k, n, ms, dtype, args.group, device, args.reps, bw)
    result = {"environment": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                              "cuda": torch.version.cuda, "python": platform.python_version()},
              "dtype": args.dtype, "group": args.group, "bandwidth_gbs": bw, "calls_per_graph": CALLS, "rows": rows}
    from .plots import w4a16_chart

    text = markdown(result)
    print(text)
    print("wrote", ", ".join(report.write(result, args.out, text, w4a16_chart)))
    return 0
