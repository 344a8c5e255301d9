"""Generation section of the bench: the pipeline's real prompts through each GGUF, before and after tuning.

For every model: TTFT and pieces/s through `rag.generate.LlamaGenerator` exactly as the pipeline builds it (the
current defaults, including the Q8_0 copy `generation.quantize` prepares); then llama.cpp-level figures
(bench/llm.py) for the original file and its Q8_0 copy (`rag.quantize.quantized_copy`, the app's own code), each with
the old defaults (batch 512) and the current ones, and with --sweep, for the first model, a flash_attn / n_threads /
n_batch sweep whose winner is measured in full. A fake generator (tests) gets only the protocol-level figures.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from rag.config import Settings
from rag.cpu import physical_cores
from rag.embed import Embedder
from rag.generate import Generator, LlamaGenerator
from rag.gguf import model_file
from rag.quantize import quantized_copy

from . import e2e, llm

log = logging.getLogger(__name__)


def model_path(name: str, settings: Settings) -> Path:
    """A preset name (`python -m rag models`; 'gemma3' = gemma3-270m, installed with `models install`) or a path."""
    return model_file(name, settings.paths.models_dir)


def generation(models: list[str], sweep: bool, repeats: int, settings: Settings, small: Settings,
               embedder: Embedder, generator: Generator | None, qs: list[str],
               ceilings: dict[str, Any]) -> dict[str, Any]:
    """Figures per model (and its Q8_0 copy); `small` is the index the pipeline's prompts are captured from."""
    if generator is not None:  # fakes: the protocol-level figures only
        prompts = e2e.capture_prompts(small, embedder, generator, qs)
        return {"models": {generator.name: {"stream": e2e.stream_figures(generator, prompts, repeats=repeats)}}}
    out: dict[str, Any] = {"models": {}}
    cores = physical_cores()
    gs = settings.generation
    threads = gs.n_threads or cores
    bench_dir = settings.paths.data_dir / "bench"  # copies live apart from the app's own data folder
    for name in models:
        path = model_path(name, settings)
        shipped = LlamaGenerator(gs.model_copy(update={"model_path": str(path)}), bench_dir)
        prompts = e2e.capture_prompts(small, embedder, shipped, qs)
        g: dict[str, Any] = {"path": str(path), "loaded": shipped.name,
                             "stream": e2e.stream_figures(shipped, prompts, repeats=repeats), "runs": {}}
        del shipped
        t = time.perf_counter()
        q8, made = quantized_copy(path, bench_dir / "models" / "prepared", threads)
        g["q8_0"] = {"path": str(q8), "seconds": round(time.perf_counter() - t, 1), "made_now": made}
        for label, p in [("", path), ("Q8_0 ", q8)]:
            configs = {f"{label}old default (fa off, {cores} threads, batch 512)": (False, cores, 512, 512),
                       f"{label}default (fa {'on' if gs.flash_attn else 'off'}, {threads} threads, batch {gs.n_batch}, "
                       f"ubatch {gs.n_ubatch or gs.n_batch})": (gs.flash_attn, threads, gs.n_batch,
                                                                gs.n_ubatch or gs.n_batch)}
            if sweep and name == models[0]:  # the default model's targets are what the sweep serves
                log.info("bench: sweeping %s", p.name)
                rows = llm.sweep(p, prompts, repeats=2)
                g[f"{label}sweep"] = rows
                w = llm.best(rows)
                configs[f"{label}best (fa {'on' if w['flash_attn'] else 'off'}, {w['n_threads']} threads, "
                        f"batch {w['n_batch']})"] = (w["flash_attn"], w["n_threads"], w["n_batch"], w["n_batch"])
            for key, (fa, nt, nb, nu) in configs.items():
                log.info("bench: generation %s %s", path.name, key)
                model = llm.load(p, nt, nb, fa, n_ubatch=nu)
                f = llm.figures(model, prompts, repeats=min(3, repeats))
                info = llm.info(model, p)
                f["ceilings"] = llm.ceilings(info, f, ceilings["copy_gbs"]["best"], ceilings["gemm_gflops"])
                f["model"] = info
                if key.startswith(f"{label}default"):  # what constrained citations would cost this config
                    f["grammar"] = llm.grammar_cost(model, prompts["cold"], repeats=min(3, repeats))
                g["runs"][key] = f
                model.close()
        out["models"][path.name] = g
    return out
