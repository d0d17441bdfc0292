"""Every variant compiles to a cubin for every arch it exists on, with NVRTC and no GPU, without spills."""

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from gn_mm import cli, compiler, microbench, runtime, sm80_mm, sm80_w4a16, sm90_w4a16, w4a16_decode
from gn_mm import variant_table as variants
from gn_mm.arch import Arch
from gn_mm.config import sm80_candidates

ARCHS = [Arch.parse(a) for a in ("sm_80", "sm_89", "sm_90a", "sm_120")]


def _share(jobs: list, key) -> list:
    """The two largest sweeps (the sm90_mm heuristic's configs, the sm_90 W4A16 kernels) take most of this file's time:
    on a 2-core CI machine GN_MM_COMPILE_SHARE=n builds about every n-th of their jobs (.ci/run: a third), yet every
    config (`key`) at least once: of each config's jobs, every n-th from an offset that rotates from config to config.
    Unset, all of them, as scripts/gpu_check.sh's test step does on the GPU machine."""
    n = int(os.environ.get("GN_MM_COMPILE_SHARE", "1"))
    if n <= 1:
        return jobs
    groups = {}
    for j in jobs:
        groups.setdefault(key(j), []).append(j)
    keep = {id(j) for i, g in enumerate(groups.values()) for j in g[i % min(n, len(g))::n]}
    return [j for j in jobs if id(j) in keep]


def _build_all(jobs):
    """jobs: (label, KernelSpec) pairs, as cli.compile_jobs makes them."""
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda j: (j[0], runtime.build(j[1], backend="bindings")), jobs))


def _mm_job(v, out, cfg, arch):
    return {"variant": v.name, "out": out, "config": cfg.name, "arch": arch.name}, sm80_mm.spec(v, out, cfg, arch)


def _assert_clean(results):
    bad = []
    for label, built in results:
        st = built.ptxas
        what = " ".join(map(str, label.values()))
        assert st.registers is not None, f"ptxas -v log missing for {what}: {built.meta}"
        if st.spills or st.stack_bytes:
            bad.append(f"{what}: {st}")
        if "serialized" in built.meta.get("log", ""):  # ptxas gave up overlapping wgmmas (C7510-style warning)
            bad.append(f"{what}: wgmma serialized: {built.meta['log']}")
        assert built.cubin[:4] == b"\x7fELF"
    assert not bad, "register spills or serialized wgmma:\n" + "\n".join(bad)


def test_every_variant_and_output_compiles_without_spills(compile_cache):
    """All (A, B, acc, out) on every arch, with the config the heuristic picks for large problems."""
    jobs = cli.compile_jobs(ARCHS, {"mma.sync"})
    assert len({(j[0]["variant"], j[0]["out"]) for j in jobs}) == sum(len(v.outs) for v in variants.MMA_SYNC)
    _assert_clean(_build_all(jobs))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_w4a16_kernel_and_config_compiles_without_spills(arch, fresh_cache):
    """fp16 / bf16 x every group size x with and without zero points x every config (sm_90: of both the
    mma.sync and the wgmma kernel; with GN_MM_COMPILE_SHARE, `_share`, every config in a share of those)."""
    jobs = cli.compile_jobs([Arch.parse(arch)], {"w4a16"}, all_configs=True)
    wgmma = len(sm90_w4a16.compile_matrix(True)) if arch == "sm_90" else 0
    assert len(jobs) == 2 * 4 * 2 * len(sm80_w4a16.CONFIGS) + len(w4a16_decode.compile_matrix(True)) + wgmma
    # 128-value stages only where a stage spans one group (G = 128 or per-channel)
    assert all(group in (128, 0) for (_, group, _), c in sm90_w4a16.compile_matrix(True) if c.k_sub == 2)
    _assert_clean(_build_all(_share(jobs, lambda j: j[0]["config"]) if arch == "sm_90" else jobs))


@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90a"])
def test_every_config_compiles_without_spills(arch, compile_cache):
    """Every config the heuristic can pick, for one variant per accumulator kind and emulation class."""
    arch = Arch.parse(arch)
    picks = [("bf16", "bf16", "f32", "bf16"), ("f16", "f16", "f16", "f16"), ("s8", "u8", "s32", "s32"),
             ("tf32", "tf32", "f32", "f32"), ("s4", "s4", "s32", "s32")]
    if arch.cc >= 89:
        picks += [("e4m3", "e5m2", "f32", "f32"), ("e5m2", "e5m2", "f16", "f16")]
    jobs = []
    for a, b, acc, out in picks:
        v = variants.find(a, b, acc)
        for cfg in sm80_candidates(arch, emulated=arch.cc in v.emulated_on, acc=v.acc):
            jobs.append(_mm_job(v, out, cfg, arch))
    _assert_clean(_build_all(jobs))


