"""Speed of light per dtype on this GPU (`python -m gn_mm sol`): the datasheet dense peak, the instruction
ceilings (mma.sync and, on sm_90, wgmma; SASS checked), the best gn_mm matmul and the best vendor matmul over a
size sweep, and the memory bandwidth of a device copy. Table on stdout, JSON, PNG.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import bench, datasheet, microbench, report, runtime, sass, sol_sustained
from .arch import Arch
from .timing import bench as time_it
from .variant_table import find_path


@dataclass(frozen=True)
class SolDtype:
    case: str                    # bench.CASES key: gn_mm against its vendor peer
    types: tuple[str, str, str]  # (A, B, accumulator) of the tensor-core instruction
    datasheet: str               # key of gn_mm.datasheet peaks


DTYPES = {
    "bf16": SolDtype("bf16", ("bf16", "bf16", "f32"), "bf16"),
    "f16": SolDtype("f16", ("f16", "f16", "f32"), "f16"),
    "f16acc": SolDtype("f16acc", ("f16", "f16", "f16"), "f16acc"),
    "tf32": SolDtype("tf32", ("tf32", "tf32", "f32"), "tf32"),
    "e4m3": SolDtype("e4m3", ("e4m3", "e4m3", "f32"), "fp8"),
    "s8": SolDtype("s8", ("s8", "s8", "s32"), "int8"),
    "s4": SolDtype("s4", ("s4", "s4", "s32"), "int4"),
}
PATHS = ("mma.sync", "wgmma")
SIZES = (1024, 2048, 4096, 8192, 16384)
QUICK_SIZES = (4096,)
TRIALS = 3  # medians per ceiling (full run)


def ceiling(variant, device, quick: bool = False) -> dict:
    """The variant's instruction ceiling on this GPU with the SASS of the microbenchmark that measured it:
    `sass_ok` is False when the opcode found is not what the variant table promises (native or emulated)."""
    arch = Arch.of_device(device)
    built = runtime.build(microbench.spec(variant, arch))
    text = sass.disassemble(built.cubin)
    expected = "emulated" if arch.cc in variant.emulated_on else "native"
    row = {"path": variant.path, "variant": variant.name, "instr": variant.ptx(microbench.WGMMA_N),
           "expected": expected}
    if text is None:
        row.update(sass="unknown (no cuobjdump/nvdisasm)", sass_ops={}, sass_ok=None)
    else:
        mix = sass.tensor_core_mix(text)
        row.update(sass=sass.classify(variant.a, mix, variant.path), sass_ops=dict(mix))
        row["sass_ok"] = row["sass"] == expected
    # A ceiling is a maximum: the best of a few medians, so that one slow stretch (clocks, a neighbour) does
    # not set it.
    trials = [microbench.mma_ceiling(variant, device, iters=1024 if quick else 4096, reps=5 if quick else 20)
              for _ in range(1 if quick else TRIALS)]
    row["tflops"] = max(t["tflops"] for t in trials)
    row["trials"] = [t["tflops"] for t in trials]
    return row


def copy_bandwidth(device, nbytes: int, trials: int = 1) -> dict:
    """Device-to-device copy, GB/s counting bytes read plus bytes written (the convention of CEILINGS.md);
    the best of `trials` medians."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    t = min((time_it(lambda i: dst.copy_(src), reps=20) for _ in range(trials)), key=lambda r: r["median_ms"])
    return {"bytes": nbytes, "gbs": 2 * nbytes / t["median_ms"] / 1e6, **t}


def _fits(case: str, size: int, device) -> bool:
    """Inputs, output and the peer's output (fp32 worst case) of one size within half of the free memory."""
    elem = {"tf32": 4, "bf16": 2, "f16": 2, "f16acc": 2, "e4m3": 1, "s8": 1, "s4": 1}[case]
    need = size * size * (2 * elem + 8) * 2  # x2: the float64 check of int4, temporaries
    return need < 0.5 * torch.cuda.mem_get_info(device)[0]


def _jobs(names, sizes, device, quick):
    arch = Arch.of_device(device)
    jobs = []
    for name in names:
        d = DTYPES[name]
        for path in PATHS:
            try:
                v = find_path(*d.types, path)
            except KeyError:
                continue
            if v.runs_on(arch.cc):
                jobs.append(("ceiling", name, v))
        jobs += [("matmul", name, s) for s in sizes]
    return jobs + [("bandwidth", None, (256 if quick else 1024) << 20)]


