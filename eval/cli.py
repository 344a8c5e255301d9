"""`python -m rag eval ...`: run the QA set (retrieval-only or full, one or several models) or compare two runs.

Builds Settings at the edge like `rag.cli`, makes sure the index exists (ingest is idempotent), writes a run folder
(default `eval/runs/<UTC timestamp>/`, git-ignored) and prints the summary tables with the command that made them.
Library errors become one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag import presets
from rag.records import RagError

EPILOG = """examples:
  python -m rag eval --retrieval-only --data-dir /tmp/evaldata
  python -m rag eval --kinds factoid,multi --limit 20
  python -m rag eval --models smollm2 gemma3 other.gguf
  python -m rag eval compare eval/runs/20260101-120000 eval/runs/20260102-090000
  python -m rag eval baseline RETRIEVAL_RUN --full-subset SUBSET_RUN   (writes eval/baseline/summary.json)
  python -m rag eval conversations --split dev   (multi-turn: follow-ups, topic switches, drill-downs)
  python -m rag eval injection --model smollm2   (planted instructions in abstracts; see eval/QA.md)"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rag eval", epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Score retrieval, answers, citations, abstention and latency on the QA "
                                            "set. `python -m rag eval compare RUN_A RUN_B` diffs two runs.")
    p.add_argument("--retrieval-only", action="store_true", help="only search (dense, bm25, hybrid): seconds")
    p.add_argument("--limit", type=int, help="at most N questions, taken round-robin across kinds")
    p.add_argument("--kinds", help="comma-separated kinds, e.g. factoid,multi")
    p.add_argument("--ids", help="comma-separated question ids, e.g. f001,u003")
    p.add_argument("--split", choices=("dev", "test"),
                   help="only one fixed half of the QA set: tune on dev, report test (see eval/QA.md)")
    p.add_argument("--models", nargs="+", metavar="MODEL",
                   help="GGUF paths or preset names (`python -m rag models`; 'gemma3' = gemma3-270m); runs each "
                        "and writes compare.md side by side")
    p.add_argument("--data-dir", help="index folder (built from the seeds if missing; default ./.rag)")
    p.add_argument("--config", help="a TOML settings file")
    p.add_argument("--out", type=Path, help="run folder (default eval/runs/<timestamp>)")
    p.add_argument("--qa", type=Path, help="QA set (default eval/qa.jsonl)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--debug", action="store_true", help="log details and show tracebacks")
    return p


def resolve_model(name: str, models_dir: Path) -> Path:
    from rag.gguf import model_file

    path = model_file(name, models_dir)  # a preset's installed file (or how to install it), else the path
    if not path.is_file():
        raise RagError(f"{name}: model file not found (give a GGUF path or a preset name: `python -m rag models`)")
    return path


