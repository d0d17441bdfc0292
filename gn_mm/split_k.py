"""Host side of the single-launch split-K fix-up (cuda_src/split_k.cuh): the per-tile ticket counters."""

from __future__ import annotations

import threading

import torch

from . import runtime

_tickets: dict = {}  # (device, stream) -> int32 counters, zero between launches (the kernels re-arm them)
_retired: list = []  # outgrown counter sets, kept alive: a captured CUDA graph may still point at one
_lock = threading.Lock()


def tickets(device: torch.device, count: int) -> torch.Tensor:
    """At least `count` zeroed int32 tile counters for the current stream. One set per stream, shared by every
    kernel launched on it (launches on one stream run in order, and each leaves its counters at zero);
    concurrent streams never share a set."""
    key = (device.index, runtime.current_stream())
    t = _tickets.get(key)
    if t is None or t.numel() < count:
        with _lock:
            if t is not None:
                _retired.append(t)
            t = _tickets[key] = torch.zeros(max(count, 1024), dtype=torch.int32, device=device)
    return t
