"""Measuring helpers: repeated timings and their medians/percentiles, peak memory, and the machine's ceilings.

Every figure the bench prints is a median (or a percentile) over repeats, never one run; nothing here asserts a
time. The ceilings are measured, not looked up: a copy bandwidth (the bound for decoding, which reads every weight
once per token) and a float32 matrix-multiply rate (a reference for prefill, which is compute bound).
This module knows nothing about the RAG code.
"""

from __future__ import annotations

import os
import platform
import resource
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, e.g. percentile([1, 2, 3, 4], 50) == 2.5."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else 0.0


def summary(values: Sequence[float], digits: int = 2) -> dict[str, float]:
    """p50/p95/min/max and the count, rounded for the report."""
    return {"p50": round(percentile(values, 50), digits), "p95": round(percentile(values, 95), digits),
            "min": round(min(values), digits) if values else 0.0, "max": round(max(values), digits) if values else 0.0,
            "n": len(values)}


def repeat(fn: Callable[[], Any], times: int, warmup: int = 1) -> list[float]:
    """Seconds for each of `times` calls of fn, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(times):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far.

    VmHWM from /proc, not getrusage's ru_maxrss: Linux carries ru_maxrss across exec, so a worker spawned by a
    5 GB parent would report the parent's peak.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    try:
        import psutil

        return float(psutil.Process().memory_info().rss) / 2**20
    except ImportError:  # psutil is a dependency, but the figure is not worth failing for
        return 0.0


def dir_size_mb(path: Path) -> float:
    total = 0
    for p in path.rglob("*") if path.exists() else ():
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_size
    return total / 2**20


def machine() -> dict[str, Any]:
    """Cores, CPU model and the SIMD flags llama.cpp and torch care about."""
    model, flags = platform.processor() or "", set[str]()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    wanted = ["sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
              "avx_vnni", "amx_tile", "amx_int8", "amx_bf16"]
    try:
        mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem_gb = 0.0
    return {"cpu": model, "logical_cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "flags": [f for f in wanted if f in flags], "memory_gb": round(mem_gb, 1),
            "load_average_1m": round(os.getloadavg()[0], 2), "python": platform.python_version(),
            "platform": platform.platform()}


def copy_bandwidth_gbs(mb: int = 256, repeats: int = 5, threads: int | None = None) -> dict[str, float]:
    """Memory copy rate in GB/s, counting bytes read + bytes written (as STREAM's Copy does).

    numpy's copy releases the GIL, so `threads` copies of disjoint halves run in parallel; the best of one thread
    and all usable cores is the ceiling, e.g. 256 MB copied in 20 ms = 2 * 256 MB / 0.02 s = 26.8 GB/s.
    """
    n = mb * 2**20
    src = np.ones(n, dtype=np.uint8)
    dst = np.empty_like(src)
    out: dict[str, float] = {}
    for k in sorted({1, threads or len(os.sched_getaffinity(0))}):
        edges = [n * i // k for i in range(k + 1)]
        bounds = list(zip(edges[:-1], edges[1:]))

        def copy(bounds: list[tuple[int, int]] = bounds) -> None:
            workers = [threading.Thread(target=np.copyto, args=(dst[a:b], src[a:b])) for a, b in bounds]
            for w in workers:
                w.start()
            for w in workers:
                w.join()

        seconds = median(repeat(copy, repeats))
        out[f"threads_{k}"] = round(2 * n / seconds / 1e9, 2)
    out["best"] = max(out.values())
    return out


def matmul_gflops(size: int = 1024, repeats: int = 5) -> float:
    """float32 GEMM rate (2*n^3 flops per product) with numpy's BLAS on all its threads: a prefill reference."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    seconds = median(repeat(lambda: a @ b, repeats))
    return round(2 * size**3 / seconds / 1e9, 1)


class Stopwatch:
    """Accumulates seconds under names: with sw.time("embed"): ...; sw.seconds["embed"]."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def time(self, name: str) -> _Span:
        return _Span(self, name)


class _Span:
    def __init__(self, sw: Stopwatch, name: str) -> None:
        self.sw, self.name, self.t = sw, name, 0.0

    def __enter__(self) -> None:
        self.t = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.sw.seconds[self.name] = self.sw.seconds.get(self.name, 0.0) + time.perf_counter() - self.t
        self.sw.calls[self.name] = self.sw.calls.get(self.name, 0) + 1
