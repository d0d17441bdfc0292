"""What every measuring command shares: a progress bar (when tqdm is installed) and the JSON + markdown +
PNG files it writes next to an output stem."""

from __future__ import annotations

import json
import sys


def progress_bar(iterable, desc: str, total: int | None = None):
    """`iterable` with a tqdm bar on stderr, or unchanged without tqdm (an optional extra)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, total=total, desc=desc, file=sys.stderr, leave=False)


def write(result: dict, stem: str, markdown: str, chart) -> list[str]:
    """<stem>.json, <stem>.md and, when `chart(result, path)` can draw (matplotlib present), <stem>.png.
    Returns the paths written."""
    with open(f"{stem}.json", "w") as f:
        json.dump(result, f, indent=1)
    with open(f"{stem}.md", "w") as f:
        f.write(markdown)
    png = chart(result, f"{stem}.png")
    return [f"{stem}.json", f"{stem}.md"] + ([png] if png else [])
