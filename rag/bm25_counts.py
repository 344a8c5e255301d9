"""What the BM25 index is made of: every chunk's words as compact (word id, count) pairs, and its length.

Three uses. The streamed build's first pass collects them chunk by chunk (`add`); BM25's arithmetic turns them into
the sparse score arrays bm25s keeps (`scores`); and they are saved beside the index (`save`, `load`), so that the
next rebuild tokenizes only the chunks it has not seen and takes every other chunk's row from here (`merge`). The
scores themselves are always recomputed from the counts: adding one chunk changes the chunk count, the average length
and so every word's idf, and recomputing 14.5M scores takes 2 s at 295k chunks, where reading and tokenizing every
text again took 32 s.

Not here: bm25s itself (rag/lexical.py imports it and wraps these arrays in a `bm25s.BM25`), reading the store, and
deciding which chunks changed (the indexer knows which papers it wrote: see `rag.lexical_sync.rebuild_lexical`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from array import array
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np

from .text import STOPWORDS, tokens

log = logging.getLogger(__name__)

FILE = "counts.npz"
FORMAT = 1  # bump when what is saved changes meaning; an older file is ignored and the index built in full
# Saved counts are only valid for the tokenizer that made them: its output on this text (and its stop words) is
# saved with them, so a change to `rag.text.tokens` makes the next rebuild a full one instead of mixing two.
_PROBE = "The 9.7× cheaper LLM-based R2G: naïve $\\alpha$-decay of mm2mm CO2/x-ray in 日本語, e.g. GPT-4o (2024)."


def tokenizer_key() -> str:
    probe = json.dumps([tokens(_PROBE), tokens(_PROBE, drop_stopwords=False), sorted(STOPWORDS)])
    return hashlib.sha256(probe.encode()).hexdigest()[:16]


# A growing array("i") while the build collects, an int32 numpy array once loaded or merged.
Ints: TypeAlias = "array[int] | np.ndarray"


class Counts:
    """Per chunk, its distinct words as integer ids with their counts, in flat 4-byte arrays.

    At 295k chunks that is 14.5M (word, count) pairs, 116 MB, where bm25s' own `index` holds every chunk's token
    list as Python strings (and then copies as id lists): 2.8 GB above the store's own memory at that size.
    Chunk i's pairs are `word_ids[s:s + n_words[i]]` with s the sum of the n_words before it.
    """

    def __init__(self, words: dict[str, int] | None = None) -> None:
        self.chunk_ids: list[str] = []
        self.paper_ids: list[str] = []
        self.words: dict[str, int] = words if words is not None else {}  # word -> id, in order of first use
        self.word_ids: Ints = array("i")  # chunk after chunk, each distinct word's id ...
        self.tfs: Ints = array("i")  # ... and how often the chunk uses it
        self.n_words: Ints = array("i")  # distinct words per chunk
        self.lengths: Ints = array("i")  # tokens per chunk (BM25's document length)

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def add(self, chunk_id: str, paper_id: str, text: str) -> None:
        # An empty token list would break the index; "_" stands in for a chunk with no searchable word.
        toks = tokens(text) or ["_"]
        counts = Counter(toks)  # in order of first use, e.g. "a b a" -> {a: 2, b: 1}
        words = self.words
        assert isinstance(self.word_ids, array) and isinstance(self.tfs, array)  # loaded counts are not added to
        self.word_ids.extend([words.setdefault(w, len(words)) for w in counts])
        self.tfs.extend(counts.values())
        assert isinstance(self.n_words, array) and isinstance(self.lengths, array)
        self.n_words.append(len(counts))
        self.lengths.append(len(toks))
        self.chunk_ids.append(chunk_id)
        self.paper_ids.append(paper_id)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(word_ids, tfs, n_words, lengths) as int32 numpy arrays, without copying."""
        return tuple(np.frombuffer(a, dtype=np.intc) for a in  # type: ignore[return-value]
                     (self.word_ids, self.tfs, self.n_words, self.lengths))

    # --- saved beside the index -------------------------------------------------------------------------------

    def save(self, folder: Path) -> None:
        """Into `folder` (the index's temporary folder, renamed into place with the rest)."""
        # Tokens are [a-z0-9.-] runs or "_" (`rag.text.tokens`), so a newline separates them unambiguously.
        vocab = "\n".join(self.words).encode()
        word_ids, tfs, n_words, lengths = self.arrays()
        np.savez(folder / FILE, format=np.array([FORMAT]), tokenizer=np.array([tokenizer_key()]),
                 vocab=np.frombuffer(vocab, dtype=np.uint8), word_ids=word_ids, tfs=tfs, n_words=n_words,
                 lengths=lengths)

    @classmethod
    def load(cls, folder: Path, chunk_ids: list[str], paper_ids: list[str]) -> Counts | None:
        """The counts saved in `folder` for these chunks (the index's ids.json), or None when there are none, or
        they are unreadable, of another format or tokenizer, or do not fit together: the caller builds in full."""
        path = folder / FILE
        if not path.exists():
            log.info("no saved BM25 counts at %s (an index saved by an older version): building in full", path)
            return None
        try:
            with np.load(path) as f:
                if int(f["format"][0]) != FORMAT or str(f["tokenizer"][0]) != tokenizer_key():
                    log.info("saved BM25 counts at %s are of another format or tokenizer: building in full", path)
                    return None
                vocab = f["vocab"].tobytes().decode()
                arrays = [np.ascontiguousarray(f[k], dtype=np.intc) for k in ("word_ids", "tfs", "n_words",
                                                                             "lengths")]
        except Exception as e:  # a cache: whatever makes it unreadable (truncated zip, bad dtype) means a full build
            log.warning("saved BM25 counts at %s unreadable (%s: %s): building in full", path, type(e).__name__, e)
            return None
        words = vocab.split("\n") if vocab else []
        out = cls({w: i for i, w in enumerate(words)})
        out.chunk_ids, out.paper_ids = chunk_ids, paper_ids
        out.word_ids, out.tfs, out.n_words, out.lengths = arrays
        word_ids, tfs, n_words, lengths = arrays
        fits = (len(out.words) == len(words) and len(n_words) == len(lengths) == len(chunk_ids) == len(paper_ids)
                and len(word_ids) == len(tfs) == int(n_words.sum(dtype=np.int64))
                and (len(word_ids) == 0 or (word_ids.min() >= 0 and word_ids.max() < len(words)))
                and bool((n_words > 0).all() and (tfs > 0).all()))
        if not fits:
            log.warning("saved BM25 counts at %s do not match the saved index: building in full", path)
            return None
        return out

    # --- an update: saved rows and freshly tokenized ones, in the store's order ------------------------------------

    def merge(self, fresh: Counts, take: np.ndarray, chunk_ids: list[str], paper_ids: list[str]) -> Counts:
        """The counts of `chunk_ids`, row r copied from self's row take[r], or from fresh's row take[r] - len(self)
        when take[r] >= len(self). `fresh` numbers its words on from self's (it was made with a copy of
        `self.words`). Words no chunk uses any more (all their chunks gone) are dropped, as a full build never
        sees them, so the vocabulary (`LexicalIndex.knows`) is the full build's.
        """
        own, new = self.arrays(), fresh.arrays()
        n_words = np.concatenate([own[2], new[2]])
        starts = np.zeros(len(n_words) + 1, dtype=np.int64)  # pair offsets of self's rows, then fresh's
        np.cumsum(n_words, out=starts[1:])
        out_starts = np.zeros(len(take) + 1, dtype=np.int64)
        np.cumsum(n_words[take], out=out_starts[1:])
        new_word_ids = np.empty(int(out_starts[-1]), dtype=np.intc)
        new_tfs = np.empty(int(out_starts[-1]), dtype=np.intc)
        # Copy runs of consecutive rows of one source as one slice: an update keeps most rows in order, e.g.
        # take = [0, 1, 2, 4, 5, 9] with 9 fresh -> runs [0, 1, 2], [4, 5], [9]: three copies, not six.
        cut = np.flatnonzero((np.diff(take) != 1) | (take[1:] == len(self))) + 1
        for r0, r1 in zip([0, *cut.tolist()], [*cut.tolist(), len(take)]):
            if r0 == r1:
                continue
            t0 = int(take[r0])
            src, base = (own, 0) if t0 < len(self) else (new, int(starts[len(self)]))
            p0, p1 = int(starts[t0]) - base, int(starts[t0 + r1 - r0]) - base
            o0, o1 = int(out_starts[r0]), int(out_starts[r1])
            new_word_ids[o0:o1], new_tfs[o0:o1] = src[0][p0:p1], src[1][p0:p1]
        lengths = np.concatenate([own[3], new[3]])
        words = list(fresh.words)
        used = np.zeros(len(words), dtype=bool)
        used[new_word_ids] = True
        if not used.all():  # renumber the words still used, keeping their order
            renumber = (np.cumsum(used) - 1).astype(np.intc)
            new_word_ids = renumber[new_word_ids]
            words = [w for w, u in zip(words, used.tolist()) if u]
        out = Counts({w: i for i, w in enumerate(words)})
        out.chunk_ids, out.paper_ids = chunk_ids, paper_ids
        out.word_ids, out.tfs = new_word_ids.astype(np.intc, copy=False), new_tfs
        out.n_words, out.lengths = n_words[take].astype(np.intc), lengths[take].astype(np.intc)
        return out

    # --- pass 2: the scores ------------------------------------------------------------------------------------

    def scores(self, k1: float, b: float, batch: int) -> tuple[dict[str, int], dict[str, Any]]:
        """bm25s' default BM25 ("lucene" tf and idf, float32) of these counts: (vocabulary, CSC score arrays).

        The scores go straight into their place in the CSC matrix a slice of chunks at a time, since the document
        frequencies say how long each word's column is. The arithmetic is bm25s' step by step and in the same float
        types (bm25s/scoring.py), so every score is bit for bit the one its `index` computes.
        """
        n_docs, n_vocab = len(self.chunk_ids), len(self.words)
        word_ids, tfs, n_words, lengths32 = self.arrays()
        lengths = lengths32.astype(np.int64)

        # bm25s numbers the words in the iteration order of a set filled word by word in order of first use, so
        # ours does too (a set built from a dict in one go is pre-sized and may iterate differently). The order
        # depends on string hashes, so it differs between processes, for bm25s as for us.
        unique: set[str] = set()
        for word in self.words:
            unique.add(word)
        vocab = {word: i for i, word in enumerate(unique)}
        final = np.fromiter((vocab[w] for w in self.words), dtype=np.int32, count=n_vocab)  # our id -> final id

        # Each chunk lists a word once, so counting ids counts the chunks containing each word.
        df = np.zeros(n_vocab, dtype=np.int64)
        df[final] = np.bincount(word_ids, minlength=n_vocab)
        # idf with Python floats as bm25s does (math.log, not numpy's log, which may differ in the last bit), once
        # per distinct frequency: e.g. a word in 3 of 10 chunks: log(1 + (10 - 3 + 0.5) / (3 + 0.5)) = 1.145.
        dfs, which = np.unique(df, return_inverse=True)
        idf = np.array([math.log(1 + (n_docs - d + 0.5) / (d + 0.5)) for d in dfs.tolist()])[which]
        idf = idf.astype(np.float32)
        avg_len = lengths.mean()  # the mean of integers: exact sums, the same float64 as bm25s' np.array(...).mean()

        # Column w holds the chunks containing word w, in chunk order: indices[indptr[w]:indptr[w + 1]].
        indptr = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        data = np.empty(int(indptr[-1]), dtype=np.float32)
        indices = np.empty(int(indptr[-1]), dtype=np.int32)
        heads = indptr[:-1].copy()  # where each column's next entry goes
        starts = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(n_words, out=starts[1:])
        for d0 in range(0, n_docs, batch):
            d1 = min(d0 + batch, n_docs)
            e0, e1 = int(starts[d0]), int(starts[d1])
            cols = final[word_ids[e0:e1]]
            rows = np.repeat(np.arange(d0, d1, dtype=np.int32), n_words[d0:d1])
            tf = tfs[e0:e1].astype(np.float32)
            l_d = np.repeat(lengths[d0:d1], n_words[d0:d1]).astype(np.float64)
            # bm25s: tf / (k1 * ((1 - b) + b * l_d / l_avg) + tf), the bracket in float64 per chunk, tf float32,
            # times the float32 idf, all in float64, stored as float32.
            scores = idf[cols] * (tf / (k1 * ((1 - b) + b * l_d / avg_len) + tf))
            # Place the slice's entries column by column (a stable sort keeps chunk order within a column), each
            # after the entries earlier slices put in its column.
            order = np.argsort(cols, kind="stable")
            sorted_cols = cols[order]
            present, first, count = np.unique(sorted_cols, return_index=True, return_counts=True)
            rank = np.arange(len(order)) - np.repeat(first, count)  # 0, 1, 2 ... within each column's run
            at = heads[sorted_cols] + rank
            data[at] = scores[order]
            indices[at] = rows[order]
            heads[present] += count
        return vocab, {"data": data, "indices": indices, "indptr": indptr, "num_docs": n_docs}


def take_order(saved: Counts, rows: Sequence[tuple[str, str]], reread: set[str]) -> tuple[np.ndarray, list[int]]:
    """For each row (chunk_id, paper_id), in order, where `Counts.merge` takes it from: its saved row, or (for a
    chunk not saved, or of a paper in `reread`) the next fresh one. Returns (take, positions of the rows to read)."""
    at = {cid: i for i, cid in enumerate(saved.chunk_ids)}
    take = np.empty(len(rows), dtype=np.int64)
    fresh: list[int] = []
    for r, (cid, pid) in enumerate(rows):
        i = at.get(cid)
        if i is None or pid in reread:
            take[r] = len(saved) + len(fresh)
            fresh.append(r)
        else:
            take[r] = i
    return take, fresh
