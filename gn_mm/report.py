"""What every measuring command shares: its argument checks, a progress bar (when tqdm is installed) and the
JSON + markdown + PNG files it writes next to an output stem."""

from __future__ import annotations

import argparse
import json
import sys


def int_list(text: str) -> tuple[int, ...]:
    """argparse type: comma-separated positive integers ("1,16,64")."""
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def shape_list(text: str) -> list[tuple[int, int]]:
    """argparse type: comma-separated K x N pairs ("4096x4096,4096x14336")."""
    shapes = []
    for part in text.split(","):
        k, sep, n = part.partition("x")
        try:
            if not sep or int(k) < 1 or int(n) < 1:
                raise ValueError
            shapes.append((int(k), int(n)))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected K x N pairs such as 4096x4096,4096x14336, got {text!r}") \
                from None
    return shapes


def unknown_names(parser, kind: str, given: list[str], known) -> None:
    """Exit through `parser` (usage error) if any of `given` is not in `known`."""
    unknown = [x for x in given if x not in known]
    if unknown:
        parser.error(f"unknown {kind} {unknown}; choose from {', '.join(known)}")


def no_gpu(command: str, does: str) -> bool:
    """True (after saying so on stderr) when no CUDA GPU is visible: `python -m gn_mm <command>` <does>."""
    import torch

    if torch.cuda.is_available():
        return False
    print(f"python -m gn_mm {command} {does}, so it needs a CUDA GPU; none is visible here. "
          "(`python -m gn_mm variants --arch sm_90a --compile` works without one.)", file=sys.stderr)
    return True


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
