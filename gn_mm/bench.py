"""gn_mm against its peers, per variant, in one process: torch.matmul (cuBLAS), torch._scaled_mm,
torch._int_mm, and for int4 (no library peer) the s4 mma.sync instruction ceiling.

Each case checks correctness against the peer before timing; times are device-event medians over inputs
rotated past L2, ours and the peer's interleaved call by call (same clocks and thermal state for both).
Used by scripts/bench.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import platform
from dataclasses import dataclass
from typing import Callable

import torch

from . import api, compiler, microbench, report
from . import variant_table as variants
from .int4 import pack_int4
from .timing import bench, bench_pair, graph_time, rotation_sets

SQUARE = ((4096, 4096, 4096), (8192, 8192, 8192))
LLM = tuple((m, n, k) for m in (16, 128, 4096) for k, n in ((4096, 4096), (4096, 14336), (14336, 4096)))


@dataclass(frozen=True)
class Case:
    name: str        # variant label
    make: Callable   # (m, n, k, device) -> dict of inputs
    ours: Callable   # (inputs, **mm_kwargs) -> tensor; extra kwargs (config=...) reach gn_mm.mm
    peer: Callable | None  # inputs -> tensor, or None (compare against the instruction ceiling)
    peer_name: str
    tol: float       # relative Frobenius error allowed between ours and the peer
    flags: Callable = contextlib.nullcontext  # context for the peer (e.g. allow_tf32)


def _float(dtype):
    def make(m, n, k, dev):
        return {"a": torch.randn(m, k, device=dev).to(dtype), "w": torch.randn(n, k, device=dev).to(dtype)}
    return make


def _fp8(m, n, k, dev):
    a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
    w = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn)
    one = torch.tensor(0.5, device=dev)
    return {"a": a, "w": w, "sa": one, "sb": one.clone()}


def _int8(m, n, k, dev):
    return {"a": torch.randint(-128, 128, (m, k), dtype=torch.int8, device=dev),
            "w": torch.randint(-128, 128, (n, k), dtype=torch.int8, device=dev)}


def _int4(m, n, k, dev):
    return {"a": pack_int4(torch.randint(-8, 8, (m, k), device=dev)),
            "w": pack_int4(torch.randint(-8, 8, (n, k), device=dev))}


@contextlib.contextmanager
def _backend_flag(name: str, value: bool):
    old = getattr(torch.backends.cuda.matmul, name)
    setattr(torch.backends.cuda.matmul, name, value)
    try:
        yield
    finally:
        setattr(torch.backends.cuda.matmul, name, old)


CASES = {
    "bf16": Case("bf16", _float(torch.bfloat16), lambda x, **kw: api.mm(x["a"], x["w"].t(), **kw),
                 lambda x: torch.matmul(x["a"], x["w"].t()), "torch.matmul", 2e-2),
    "f16": Case("f16", _float(torch.float16), lambda x, **kw: api.mm(x["a"], x["w"].t(), **kw),
                lambda x: torch.matmul(x["a"], x["w"].t()), "torch.matmul", 5e-3),
    "f16acc": Case("f16 (f16 acc)", _float(torch.float16),
                   lambda x, **kw: api.mm(x["a"], x["w"].t(), acc_dtype=torch.float16, **kw),
                   lambda x: torch.matmul(x["a"], x["w"].t()), "torch.matmul fp16-acc", 2e-2,
                   lambda: _backend_flag("allow_fp16_accumulation", True)),
    "tf32": Case("tf32", _float(torch.float32), lambda x, **kw: api.mm(x["a"], x["w"].t(), **kw),
                 lambda x: torch.matmul(x["a"], x["w"].t()), "torch.matmul tf32", 1e-2,
                 lambda: _backend_flag("allow_tf32", True)),
    "e4m3": Case("e4m3 -> bf16 (per-tensor scales)", _fp8,
                 lambda x, **kw: api.mm(x["a"], x["w"].t(), scale_a=x["sa"], scale_b=x["sb"],
                                        out_dtype=torch.bfloat16, **kw),
                 lambda x: torch._scaled_mm(x["a"], x["w"].t(), x["sa"], x["sb"], out_dtype=torch.bfloat16,
                                            use_fast_accum=True), "torch._scaled_mm fast_accum", 2e-2),
    "s8": Case("s8 -> s32", _int8, lambda x, **kw: api.mm(x["a"], x["w"].t(), **kw),
               lambda x: torch._int_mm(x["a"], x["w"].t()), "torch._int_mm", 0.0),
    "s4": Case("s4 -> s32", _int4, lambda x, **kw: api.mm(x["a"], x["w"].t(), **kw), None,
               "s4 mma.sync ceiling", 0.0),
}


def _rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = x.double(), ref.double()
    return float((x - ref).norm() / ref.norm().clamp_min(1e-30))


def _nbytes(inputs: dict) -> int:
    total = 0
    for v in inputs.values():
        t = getattr(v, "data", v)
        total += t.numel() * t.element_size()
    return total


def run_case(case: Case, shape, device, reps: int = 30, ceilings: dict | None = None, graph: bool = False,
             **mm_kwargs) -> dict:
    """One variant at one shape, ours against the peer; mm_kwargs (e.g. config="mma.sync") reach gn_mm.mm.
    graph: also the GPU time per call under CUDA-graph replay (no host time), ours and the peer's alternated."""
    m, n, k = shape
    first = case.make(m, n, k, device)
    sets = [first] + [case.make(m, n, k, device) for _ in range(rotation_sets(_nbytes(first), device) - 1)]
    case = dataclasses.replace(case, ours=functools.partial(case.ours, **mm_kwargs)) if mm_kwargs else case
    ours = case.ours(first)
    row = {"variant": case.name, "m": m, "n": n, "k": k, "peer": case.peer_name, "sets": len(sets)}
    to = None  # our timing: taken together with the peer's when there is one
    flops = 2 * m * n * k
    if case.peer is not None:
        with case.flags():
            try:
                ref = case.peer(first)
            except RuntimeError as exc:  # e.g. torch._int_mm refuses M <= 16: report ours alone
                ref, row["peer_error"] = None, str(exc).split("\n")[0]
            if ref is not None:
                row["rel_err_vs_peer"] = _rel_err(ours, ref)
                if row["rel_err_vs_peer"] > case.tol:
                    row["error"] = f"mismatch vs peer: {row['rel_err_vs_peer']:.3g} > {case.tol}"
                tp, to = bench_pair(lambda i: case.peer(sets[i]), lambda i: case.ours(sets[i]), len(sets),
                                    reps=reps)
                row["peer_ms"] = tp["median_ms"]
                row["peer_tflops"] = flops / tp["median_ms"] / 1e9
    else:
        ref = first["a"].unpack().double() @ first["w"].unpack().double().t()
        row["rel_err_vs_peer"] = _rel_err(ours, ref)
        if row["rel_err_vs_peer"] != 0.0:
            row["error"] = "int4 result is not exact"
        row["peer_tflops"] = (ceilings or {}).get(case.name)
    if to is None:
        to = bench(lambda i: case.ours(sets[i]), len(sets), reps=reps)
    row.update(ours_ms=to["median_ms"], ours_p10_ms=to["p10_ms"], ours_p90_ms=to["p90_ms"],
               ours_tflops=flops / to["median_ms"] / 1e9)
    if row.get("peer_tflops"):
        row["ratio"] = row["ours_tflops"] / row["peer_tflops"]
    if graph and "peer_ms" in row:
        row.update(_graph_pair(case, sets, calls=max(1, min(20, int(2e11 // flops)))))
    return row


def _graph_pair(case: Case, sets: list, calls: int, rounds: int = 2) -> dict:
    """GPU time per call (us) of ours and the peer under CUDA-graph replay: each round a median over replays,
    rounds alternating which goes first (the same clocks for both); per side the middle round (the lower middle
    one when `rounds` is even: with the default 2, the faster); and the peer's time over ours."""
    times = {"ours": [], "peer": []}
    fns = {"ours": lambda i: case.ours(sets[i]), "peer": lambda i: case.peer(sets[i])}
    with case.flags():
        for r in range(rounds):
            for who in ("ours", "peer") if r % 2 == 0 else ("peer", "ours"):
                times[who].append(graph_time(fns[who], len(sets), 20, calls)["median_ms"] * 1e3)
    ours, peer = (sorted(times[w])[(rounds - 1) // 2] for w in ("ours", "peer"))
    return {"graph_ours_us": ours, "graph_peer_us": peer, "graph_ratio": peer / ours}


def environment() -> dict:
    props = torch.cuda.get_device_properties()
    return {"gpu": torch.cuda.get_device_name(), "sms": props.multi_processor_count,
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "nvrtc": compiler.nvrtc_version(compiler.default_backend()), "python": platform.python_version()}


def s4_ceiling(device) -> float:
    v = next(x for x in variants.MMA_SYNC if (x.a, x.b) == ("s4", "s4"))
    return microbench.mma_ceiling(v, device)["tflops"]


def run(names, shapes, device="cuda", reps: int = 30, progress=None, graph: bool = False, **mm_kwargs) -> dict:
    device = torch.device(device)
    ceilings = {CASES["s4"].name: s4_ceiling(device)} if "s4" in names else {}
    jobs = [(CASES[nm], s) for nm in names for s in shapes]
    rows = []
    for case, shape in (progress(jobs) if progress else jobs):
        try:
            rows.append(run_case(case, shape, device, reps, ceilings, graph, **mm_kwargs))
        except Exception as exc:  # one failing case must not hide the others; it is reported
            rows.append({"variant": case.name, "m": shape[0], "n": shape[1], "k": shape[2],
                         "error": f"{type(exc).__name__}: {exc}"})
        torch.cuda.empty_cache()
    return {"environment": environment(), "ceilings": ceilings, "rows": rows}


def markdown(result: dict) -> str:
    env = result["environment"]
    config = result.get("config", "auto")
    graph = any("graph_ratio" in r for r in result["rows"])
    lines = [f"GPU: {env['gpu']} ({env['sms']} SMs), torch {env['torch']}, NVRTC {env['nvrtc']}"
             + ("" if config == "auto" else f"; gn_mm config: {config}"), "",
             "| variant | M | N | K | gn_mm TFLOP/s | peer | peer TFLOP/s | ratio |"
             + (" graph us (gn_mm / peer) | graph ratio |" if graph else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|---|" if graph else "")]
    if graph:
        lines[1:1] = ["", "ratio: eager calls, a device-event pair around each (the host's time to submit a call is in "
                      "it); graph: GPU time per call under CUDA-graph replay."]
    for r in result["rows"]:
        if "error" in r and "ours_tflops" not in r:
            lines.append(f"| {r['variant']} | {r['m']} | {r['n']} | {r['k']} | error: {r['error']} | | | |")
            continue
        peer = f"{r['peer_tflops']:.1f}" if r.get("peer_tflops") else f"n/a ({r.get('peer_error', '')})"
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else "-"
        extra = ""
        if graph:
            extra = (f" {r['graph_ours_us']:.1f} / {r['graph_peer_us']:.1f} | {r['graph_ratio']:.2f} |"
                     if "graph_ratio" in r else " | |")
        lines.append(f"| {r['variant']} | {r['m']} | {r['n']} | {r['k']} | {r['ours_tflops']:.1f} | {r['peer']} | "
                     f"{peer} | {ratio} |{extra}" + (f" {r['error']}" if "error" in r else ""))
    return "\n".join(lines) + "\n"


def save(result: dict, stem: str) -> list[str]:
    """<stem>.json, <stem>.md and (with matplotlib) <stem>.png; returns the paths written."""
    from .plots import bench_chart

    return report.write(result, stem, markdown(result), bench_chart)


def main(argv=None) -> int:
    """`python -m gn_mm bench` and scripts/bench.py: gn_mm vs torch peers, table + JSON + PNG."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m gn_mm bench", description="gn_mm vs torch peers per variant")
    p.add_argument("--variants", default=",".join(CASES), help=f"comma-separated, from {', '.join(CASES)}")
    p.add_argument("--shapes", choices=["square", "llm", "all"], default="all")
    p.add_argument("--quick", action="store_true", help="4096^3 only, fewer repetitions")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--graph", action="store_true",
                   help="also GPU time per call under CUDA-graph replay (host time out of the way), ours and the "
                        "peer's alternated")
    p.add_argument("--config", default="auto",
                   help="what gn_mm runs: auto (wgmma on sm_90, mma.sync elsewhere), a family (mma.sync, wgmma) "
                        "or a config name (python -m gn_mm compile --all-configs lists them)")
    p.add_argument("--out", default="gn_mm_bench", help="output stem: <out>.json, .md, .png")
    args = p.parse_args(argv)
    report.unknown_names(p, "variants", args.variants.split(","), CASES)
    if report.no_gpu("bench", "times kernels"):
        return 2
    shapes = {"square": SQUARE, "llm": LLM, "all": tuple(dict.fromkeys(SQUARE + LLM))}[args.shapes]
    if args.quick:
        shapes, args.reps = SQUARE[:1], 10
    kw = {} if args.config == "auto" else {"config": args.config}
    result = run(args.variants.split(","), shapes, reps=args.reps,
                 progress=lambda jobs: report.progress_bar(jobs, "bench"), graph=args.graph, **kw)
    result["config"] = args.config
    written = save(result, args.out)
    print(markdown(result))
    print("wrote " + ", ".join(written))
    return 0
