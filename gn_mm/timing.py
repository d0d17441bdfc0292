"""Device-event timing: warm-up, many repetitions, median and spread, inputs rotated past L2."""

from __future__ import annotations

import statistics

import torch


def rotation_sets(bytes_per_set: int, device=None, factor: float = 3.0, cap: int = 16) -> int:
    """How many input sets to cycle so that consecutive runs never find their inputs in L2."""
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20)
    return max(1, min(cap, int(-(-factor * l2 // max(bytes_per_set, 1)))))


def bench(fn, n_sets: int = 1, warmup: int = 5, reps: int = 30) -> dict:
    """Time fn(i) (i = repetition, pick input set i % n_sets) with CUDA events; milliseconds."""
    for i in range(warmup):
        fn(i % n_sets)
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        fn(i % n_sets)
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    q = statistics.quantiles(times, n=10) if len(times) >= 10 else [times[0]] * 9
    return {"median_ms": statistics.median(times), "p10_ms": q[0], "p90_ms": q[-1], "min_ms": times[0],
            "reps": reps}
