"""`python -m rag bench`: run the measurements and write bench/results/<stamp>.json and .md (git-ignored).

Sections (all by default; `--only` picks some): ingest, retrieval, hnsw, embed, generation, formats, e2e. Corpora
are the seeds and synthetic JSONL corpora (bench/corpus.py) cached under <data-dir>/bench/corpora; each size gets its
own index under <data-dir>/bench/size-N, built once by a worker process (so its peak RSS is its own) and reused by
later runs unless --fresh. Sizes above --approx-above are built with approximate vectors (bench/ingest.py says
how), and labelled so in every figure.

Internal worker commands (not for users): `_ingest` and `_ready`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag.config import PROJECT_ROOT, Settings, load
from rag.embed import Embedder
from rag.generate import Generator
from rag.index import IndexPaths

from . import measure, report

log = logging.getLogger(__name__)

EPILOG = """examples:
  python -m rag bench                                  # seeds + 10,000 papers, every section
  python -m rag bench --sizes 38 10000 100000          # adds 100,000 (built with approximate vectors)
  python -m rag bench --only generation --models smollm2 gemma3 --repeats 5"""
SECTIONS = ("ingest", "retrieval", "hnsw", "embed", "generation", "formats", "e2e")


@dataclass
class Plan:
    sizes: list[int] = field(default_factory=lambda: [38, 10000])
    repeats: int = 5
    models: list[str] = field(default_factory=lambda: ["smollm2", "gemma3"])
    only: set[str] = field(default_factory=lambda: set(SECTIONS))
    approx_above: int = 10000
    fresh: bool = False
    out: Path | None = None  # where partial.json is rewritten after every section (a killed run keeps its figures)
    replicate: bool = False  # sizes above approx_above: copy a smaller built index (bench/scale.py), no ingest
    sweep: bool = True
    workers: bool = True  # ingest and start-up in fresh processes (off in the smoke test)
    ceiling_mb: int = 256  # buffer copied for the bandwidth ceiling (the smoke test uses a small one)
    qa: Path = PROJECT_ROOT / "eval" / "qa.jsonl"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rag bench", epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Measure ingest, retrieval, generation and start-up; print medians.")
    p.add_argument("--sizes", type=int, nargs="+", default=[38, 10000],
                   help="corpus sizes in papers (38 = the seeds; others are synthetic)")
    p.add_argument("--only", help=f"comma-separated sections: {','.join(SECTIONS)}")
    p.add_argument("--models", nargs="+", default=["smollm2", "gemma3"],
                   help="preset names (python -m rag models) or GGUF paths")
    p.add_argument("--repeats", type=int, default=5, help="repeats per figure (the median is reported)")
    p.add_argument("--approx-above", type=int, default=10000,
                   help="sizes above this are built with approximate vectors (default 10000)")
    p.add_argument("--fresh", action="store_true", help="rebuild cached indexes (ingest figures are re-measured)")
    p.add_argument("--replicate", action="store_true",
                   help="build sizes above --approx-above as noisy copies of the largest smaller built index "
                        "(minutes instead of an hour; labelled 'replicated'; see bench/scale.py)")
    p.add_argument("--no-sweep", action="store_true", help="skip the flash_attn / n_threads / n_batch sweep")
    p.add_argument("--data-dir", help="where corpora and bench indexes go (<data-dir>/bench; default ./.rag)")
    p.add_argument("--config", help="a TOML settings file")
    p.add_argument("--out", type=Path, default=PROJECT_ROOT / "bench" / "results", help="results folder")
    p.add_argument("--json", action="store_true", help="print the results JSON instead of the tables")
    return p


def size_settings(settings: Settings, n: int) -> Settings:
    root = settings.paths.data_dir / "bench" / f"size-{n}"
    return settings.with_values({"paths.data_dir": root, "paths.models_dir": settings.paths.models_dir})


def corpus_for(settings: Settings, n: int, seeds_size: int) -> Path:
    from .corpus import corpus_file

    if n == seeds_size:
        return settings.paths.seeds_dir
    return corpus_file(n, settings.paths.seeds_dir, settings.paths.data_dir / "bench" / "corpora")


def _ingest(plan: Plan, settings: Settings, embedder: Embedder, n: int, seeds_size: int) -> dict[str, Any]:
    from .ingest import ingest_figures

    s = size_settings(settings, n)
    cached = s.paths.data_dir / "ingest.json"
    # Reuse a finished ingest only if its index is the one these settings open (the fingerprint names the folder:
    # another embedding backend or chunking means another index).
    if cached.is_file() and not plan.fresh and IndexPaths.of(s).catalog.exists():
        return {**json.loads(cached.read_text()), "cached": True}
    shutil.rmtree(s.paths.data_dir, ignore_errors=True)
    approx = n > plan.approx_above
    smaller = [m for m in plan.sizes if m < n and (size_settings(settings, m).paths.data_dir / "ingest.json").is_file()]
    if approx and plan.replicate and smaller and n % max(smaller) == 0:
        from .scale import replicate

        figures = replicate(size_settings(settings, max(smaller)), s, embedder, factor=n // max(smaller))
        s.paths.data_dir.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(figures))
        return figures
    corpus = corpus_for(settings, n, seeds_size)
    if plan.workers:
        cmd = [sys.executable, "-m", "bench.cli", "_ingest", "--data-dir", str(s.paths.data_dir),
               "--corpus", str(corpus), *(["--approx"] if approx else [])]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT, check=False)
        if done.returncode != 0:
            return {"error": f"ingest worker exited {done.returncode}"}
        figures = json.loads(done.stdout.strip().splitlines()[-1])
    else:
        figures = ingest_figures(s, [corpus], embedder, approx=approx)
    figures["corpus"] = corpus.name
    cached.write_text(json.dumps(figures))
    return figures


def run(plan: Plan, settings: Settings, embedder: Embedder, generator: Generator | None = None,
        make_embedder: Callable[[int], Embedder] | None = None, command: str = "") -> dict[str, Any]:
    """Every planned section; `generator` (a fake in tests) replaces the real GGUFs in generation and e2e."""
    from . import e2e, retrieval

    started = time.perf_counter()
    res: dict[str, Any] = {"command": command, "started": dt.datetime.now().isoformat(timespec="seconds"),
                           "machine": measure.machine(), "load_average": {}, "gpu": "none (CPU only)"}
    res["ceilings"] = {"copy_gbs": measure.copy_bandwidth_gbs(plan.ceiling_mb),
                       "gemm_gflops": measure.matmul_gflops(1024 if plan.ceiling_mb >= 64 else 256)}
    seeds_size = 38
    qs = retrieval.questions(plan.qa)
    sizes = sorted(set(plan.sizes))

    def section(name: str) -> bool:
        if plan.out is not None:
            plan.out.mkdir(parents=True, exist_ok=True)
            (plan.out / "partial.json").write_text(json.dumps(res, indent=1))
        res["load_average"][name] = round(os.getloadavg()[0], 2)
        if name in plan.only:
            log.info("bench: %s (load average %.1f)", name, os.getloadavg()[0])
        return name in plan.only

    if section("ingest"):
        res["ingest"] = {str(n): _ingest(plan, settings, embedder, n, seeds_size) for n in sizes}
    built = [n for n in sizes if (size_settings(settings, n).paths.data_dir / "ingest.json").is_file()]
    if section("retrieval"):
        res["retrieval"] = {str(n): retrieval.latency(size_settings(settings, n), embedder, qs, plan.repeats)
                            for n in built}
    if section("hnsw") and built:
        res["hnsw"] = retrieval.hnsw(size_settings(settings, max(built)), embedder, qs, repeats=plan.repeats)
        res["hnsw"]["papers"] = max(built)
    if section("embed") and make_embedder is not None:
        from .ingest import embed_sweep

        res["embed"] = embed_sweep(make_embedder, _chunk_texts(settings, max(built or [seeds_size]), embedder),
                                   qs[0], repeats=max(1, plan.repeats // 2))
    small = size_settings(settings, min(built)) if built else None
    if section("generation") and small is not None:
        from .generation import generation

        res["generation"] = generation(plan.models, plan.sweep, plan.repeats, settings, small, embedder, generator,
                                       qs, res["ceilings"])
    if section("formats") and small is not None and generator is None:  # real GGUFs only
        res["formats"] = _formats(plan, settings, small, embedder, qs, res["ceilings"]["copy_gbs"]["best"])
    if section("e2e") and small is not None:
        res["end_to_end"] = {}
        for n in built[:2]:
            s = size_settings(settings, n)
            try:
                res["end_to_end"][str(n)] = (
                    e2e.ready_subprocess(s.paths.data_dir, qs[0], repeats=min(3, plan.repeats)) if plan.workers
                    else e2e.ready_in_process(s, qs[0], embedder, generator))
            except Exception as e:  # one failing start-up should not lose the other figures
                res["end_to_end"][str(n)] = {"error": f"{type(e).__name__}: {e}"}
    res["seconds"] = round(time.perf_counter() - started, 1)
    return res


def _formats(plan: Plan, settings: Settings, small: Settings, embedder: Embedder, qs: list[str],
             copy_gbs: float) -> dict[str, Any]:
    """Speed and fidelity of the first model's requantized copies (bench/formats.py), on the pipeline's prompt."""
    from rag.cpu import physical_cores
    from rag.generate import LlamaGenerator

    from . import e2e
    from .formats import formats
    from .generation import model_path

    gs = settings.generation
    path = model_path(plan.models[0], settings)
    prompts = e2e.capture_prompts(small, embedder, LlamaGenerator(gs.model_copy(update={"model_path": str(path)}),
                                                                  settings.paths.data_dir / "bench"), qs)
    texts = _chunk_texts(settings, min(plan.sizes), embedder, limit=8)
    return formats(path, settings.paths.data_dir / "bench" / "models" / "prepared", prompts["cold"], texts,
                   gs.n_threads or physical_cores(), gs.n_batch, copy_gbs, repeats=min(3, plan.repeats))


def _chunk_texts(settings: Settings, n: int, embedder: Embedder, limit: int = 512) -> list[str]:
    """Real stored chunk texts (title-prefixed windows), for the embedding batch-size sweep."""
    from rag.index import IndexPaths, open_store

    s = size_settings(settings, n)
    if not IndexPaths.of(s).catalog.exists():
        return ["probe"]
    return [text for _, _, text in open_store(s, embedder, create=False).all_chunks()[:limit]]


def _worker(argv: list[str]) -> int:
    """`_ingest --data-dir D --corpus C [--approx]` and `_ready --data-dir D --question Q [--model M]`."""
    p = argparse.ArgumentParser(prog="bench worker")
    p.add_argument("kind", choices=["_ingest", "_ready"])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--corpus")
    p.add_argument("--approx", action="store_true")
    p.add_argument("--question")
    p.add_argument("--model")
    a = p.parse_args(argv)
    flags = {"paths.data_dir": a.data_dir, "generation.model_path": a.model}
    settings = load(None, flags)
    if a.kind == "_ready":
        from .e2e import ready_in_process

        out = ready_in_process(settings, a.question, on_ready=lambda: print("READY", flush=True))
        print(json.dumps(out), flush=True)
        return 0
    from rag.embed import load_embedder

    from .ingest import ingest_figures

    bar = _bar()
    embedder = load_embedder(settings.embedding, settings.paths.data_dir)
    figures = ingest_figures(settings, [Path(a.corpus)], embedder,
                             approx=a.approx, progress=bar)
    print(json.dumps(figures), flush=True)
    return 0


def _bar() -> Callable[[str, int], None]:
    from tqdm import tqdm

    bar = tqdm(unit="paper", file=sys.stderr, mininterval=5.0,
               disable=not sys.stderr.isatty() and "RAG_PROGRESS" not in os.environ)
    return lambda what, n: bar.update(n)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["_ingest"], ["_ready"]):
        return _worker(argv)
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    from rag.records import RagError

    try:
        flags: dict[str, Any] = {"paths.data_dir": args.data_dir}
        settings = load(args.config, flags)
        only = set(args.only.split(",")) if args.only else set(SECTIONS)
        if only - set(SECTIONS):
            raise RagError(f"--only: unknown section(s) {', '.join(sorted(only - set(SECTIONS)))}")
        plan = Plan(sizes=args.sizes, repeats=args.repeats, models=args.models, only=only,
                    approx_above=args.approx_above, fresh=args.fresh, sweep=not args.no_sweep,
                    replicate=args.replicate, out=args.out)
        from rag.embed import load_embedder

        embedder = load_embedder(settings.embedding, settings.paths.data_dir)

        def make(batch: int) -> Embedder:
            return load_embedder(settings.embedding.model_copy(update={"batch_size": batch}), settings.paths.data_dir)

        command = "python -m rag bench " + shlex.join(argv)
        res = run(plan, settings, embedder, make_embedder=make, command=command.strip())
    except RagError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write(res, args.out)
    print(json.dumps(res, indent=1) if args.json else report.markdown(res))
    return 0


def write(res: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = out / f"bench-{stamp}.json"
    path.write_text(json.dumps(res, indent=1))
    path.with_suffix(".md").write_text(report.markdown(res) + "\n")
    shutil.copyfile(path, out / "latest.json")
    shutil.copyfile(path.with_suffix(".md"), out / "latest.md")
    return path


if __name__ == "__main__":
    sys.exit(main())
