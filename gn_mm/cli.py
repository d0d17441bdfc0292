"""python -m gn_mm: command-line entry points.

    python -m gn_mm variants [--arch sm_90a] [--compile] [--json]
    python -m gn_mm bench [--variants bf16,s8] [--shapes square|llm|all] [--quick] [--out stem]   (GPU)
    python -m gn_mm sol [--dtypes bf16,s8] [--sizes 4096,8192] [--quick | --sustained] [--out stem] (GPU)
    python -m gn_mm w4a16-bench [--dtype bfloat16] [--ms 1,16] [--shapes 4096x4096] [--out stem]     (GPU)
    python -m gn_mm compile --arch sm_80,sm_89,sm_90a [--variants bf16,s8,wgmma] [--all-configs] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor

from . import microbench, runtime, sass, sm80_mm, sm80_w4a16, sm90_mm, sm90_w4a16, w4a16_decode
from .errors import ArchError, GnMmError
from .report import progress_bar
from .arch import Arch
from .config import choose_sm80, sm80_candidates
from .sm90_config import choose_sm90, heuristic_configs
from .variant_table import MMA_SYNC, WGMMA, find_path, variants


def _wanted(v, variant_filter, family: str) -> bool:
    return not variant_filter or family in variant_filter or v.a in variant_filter or v.name in variant_filter


def compile_jobs(archs, variant_filter=None, all_configs=False):
    """(label, KernelSpec) pairs: each mma.sync variant on each arch it exists for, and on sm_90 each wgmma
    variant (sm90_mm, built for sm_90a), with the config the heuristic picks for a large problem, or every config
    that fits (mma.sync) / that the heuristic can pick (wgmma); and the W4A16 kernels (on sm_90 both the mma.sync
    and the wgmma family). variant_filter: input types or variant names, or a family ("mma.sync", "wgmma",
    "w4a16")."""
    jobs = []
    for arch in archs:
        for v in MMA_SYNC:
            if arch.cc < v.min_arch or not _wanted(v, variant_filter, "mma.sync"):
                continue
            emulated = arch.cc in v.emulated_on
            configs = (sm80_candidates(arch, emulated=emulated, acc=v.acc) if all_configs
                       else [choose_sm80(8192, 8192, arch, 132, emulated=emulated, acc=v.acc)])
            for cfg in configs:
                for out in v.outs:
                    jobs.append(({"variant": v.name, "out": out, "config": cfg.name, "arch": arch.name},
                                 sm80_mm.spec(v, out, cfg, arch)))
        for v in WGMMA if arch.cc == 90 else ():
            if not _wanted(v, variant_filter, "wgmma"):
                continue
            for out in v.outs:
                for cfg in heuristic_configs(v.acc, out) if all_configs else [choose_sm90(8192, 8192, 8192, 132)]:
                    # (every epilogue build with --all-configs: what a call may run; else the one plain calls take)
                    for store in sm90_mm.stores(cfg, v.acc, out) if all_configs else (None,):
                        name = cfg.name if store is None else f"{cfg.name}/{sm90_mm.STORE_NAMES[store]}"
                        jobs.append(({"variant": v.name, "out": out, "config": name, "arch": "sm_90a"},
                                     sm90_mm.spec(v, out, cfg, store)))
        if variant_filter and "w4a16" not in variant_filter:
            continue
        # The W4A16 kernels: mma.sync and decode on sm_80+, the wgmma kernel (sm_90a) on sm_90.
        families = [] if arch.cc < sm80_w4a16.MIN_CC else [
            (sm80_w4a16.compile_matrix, lambda d, g, z, c: sm80_w4a16.spec(d, g, z, c, arch), arch.name),
            (w4a16_decode.compile_matrix, lambda d, g, z, c: w4a16_decode.spec(d, g, z, c, arch), arch.name)]
        if arch.cc == 90:
            families.append((sm90_w4a16.compile_matrix, sm90_w4a16.spec, "sm_90a"))
        for matrix, make, label in families:
            for (dtype, group, zeros), cfg in matrix(all_configs):
                s = make(dtype, group, zeros, cfg)
                jobs.append(({"variant": dict(s.params)["variant_name"], "out": str(dtype)[6:], "config": cfg.name,
                              "arch": label}, s))
    return jobs


def _compile_one(job, backend):
    label, spec = job
    built = runtime.build(spec, backend=backend)
    st = built.ptxas
    return {**label,
            "seconds": round(built.meta["seconds"], 3), "cached": built.from_disk, "registers": st.registers,
            "smem_bytes": spec.smem_bytes, "stack_bytes": st.stack_bytes, "spill_stores": st.spill_stores,
            "spill_loads": st.spill_loads}


def _archs(text: str) -> list[Arch]:
    """--arch's comma-separated list; a usage error (SystemExit 2) for a name that does not parse or an arch
    older than the kernels' sm_80."""
    archs = []
    if not _items(text):
        _usage("--arch: no architecture given (e.g. sm_80,sm_90a)")
    for part in _items(text):
        try:
            arch = Arch.parse(part)
        except ValueError as exc:
            _usage(f"--arch: {str(exc).removeprefix('arch: ')}")
        if arch.cc < 80:
            _usage(f"--arch: {arch.name} is older than sm_80, the oldest arch gn_mm's kernels run on")
        archs.append(arch)
    return archs