def test_fp8_refused_below_sm89_with_compiler_message():
    v = variants.find("e4m3", "e4m3", "f32")
    cfg = sm80_candidates(Arch(80))[0]
    from gn_mm.errors import CompileError

    with pytest.raises(CompileError, match="sm_89") as info:
        runtime.build(sm80_mm.spec(v, "bf16", cfg, Arch(80)), backend="bindings")
    assert info.value.source_path and info.value.source_path.endswith(".cu")
    assert "FP8" in info.value.log or "sm_89" in info.value.log


def test_microbenchmarks_compile_for_every_variant(compile_cache):
    """The register-only loop for every variant; sm80_mm's ldmatrix loop where the instruction is native
    (an emulated instruction needs more registers than that 64x64 warp tile leaves)."""
    for arch in ARCHS:
        for v in variants.MMA_SYNC:
            if arch.cc < v.min_arch or v.a != v.b:
                continue
            loops = ["registers"] + ([] if arch.cc in v.emulated_on else ["ldmatrix"])
            for loop in loops:
                built = runtime.build(microbench.spec(v, arch, loop), backend="bindings")
                assert built.ptxas.registers is not None and not built.ptxas.spills, (v.name, arch.name, loop)


def test_torch_flags_match_torch():
    from torch.cuda._utils import _get_gpu_rtc_compatible_flags

    assert tuple(_get_gpu_rtc_compatible_flags()) == compiler.TORCH_NVRTC_FLAGS


def test_offline_and_torch_frontends_pass_the_same_options():
    opts = compiler.options(Arch.parse("sm_90a"))
    assert opts[0] == "--gpu-architecture=sm_90a"
    assert set(compiler.BASE_OPTIONS) <= set(opts)
    assert opts[-len(compiler.torch_flags()) or len(opts):] == compiler.torch_flags() or not compiler.torch_flags()


# ptxas "Potential Performance Loss" diagnostics: serialized wgmma (C7510/C7511/C7515/C7517/C7519) or an
# ignored setmaxnreg (C7508). Any of them in a Hopper kernel's log is a failure.
_PERF_LOSS = ("C7508", "C7510", "C7511", "C7515", "C7517", "C7519", "Potential Performance Loss")


def test_every_hopper_variant_and_config_compiles_clean(fresh_cache):
    """sm90_mm: every wgmma variant x output with the large-problem config, and every config the heuristic
    can pick for one variant per accumulator kind (with GN_MM_COMPILE_SHARE, `_share`: every config for a share of
    them): no spills, no stack, no performance-loss diagnostics, and the clustered configs carry their cluster shape in
    the cubin."""
    from gn_mm import sass, sm90_mm
    from gn_mm.sm90_config import TALL, TALL_FIT, TALL_SPILLS, choose_sm90, heuristic_configs

    big = choose_sm90(8192, 8192, 8192, 132)
    # what `python -m gn_mm compile --arch sm_90a --variants wgmma` builds: every variant x output, the large config
    cli_jobs = cli.compile_jobs([Arch.parse("sm_90a")], {"wgmma"})
    assert {(j[0]["variant"], j[0]["out"], j[0]["config"]) for j in cli_jobs} == \
        {(v.name, out, big.name) for v in variants.WGMMA for out in v.outs}
    # (each config in every epilogue build a call may run: sm90_mm.stores)
    def builds(v, out, cfg):
        return [(v, out, cfg, store) for store in sm90_mm.stores(cfg, v.acc, out)]

    jobs, heuristic = [j for v in variants.WGMMA for out in v.outs for j in builds(v, out, big)], []
    for a, b, acc, out in [("bf16", "bf16", "f32", "bf16"), ("f16", "f16", "f16", "f16"), ("s8", "u8", "s32", "f32"),
                           ("e4m3", "e5m2", "f32", "bf16"), ("tf32", "tf32", "f32", "f32")]:
        heuristic += [j for cfg in heuristic_configs(acc, out) if cfg != big
                      for j in builds(variants.find_path(a, b, acc, "wgmma"), out, cfg)]
    jobs += _share(heuristic, lambda j: j[2].name)
    # The 192-row tiles (128 registers per thread) for one variant of every accumulator x output pair the heuristic
    # may give them (TALL_SPILLS: the pairs it keeps off them)
    pairs = {(v.acc, out): v for v in variants.WGMMA for out in v.outs if (v.acc, out) not in TALL_SPILLS}
    jobs += [j for (acc, out), v in pairs.items() for cfg in TALL + TALL_FIT for j in builds(v, out, cfg)
             if j not in jobs]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda j: (j, runtime.build(sm90_mm.spec(*j), backend="bindings")), jobs))
    bad = []
    for (v, out, cfg, store), built in results:
        st, log = built.ptxas, built.meta["log"]
        if st.registers is None or st.spills or st.stack_bytes or any(code in log for code in _PERF_LOSS):
            bad.append(f"{v.name}->{out} {cfg.name}/{sm90_mm.STORE_NAMES[store]}: {st} {log[-300:]}")
    assert not bad, "\n".join(bad)
    tool = sass.disassembler("cuobjdump")
    if tool is not None:
        import subprocess
        import tempfile

        clustered = [[r for r in results if getattr(r[0][2], f"cluster_{d}") > 1][0] for d in "mnk"]
        split = [r for r in results if r[0][2].cluster_k > 1][:4]
        for (v, out, cfg, _), built in results[:1] + clustered + split:
            with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
                f.write(built.cubin)
                f.flush()
                elf = subprocess.run([tool, "-elf", f.name], capture_output=True, text=True).stdout
                sass = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True).stdout
            assert ("EIATTR_CTA_PER_CLUSTER" in elf) == (cfg.cluster > 1), cfg.name
            assert _tma_loads_unlooped(sass), f"{v.name}->{out} {cfg.name}: a TMA load sits in a per-lane loop"
            if cfg.cluster_k > 1:
                assert "MEMBAR.ALL.GPU" not in sass, cfg.name  # the reduction's barriers fence shared memory only
                assert _remote_reads_consumed(sass), f"{v.name}->{out} {cfg.name}: a peer read may outlive its barrier"


