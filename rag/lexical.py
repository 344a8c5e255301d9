"""The BM25 adapter (the only module that imports bm25s): build, save, load, search.

Dense embeddings blur exact strings: "PBTO", "R2G", "9.7x" are rare tokens a user types precisely because they are
distinctive. BM25 over our own tokens (`text.tokens`, which keeps "9.7x" and "mm2mm" whole) catches them; the
retriever fuses both rankings. The index lives beside the Chroma store and is rebuilt after every ingest that
changed anything, written to a temporary folder and renamed into place, so a crash never leaves half an index.

The build streams: chunks arrive one at a time (the indexer pages them out of the store), each is tokenized and kept
only as (word id, count) pairs in flat integer arrays (`rag.bm25_counts.Counts`), and the scores are then written
straight into bm25s' sparse layout and handed to a `bm25s.BM25`, which saves, loads and scores as if its own `index`
had built it (same vocabulary, same arrays, bit for bit). bm25s' `index` wants every chunk's token list at once, so
its memory grows with the corpus's tokens; streamed, it grows with the distinct words (bench/RESULTS.md has the peaks).

The rebuild is incremental: the counts are saved with the index (`counts.npz`, in the same renamed folder), so
`update` is given only the chunk ids in the store's order, tokenizes only chunks it has not counted (and those of
papers the indexer says it rewrote), takes every other chunk's counts from the file, and recomputes every score (a new
chunk changes every idf and the average length, and that part is cheap): a full rebuild reads and tokenizes every
text and title, an update only the new ones (bench/RESULTS.md compares them at 295k chunks). Without usable
counts (an index saved by an older version, a damaged or foreign file) it builds in full. Word ids then differ from
a full build's (they follow first use), but every word's column, every score and every search result are the same.

Besides ranking, the index answers "how many papers do this word's best chunks come from" from its postings (bm25s
keeps the scores as a sparse matrix with one column per word, so a column's row indices are the chunks containing
that word and its data their scores), which is what the retriever's rare-term checks need: a partition of one
word's scores, remembered, instead of scoring every chunk.
"""

from __future__ import annotations

import bisect
import json
import logging
import re
import shutil
import sys
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .bm25_counts import Counts, take_order
from .text import other_number, spellings, tokens, without_ending

log = logging.getLogger(__name__)
logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG on its own handler

_WORD = re.compile(r"[A-Za-z]+")  # a word as `respelt` reads it
SCORE_BATCH = 20_000  # chunks scored at a time in the build's second pass: ~1M (word, chunk) pairs, ~60 MB temporaries


def _bm25s() -> Any:
    """bm25s, imported without numba when nothing has imported numba yet: bm25s imports it whenever it is installed
    (0.6 s, a third of a cold `ask`'s imports after the embedder) for a backend we never select (`BM25()` defaults to
    "numpy", and search reads the postings itself). Hidden for this one import only, so ranx still finds it."""
    if "bm25s" not in sys.modules and "numba" not in sys.modules:
        sys.modules["numba"] = None  # type: ignore[assignment]  # `import numba` now raises ImportError
        try:
            import bm25s
        finally:
            del sys.modules["numba"]
    import bm25s

    return bm25s


