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