def _items(text: str) -> list[str]:
    """A comma-separated option's items, stripped, empty ones dropped ("bf16, s8," is bf16 and s8)."""
    return [x.strip() for x in text.split(",") if x.strip()]


def _usage(message: str):
    print(f"python -m gn_mm: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def cmd_compile(args) -> int:
    archs = _archs(args.arch)
    vf = set(_items(args.variants)) or None
    jobs = compile_jobs(archs, vf, args.all_configs)
    names = ", ".join(a.name for a in archs)
    unmatched = sorted(f for f in vf or () if not compile_jobs(archs, {f}))
    if unmatched:  # a typo would otherwise print an empty table and succeed
        _usage(f"--variants: {', '.join(unmatched)} match no kernel on {names}; use input types (bf16, f16, e4m3, "
               "e5m2, s8, u8, s4, u4, tf32), variant names (python -m gn_mm variants) or families (mma.sync, "
               "wgmma, w4a16)")
    backend = args.backend or "bindings"  # the offline front-end returns the ptxas log
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        rows = list(progress_bar(pool.map(lambda j: _compile_one(j, backend), jobs), "compile", len(jobs)))
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{'variant':22} {'out':5} {'arch':7} {'config':28} {'s':>6} {'regs':>4} {'smem':>7} spills")
        for r in rows:
            secs = "cache" if r["cached"] else f"{r['seconds']:.2f}"
            spill = f"{r['spill_stores']}/{r['spill_loads']}"
            print(f"{r['variant']:22} {r['out']:5} {r['arch']:7} {r['config']:28} {secs:>6} "
                  f"{r['registers']!s:>4} {r['smem_bytes']:>7} {spill}")
    bad = [r for r in rows if r["spill_stores"] or r["spill_loads"]]
    if bad:
        print(f"{len(bad)} kernels spill registers", file=sys.stderr)
    return 1 if bad else 0


def _variant_sass(row: dict, arch: Arch) -> dict:
    """Compile the variant's instruction microbenchmark for `arch` and read what the SASS runs."""
    v = find_path(row["a"], row["b"], row["acc"], row["path"])
    built = runtime.build(microbench.spec(v, arch), backend="bindings")
    text = sass.disassemble(built.cubin)
    mix = sass.tensor_core_mix(text) if text is not None else None
    st = built.ptxas
    return {**row, "arch": arch.name, "compile_s": round(built.meta["seconds"], 3), "registers": st.registers,
            "spills": bool(st.spills), "sass_ops": dict(mix) if mix is not None else "unknown",
            "sass": sass.classify(v.a, mix, v.path) if mix is not None else "unknown (no cuobjdump/nvdisasm)"}


def cmd_variants(args) -> int:
    if args.arch:
        archs = _archs(args.arch)
    else:
        try:
            archs = [Arch.of_device()]
        except ArchError:
            if args.compile:
                print("--compile needs an architecture: no CUDA GPU here, so pass --arch (e.g. sm_90a); "
                      "compiling needs no GPU", file=sys.stderr)
                return 2
            archs = [None]
    rows = []
    for arch in archs:
        found = variants(arch)
        if args.compile:
            with ThreadPoolExecutor(max(1, args.jobs)) as pool:
                found = list(progress_bar(pool.map(lambda r: _variant_sass(r, arch), found), "compile", len(found)))
        rows += [{**r, "arch": arch.name if arch else "any"} for r in found]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    head = f"{'arch':7} {'A x B':11} {'acc':4} {'outputs':20} {'instruction':60} {'min':6}"
    print(head + ("  compile regs spills  SASS" if args.compile else "  emulated"))
    for r in rows:
        line = (f"{r['arch']:7} {r['a'] + ' x ' + r['b']:11} {r['acc']:4} {','.join(r['outs']):20} "
                f"{r['instr']:60} {r['min_arch']:6}")
        if args.compile:
            ops = r["sass_ops"] if isinstance(r["sass_ops"], str) else ",".join(sorted(r["sass_ops"]))
            line += f"  {r['compile_s']:6.2f} {r['registers']!s:>4} {'yes' if r['spills'] else 'no':>6}  {r['sass']}: {ops}"
        else:
            line += "  " + ("yes" if r["emulated"] else "no" if r["emulated"] is False else ",".join(r["emulated_on"]))
        print(line)
    return 0


# Subcommands whose argument parsers live in their own modules.
_DELEGATED = {"bench": ".bench", "sol": ".sol", "w4a16-bench": ".bench_w4a16"}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] and argv[0] in _DELEGATED:  # their options live with the measuring modules
        import importlib

        return importlib.import_module(_DELEGATED[argv[0]], __package__).main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m gn_mm", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("bench", help="time gn_mm against torch peers per variant (needs a GPU); "
                                 "python -m gn_mm bench --help")
    sub.add_parser("sol", help="speed of light per dtype: datasheet, instruction ceilings, best gn_mm and vendor "
                               "matmul, bandwidth (needs a GPU); python -m gn_mm sol --help")
    sub.add_parser("w4a16-bench", help="time gn_mm.w4a16_mm against fp16 torch.matmul and "
                                       "torch._weight_int4pack_mm (needs a GPU); python -m gn_mm w4a16-bench --help")
    p = sub.add_parser("variants", help="the MMA variant table for the current GPU or a named arch; with "
                                        "--compile, each variant compiled (no GPU needed) and its SASS checked")
    p.add_argument("--arch", default="", help="e.g. sm_90a or sm_80,sm_89 (default: the current GPU)")
    p.add_argument("--compile", action="store_true", help="compile each variant and report its SASS")
    p.add_argument("--jobs", type=int, default=2, help="parallel compiles")
    p.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    p.set_defaults(func=cmd_variants)
    p = sub.add_parser("compile", help="compile kernel variants with NVRTC (no GPU needed) and report "
                                       "compile time, registers, shared memory and spills")
    p.add_argument("--arch", default="sm_80,sm_89,sm_90a,sm_120", help="comma-separated, e.g. sm_80,sm_90a")
    p.add_argument("--variants", default="", help="filter: input types (bf16,e4m3,s8,...), variant names, or "
                   "families (mma.sync, wgmma, w4a16)")
    p.add_argument("--all-configs", action="store_true", help="every config that fits (mma.sync, W4A16) or that the "
                   "heuristic can pick (wgmma), not just the default")
    p.add_argument("--backend", choices=["torch", "bindings"], default=None,
                   help="NVRTC front-end (default: cuda.bindings, whose log has registers and spills)")
    p.add_argument("--jobs", type=int, default=2, help="parallel compiles")
    p.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    p.set_defaults(func=cmd_compile)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except GnMmError as exc:  # (a compile error, a front-end this torch build lacks): the message, no traceback
        print(f"python -m gn_mm {args.cmd}: error: {exc}", file=sys.stderr)
        return 1