def measure(names, sizes, device="cuda", reps: int = 20, quick: bool = False, progress=None) -> dict:
    """Every measurement of the SOL table, raw (see `summarize`)."""
    device = torch.device(device)
    result = {"environment": bench.environment(), "ceilings": [], "matmul": [], "skipped": []}
    jobs = _jobs(names, sizes, device, quick)
    for kind, name, arg in (progress(jobs) if progress else jobs):
        if kind == "ceiling":
            result["ceilings"].append({"dtype": name, **ceiling(arg, device, quick)})
        elif kind == "bandwidth":
            result["bandwidth"] = copy_bandwidth(device, arg, 1 if quick else TRIALS)
        elif not _fits(DTYPES[name].case, arg, device):
            result["skipped"].append({"dtype": name, "size": arg, "why": "not enough free GPU memory"})
        else:
            case = bench.CASES[DTYPES[name].case]
            try:
                row = bench.run_case(case, (arg, arg, arg), device, reps if arg <= 4096 else max(5, reps // 2))
            except Exception as exc:  # reported, never hidden
                row = {"m": arg, "n": arg, "k": arg, "error": f"{type(exc).__name__}: {exc}"}
            result["matmul"].append({"dtype": name, **row})
            torch.cuda.empty_cache()
    found = datasheet.lookup(result["environment"]["gpu"])
    result["datasheet"] = {"label": found[0], **found[1]} if found else None
    result["rows"] = summarize(result, names)
    return result


def _best(rows, key):
    good = [r for r in rows if r.get(key) and "error" not in r]
    return max(good, key=lambda r: r[key]) if good else None


def summarize(result: dict, names) -> list[dict]:
    """One row per dtype: datasheet, ceilings, best gn_mm and vendor over the sweep, and the ratios."""
    sheet = result.get("datasheet") or {}
    rows = []
    for name in names:
        d = DTYPES[name]
        ceils = {c["path"]: c for c in result["ceilings"] if c["dtype"] == name}
        runs = [r for r in result["matmul"] if r["dtype"] == name]
        ours = _best(runs, "ours_tflops")
        peer = _best(runs, "peer_tflops") if bench.CASES[d.case].peer else None  # s4: a ceiling, not a vendor
        top = max((c["tflops"] for c in ceils.values()), default=None)
        row = {"dtype": name, "datasheet": sheet.get(d.datasheet),
               **{f"{p}_ceiling": ceils[p]["tflops"] if p in ceils else None for p in PATHS},
               "sass_ok": all(c["sass_ok"] is not False for c in ceils.values()),
               "gn_mm": ours and ours["ours_tflops"], "gn_mm_size": ours and ours["m"],
               "vendor": bench.CASES[d.case].peer_name if bench.CASES[d.case].peer else None,
               "vendor_tflops": peer and peer["peer_tflops"], "vendor_size": peer and peer["m"],
               "errors": [r["error"] for r in runs if "error" in r]}
        row["pct_ceiling"] = 100 * row["gn_mm"] / top if row["gn_mm"] and top else None
        row["pct_datasheet"] = 100 * row["gn_mm"] / row["datasheet"] if row["gn_mm"] and row["datasheet"] else None
        row["x_vendor"] = row["gn_mm"] / row["vendor_tflops"] if row["gn_mm"] and row["vendor_tflops"] else None
        rows.append(row)
    return rows


def _f(x, fmt="{:.0f}", none="n/a"):
    return none if x is None else fmt.format(x)


def markdown(result: dict) -> str:
    env, sheet = result["environment"], result.get("datasheet")
    lines = [f"GPU: {env['gpu']} ({env['sms']} SMs), torch {env['torch']}, NVRTC {env['nvrtc']}; datasheet: "
             + (sheet["label"] if sheet else "unknown GPU"), "",
             "TFLOP/s (TOPS for integers). Ceilings: register/shared-memory-only loops of the instruction, SASS "
             "checked. gn_mm and vendor: best over the square sizes swept (size in brackets).", "",
             "| dtype | datasheet | mma.sync ceiling | wgmma ceiling | gn_mm best | % of ceiling | % of datasheet "
             "| vendor | vendor best | x vendor |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        flag = "" if r["sass_ok"] else " (SASS mismatch!)"
        lines.append(
            f"| {r['dtype']} | {_f(r['datasheet'])} | {_f(r['mma.sync_ceiling'])}{flag} | {_f(r['wgmma_ceiling'])} "
            f"| {_f(r['gn_mm'])} [{_f(r['gn_mm_size'], '{}', '-')}] | {_f(r['pct_ceiling'], '{:.0f}%')} "
            f"| {_f(r['pct_datasheet'], '{:.0f}%')} | {r['vendor'] or 'none'} "
            f"| {_f(r['vendor_tflops'])} [{_f(r['vendor_size'], '{}', '-')}] | {_f(r['x_vendor'], '{:.2f}')} |")
    lines += [f"- {r['dtype']}: {e}" for r in result["rows"] for e in r["errors"]]
    bw = result.get("bandwidth")
    if bw:
        peak = sheet.get("bw") if sheet else None
        lines += ["", f"Memory: device copy {bw['gbs']:.0f} GB/s (read + write, {bw['bytes'] >> 20} MiB)"
                  + (f"; datasheet {peak} GB/s ({100 * bw['gbs'] / peak:.0f}%)" if peak else "")]
    for s in result.get("skipped", []):
        lines.append(f"- skipped {s['dtype']} {s['size']}^3: {s['why']}")
    return "\n".join(lines) + "\n"


def save(result: dict, stem: str) -> list[str]:
    """<stem>.json, <stem>.md and (with matplotlib) <stem>.png; returns the paths written."""
    from .plots import sol_chart

    return report.write(result, stem, markdown(result), sol_chart)


def _sustained(names, sizes, out: str, family: str | None = None) -> int:
    from .plots import sustained_chart

    names = [n for n in names if bench.CASES[DTYPES[n].case].peer]  # s4 has no vendor matmul to compare
    result = sol_sustained.measure(names, sizes, progress=lambda jobs: report.progress_bar(jobs, "sol --sustained"),
                                   family=family)
    written = report.write(result, out, sol_sustained.markdown(result), sustained_chart)
    print(sol_sustained.markdown(result))
    print("wrote " + ", ".join(written))
    return 0


def main(argv=None) -> int:
    """`python -m gn_mm sol` and scripts/sol.py."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m gn_mm sol",
                                description="speed of light per dtype: datasheet, instruction ceilings, best "
                                            "gn_mm and vendor matmul, memory bandwidth (needs a GPU)")
    p.add_argument("--dtypes", default="", help=f"comma-separated, from {', '.join(DTYPES)} (default: all)")
    p.add_argument("--sizes", type=report.int_list, default=None,
                   help=f"square sizes to sweep (default {','.join(map(str, SIZES))})")
    p.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES}, short loops")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--sustained", action="store_true",
                   help="instead: under sustained load (the GPU at its power limit), the instruction loop, the vendor "
                        "and gn_mm interleaved call by call at the squares (default dtypes "
                        f"{','.join(sol_sustained.DTYPES)}, sizes {','.join(map(str, sol_sustained.SIZES))})")
    p.add_argument("--family", choices=("mma.sync",), default=None,
                   help="with --sustained: the mma.sync family's loop and kernel, also where wgmma exists")
    p.add_argument("--out", default="gn_mm_sol", help="output stem: <out>.json, .md, .png")
    args = p.parse_args(argv)
    names = args.dtypes.split(",") if args.dtypes else list(sol_sustained.DTYPES if args.sustained else DTYPES)
    report.unknown_names(p, "dtypes", names, DTYPES)
    if report.no_gpu("sol", "measures the GPU"):
        return 2
    if args.sustained:
        return _sustained(names, args.sizes or sol_sustained.SIZES, args.out, args.family)
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    if args.quick:
        args.reps = min(args.reps, 10)
    result = measure(names, sizes, reps=args.reps, quick=args.quick,
                     progress=lambda jobs: report.progress_bar(jobs, "sol"))
    written = save(result, args.out)
    print(markdown(result))
    print("wrote " + ", ".join(written))
    bad = [r["dtype"] for r in result["rows"] if not r["sass_ok"] or r["errors"]]
    if bad:
        print(f"problems (SASS mismatch or wrong results): {', '.join(bad)}", file=sys.stderr)
    return 1 if bad else 0
