"""Device-event timing: warm-up, many repetitions, median and spread, inputs rotated past L2."""

from __future__ import annotations

import statistics
import time

import torch

SLEEP_CAP_S = 0.05  # the longest GPU sleep gpu_only queues
CYCLES_PER_S = 2e9  # sleep length in clock cycles per second (>= any boost clock: a slower GPU sleeps longer)


def rotation_sets(bytes_per_set: int, device=None, factor: float = 3.0, cap: int = 16) -> int:
    """How many input sets to cycle so that consecutive runs never find their inputs in L2."""
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20)
    return max(1, min(cap, int(-(-factor * l2 // max(bytes_per_set, 1)))))


def bench(fn, n_sets: int = 1, warmup: int = 5, reps: int = 30, gpu_only: bool = False) -> dict:
    """Time fn(i) (i = repetition, pick input set i % n_sets) with CUDA events; milliseconds.

    An event pair around a call measures from the GPU reaching the first event to it reaching the second: when
    the host submits the call more slowly than the GPU runs it, the host's time is in the number. That is the
    point of an eager measurement. gpu_only=True measures GPU time instead: a GPU sleep queued first, longer
    than the host needs to submit every repetition, so that all of them wait in the stream and run back to back.
    """
    t0 = time.perf_counter()
    for i in range(warmup):
        fn(i % n_sets)
    host_s = (time.perf_counter() - t0) / max(warmup, 1)
    torch.cuda.synchronize()
    if gpu_only:
        torch.cuda._sleep(int(min(SLEEP_CAP_S, 2 * host_s * reps + 1e-4) * CYCLES_PER_S))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        fn(i % n_sets)
        ends[i].record()
    torch.cuda.synchronize()
    return _summary([s.elapsed_time(e) for s, e in zip(starts, ends)])


def graph_time(fn, n_sets: int = 1, reps: int = 30, calls: int = 10) -> dict:
    """Per-call GPU time of fn(i): `calls` calls (input set i % n_sets) captured in one CUDA graph (after one
    eager call per set), the graph replayed back to back behind a GPU sleep (bench's gpu_only), each time
    divided by `calls`."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(n_sets):
            fn(i)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for i in range(calls):
                fn(i % n_sets)
    torch.cuda.current_stream().wait_stream(stream)
    t = bench(lambda i: graph.replay(), 1, warmup=3, reps=reps, gpu_only=True)
    return {k: (v / calls if k.endswith("_ms") else v) for k, v in t.items()}


def bench_pair(fn_a, fn_b, n_sets: int = 1, warmup: int = 5, reps: int = 30) -> tuple[dict, dict]:
    """bench() of two functions interleaved rep by rep (alternating which goes first), so that both see the
    same clocks, power and thermal state: on a long run an H200 slows down by up to 15%, and timing one
    function after the other charges that to the second. fn_b(i) gets input set (i + n_sets // 2) % n_sets,
    never the set fn_a just brought into L2."""
    half = n_sets // 2
    for i in range(warmup):
        fn_a(i % n_sets)
        fn_b((i + half) % n_sets)
    torch.cuda.synchronize()
    ev = [[torch.cuda.Event(enable_timing=True) for _ in range(4)] for _ in range(reps)]
    for i in range(reps):
        sa, ea, sb, eb = ev[i]
        first, second = ((fn_a, sa, ea, i), (fn_b, sb, eb, i + half)) if i % 2 == 0 else \
            ((fn_b, sb, eb, i + half), (fn_a, sa, ea, i))
        for fn, start, end, j in (first, second):
            start.record()
            fn(j % n_sets)
            end.record()
    torch.cuda.synchronize()
    return _summary([e[0].elapsed_time(e[1]) for e in ev]), _summary([e[2].elapsed_time(e[3]) for e in ev])


def _summary(times: list) -> dict:
    times = sorted(times)
    q = statistics.quantiles(times, n=10) if len(times) >= 10 else [times[0]] * 9
    return {"median_ms": statistics.median(times), "p10_ms": q[0], "p90_ms": q[-1], "min_ms": times[0],
            "reps": len(times)}
