"""The speed of light under sustained load (`python -m gn_mm sol --sustained`).

A GPU that runs matmuls for more than a moment sits at its power limit (an H100 SXM at 700 W clocks its SMs
down from 1980 to ~1750 MHz), where the instruction ceilings measured in short bursts do not apply. This
measures, per dtype and square size, after `WARM_S` seconds of load, calls of three things interleaved call by
call so that all see the same power state: the instruction ceiling's loop (no global memory traffic: the
upper bound of any matmul at that power), the vendor's matmul and gn_mm's (benchmarks/NOTES.md, sm90 35).
"""

from __future__ import annotations

import time

import torch

from . import bench, microbench, runtime
from .arch import Arch
from .microbench import LOOPS, instruction_flops
from .variant_table import find_path

WARM_S = 3.0  # seconds of load before timing: the board reaches its power limit within about a second
SIZES = (4096, 8192)
DTYPES = ("bf16", "f16", "tf32", "e4m3", "s8")  # dtypes with a vendor peer (sol.DTYPES names)


def interleaved(fns: dict, reps: int, warm_s: float = WARM_S) -> dict:
    """Median milliseconds per function: `warm_s` seconds of calling all of them, then `reps` rounds, each calling
    every function once between its own event pair, the order rotating round by round. fn(i): i picks inputs."""
    names = list(fns)
    start, i = time.perf_counter(), 0
    while time.perf_counter() - start < warm_s:
        for name in names:
            fns[name](i)
        i += 1
        if i % 8 == 0:
            torch.cuda.synchronize()  # keep the queue short: the warm-up's length is wall time
    torch.cuda.synchronize()
    events = {name: [] for name in names}
    for r in range(reps):
        for name in names[r % len(names):] + names[:r % len(names)]:
            pair = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            pair[0].record()
            fns[name](r)
            pair[1].record()
            events[name].append(pair)
    torch.cuda.synchronize()
    return {name: sorted(s.elapsed_time(e) for s, e in events[name])[reps // 2] for name in names}


def _loop(variant, device):
    """(calls(iters) -> fn, flops per iteration) of the variant's ceiling loop: the wgmma loop on sm_90, else
    sm80_mm's own inner loop (ldmatrix + mma.sync)."""
    name = "wgmma" if variant.path == "wgmma" else "ldmatrix"
    lp = LOOPS[name]
    kern = runtime.kernel(microbench.spec(variant, Arch.of_device(device), name), device)
    blocks = torch.cuda.get_device_properties(device).multi_processor_count * lp.blocks_per_sm
    seed = torch.randint(0, 2**31 - 1, (64,), dtype=torch.int32, device=device)
    out = torch.empty(blocks * lp.threads, dtype=torch.int32, device=device)
    per_iter = instruction_flops(variant) * lp.per_iter * (blocks * lp.threads // lp.issuers)

    def calls(iters: int):
        return lambda i: runtime.launch(kern, (blocks, 1, 1), (lp.threads, 1, 1), [out, seed, iters])
    return calls, per_iter, name


def measure_one(name: str, size: int, device, reps: int = 0, family: str | None = None) -> dict:
    """One dtype at size^3: the loop, the vendor and gn_mm under sustained load (TFLOP/s, ratios to the vendor).
    family "mma.sync": that family's loop and gn_mm's mma.sync kernel, also where wgmma exists."""
    from .sol import DTYPES

    d = DTYPES[name]
    variant = runnable(name, device, family)
    case = bench.CASES[d.case]
    sets = [case.make(size, size, size, device) for _ in range(2 if size >= 8192 else 3)]
    kw = {"config": family} if family else {}
    fns = {"vendor": lambda i: case.peer(sets[i % len(sets)]),
           "gn_mm": lambda i: case.ours(sets[i % len(sets)], **kw)}
    reps = reps or (40 if size >= 8192 else 120)
    with case.flags():
        for fn in fns.values():
            fn(0)
        calls, per_iter, loop = _loop(variant, device)
        # Size the loop's calls to the vendor's: the same duty cycle for all three.
        t = interleaved({"vendor": fns["vendor"], "probe": calls(256)}, 10, 0.5)
        iters = max(16, round(256 * t["vendor"] / t["probe"]))
        t = interleaved({"loop": calls(iters), **fns}, reps)
    flops = 2 * size ** 3
    row = {"dtype": name, "size": size, "loop": loop, "instr": variant.ptx(microbench.WGMMA_N), "iters": iters,
           "ms": t, "loop_tflops": per_iter * iters / t["loop"] / 1e9, "vendor": case.peer_name,
           "vendor_tflops": flops / t["vendor"] / 1e9, "gn_mm_tflops": flops / t["gn_mm"] / 1e9}
    row["loop_x_vendor"] = row["loop_tflops"] / row["vendor_tflops"]
    row["gn_mm_x_vendor"] = row["gn_mm_tflops"] / row["vendor_tflops"]
    row["gn_mm_pct_loop"] = 100 * row["gn_mm_tflops"] / row["loop_tflops"]
    row["vendor_pct_loop"] = 100 * row["vendor_tflops"] / row["loop_tflops"]
    return row


def _find(types, path):
    try:
        return find_path(*types, path)
    except KeyError:
        return None


def runnable(name: str, device, family: str | None = None):
    """The variant whose loop bounds dtype `name` on this GPU (wgmma where it runs, else mma.sync; or only
    `family`'s), or None."""
    from .sol import DTYPES

    cc = Arch.of_device(device).cc
    paths = (family,) if family else ("wgmma", "mma.sync")
    return next((v for v in (_find(DTYPES[name].types, p) for p in paths) if v and v.runs_on(cc)), None)


def measure(names, sizes, device="cuda", progress=None, family: str | None = None) -> dict:
    """`measure_one` for every dtype and size; dtypes this GPU has no instruction for are listed as skipped,
    and a failing measurement (e.g. a vendor call the GPU lacks) is reported in its row, never hidden."""
    device = torch.device(device)
    jobs = [(n, s) for n in names for s in sizes]
    rows, skipped = [], sorted({n for n in names if runnable(n, device, family) is None})
    for name, size in (progress(jobs) if progress else jobs):
        if name in skipped:
            continue
        try:
            rows.append(measure_one(name, size, device, family=family))
        except Exception as exc:  # reported, never hidden
            rows.append({"dtype": name, "size": size, "error": f"{type(exc).__name__}: {exc}"})
        torch.cuda.empty_cache()
    return {"environment": bench.environment(), "sustained": rows, "skipped": skipped, "family": family or "auto"}


def markdown(result: dict) -> str:
    env = result["environment"]
    family = result.get("family", "auto")
    lines = [f"GPU: {env['gpu']} ({env['sms']} SMs), torch {env['torch']}, NVRTC {env['nvrtc']}"
             + ("" if family == "auto" else f"; gn_mm family: {family}"), "",
             f"Under sustained load ({WARM_S:.0f} s of calls first), interleaved call by call, TFLOP/s (TOPS for "
             "integers). loop: the instruction ceiling's loop (no global memory), each call as long as the vendor's: "
             "what no matmul can beat at this power.", "",
             "| dtype | size | loop | vendor | vendor TFLOP/s | gn_mm TFLOP/s | loop TFLOP/s | loop / vendor "
             "| gn_mm / vendor | gn_mm % of loop | vendor % of loop |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["sustained"]:
        if "error" in r:
            lines.append(f"| {r['dtype']} | {r['size']}^3 | error: {r['error']} |")
            continue
        lines.append(f"| {r['dtype']} | {r['size']}^3 | {r['loop']} | {r['vendor']} | {r['vendor_tflops']:.0f} "
                     f"| {r['gn_mm_tflops']:.0f} | {r['loop_tflops']:.0f} | {r['loop_x_vendor']:.3f} "
                     f"| {r['gn_mm_x_vendor']:.3f} | {r['gn_mm_pct_loop']:.1f}% | {r['vendor_pct_loop']:.1f}% |")
    if result.get("skipped"):
        lines += ["", "No tensor-core instruction on this GPU for: " + ", ".join(result["skipped"])]
    return "\n".join(lines) + "\n"