class LexicalIndex:
    """BM25 over chunk texts, answering with (chunk_id, paper_id, score)."""

    def __init__(self, chunk_ids: list[str], paper_ids: list[str], model: object | None,
                 counts: Counts | None = None) -> None:
        self.chunk_ids, self.paper_ids, self._bm25 = chunk_ids, paper_ids, model
        self._counts = counts  # what the index was scored from, kept only until `save` writes it beside it
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
        # (word ids, want) -> papers of the best `want` chunks: see `_papers_in_top`.
        self._top_papers: dict[tuple[tuple[int, ...], int], int] = {}
        self._paper_df: dict[int, int] = {}  # word id -> papers containing it: see `idf`

    def respelt(self, text: str) -> str:
        """The text with each word the abstracts never write but write in its other spelling (`text.spellings`)
        spelt their way: "which papers study generalisation?" -> "which papers study generalization?" over
        abstracts in American English, and back over British ones. Every other word is left as typed."""

        def spelt(m: re.Match[str]) -> str:
            word = m.group(0)
            low = word.lower()
            if low in self._word_ids:
                return word
            other = next((w for w in spellings(low) if w in self._word_ids), None)
            if other is None:
                return word
            return other.upper() if word.isupper() else other.capitalize() if word[:1].isupper() else other

        return _WORD.sub(spelt, text)

    def knows(self, term: str) -> bool:
        """Does any indexed word equal the term or start with it? ("mllm" is known through "mllms")."""
        i = bisect.bisect_left(self._vocab, term)
        return i < len(self._vocab) and self._vocab[i].startswith(term)

    def idf(self, terms: Iterable[str]) -> dict[str, float]:
        """BM25's idf formula over papers: from the number of papers with a chunk containing the term, so a word
        weighs the same however the abstracts are cut into chunks (`chunking.max_tokens`); unknown terms are left
        out. Remembered per word id until the index is rebuilt.

        e.g. idf(["diffusion", "the"]) -> {"diffusion": 2.16} at 38 papers ("the" is not indexed).
        """
        if self._postings is None:
            return {}
        indptr, indices = self._postings
        n = self._n_papers
        out = {}
        for t in terms:
            i = self._word_ids.get(t)
            if i is None:
                continue
            df = self._paper_df.get(i)
            if df is None:
                papers = self._paper_of[indices[indptr[i]:indptr[i + 1]]]
                df = int(np.count_nonzero(np.bincount(papers, minlength=n)))
                if len(self._paper_df) >= 200_000:  # bounded: only words asked about are remembered
                    self._paper_df.clear()
                self._paper_df[i] = df
            out[t] = float(np.log(1 + (n - df + 0.5) / (df + 0.5)))
        return out

    @classmethod
    def build(cls, docs: Iterable[tuple[str, str, str]], batch: int = SCORE_BATCH) -> LexicalIndex:
        """docs: (chunk_id, paper_id, text to index), read once and in order, so a generator keeps memory bounded.

        The same index bm25s' own `BM25().index(token lists)` builds (same vocabulary, same CSC arrays), from
        compact counts instead of every chunk's token list: see `rag.bm25_counts.Counts`.
        """
        counts = Counts()
        for chunk_id, paper_id, text in docs:
            counts.add(chunk_id, paper_id, text)
        return cls._scored(counts, batch)

    @classmethod
    def update(cls, folder: Path, rows: Sequence[tuple[str, str]], reread: Collection[str],
               texts: Callable[[list[tuple[str, str]]], Iterable[tuple[str, str, str]]],
               batch: int = SCORE_BATCH) -> LexicalIndex | None:
        """The index of `rows` (every chunk's (chunk_id, paper_id), in the store's order) from the counts saved in
        `folder`, or None when they are missing or unusable (build in full then).

        Only chunks the saved counts lack, or of a paper in `reread` (the indexer rewrote it: same chunk ids, new
        text), are read: `texts(those rows)` yields their (chunk_id, paper_id, text to index), in that order.
        Chunks saved but not in `rows` (removed) are dropped. Every score is recomputed, so the result equals
        `build` over all rows' texts, but for word ids.
        """
        if not (folder / "ids.json").exists():  # nothing saved yet (a first ingest): no warning, just the full build
            log.info("no BM25 index at %s yet: building in full", folder)
            return None
        try:
            ids = json.loads((folder / "ids.json").read_text())
            saved = Counts.load(folder, list(ids["chunk_ids"]), list(ids["paper_ids"]))
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("lexical index at %s unreadable (%s): building in full", folder, e)
            return None
        if saved is None:
            return None
        reread = set(reread)
        take, fresh_at = take_order(saved, rows, reread)
        fresh = Counts(dict(saved.words))  # numbers new words on from the saved ones
        wanted = [rows[r] for r in fresh_at]
        for chunk_id, paper_id, text in texts(wanted):
            fresh.add(chunk_id, paper_id, text)
        if fresh.chunk_ids != [cid for cid, _ in wanted]:  # a chunk went between reading ids and texts
            log.warning("chunks changed while the BM25 index was updated: building in full")
            return None
        log.info("BM25 update: %d chunks, %d tokenized, %d saved rows not reused", len(rows), len(fresh),
                 len(saved) - (len(rows) - len(fresh)))
        counts = saved.merge(fresh, take, [r[0] for r in rows], [r[1] for r in rows])
        del saved, fresh
        return cls._scored(counts, batch)

    @classmethod
    def _scored(cls, counts: Counts, batch: int) -> LexicalIndex:
        """A bm25s.BM25 holding these counts' scores, as if its `index` had built it."""
        bm25s = _bm25s()
        if not counts.chunk_ids:
            return cls([], [], None, counts)
        model = bm25s.BM25()
        if (model.method, model.idf_method, model.dtype) != ("lucene", "lucene", "float32"):
            raise RuntimeError(f"bm25s' default BM25 changed ({model.method}, {model.dtype}); see rag/bm25_counts.py")
        vocab, model.scores = counts.scores(model.k1, model.b, batch)
        if "" not in vocab:  # bm25s adds the empty word after the others (it has no column)
            vocab[""] = len(vocab)
        model.vocab_dict = vocab
        model.unique_token_ids_set = set(vocab.values())
        model.nonoccurrence_array = None  # "lucene" scores a chunk without the word 0
        return cls(counts.chunk_ids, counts.paper_ids, model, counts)

    @classmethod
    def build_at_once(cls, docs: Sequence[tuple[str, str, str]]) -> LexicalIndex:
        """bm25s' own `index` over every chunk's token list at once: the reference `build` is tested and measured
        against (bench/bm25_build.py), not used by the indexer, since it holds every token of every chunk."""
        bm25s = _bm25s()
        if not docs:
            return cls([], [], None)
        model = bm25s.BM25()
        model.index([tokens(text) or ["_"] for _, _, text in docs], show_progress=False)
        return cls([d[0] for d in docs], [d[1] for d in docs], model)

    def save(self, folder: Path) -> None:
        """Into `folder` via a temporary folder renamed into place: a crash leaves the old index or the new one."""
        tmp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        if self._bm25 is not None:
            self._bm25.save(str(tmp / "bm25"))  # type: ignore[attr-defined]
        (tmp / "ids.json").write_text(json.dumps({"chunk_ids": self.chunk_ids, "paper_ids": self.paper_ids}))
        if self._counts is not None:  # for the next rebuild's `update`; not needed to search, so let go of it
            self._counts.save(tmp)
            self._counts = None
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
                model = _bm25s().BM25.load(str(folder / "bm25"), mmap=False)
            return cls(ids["chunk_ids"], ids["paper_ids"], model)
        except (OSError, ValueError, KeyError) as e:
            log.warning("lexical index at %s unreadable (%s); it will be rebuilt", folder, e)
            return None

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def idf_or_kin(self, terms: Iterable[str], prefix: int = 5) -> dict[str, float]:
        """`idf`, and for a term the index does not write, the idf of the commonest indexed word sharing its first
        `prefix` letters ("verifying" -> "verified"; left out when none does, or when the term is shorter): the word
        a user inflects differently from the abstracts still names the topic. Among several words sharing the prefix
        the commonest gives the lowest weight, the safe one when they are unrelated ("gener": general, generate)."""
        terms = list(terms)
        out = self.idf(terms)
        for t in terms:
            if t in out or len(t) < prefix:
                continue
            weights = self.idf(self._starting(t[:prefix], 64))
            if weights:
                out[t] = min(weights.values())
        return out

    def writes_stem(self, stem: str, letters: int = 5, limit: int = 512) -> bool:
        """Does an indexed word share the stem: one of the two stems begins the other ("robotic" ~ "robot",
        "federat" ~ "federated"), not only their first `letters` letters ("transl", from "translation", is not
        "transfer")? The words sharing those letters are read, at most `limit` of them (then it is taken as shared)."""
        family = self._starting(stem[:letters], limit)
        return len(family) >= limit or any(word.startswith(stem) or (len(own := without_ending(word)) >= 4
                                                                    and stem.startswith(own)) for word in family)

    def _starting(self, head: str, limit: int) -> list[str]:
        """The indexed words beginning with `head`, in order, at most `limit` of them."""
        i = bisect.bisect_left(self._vocab, head)
        family: list[str] = []
        while i < len(self._vocab) and self._vocab[i].startswith(head) and len(family) < limit:
            family.append(self._vocab[i])
            i += 1
        return family

    def has(self, term: str) -> bool:
        """Is the term an indexed word, as it is or in its other number ("tokens" through "token")?"""
        return term in self._word_ids or any(w in self._word_ids for w in self._number_forms_of(term))

    def search(self, query: str, k: int, allowed: set[str] | None = None, number_forms: bool = True,
               extra: Sequence[str] = (), extra_weight: float = 1.0) -> list[tuple[str, str, float]]:
        """Best chunks for the query with a positive score, optionally only of the allowed paper ids; each query
        word also searched in its other number (`_number_forms`) unless `number_forms` is off. `extra` words
        (a glossary's field terms) count `extra_weight` times their score."""
        if self._bm25 is None or not self.chunk_ids:
            return []
        q = tokens(query)
        q = self._number_forms(q) if number_forms else q
        more = self._extra_words(q, extra, extra_weight)
        if not q and not more:
            return []
        # Ask for more when filtering, since filtered-out chunks are dropped after scoring.
        want = len(self.chunk_ids) if allowed is not None else min(k, len(self.chunk_ids))
        docs, scores = self._top(q, want, more, extra_weight)
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

    def ceiling(self, query: str, extra: Sequence[str] = (), extra_weight: float = 1.0) -> float:
        """The most any chunk could score for the query: each query word's (and other number's) best weight in
        any chunk, summed, `extra` words at `extra_weight`. A chunk scoring near it holds the question's words
        where they weigh most; the best chunk for a question of common words scores a small share of it."""
        if self._bm25 is None or self._postings is None:
            return 0.0
        q = self._number_forms(tokens(query))
        return self._best_sum(q) + extra_weight * self._best_sum(self._extra_words(q, extra, extra_weight))

    def _extra_words(self, q: list[str], extra: Sequence[str], weight: float) -> list[str]:
        """The extra words (and their other numbers) not already among the query's, none at weight 0."""
        return [w for w in self._number_forms(list(extra)) if w not in q] if weight else []

    def _best_sum(self, words: list[str]) -> float:
        model: Any = self._bm25
        indptr, _ = self._postings  # type: ignore[misc]
        data = model.scores["data"]
        total = 0.0
        for i in model.get_tokens_ids(words):
            if indptr[i + 1] > indptr[i]:
                total += float(data[indptr[i]:indptr[i + 1]].max())
        return total

    def _number_forms_of(self, word: str) -> list[str]:
        other = other_number(word)
        return [other] if other else []

    def _number_forms(self, q: list[str]) -> list[str]:
        """The query's words and, where the index holds it, each one's other number: "VLM" also finds "VLMs",
        "GNNs" also "GNN" (an abstract writes the plural where a user types the singular)."""
        out = list(q)
        for word in q:
            for other in self._number_forms_of(word):
                if other not in out and other in self._word_ids:
                    out.append(other)
        return out

    def _top(self, q: list[str], k: int, extra: Sequence[str] = (),
             extra_weight: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """The k best chunks for the query words, best first, ties broken by chunk order: (docs, scores).

        Scores are summed from the words' postings (a chunk without the word scores 0 in bm25s' "lucene" variant),
        then only the chunks that contain a query word compete: a top-k over all scores (bm25s' `retrieve`, or its
        `topk`) spends nearly all its time partitioning zeros, and the same scores come out in the same order
        (tests/test_retrieve.py checks them against bm25s' own). A word's postings hold each chunk once, so
        `total[docs] += data` adds exactly what bm25s' `np.add.at` adds.
        """
        model: Any = self._bm25
        if self._postings is None:
            docs, scores = model.retrieve([[*q, *extra]], k=k, show_progress=False)  # extra at full weight here
            return docs[0], scores[0]
        indptr, indices = self._postings
        data = model.scores["data"]
        total = np.zeros(model.scores["num_docs"], dtype=np.dtype(model.dtype))
        for i in model.get_tokens_ids(q):
            total[indices[indptr[i]:indptr[i + 1]]] += data[indptr[i]:indptr[i + 1]]
        for i in model.get_tokens_ids(list(extra)) if extra else ():
            total[indices[indptr[i]:indptr[i + 1]]] += extra_weight * data[indptr[i]:indptr[i + 1]]
        docs = np.flatnonzero(total > 0)
        scores = total[docs]
        if len(docs) > k:  # keep everything scoring at least the k-th best, ties included, then order and cut
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
            keep = scores >= kth
            docs, scores = docs[keep], scores[keep]
        order = np.lexsort((docs, -scores))[:k]  # by score, then by chunk position: the same order on every run
        return docs[order], scores[order]

    def in_few_papers(self, query: str, k: int, limit: int) -> bool:
        """Whether `search(query, k, number_forms=False)` returns chunks of between 1 and `limit` distinct papers:
        the words as written are rare ("GNN" in few papers though "GNNs" is in many).

        Answered from the postings without building search's result list (see `_papers_in_top`), e.g. "solar" in
        3 chunks of 1 paper -> True; "model" in 121,684 chunks (100k papers), whose best k = 2,008 come from 1,759
        papers -> False with `limit` = 500; no search is run, which made the check the retriever's slowest step
        at 100k papers (bench/RESULTS.md).
        """
        if self._bm25 is None or not self.chunk_ids or k < 1:
            return False
        if self._postings is None:
            return 0 < len({pid for _, pid, _ in self.search(query, k, number_forms=False)}) <= limit
        return 0 < self._papers_in_top(tokens(query), min(k, len(self.chunk_ids))) <= limit

    def _papers_in_top(self, q: list[str], want: int) -> int:
        """How many papers the best `want` chunks for the query words (search's order) come from, remembered.

        The index never changes, and the retriever asks this for every question word of 3+ letters
        (`Retriever.rare_terms`), so the same common words come back with the same `want`: a look-up after the first
        time. The first time, one word's best chunks come from its postings alone (`_best_of_word`); several words
        (a hyphenated term yields itself and its parts) are scored as search scores them.
        """
        ids = tuple(self._word_ids[t] for t in q if t in self._word_ids)  # in query order, as `_top` sums them
        key = (ids, want)
        known = self._top_papers.get(key)
        if known is not None:
            return known
        if not ids:
            docs = np.zeros(0, dtype=np.int64)
        elif len(ids) == 1:
            docs = self._best_of_word(ids[0], want)
        else:
            docs = self._top(q, want)[0]
        count = len(np.unique(self._paper_of[docs]))
        if len(self._top_papers) >= 20_000:  # bounded: ~250 bytes an entry, ~5 MB
            self._top_papers.clear()
        self._top_papers[key] = count
        return count

    def _best_of_word(self, i: int, want: int) -> np.ndarray:
        """The chunks `_top([word i], want)` returns, in no particular order, from word i's postings alone.

        A one-word query scores a chunk with the word's posting and every other chunk 0, so its best `want` chunks
        are the postings' best `want` scores, ties at the cut going to the earliest chunks: e.g. scores 3, 2, 2, 1
        for chunks 9, 4, 7, 2 and want 2 -> chunks 9 and 4. A partition of this word's scores, not a pass over
        every chunk's.
        """
        assert self._postings is not None
        indptr, indices = self._postings
        lo, hi = int(indptr[i]), int(indptr[i + 1])
        model: Any = self._bm25
        # In `_top`'s dtype, since its sums are what search ranks (the same float32 here: no copy).
        docs, scores = indices[lo:hi], model.scores["data"][lo:hi].astype(model.dtype, copy=False)
        if not (scores > 0).all():  # `_top` keeps positive scores only (lucene scores are, but be exact)
            docs, scores = docs[scores > 0], scores[scores > 0]
        if len(docs) <= want:
            return docs
        kth = np.partition(scores, len(scores) - want)[len(scores) - want]  # the want-th best score
        above = docs[scores > kth]
        tied = np.sort(docs[scores == kth])[: want - len(above)]
        return np.concatenate([above, tied])
