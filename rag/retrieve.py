"""Question -> ranked papers (`Hit`s): dense, BM25, or both fused; filters applied here.

Both retrievers rank chunks; a paper counts by its best chunk in each. Two fusions (`retrieval.fusion`):

- "score" (the default): a paper's best cosine plus `bm25_score_weight` times its best BM25 score divided by the
  most any chunk could score for the question (each query word at its best weight in any chunk, summed:
  `LexicalIndex.ceiling`), e.g. cosine 0.52 and BM25 at 60 % of that with weight 0.2: 0.52 + 0.12 = 0.64. A paper
  BM25 found among the dense retriever's misses counts the lowest cosine read (it is at most that close). The
  cosine leads, so a question that describes a paper in other words still finds it; a rare name the question
  shares with one paper lifts that paper by up to the weight, while the best match for a question of common words
  holds a small share of them and gets a small lift (dividing by the question's best score instead,
  `bm25_share_of = "best"`, gave that best match the whole weight however weak it was).
- "rrf", reciprocal rank fusion: sum over retrievers of weight / (rrf_k + rank), e.g. dense #1 and BM25 #3 with
  rrf_k=60 and BM25 weight 2: 1/61 + 2/63 = 0.0481. Ranks carry no calibration, but a BM25 rank counts as much as
  a dense one however weak the words it matched, which put papers sharing common words ahead of the one a
  paraphrased question describes (bench/RESULTS.md, "Fusion").

`best_similarity` (the best cosine of any chunk of the paper to the question) is kept on every hit: the answerer
abstains when the top one is below the calibrated threshold. This module does not choose sentences or talk to
the model.

Speed (bench/RESULTS.md): the dense search fetches ids, paper ids and distances only, and the texts of just the
chunks shown for the returned papers; filters are applied after an over-fetch rather than by Chroma's `where`
(far slower at 100k papers); the rare-term check counts papers from the BM25 postings instead of searching.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .catalog import Catalog
from .config import Retrieval
from .embed import Embedder
from .glossary import load_glossary
from .lexical import LexicalIndex
from .records import Hit, Passage
from .store import ChunkStore, StoredChunk
from .text import NAME_FORM, spelled_out, tokens, without_ending

_NAME_CHUNKS = 12  # BM25 chunks read for the papers writing a name (`Retriever.paper_named`)
_AS_NAME = re.compile(NAME_FORM)


@dataclass(frozen=True)
class Filters:
    """Restrict retrieval to some papers: by source file, by having a code link, by id."""

    sources: frozenset[str] = frozenset()
    has_code: bool | None = None
    paper_ids: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.sources) or self.has_code is not None or bool(self.paper_ids)

    def where(self) -> dict[str, Any] | None:
        """The same restriction as a Chroma metadata filter."""
        clauses: list[dict[str, Any]] = []
        if self.sources:
            clauses.append({"source": {"$in": sorted(self.sources)}})
        if self.has_code is not None:
            clauses.append({"has_code": self.has_code})
        if self.paper_ids:
            clauses.append({"paper_id": {"$in": sorted(self.paper_ids)}})
        if not clauses:
            return None
        return clauses[0] if len(clauses) == 1 else {"$and": clauses}


@dataclass
class Retrieved:
    hits: list[Hit]
    timings: dict[str, float] = field(default_factory=dict)  # ms: embed, dense, bm25, fuse

    query_vector: np.ndarray | None = field(default=None, repr=False)  # reused for evidence: embed once
    expansion: tuple[str, ...] = ()  # the field's terms the glossary read the question's plain words as

    @property
    def best_similarity(self) -> float:
        return max((h.best_similarity for h in self.hits), default=0.0)


class Retriever:
    def __init__(self, embedder: Embedder, store: ChunkStore, lexical: LexicalIndex | None, catalog: Catalog,
                 settings: Retrieval) -> None:
        self.embedder, self.store, self.lexical, self.catalog, self.settings = (
            embedder, store, lexical, catalog, settings)
        self.glossary = load_glossary(settings.glossary)
        # Counted once: a retriever reads one snapshot of the index (the app makes a new one after an ingest), and
        # SQLite's count(*) scans the table.
        self._papers = catalog.count()

    def _allowed(self, filters: Filters) -> set[str] | None:
        if not filters:
            return None
        return self.catalog.ids_where(sources=filters.sources, has_code=filters.has_code, paper_ids=filters.paper_ids)

    def search(self, question: str, filters: Filters | None = None, top_k: int | None = None,
               mode: str | None = None) -> Retrieved:
        filters = filters or Filters()
        mode = mode or self.settings.mode
        k = top_k or self.settings.top_k
        timings: dict[str, float] = {}

        # The field's terms for the question's plain words (rag/glossary.py), those the index writes: embedded with
        # the question and searched at a lower BM25 weight.
        extra = self.glossary.expand(question, self.lexical.has if self.lexical is not None else None)
        t = time.perf_counter()
        qvec = self.embedder.embed([f"{question} ({' '.join(extra)})" if extra else question])[0]
        timings["embed_ms"] = (time.perf_counter() - t) * 1000

        allowed = self._allowed(filters)
        # Dense: always run, since its similarity drives abstention even in bm25 mode.
        t = time.perf_counter()
        dense = self._dense(qvec, filters, allowed)
        timings["dense_ms"] = (time.perf_counter() - t) * 1000

        lexical: list[tuple[str, str, float]] = []
        if mode in {"hybrid", "bm25"} and self.lexical is not None:
            t = time.perf_counter()
            lexical = self.lexical.search(question, self.settings.candidates, allowed=allowed, extra=extra,
                                          extra_weight=self.settings.glossary_weight)
            timings["bm25_ms"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        best_sim: dict[str, float] = {}
        dense_rank: dict[str, int] = {}
        for c in dense:
            best_sim[c.paper_id] = max(best_sim.get(c.paper_id, -1.0), c.similarity)
            dense_rank.setdefault(c.paper_id, len(dense_rank) + 1)
        bm25_rank: dict[str, int] = {}
        for _chunk_id, paper_id, _score in lexical:
            bm25_rank.setdefault(paper_id, len(bm25_rank) + 1)

        rrf = self.settings.rrf_k
        scores: dict[str, float] = {}
        if mode == "hybrid" and self.settings.fusion == "score":
            floor = min((c.similarity for c in dense), default=0.0)
            top_bm25 = max((score for _, _, score in lexical), default=0.0) or 1.0
            if self.settings.bm25_share_of == "ceiling" and self.lexical is not None:
                top_bm25 = max(self.lexical.ceiling(question, extra, self.settings.glossary_weight), top_bm25)
            bm25_best: dict[str, float] = {}
            for _chunk_id, paper_id, score in lexical:
                bm25_best[paper_id] = max(bm25_best.get(paper_id, 0.0), score)
            for pid in [*dense_rank, *(p for p in bm25_best if p not in dense_rank)]:
                scores[pid] = (best_sim.get(pid, floor)
                               + self.settings.bm25_score_weight * bm25_best.get(pid, 0.0) / top_bm25)
        elif mode in {"hybrid", "dense"}:
            for pid, r in dense_rank.items():
                scores[pid] = scores.get(pid, 0.0) + 1.0 / (rrf + r)
        if mode == "bm25" or (mode == "hybrid" and self.settings.fusion == "rrf"):
            weight = self.settings.bm25_weight if mode == "hybrid" else 1.0
            for pid, r in bm25_rank.items():
                scores[pid] = scores.get(pid, 0.0) + weight / (rrf + r)
        ranked = sorted(scores, key=lambda p: (-scores[p], -best_sim.get(p, 0.0)))[:k]
        papers = self.catalog.get_many(ranked)
        # Passages are the dense chunks of the returned papers (BM25 finds chunks but its text is not shown):
        # read only those texts, e.g. 9 of the 40 candidates.
        fetch = time.perf_counter()
        shown = set(ranked)
        texts = self.store.texts_of([c.chunk_id for c in dense if c.paper_id in shown])
        passages: dict[str, list[Passage]] = {}
        for c in dense:
            if texts.get(c.chunk_id):
                passages.setdefault(c.paper_id, []).append(Passage(c.chunk_id, texts[c.chunk_id], c.similarity))
        fetch_ms = (time.perf_counter() - fetch) * 1000
        qtok = set(tokens(question))
        hits: list[Hit] = []
        for pid in ranked:
            paper = papers.get(pid)
            if paper is None:  # in the vectors but not the catalog: an interrupted ingest; skip until repaired
                continue
            words = set(tokens(paper.raw + " " + paper.title))
            matched = sorted(qtok & words)
            read_as = [w for w in extra if w in words]
            why = ", ".join(x for x in (
                f"dense #{dense_rank[pid]} ({best_sim[pid]:.2f})" if pid in dense_rank else "",
                f"bm25 #{bm25_rank[pid]}" if pid in bm25_rank else "",
                f"terms: {', '.join(matched[:8])}" if matched else "",
                f"read as: {', '.join(read_as[:6])}" if read_as else "",
            ) if x)
            best = sorted(passages.get(pid, []), key=lambda p: -p.score)[:3]
            hits.append(Hit(paper=paper, score=scores[pid], passages=tuple(best), why=why,
                            dense_rank=dense_rank.get(pid), bm25_rank=bm25_rank.get(pid),
                            best_similarity=best_sim.get(pid, 0.0)))
        timings["fuse_ms"] = (time.perf_counter() - t) * 1000 - fetch_ms
        timings["dense_ms"] += fetch_ms  # reading the shown chunks' texts is the dense retriever's cost
        timings["retrieve_ms"] = sum(timings.values())
        return Retrieved(hits=hits, timings=timings, query_vector=qvec, expansion=tuple(extra))

    def _dense(self, qvec: np.ndarray, filters: Filters, allowed: set[str] | None) -> list[StoredChunk]:
        """The nearest `candidates` chunks of allowed papers.

        A filter is applied to an over-fetch: the allowed share of papers predicts how many neighbours to read,
        e.g. 40 candidates with 37 % of papers allowed -> fetch ceil(40 / 0.37 * 1.5) = 163, keep the allowed,
        and fetch twice as many while too few are left. Chroma's own `where` is used only when that would read
        more than `filter_fetch_max` chunks (a filter keeping a small share of papers).
        """
        want = self.settings.candidates
        if allowed is None:
            return self.store.query(qvec, want, texts=False)
        if not allowed:
            return []
        share = len(allowed) / max(1, self._papers)
        fetch = math.ceil(want / share * 1.5)
        while fetch <= self.settings.filter_fetch_max:
            got = self.store.query(qvec, fetch, texts=False)
            kept = [c for c in got if c.paper_id in allowed]
            if len(kept) >= want or len(got) < fetch:  # enough, or the whole collection was read
                return kept[:want]
            fetch *= 2
        return self.store.query(qvec, want, where=filters.where(), texts=False)

    def respelt(self, text: str) -> str:
        """The text with its words spelt as the abstracts spell them ("generalisation" -> "generalization" over
        American English abstracts): `LexicalIndex.respelt`; as typed without a lexical index."""
        return self.lexical.respelt(text) if self.lexical is not None else text

    def absent_terms(self, question: str) -> tuple[str, ...]:
        """Specific terms of the question that no abstract contains: names, datasets, venues, numbers.

        e.g. "How much does NITP improve GSM8K accuracy?" -> ("GSM8K",): the corpus cannot say anything about
        GSM8K, however similar the rest of the question is to a real paper. A term counts as specific when it has a
        capital letter past the question's first word or a digit; a hyphenated one by its head ("Mamba-based").
        """
        if self.lexical is None or not len(self.lexical):
            return ()
        out = []
        for m in re.finditer(r"[\w][\w\-./]*[\w]|\w", question):
            word = m.group(0)
            # A capital that only opens a sentence ("... of it? What does ...") names nothing.
            opens = not question[:m.start()].strip() or question[:m.start()].rstrip()[-1] in ".?!:;\"“("
            if (opens and not any(c.isdigit() for c in word) and word[1:].islower()) or \
                    not (any(c.isdigit() for c in word) or any(c.isupper() for c in word)):
                continue
            head = tokens(re.split(r"[-/]", word)[0], drop_stopwords=False)
            # A field's acronym ("LMs") is not absent where the abstracts spell it out ("language models").
            long = spelled_out(word)
            if long and all(self.lexical.knows(w) for w in long):
                continue
            if head and len(head[0]) >= 3 and not self.lexical.knows(head[0]):
                out.append(word)
        return tuple(dict.fromkeys(out))

    def unmentioned(self, words: list[str]) -> tuple[str, ...]:
        """Words no abstract uses in any form: no indexed word shares their stem (`LexicalIndex.writes_stem`:
        "speeding" -> "speed"; "translation" -> "transl", which "transfer" does not share). e.g. ["speculative",
        "decoding"] -> ("speculative",) in the seeds. Words under five letters and hyphenated ones (whose parts are
        checked) are left out."""
        if self.lexical is None or not len(self.lexical):
            return ()
        out = []
        for word in words:
            if len(word) < 5 or "-" in word or any(c.isdigit() for c in word):
                continue
            stem = without_ending(word)
            if len(stem) >= 4 and not self.lexical.writes_stem(stem):
                out.append(word)
        return tuple(out)

    def paper_named(self, names: list[str], lowered: list[str] | tuple[str, ...] = ()) -> str | None:
        """The one paper whose name a question writes (`names` as written: "FoundObj", "TIED"): a name that one paper
        alone writes in that case, not a field's acronym ("GNN"); None when no name is, or names of two papers are.
        A word typed in lower case that few papers use (`lowered`, of `rare_terms`: "rhi - what does it guarantee?")
        names a paper when one paper writes it, and only as a name ("RHI"): a word any of those papers writes in
        lower case is a word ("tied", "solar cells"). The papers of the word's best `_NAME_CHUNKS` BM25 chunks are
        read for it."""
        if self.lexical is None:
            return None
        found = set()
        for name in names:
            if spelled_out(name):
                continue
            writing = self._writing(name, re.compile(r"(?<![\w\-])" + re.escape(name) + r"(?![\w\-])"))
            if len(writing) == 1:
                found.add(writing[0])
        for word in lowered:
            if spelled_out(word):
                continue
            any_case = re.compile(r"(?<![\w\-])" + re.escape(word) + r"(?![\w\-])", re.IGNORECASE)
            writing = self._writing(word, any_case, only_as_name=True)
            if len(writing) == 1:
                found.add(writing[0])
        return found.pop() if len(found) == 1 else None

    def _writing(self, word: str, pattern: re.Pattern[str], only_as_name: bool = False) -> list[str]:
        """The papers, among those of the word's best BM25 chunks, whose text the pattern finds; with `only_as_name`,
        none when one of them writes it otherwise than as a name."""
        assert self.lexical is not None
        ids = list(dict.fromkeys(pid for _, pid, _ in self.lexical.search(word, k=_NAME_CHUNKS, number_forms=False)))
        papers = self.catalog.get_many(ids)
        writing = []
        for pid in ids:
            if pid not in papers:
                continue
            seen = pattern.findall(papers[pid].raw + " " + papers[pid].title)
            if only_as_name and any(not _AS_NAME.fullmatch(w) for w in seen):
                return []
            if seen:
                writing.append(pid)
        return writing

    def rare_terms(self, text: str) -> tuple[str, ...]:
        """Words of the text few papers use: the papers of each word's best `limit * 4 + 8` BM25 chunks number
        between 1 and `limit` (2, or one paper in 200). e.g. "What does SOLAR stand for?" -> ("solar",)."""
        if self.lexical is None:
            return ()
        rare_limit = max(2, self._papers // 200)
        return tuple(term for term in dict.fromkeys(tokens(text))
                     if len(term) >= 3 and self.lexical.in_few_papers(term, k=rare_limit * 4 + 8, limit=rare_limit))
