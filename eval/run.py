"""Run the QA set through the pipeline and score it: retrieval in every mode, then (unless retrieval-only) answers.

One run = one folder holding `questions.jsonl` (one scored record per question), `summary.json` (overall and
per-kind metrics, latency percentiles, the abstention threshold sweep, stamped with what produced it) and the
report written by `eval.report`. This module calls only the pipeline API (`Assistant.search/read/retrieve/ask`); it
does not parse model output or choose evidence, so the numbers describe exactly what a user would get.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import resource
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rag.config import PROJECT_ROOT, Settings
from rag.records import Answer

from . import metrics as M

QA_FILE = Path(__file__).resolve().parent / "qa.jsonl"
RUNS_DIR = Path(__file__).resolve().parent / "runs"
MODES = ("hybrid", "dense", "bm25")  # hybrid first: its search embeds the query uncached (real timings)
RANK_DEPTH = 10  # papers ranked per question for retrieval metrics (Recall@10, nDCG@10, the recall@k curve)
LATENCY_KEYS = ("embed_ms", "retrieve_ms", "prompt_ms", "prompt_tokens", "first_token_ms", "generate_ms",
                "total_ms", "tokens_per_s")


@dataclass(frozen=True)
class Question:
    id: str
    kind: str
    question: str
    gold: tuple[str, ...]
    facts: tuple[tuple[str, ...], ...]
    history: tuple[dict[str, str], ...] = field(default=())
    split: str = ""  # "dev" (tune on it) or "test" (report it); see eval/QA.md
    subset: str = ""  # e.g. "paraphrase": questions that avoid their paper's distinctive terms

    @property
    def answerable(self) -> bool:
        return self.kind != "unanswerable"


def load_qa(path: Path = QA_FILE, kinds: Iterable[str] | None = None, ids: Iterable[str] | None = None,
            limit: int | None = None, split: str | None = None) -> list[Question]:
    """The QA set, optionally restricted to some kinds, ids or one split ("dev" / "test"); `limit` takes
    questions round-robin across kinds.

    Round-robin so that `--limit 10` still has every kind, e.g. factoid, which_paper, multi, ..., factoid, ...
    """
    questions = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            questions.append(Question(d["id"], d["kind"], d["question"], tuple(d["gold"]),
                                      tuple(tuple(v) for v in d["facts"]), tuple(d.get("history", ())),
                                      d.get("split", ""), d.get("subset", "")))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{n}: not a QA record ({e})") from None
    if split:
        questions = [q for q in questions if q.split == split]
    if kinds:
        wanted = set(kinds)
        questions = [q for q in questions if q.kind in wanted]
    if ids:
        wanted = set(ids)
        questions = [q for q in questions if q.id in wanted]
    if limit is not None and limit < len(questions):
        by_kind: dict[str, list[Question]] = {}
        for q in questions:
            by_kind.setdefault(q.kind, []).append(q)
        picked: list[Question] = []
        while len(picked) < limit:
            for group in by_kind.values():
                if group and len(picked) < limit:
                    picked.append(group.pop(0))
        order = {q.id: i for i, q in enumerate(questions)}
        questions = sorted(picked, key=lambda q: order[q.id])
    return questions


class QueryCache:
    """An embedder that remembers single-text (query) embeddings, so the three modes embed each question once.

    Only the retrieval pass uses it: answers go through the real embedder, so their timings stay honest.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.dim: int = inner.dim
        self.max_tokens: int = inner.max_tokens
        self._cache: dict[str, Any] = {}

    def count_tokens(self, text: str) -> int:
        return int(self.inner.count_tokens(text))

    def embed(self, texts: list[str]) -> Any:
        if len(texts) != 1:
            return self.inner.embed(texts)
        if texts[0] not in self._cache:
            self._cache[texts[0]] = self.inner.embed(texts)
        return self._cache[texts[0]]


class Pipeline(Protocol):
    """The part of `rag.pipeline.Assistant` the runner uses (a fake stands in for it in fast tests)."""

    def search(self, question: str, filters: Any = None, top_k: int | None = None,
               mode: str | None = None) -> Any: ...

    def read(self, question: str, history: list[dict[str, str]] | None = None) -> Any: ...

    def retrieve(self, question: Any, filters: Any = None, top_k: int | None = None) -> Any: ...

    def ask(self, question: str, history: list[dict[str, str]] | None = None, filters: Any = None) -> Answer: ...


