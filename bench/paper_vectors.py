"""Richer paper representations for finding a paper the question describes in other words, without the model: one
vector per paper beside its chunks, added to its retrieval score, measured before anything is built into the index.

`python -m bench.paper_vectors --data-dir DIR [--split dev] [--weights 0.1,0.2,0.3,0.5]` embeds, for every paper of
the index, three candidate paper vectors:

- "whole": the title and the whole abstract as one text (the embedder truncates it at its limit; one more embedding
  per paper at ingest);
- "centroid": the mean of the paper's own chunk vectors (no extra embedding);
- "keyphrases": the title and the abstract's 15 words of highest tf-idf (a derived title and key phrases).

For every single-paper question of one split of eval/qa.jsonl it reads and retrieves the question with the pipeline
(`Assistant.read`, `Assistant.retrieve`), adds weight x cosine(question, paper vector) to each hit's score, and
counts how often the first hit (Recall@1) and the first evidence paper (the pipeline's own `select_evidence`) are
gold, per subset ("" = the original questions), beside how often each paper vector alone ranks a gold paper
first. DIR must hold an ingested index of the seeds.
"""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter
from typing import Any

import numpy as np

from .measure import machine
from .sweep import setup


def paper_vectors(assistant: Any) -> tuple[list[str], dict[str, np.ndarray]]:
    """(paper ids, {representation: one unit vector per paper, in that order})."""
    from rag.chunk import chunk_paper, embed_text
    from rag.text import tokens

    papers = list(assistant.catalog.iter_papers())
    embedder = assistant.embedder
    whole = embedder.embed([f"{p.title}. {p.abstract}" for p in papers])
    centroids = []
    for p in papers:
        chunks = chunk_paper(p, assistant.settings.chunking, embedder.count_tokens)
        v = embedder.embed([embed_text(p.title, c.text) for c in chunks]).mean(axis=0)
        centroids.append(v / np.linalg.norm(v))
    lexical = assistant.retriever.lexical
    phrases = []
    for p in papers:
        words = tokens(p.abstract)
        tf = Counter(words)
        idf = lexical.idf(list(tf)) if lexical is not None else {}
        top = sorted(tf, key=lambda w: -tf[w] * idf.get(w, 0.0))[:15]
        phrases.append(f"{p.title}. {', '.join(top)}")
    return [p.paper_id for p in papers], {"whole": whole, "centroid": np.array(centroids),
                                          "keyphrases": embedder.embed(phrases)}


def main(argv: list[str] | None = None) -> int:
    from rag.evidence import SentenceScorer, select_evidence

    split, assistant, questions, weights = setup("bench.paper_vectors", __doc__, "--weights", "0.1,0.2,0.3,0.5",
                                                 "paper-vector weight", argv)
    ids, vectors = paper_vectors(assistant)
    at = {pid: i for i, pid in enumerate(ids)}
    knobs = assistant.settings.answer
    scorer = SentenceScorer(assistant.embedder, knobs)
    lexical = assistant.retriever.lexical
    configs = [("retrieval as is", 0.0)] + [(name, w) for name in vectors for w in weights]
    first: dict[tuple[str, float], Counter[str]] = {c: Counter() for c in configs}
    evidence: dict[tuple[str, float], Counter[str]] = {c: Counter() for c in configs}
    alone: dict[str, Counter[str]] = {name: Counter() for name in vectors}  # the paper vector's own first paper
    total: Counter[str] = Counter()
    for q in questions:
        if q.kind in ("unanswerable", "multi"):
            continue
        read = assistant.read(q.question, list(q.history))
        retrieved = assistant.retrieve(read)
        if read.summary or not retrieved.hits:
            continue
        total[q.subset] += 1
        qvec = assistant.embedder.embed([q.question])[0] if read.pinned else retrieved.query_vector
        for name, v in vectors.items():
            alone[name][q.subset] += ids[int(np.argmax(v @ retrieved.query_vector))] in q.gold
        for name, w in configs:
            hits = retrieved.hits
            if w:
                cos = vectors[name] @ retrieved.query_vector
                hits = sorted((dataclasses.replace(h, score=h.score + w * float(cos[at[h.paper.paper_id]]))
                               for h in hits), key=lambda h: -h.score)
            first[(name, w)][q.subset] += hits[0].paper.paper_id in q.gold
            blocks = select_evidence(read, qvec, hits, scorer, max_papers=knobs.evidence_papers,
                                     per_paper=knobs.sentences_per_paper, margin=knobs.evidence_margin,
                                     idf=lexical.idf if lexical is not None else None,
                                     cover_weight=knobs.evidence_cover_weight, focus_weight=knobs.evidence_focus_weight)
            evidence[(name, w)][q.subset] += bool(blocks) and blocks[0].hit.paper.paper_id in q.gold
    print(f"{split} split, {sum(total.values())} single-paper questions, {len(ids)} papers, {machine().get('cpu')}")

    def counts(c: Counter[str]) -> str:
        return ", ".join(f"{s or 'original'} {c[s]}/{total[s]}" for s in sorted(total))

    for name, firsts in alone.items():
        print(f"{name} alone, over every paper: first paper gold {counts(firsts)}")
    for c in configs:
        label = c[0] if not c[1] else f"+ {c[1]:g} x {c[0]}"
        print(f"{label}: first hit gold {counts(first[c])}; first evidence paper gold {counts(evidence[c])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