def _labels(names: list[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        label = name if presets.get(name) else Path(name).stem
        out.append(label if label not in out else f"{label}-{len(out) + 1}")
    return out


def run(args: argparse.Namespace, command: str) -> int:
    from rag.config import load
    from rag.pipeline import Assistant, ingest, with_model

    from . import run as R
    from .report import models_table, summary_text

    started = time.perf_counter()
    settings = load(args.config, {"paths.data_dir": args.data_dir})
    qa = args.qa or R.QA_FILE
    questions = R.load_qa(qa, kinds=args.kinds.split(",") if args.kinds else None,
                          ids=args.ids.split(",") if args.ids else None, limit=args.limit, split=args.split)
    if not questions:
        raise RagError(f"{qa}: no questions match --kinds/--ids")
    out = args.out or R.RUNS_DIR / dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    progress = not args.quiet

    models = args.models or [None]
    paths = [resolve_model(m, settings.paths.models_dir) if m else None for m in models]
    first = Assistant(with_model(settings, str(paths[0])) if paths[0] else settings)
    ingest(settings, embedder=first.embedder)  # idempotent: a no-op when the index matches the seeds
    searcher = Assistant(first.settings, embedder=R.QueryCache(first.embedder))
    retrieval = R.retrieval_pass(searcher, questions, settings.retrieval.min_similarity, progress)

    if args.retrieval_only or not args.models:
        summary = R.evaluate(first, first.settings, questions, out, retrieval_only=args.retrieval_only,
                             prompt_version=first.prompts.version, qa_path=qa, command=command,
                             retrieval=retrieval, progress=progress, warm=first.warm, started=started)
        print(summary_text(summary))
        print(f"\nrun folder: {out}")
        return 0

    runs: list[tuple[str, dict[str, Any]]] = []
    assistant: Assistant | None = first
    for label, path in zip(_labels(args.models), paths, strict=True):
        if assistant is None:
            assistant = Assistant(with_model(settings, str(path)), embedder=first.embedder)
            started = time.perf_counter()
        print(f"== {label}: {path}", file=sys.stderr)
        summary = R.evaluate(assistant, assistant.settings, questions, out / label, retrieval_only=False,
                             prompt_version=assistant.prompts.version, qa_path=qa, command=command,
                             retrieval=retrieval, progress=progress, warm=assistant.warm, started=started)
        runs.append((label, summary))
        assistant = None  # drop this model before loading the next
    text = models_table(runs)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.md").write_text(f"# Models compared\n\n`{command}`\n\n{text}\n", encoding="utf-8")
    print(f"command: {command}\n\n{text}\n\nrun folder: {out}")
    return 0


def compare(argv: list[str]) -> int:
    from .report import compare_runs
    from .run import load_run

    p = argparse.ArgumentParser(prog="python -m rag eval compare",
                                description="Metric deltas (B - A) and questions whose fact hit or abstention flipped.",
                                epilog="example: python -m rag eval compare eval/runs/A eval/runs/B")
    p.add_argument("run_a", type=Path)
    p.add_argument("run_b", type=Path)
    p.add_argument("--out", type=Path, help="also write the comparison to this markdown file")
    args = p.parse_args(argv)
    for d in (args.run_a, args.run_b):
        if not (d / "summary.json").is_file():
            raise RagError(f"{d}: not a run folder (no summary.json)")
    text = compare_runs(load_run(args.run_a), load_run(args.run_b), (str(args.run_a), str(args.run_b)))
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


def make_baseline(retrieval_run: dict[str, Any], subset_run: dict[str, Any] | None = None,
                  subset_ids: Sequence[str] = ()) -> dict[str, Any]:
    """The small committed baseline: retrieval per mode and kind, the sweep's threshold, the full-subset gate."""
    def r4(x: Any) -> Any:
        return round(x, 4) if isinstance(x, float) else x

    def pick(m: dict[str, Any]) -> dict[str, Any]:
        return {k: r4(v) for k, v in m.items()}

    meta = retrieval_run["meta"]
    best = retrieval_run["abstention_sweep"]["best"]
    out: dict[str, Any] = {
        "made_from": {k: meta.get(k) for k in ("timestamp", "command", "git_commit", "settings_fingerprint",
                                               "qa_sha256")},
        "counts": retrieval_run["counts"],
        "retrieval": {mode: {"overall": pick(m["overall"]), "by_kind": {k: pick(v) for k, v in m["by_kind"].items()}}
                      for mode, m in retrieval_run["retrieval"].items()},
        "abstention_sweep": {"chosen_threshold": best and best["threshold"],
                             **{k: r4(best[k]) for k in ("precision", "recall", "false_abstention", "f1")},
                             "max_false_abstention": retrieval_run["abstention_sweep"]["max_false_abstention"],
                             "current_setting": retrieval_run["abstention_sweep"]["current"]} if best else None,
    }
    if subset_run is not None:
        a = subset_run["answers"]["overall"]
        out["full_subset"] = {
            "ids": list(subset_ids), "model": subset_run["meta"].get("model"),
            "model_sha256": subset_run["meta"].get("model_sha256"),
            "abstention_recall": r4(a["abstention"]["recall"]),
            "false_abstention": r4(a["abstention"]["false_abstention"]),
            "fact_accuracy": r4(a["fact_accuracy"]), "score": r4(a["score"]),
            "first_sentence_accuracy": r4(a.get("first_sentence_accuracy")),
            "citation_precision": r4(a["citation_precision"]), "citation_recall": r4(a["citation_recall"]),
            "outside_citations": a["outside_citations"],
        }
    return out


def baseline(argv: list[str]) -> int:
    import json

    from .run import load_run

    p = argparse.ArgumentParser(prog="python -m rag eval baseline",
                                description="Write the committed baseline from a retrieval-only run of the whole QA "
                                            "set and, optionally, a full run of the gate subset.",
                                epilog="example: python -m rag eval baseline eval/runs/A --full-subset eval/runs/B")
    p.add_argument("retrieval_run", type=Path)
    p.add_argument("--full-subset", type=Path, help="a full run made with --ids: its ids become the gate subset")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "baseline" / "summary.json")
    args = p.parse_args(argv)
    retrieval, _ = load_run(args.retrieval_run)
    subset, records = load_run(args.full_subset) if args.full_subset else (None, [])
    data = make_baseline(retrieval, subset, [r["id"] for r in records])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from rag.cli import _offline

    _offline()
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        if argv[:1] == ["compare"]:
            return compare(argv[1:])
        if argv[:1] == ["baseline"]:
            return baseline(argv[1:])
        if argv[:1] == ["conversations"]:
            from .conversations import main as conversations

            return conversations(argv[1:])
        if argv[:1] == ["injection"]:
            from .injection import main as injection

            return injection(argv[1:])
        args = build_parser().parse_args(argv)
        return run(args, "python -m rag eval " + shlex.join(argv))
    except (RagError, ValueError, OSError) as e:
        if debug:
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