def retrieval_pass(pipe: Pipeline, questions: Sequence[Question], min_similarity: float,
                   progress: bool = True) -> dict[str, dict[str, Any]]:
    """Per question id: the query searched, ranked paper ids and scores per mode, hybrid timings, similarities.

    `gate_similarity` places the question on the threshold sweep through the pipeline's own gate
    (`rag.answerable.gate`, on the papers the pipeline retrieves for it): the best chunk similarity it compares with
    `retrieval.min_similarity`, -1 when the gate abstains at any threshold (a name no abstract contains) and 2 when
    at none (a rare word of the question in the top paper, a follow-up pinned to cited papers).
    """
    from tqdm import tqdm

    from rag.answerable import gate

    out: dict[str, dict[str, Any]] = {}
    for q in tqdm(questions, desc="retrieval", unit="q", file=sys.stderr, disable=not progress):
        read = pipe.read(q.question, list(q.history))
        query = read.searched
        rec: dict[str, Any] = {"query": query, "ranked": {}, "scores": {}, "timings": {}}
        for mode in MODES:
            got = pipe.search(query, top_k=RANK_DEPTH, mode=mode)
            rec["ranked"][mode] = [h.paper.paper_id for h in got.hits]
            rec["scores"][mode] = [round(h.score, 6) for h in got.hits]
            if mode == "hybrid":
                rec["timings"] = dict(got.timings)
                rec["top_similarity"] = got.hits[0].best_similarity if got.hits else 0.0
        hits = pipe.retrieve(read).hits
        if gate(read, hits, 0.0):
            rec["gate_similarity"] = -1.0
        elif not gate(read, hits, 2.0):
            rec["gate_similarity"] = 2.0
        else:
            rec["gate_similarity"] = max(h.best_similarity for h in hits)
        assert (gate(read, hits, min_similarity) is not None) == (rec["gate_similarity"] < min_similarity)
        out[q.id] = rec
    return out


def score_answer(q: Question, ans: Answer) -> dict[str, Any]:
    cited = [c.paper.paper_id for c in ans.citations]
    precision, recall = M.citation_scores(M.shown_papers(ans), q.gold)
    facts = [list(f) for f in q.facts]
    hit = M.fact_hit(ans.text, facts)
    first = M.first_sentence(ans.text)
    if not q.answerable:
        correct: float | None = 1.0 if ans.abstained else 0.0
    elif q.kind == "multi":
        correct = recall
    elif hit is not None:
        correct = float(hit)
    else:  # a which_paper question whose abstract names no method: right when the gold paper is cited
        correct = 1.0 if set(cited) & set(q.gold) else 0.0
    return {
        "answer": ans.text, "mode": ans.mode, "abstained": ans.abstained, "searched": ans.searched, "model": ans.model,
        "citations": [{"n": c.n, "paper_id": c.paper.paper_id} for c in ans.citations],
        "hits": [{"paper_id": h.paper.paper_id, "score": round(h.score, 6), "similarity": round(h.best_similarity, 4)}
                 for h in ans.hits],
        "metrics": {"fact_hit": hit, "correct": correct, "citation_precision": precision,
                    "first_sentence_hit": M.fact_hit(first, facts),
                    # The model's own shown sentences (evidence sentences the answer adds are not its words).
                    "own_words_hit": M.fact_hit(" ".join(c.sentence for c in ans.checks if c.supported)
                                                if ans.mode == "generated" else "", facts),
                    "words": None if ans.abstained else M.word_count(ans.text),
                    "quoted": None if ans.abstained else M.is_quoted(ans.text, ans.mode),
                    "citation_recall": recall, "outside": M.outside_retrieved(cited, [h.paper.paper_id
                                                                                        for h in ans.hits]),
                    "abstained": ans.abstained, "declined": ans.declined,
                    "unsupported": sum(1 for c in ans.checks if not c.supported),
                    "checked": len(ans.checks), "dropped_markers": ans.dropped_markers},
        "timings": {k: round(v, 3) for k, v in ans.timings.items()},
    }


def answer_pass(pipe: Pipeline, questions: Sequence[Question], progress: bool = True) -> dict[str, dict[str, Any]]:
    from tqdm import tqdm

    out = {}
    for q in tqdm(questions, desc="answers", unit="q", file=sys.stderr, disable=not progress):
        out[q.id] = score_answer(q, pipe.ask(q.question, history=[dict(m) for m in q.history]))
    return out


