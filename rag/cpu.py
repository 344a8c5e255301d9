"""How many threads llama.cpp work gets when `generation.n_threads` is 0: the physical cores this process may use.

Not here: the setting itself (config.py) or anything that runs the threads (generate.py, quantize.py).
"""

from __future__ import annotations

import os
from pathlib import Path


def physical_cores() -> int:
    """Physical cores (hyper-threads share an FPU; llama.cpp decodes no faster on them)."""
    try:
        pairs = set()
        text = Path("/proc/cpuinfo").read_text()
        phys = core = None
        for line in text.splitlines():
            if line.startswith("physical id"):
                phys = line.split(":")[1].strip()
            elif line.startswith("core id"):
                core = line.split(":")[1].strip()
                pairs.add((phys, core))
        if pairs:
            return max(1, min(len(pairs), len(os.sched_getaffinity(0))))
    except OSError:
        pass
    return max(1, len(os.sched_getaffinity(0)))
