"""The BM25 adapter (the only module that imports bm25s): build, save, load, search.

Dense embeddings blur exact strings: "PBTO", "R2G", "9.7x" are rare tokens a user types precisely because they are
distinctive. BM25 over our own tokens (`text.tokens`, which keeps "9.7x" and "mm2mm" whole) catches them; the
retriever fuses both rankings. The index lives beside the Chroma store and is rebuilt after every ingest that
changed anything, written to a temporary folder and renamed into place, so a crash never leaves half an index.

Besides ranking, the index answers "how many papers contain this word" from its postings (bm25s keeps the scores
as a sparse matrix with one column per word, so a column's row indices are the chunks containing that word), which
is what the retriever's rare-term checks need: a dictionary look-up and a count instead of scoring every chunk.
"""

from __future__ import annotations

import bisect
import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .text import tokens

log = logging.getLogger(__name__)
logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG on its own handler


class LexicalIndex:
    """BM25 over chunk texts, answering with (chunk_id, paper_id, score)."""

    def __init__(self, chunk_ids: list[str], paper_ids: list[str], model: object | None) -> None:
        self.chunk_ids, self.paper_ids, self._bm25 = chunk_ids, paper_ids, model
        vocab = getattr(model, "vocab_dict", None) or {}
        self._vocab = sorted(str(t) for t in vocab)
        self._word_ids: dict[str, int] = {str(t): int(i) for t, i in vocab.items()}
        # Postings: chunks containing word i are indices[indptr[i]:indptr[i + 1]] (the CSC score matrix). Only
        # valid for BM25 variants where a chunk without the word scores 0 (bm25s' default "lucene" is one).
        scores = getattr(model, "scores", None) or {}
        self._postings: tuple[np.ndarray, np.ndarray] | None = None
        if scores and getattr(model, "nonoccurrence_array", None) is None:
            self._postings = (np.asarray(scores["indptr"]), np.asarray(scores["indices"]))
        # Each chunk's paper as a small integer, so "which papers" is a bincount, not a set of strings.
        self._codes: dict[str, int] = {}
        self._paper_of = np.fromiter((self._codes.setdefault(p, len(self._codes)) for p in paper_ids),
                                     dtype=np.int64, count=len(paper_ids))
        self._n_papers = len(self._codes)

    def knows(self, term: str) -> bool:
        """Does any indexed word equal the term or start with it? ("mllm" is known through "mllms")."""
        i = bisect.bisect_left(self._vocab, term)
        return i < len(self._vocab) and self._vocab[i].startswith(term)

    @classmethod
    def build(cls, docs: Sequence[tuple[str, str, str]]) -> LexicalIndex:
        """docs: (chunk_id, paper_id, text to index)."""
        import bm25s

        if not docs:
            return cls([], [], None)
        model = bm25s.BM25()
        # An empty token list would break the index; "_" stands in for a chunk with no searchable word.
        model.index([tokens(text) or ["_"] for _, _, text in docs], show_progress=False)
        return cls([d[0] for d in docs], [d[1] for d in docs], model)

    def save(self, folder: Path) -> None:
        tmp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        if self._bm25 is not None:
            self._bm25.save(str(tmp / "bm25"))  # type: ignore[attr-defined]
        (tmp / "ids.json").write_text(json.dumps({"chunk_ids": self.chunk_ids, "paper_ids": self.paper_ids}))
        old = folder.with_name(folder.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if folder.exists():
            folder.rename(old)
        tmp.rename(folder)
        shutil.rmtree(old, ignore_errors=True)

    @classmethod
    def load(cls, folder: Path) -> LexicalIndex | None:
        """The saved index, or None when there is none (or it is unreadable: the caller rebuilds it)."""
        if not folder.exists():
            return None
        try:
            ids = json.loads((folder / "ids.json").read_text())
            model = None
            if ids["chunk_ids"]:
                import bm25s

                model = bm25s.BM25.load(str(folder / "bm25"), mmap=False)
            return cls(ids["chunk_ids"], ids["paper_ids"], model)
        except (OSError, ValueError, KeyError) as e:
            log.warning("lexical index at %s unreadable (%s); it will be rebuilt", folder, e)
            return None

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def search(self, query: str, k: int, allowed: set[str] | None = None) -> list[tuple[str, str, float]]:
        """Best chunks for the query with a positive score, optionally only of the allowed paper ids."""
        if self._bm25 is None or not self.chunk_ids:
            return []
        q = tokens(query)
        if not q:
            return []
        # Ask for more when filtering, since filtered-out chunks are dropped after scoring.
        want = len(self.chunk_ids) if allowed is not None else min(k, len(self.chunk_ids))
        docs, scores = self._top(q, want)
        if allowed is not None:  # keep the allowed chunks in order, as numpy masks rather than a loop over all
            ok = np.zeros(self._n_papers, dtype=bool)
            ok[[self._codes[p] for p in allowed if p in self._codes]] = True
            keep = (scores > 0) & ok[self._paper_of[docs]]
            docs, scores = docs[keep][:k], scores[keep][:k]
        out: list[tuple[str, str, float]] = []
        for idx, score in zip(docs, scores):
            if score <= 0:
                break
            pid = self.paper_ids[int(idx)]
            if allowed is not None and pid not in allowed:
                continue
            out.append((self.chunk_ids[int(idx)], pid, float(score)))
            if len(out) >= k:
                break
        return out

    def _top(self, q: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k best chunks for the query words, best first, ties broken by chunk order: (docs, scores).

        Scores are summed from the words' postings (a chunk without the word scores 0 in bm25s' "lucene" variant),
        then only the chunks that contain a query word compete: at 295k chunks, a top-k over all scores (bm25s'
        `retrieve`, or its `topk`) took 25 ms, nearly all of it partitioning zeros; over the 40-110k scored chunks
        it takes 2 ms, with the same scores in the same order (30 of 30 bench questions). A word's postings hold
        each chunk once, so `total[docs] += data` adds exactly what bm25s' `np.add.at` adds.
        """
        model: Any = self._bm25
        if self._postings is None:
            docs, scores = model.retrieve([q], k=k, show_progress=False)
            return docs[0], scores[0]
        indptr, indices = self._postings
        data = model.scores["data"]
        total = np.zeros(model.scores["num_docs"], dtype=np.dtype(model.dtype))
        for i in model.get_tokens_ids(q):
            total[indices[indptr[i]:indptr[i + 1]]] += data[indptr[i]:indptr[i + 1]]
        docs = np.flatnonzero(total > 0)
        scores = total[docs]
        if len(docs) > k:  # keep everything scoring at least the k-th best, ties included, then order and cut
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
            keep = scores >= kth
            docs, scores = docs[keep], scores[keep]
        order = np.lexsort((docs, -scores))[:k]  # by score, then by chunk position: the same order on every run
        return docs[order], scores[order]

    def in_few_papers(self, query: str, k: int, limit: int) -> bool:
        """Whether `search(query, k)` returns chunks of between 1 and `limit` distinct papers.

        Answered from the postings without scoring: a chunk scores above 0 exactly when it contains a query word,
        so when at most k chunks do, search returns all of them; when more do, its papers are a subset of the
        papers holding any. e.g. "solar" in 3 chunks of 1 paper -> True; "model" in 9,000 chunks of 4,000 papers
        -> False, since no k = 208 of those chunks fit in `limit` = 50 papers (at most 6 chunks per paper).
        Only when a few papers hold most of the matching chunks does it fall back to the search itself.
        """
        if self._bm25 is None or not self.chunk_ids:
            return False
        if self._postings is None:
            return 0 < len({pid for _, pid, _ in self.search(query, k)}) <= limit
        indptr, indices = self._postings
        ids = sorted({self._word_ids[t] for t in tokens(query) if t in self._word_ids})
        if not ids:
            return False
        parts = [indices[indptr[i]:indptr[i + 1]] for i in ids]
        docs = parts[0] if len(parts) == 1 else np.unique(np.concatenate(parts))
        want = min(k, len(self.chunk_ids))
        if len(docs) <= want:  # search returns every chunk that contains a query word
            return 0 < len(np.unique(self._paper_of[docs])) <= limit
        per_paper = np.bincount(self._paper_of[docs], minlength=self._n_papers)
        if np.count_nonzero(per_paper) <= limit:  # the top `want` chunks come from these few papers
            return True
        # The top `want` chunks span at least as many papers as it takes to cover `want` chunks with the papers
        # holding the most matching chunks, e.g. want 208 with at most 6 per paper: at least 35 papers.
        covered = needed = 0
        by_count = np.bincount(per_paper)  # by_count[c]: papers holding exactly c matching chunks
        for c in range(len(by_count) - 1, 0, -1):
            take = min(int(by_count[c]), -(-(want - covered) // c))
            covered, needed = covered + take * c, needed + take
            if covered >= want:
                break
        if needed > limit:
            return False
        return 0 < len({pid for _, pid, _ in self.search(query, k)}) <= limit