def question_records(questions: Sequence[Question], retrieval: dict[str, dict[str, Any]],
                     answers: dict[str, dict[str, Any]] | None) -> list[dict[str, Any]]:
    records = []
    for q in questions:
        r = retrieval[q.id]
        rec: dict[str, Any] = {
            "id": q.id, "kind": q.kind, "split": q.split, "subset": q.subset, "question": q.question,
            "query": r["query"], "gold": list(q.gold),
            "facts": [list(f) for f in q.facts], "retrieval": r["ranked"], "retrieval_scores": r["scores"],
            "gold_rank": {m: M.first_relevant_rank(r["ranked"][m], q.gold) for m in MODES},
            "top_similarity": round(r["top_similarity"], 4), "gate_similarity": round(r["gate_similarity"], 4),
        }
        if answers is None:
            rec["hits"] = [{"paper_id": p, "score": s} for p, s in zip(r["ranked"]["hybrid"], r["scores"]["hybrid"],
                                                                          strict=True)]
            rec["timings"] = {k: round(v, 3) for k, v in r["timings"].items()}
        else:
            rec.update(answers[q.id])
        records.append(rec)
    return records


def _retrieval_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    kinds = sorted({r["kind"] for r in records})
    modes: dict[str, Any] = {}
    for mode in MODES:
        def ranked(rs: Iterable[dict[str, Any]], m: str = mode) -> dict[str, list[str]]:
            return {r["id"]: r["retrieval"][m] for r in rs}

        gold = {r["id"]: r["gold"] for r in records}
        curve = M.retrieval_metrics(gold, ranked(records), ks=range(1, RANK_DEPTH + 1))
        modes[mode] = {
            "overall": M.retrieval_metrics(gold, ranked(records)),
            "by_kind": {k: M.retrieval_metrics({r["id"]: r["gold"] for r in records if r["kind"] == k},
                                               ranked(r for r in records if r["kind"] == k)) for k in kinds},
            "recall_curve": [curve[f"recall@{k}"] for k in range(1, RANK_DEPTH + 1)],
            "by_subset": {s: M.retrieval_metrics({r["id"]: r["gold"] for r in records if r.get("subset") == s},
                                                 ranked(r for r in records if r.get("subset") == s))
                          for s in sorted({r.get("subset") or "" for r in records} - {""})},
        }
    return modes


def answer_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def block(rs: Sequence[dict[str, Any]]) -> dict[str, Any]:
        m = [r["metrics"] for r in rs]
        abst = M.abstention_scores([x["abstained"] for x in m], [r["kind"] == "unanswerable" for r in rs])
        return {
            "n": len(rs), "fact_accuracy": M.mean(x["fact_hit"] for x in m),
            # What the user reads first, and what the system wrote itself (older runs lack these: None).
            "first_sentence_accuracy": M.mean(x.get("first_sentence_hit") for x in m),
            "own_words_accuracy": M.mean(x.get("own_words_hit") for x in m),
            "words_median": M.median(x.get("words") for x in m),
            "quoted_share": M.mean(x.get("quoted") for x in m),
            "fact_questions": sum(1 for x in m if x["fact_hit"] is not None),
            "score": M.mean(x["correct"] for x in m),
            "citation_precision": M.mean(x["citation_precision"] for x in m),
            "citation_recall": M.mean(x["citation_recall"] for x in m),
            "outside_citations": sum(x["outside"] for x in m),
            "abstention_rate": M.mean(x["abstained"] for x in m), "abstention": abst.to_dict(),
            # Abstained, or said first that no abstract holds what was asked before the closest papers (older runs:
            # abstained only).
            "declining": M.abstention_scores([x.get("declined", x["abstained"]) for x in m],
                                             [r["kind"] == "unanswerable" for r in rs]).to_dict(),
            "modes": {mode: sum(1 for r in rs if r["mode"] == mode) for mode in sorted({r["mode"] for r in rs})},
            "unsupported_sentences": sum(x["unsupported"] for x in m),
            # Share of the model's checked answer sentences the support check flagged (older runs: no "checked").
            "checked_sentences": sum(x.get("checked", 0) for x in m),
            "flagged_share": (sum(x["unsupported"] for x in m) / checked
                              if (checked := sum(x.get("checked", 0) for x in m)) else None),
            "dropped_markers": sum(x["dropped_markers"] for x in m),
        }

    kinds = sorted({r["kind"] for r in records})
    out = {"overall": block(records), "by_kind": {k: block([r for r in records if r["kind"] == k]) for k in kinds}}
    subsets = sorted({r.get("subset") or "" for r in records} - {""})
    out["by_subset"] = {s: block([r for r in records if r.get("subset") == s]) for s in subsets}
    return out


