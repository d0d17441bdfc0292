import re

import jinja2
import pytest

from gn_mm import codegen, config, sm80_mm, variant_table as variants
from gn_mm.arch import Arch
from gn_mm.config import SM80_CONFIGS

BF16 = variants.find("bf16", "bf16", "f32")


def test_every_kernel_file_has_one_marker():
    files = sorted(codegen.cuda_src_dir().glob("*.cu"))
    assert files, "no kernel files found"
    for f in files:
        header, kernel = codegen.split(f.read_text(), str(f))
        assert "extern \"C\" __global__" in kernel
        assert (codegen.codegen_dir() / f"{f.stem}.j2").is_file(), f"{f.stem}.j2 missing"


def test_split_rejects_zero_or_two_markers():
    with pytest.raises(ValueError, match="exactly one marker"):
        codegen.split("int x;\n")
    with pytest.raises(ValueError, match="found 2"):
        codegen.split(f"{codegen.MARKER}\nx\n{codegen.MARKER}\n")


def test_render_replaces_header_and_inlines_includes():
    cfg = SM80_CONFIGS[0]
    src = sm80_mm.spec(BF16, "bf16", cfg, Arch(90)).source()
    assert '#include "' not in src  # self-contained: every include inlined
    assert src.count("typedef unsigned int u32;") == 1  # each header once
    assert f"BLOCK_M = {cfg.block_m}, BLOCK_N = {cfg.block_n}" in src
    assert BF16.instr in src
    # The editor defaults above the marker are gone: exactly one definition of each constant.
    assert len(re.findall(r"constexpr int BLOCK_M", src)) == 1
    assert "extern \"C\" __global__ void __launch_bounds__(NUM_THREADS, MIN_BLOCKS) sm80_mm(" in src


def test_tma_fills_the_mma_sync_ring_where_the_gpu_has_it():
    # sm_90 loads A and B by TMA (one thread, swizzled boxes); other GPUs by every thread's cp.async.
    for cc, tma in ((80, False), (86, False), (89, False), (90, True), (120, False)):
        src = sm80_mm.spec(BF16, "bf16", SM80_CONFIGS[3], Arch(cc)).source()
        assert f"constexpr bool TMA_LOADS = {'true' if tma else 'false'};" in src
        assert config.tma_loads(Arch(cc)) is tma


def test_line_directives_point_at_original_files():
    src = sm80_mm.spec(BF16, "f32", SM80_CONFIGS[0], Arch(80)).source()
    cu = (codegen.cuda_src_dir() / "sm80_mm.cu").read_text().splitlines()
    lines = src.splitlines()
    # Find the kernel's signature line in the rendered source and the #line directive in force there.
    idx = next(i for i, ln in enumerate(lines) if ln.startswith("extern \"C\" __global__"))
    last = max(i for i in range(idx) if lines[i].startswith('#line') and '"sm80_mm.cu"' in lines[i])
    line_no = int(lines[last].split()[1]) + (idx - last - 1)
    assert cu[line_no - 1] == lines[idx]


def test_missing_template_parameter_is_an_error():
    with pytest.raises(jinja2.UndefinedError):
        codegen.render("sm80_mm", {"variant_name": "x"})


def test_different_configs_render_differently():
    a = sm80_mm.spec(BF16, "bf16", SM80_CONFIGS[0], Arch(90)).source()
    b = sm80_mm.spec(BF16, "bf16", SM80_CONFIGS[1], Arch(90)).source()
    c = sm80_mm.spec(BF16, "f32", SM80_CONFIGS[0], Arch(90)).source()
    assert len({a, b, c}) == 3


def test_sm90_mm_builds_hold_one_epilogue_each():
    """sm90_mm compiles one epilogue per build (GN_STORE), picked per call: TMA stores (with column terms only when the
    call has them) where C suits a tensor map and the tile holds a 128-byte chunk, K-split partials with mm_reduce,
    direct stores otherwise and for CLUSTER_K tiles; the compile sweeps build each a call may run."""
    from gn_mm import sm90_mm as s
    from gn_mm.sm90_config import Sm90Config

    big, narrow = Sm90Config(128, 256, 4), Sm90Config(64, 48, 8)
    split_k = Sm90Config(64, 128, 8, cluster_k=4)
    swapped = Sm90Config(64, 160, 7, swap=True)
    assert s.store_for(big, 1, 2, True, False) == s.STORE_TMA
    assert s.store_for(big, 1, 2, True, True) == s.STORE_TMA_COLS
    assert s.store_for(big, 1, 2, False, True) == s.STORE_DIRECT  # C's rows unfit for a tensor map
    assert s.store_for(big, 3, 2, True, False) == s.STORE_PARTIAL
    assert s.store_for(narrow, 1, 2, True, False) == s.STORE_DIRECT  # 96 bytes: no whole chunk
    assert s.store_for(split_k, 1, 2, True, False) == s.STORE_DIRECT
    assert s.store_for(swapped, 1, 2, True, False) == s.STORE_TMA
    assert s.column_terms(swapped, True, False) and not s.column_terms(big, True, False)
    assert s.stores(big, "f32", "bf16") == (s.STORE_TMA, s.STORE_TMA_COLS, s.STORE_DIRECT, s.STORE_PARTIAL)
    assert s.stores(big, "s32", "s32") == (s.STORE_TMA, s.STORE_DIRECT, s.STORE_PARTIAL)
    assert s.STORE_PARTIAL not in s.stores(big, "f16", "f16") + s.stores(swapped, "f32", "bf16")
    assert s.stores(split_k, "f32", "bf16") == (s.STORE_DIRECT,)
    v = variants.find_path("bf16", "bf16", "f32", "wgmma")
    sources = {st: s.spec(v, "bf16", big, st).source() for st in s.stores(big, "f32", "bf16")}
    for st, src in sources.items():
        assert f"#define GN_STORE {st}\n" in src
    assert len(set(sources.values())) == len(sources)
    assert s.spec(v, "bf16", big) == s.spec(v, "bf16", big, s.STORE_TMA)