def _sass_ops(sass: str) -> list[str]:
    """The instructions of a cuobjdump -sass listing, one string each ("@P0 BRA 0x96b0")."""
    import re

    code = [ln for ln in sass.splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln)]  # "/*0a10*/ OP ...;"
    return [ln.split("*/", 1)[1].split(";")[0].strip() for ln in code]


def _tma_loads_unlooped(sass: str) -> bool:
    """sm90_mm's producer issues its TMA loads from operands the compiler keeps in uniform registers. When it cannot
    prove them warp-uniform (a loop run by one thread), it wraps each load in a per-lane loop (ELECT, R2UR, the load,
    BRA.U.ANY back), ~50 dependent instructions per k-tile that capped narrow tiles' stage rate (NOTES sm90 67)."""
    ops = _sass_ops(sass)
    loads = [i for i, op in enumerate(ops) if op.startswith("UTMALDG")]
    return bool(loads) and not any("BRA.U.ANY" in op for i in loads for op in ops[i + 1:i + 3])


def _remote_reads_consumed(sass: str) -> bool:
    """sm90_mm's cluster reduction arrives on its second cluster barrier relaxed, which is safe only because every
    value read from a peer's shared memory (generic LD.E through the cluster window) is used before the arrival, so
    the read is complete when it arrives: check that in the SASS, between each cluster wait and the next arrival."""
    import re

    lines = _sass_ops(sass)
    region, seen = None, False
    for ln in lines:
        if ln.startswith("UCGABAR_WAIT"):
            region = []
        elif ln.startswith("UCGABAR_ARV") and region is not None:
            for i, op in enumerate(region):
                m = re.match(r"(?:@!?P\d )?LD\.E(?:\.(64|128))?\s+R(\d+),", op)
                if m:
                    seen = True
                    regs = [f"R{int(m.group(2)) + j}" for j in range({None: 1, "64": 2, "128": 4}[m.group(1)])]
                    later = " ".join(o for o in region[i + 1:] if not o.split()[0].startswith("LD"))
                    if not all(re.search(rf"\b{r}\b", later) for r in regs):
                        return False
            region = None
        elif region is not None:
            region.append(ln)
    return seen


def test_wgmma_microbenchmarks_compile_clean(compile_cache):
    for v in variants.WGMMA:
        built = runtime.build(microbench.spec(v, Arch.parse("sm_90a")), backend="bindings")
        assert built.ptxas.registers is not None and not built.ptxas.spills, v.name
        assert not any(code in built.meta["log"] for code in _PERF_LOSS), (v.name, built.meta["log"])