def summarise(records: Sequence[dict[str, Any]], settings: Settings, meta: dict[str, Any]) -> dict[str, Any]:
    """Everything `summary.json` holds, from the question records alone (so a run can be re-summarised)."""
    full = bool(records) and "answer" in records[0]
    rows = M.threshold_sweep([r["gate_similarity"] for r in records], [r["kind"] == "unanswerable" for r in records])
    current = settings.retrieval.min_similarity
    summary: dict[str, Any] = {
        "kind": "full" if full else "retrieval-only",
        "meta": meta,
        "counts": {k: sum(1 for r in records if r["kind"] == k) for k in sorted({r["kind"] for r in records})},
        "retrieval": _retrieval_summary(records),
        "abstention_sweep": {
            "similarity": "best chunk cosine over the hybrid top_k hits (what the pipeline gates on)",
            "max_false_abstention": 0.1, "rows": rows, "best": M.best_threshold(rows), "current": current,
            "at_current": M.threshold_sweep([r["gate_similarity"] for r in records],
                                            [r["kind"] == "unanswerable" for r in records], [current])[0],
        },
        "latency": {k: M.percentiles(r["timings"].get(k) for r in records) for k in LATENCY_KEYS
                    if any(k in r["timings"] for r in records)},
    }
    if full:
        summary["answers"] = answer_summary(records)
    return summary


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


@functools.lru_cache(maxsize=8)
def _sha16(path: str, size: int, mtime_ns: int) -> str:  # size and mtime in the key: a replaced file is re-hashed
    from rag.files import file_sha256

    return file_sha256(Path(path))[:16]


def model_stamp(settings: Settings) -> dict[str, Any]:
    """The GGUF's file name and the first 16 hex digits of its sha256 (None values if it cannot be found)."""
    from rag.gguf import resolve_model
    from rag.records import RagError

    try:
        path = resolve_model(settings.generation, settings.paths.data_dir)
        st = path.stat()
        return {"model": path.name, "model_sha256": _sha16(str(path), st.st_size, st.st_mtime_ns),
                "model_path": str(path)}
    except (RagError, OSError) as e:
        return {"model": None, "model_sha256": None, "model_error": str(e)}


def stamp(settings: Settings, prompt_version: str, qa_path: Path, command: str) -> dict[str, Any]:
    return {
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "command": command,
        "git_commit": git_commit(), "settings_fingerprint": settings.fingerprint(), "prompt_version": prompt_version,
        **model_stamp(settings),
        "qa_file": str(qa_path), "qa_sha256": hashlib.sha256(qa_path.read_bytes()).hexdigest()[:16],
        "settings": settings.to_dict(),
    }


def resources(started: float) -> dict[str, float]:
    import psutil

    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {"peak_rss_mb": round(peak_kb / 1024, 1),
            "rss_mb": round(psutil.Process().memory_info().rss / 2**20, 1),
            "wall_s": round(time.perf_counter() - started, 2)}


def evaluate(pipe: Pipeline, settings: Settings, questions: Sequence[Question], out_dir: Path, *,
             retrieval_only: bool, prompt_version: str = "", qa_path: Path = QA_FILE, command: str = "",
             retrieval: dict[str, dict[str, Any]] | None = None, progress: bool = True,
             warm: Any = None, started: float | None = None) -> dict[str, Any]:
    """Run, score and write one run folder; returns the summary. `retrieval` reuses a pass made for another model."""
    from .report import write_report

    started = time.perf_counter() if started is None else started
    if retrieval is None:
        retrieval = retrieval_pass(pipe, questions, settings.retrieval.min_similarity, progress)
    answers = None
    if not retrieval_only:
        if warm is not None:
            warm()  # load the model and run one token so the first question's latency is not start-up cost
        answers = answer_pass(pipe, questions, progress)
    records = question_records(questions, retrieval, answers)
    meta = stamp(settings, prompt_version, qa_path, command)
    loaded = sorted({r["model"] for r in records if r.get("model")})
    if loaded:  # what answered, e.g. "SmolLM2-135M-Instruct.Q4_1.gguf → Q8_0" (generation.quantize)
        meta["model_loaded"] = ", ".join(loaded)
    summary = summarise(records, settings, meta)
    summary["resources"] = resources(started)
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / "questions.jsonl").open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    write_report(summary, records, out_dir)
    return summary


def load_run(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(summary, one record per question) of a run folder; a conversation run's record is its last turn's."""
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    qfile, cfile = run_dir / "questions.jsonl", run_dir / "conversations.jsonl"

    def lines(f: Path) -> list[dict[str, Any]]:
        return [json.loads(x) for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]

    if qfile.exists():
        return summary, lines(qfile)
    if cfile.exists():
        return summary, [{"id": c["id"], "kind": c["kind"], "answer": c["turns"][-1]["answer"],
                          "metrics": {k: c["turns"][-1].get(k) for k in ("fact_hit", "abstained")}}
                         for c in lines(cfile) if c.get("turns")]
    return summary, []

