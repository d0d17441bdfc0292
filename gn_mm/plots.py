"""PNG charts of benchmark results (matplotlib is an optional extra: pip install "gn_mm[plot]")."""

from __future__ import annotations


def bench_chart(result: dict, path: str) -> str | None:
    """TFLOP/s of gn_mm and its peer for every benchmarked shape, one panel per variant. Returns the path, or
    None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [r for r in result["rows"] if "ours_tflops" in r]
    names = list(dict.fromkeys(r["variant"] for r in rows))
    if not names:
        return None
    fig, axes = plt.subplots(len(names), 1, figsize=(10, 2.6 * len(names)), squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        sub = [r for r in rows if r["variant"] == name]
        labels = [f"{r['m']}x{r['n']}x{r['k']}" for r in sub]
        x = range(len(sub))
        ax.bar([i - 0.2 for i in x], [r["ours_tflops"] for r in sub], width=0.4, label="gn_mm")
        ax.bar([i + 0.2 for i in x], [r.get("peer_tflops") or 0 for r in sub], width=0.4, label=sub[0]["peer"])
        ax.set_xticks(list(x), labels, rotation=20, fontsize=7)
        ax.set_ylabel("TFLOP/s")
        ax.set_title(name, fontsize=9)
        ax.legend(fontsize=7)
    env = result.get("environment", {})
    fig.suptitle(f"gn_mm vs peers on {env.get('gpu', '?')} (M x N x K)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def sol_chart(result: dict, path: str) -> str | None:
    """Grouped bars per dtype: datasheet, instruction ceilings, best gn_mm, best vendor (log scale: int4 and
    fp8 differ 50x). Returns the path, or None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = result["rows"]
    series = [("datasheet", "datasheet"), ("mma.sync_ceiling", "mma.sync ceiling"),
              ("wgmma_ceiling", "wgmma ceiling"), ("gn_mm", "gn_mm best"), ("vendor_tflops", "vendor best")]
    series = [(k, label) for k, label in series if any(r.get(k) for r in rows)]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(rows)), 4.2))
    width = 0.8 / max(1, len(series))
    for i, (key, label) in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(rows))]
        values = [r.get(key) or 0 for r in rows]
        bars = ax.bar(xs, values, width=width, label=label)
        ax.bar_label(bars, [f"{v:.0f}" if v else "" for v in values], fontsize=6, rotation=90, padding=2)
    ax.set_xticks(range(len(rows)), [r["dtype"] for r in rows])
    ax.margins(y=0.25)
    ax.set_yscale("log")
    ax.set_ylabel("TFLOP/s (TOPS for integers), log scale")
    env, sheet = result.get("environment", {}), result.get("datasheet")
    bw = result.get("bandwidth")
    ax.set_title(f"Speed of light on {env.get('gpu', '?')}" + (f"; copy {bw['gbs']:.0f} GB/s" if bw else "")
                 + ("" if sheet else " (datasheet: unknown GPU)"), fontsize=9)
    ax.legend(fontsize=7, ncol=len(series), loc="upper center", bbox_to_anchor=(0.5, -0.08), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def sustained_chart(result: dict, path: str) -> str | None:
    """Per dtype and size under sustained load: the vendor's and gn_mm's matmul as a percentage of the
    instruction loop that moves no data (`sol --sustained`). Returns the path, or None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [r for r in result["sustained"] if "error" not in r]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows)), 4))
    for i, (key, label) in enumerate((("vendor_pct_loop", "vendor"), ("gn_mm_pct_loop", "gn_mm"))):
        bars = ax.bar([j + (i - 0.5) * 0.4 for j in range(len(rows))], [r[key] for r in rows], width=0.4, label=label)
        ax.bar_label(bars, [f"{r[key]:.0f}" for r in rows], fontsize=7, padding=2)
    ax.axhline(100, color="k", lw=0.8)
    ax.set_xticks(range(len(rows)), [f"{r['dtype']}\n{r['size']}^3" for r in rows], fontsize=8)
    ax.set_ylim(0, max(110, 1.1 * max(max(r["vendor_pct_loop"], r["gn_mm_pct_loop"]) for r in rows)))
    ax.set_ylabel("% of the instruction loop (no memory traffic)")
    family = result.get("family", "auto")
    ax.set_title(f"Under sustained load on {result['environment'].get('gpu', '?')}"
                 + ("" if family == "auto" else f" (gn_mm: {family})"), fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def w4a16_chart(result: dict, path: str) -> str | None:
    """Speed-up of gn_mm.w4a16_mm over fp16 torch.matmul (and torch._weight_int4pack_mm) against M, one panel
    per (K, N), with the issue's targets as markers. Returns the path, or None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    shapes = list(dict.fromkeys((r["k"], r["n"]) for r in result["rows"]))
    if not shapes:
        return None
    fig, axes = plt.subplots(1, len(shapes), figsize=(3.6 * len(shapes), 3.2), squeeze=False, sharey=True)
    for ax, (k, n) in zip(axes[0], shapes):
        rows = [r for r in result["rows"] if (r["k"], r["n"]) == (k, n)]
        ms = [r["m"] for r in rows]
        ax.plot(ms, [r["ratio_fp16"] for r in rows], "o-", label="vs fp16 matmul")
        if any("ratio_int4pack" in r for r in rows):
            ax.plot([r["m"] for r in rows if "ratio_int4pack" in r],
                    [r["ratio_int4pack"] for r in rows if "ratio_int4pack" in r], "s--", label="vs _weight_int4pack_mm")
        ax.plot([r["m"] for r in rows if r.get("target_fp16")], [r["target_fp16"] for r in rows if r.get("target_fp16")],
                "k_", markersize=14, label="target vs fp16")
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.set_xscale("log", base=2)
        ax.set_title(f"K={k}, N={n}", fontsize=9)
        ax.set_xlabel("M")
    axes[0][0].set_ylabel("speed-up (x)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"gn_mm W4A16 on {result['environment']['gpu']} ({result['dtype']}, G={result['group']}; "
                 "CUDA-graph GPU time)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
