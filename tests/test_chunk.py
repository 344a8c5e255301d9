"""Chunking: every chunk fits the embedder, no text is lost, deterministic."""

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rag.chunk import approx_tokens, chunk_paper, embed_text
from rag.config import Chunking
from rag.parse import ParseReport, iter_papers, make_paper
from rag.text import split_sentences

SEEDS = Path(__file__).resolve().parent.parent / "seeds"


def _check(paper, cfg: Chunking) -> None:  # type: ignore[no-untyped-def]
    chunks = chunk_paper(paper, cfg, approx_tokens)
    assert chunks, "every paper has at least one chunk"
    for c in chunks:
        assert c.text.strip()
        assert approx_tokens(embed_text(paper.title, c.text)) <= cfg.max_tokens or not paper.title
        assert approx_tokens(c.text) <= cfg.max_tokens
    joined = " ".join(c.text for c in chunks)
    for s in split_sentences(paper.abstract):
        for word in s.split()[:3]:
            assert word[:10] in joined
    assert chunk_paper(paper, cfg, approx_tokens) == chunks


def test_seed_chunks_fit_and_overlap() -> None:
    cfg = Chunking(max_tokens=128, overlap_sentences=1)
    for paper in iter_papers([SEEDS], ParseReport()):
        _check(paper, cfg)
        chunks = chunk_paper(paper, cfg, approx_tokens)
        for a, b in zip(chunks, chunks[1:]):
            end = a.first_sentence + a.n_sentences
            assert b.first_sentence == max(end - 1, a.first_sentence + 1)  # one sentence shared when it can be


def test_megabyte_line_without_spaces_is_cut_within_limit() -> None:
    paper = make_paper("x" * 1_000_000 + ". A normal closing sentence.", "big.txt", 0)
    cfg = Chunking(max_tokens=64, overlap_sentences=0)
    chunks = chunk_paper(paper, cfg, approx_tokens)
    assert sum(len(c.text) for c in chunks) >= 1_000_000
    assert all(approx_tokens(c.text) <= 64 for c in chunks)


def test_a_long_word_of_punctuation_is_cut_within_budget() -> None:
    """Found by the property test below: 12 colons count 2 + 3 + 12 = 17 > 16 with the fake counter, though a cut
    by `budget - specials` characters assumed one piece per character at most."""
    paper = make_paper("::::::::::::", "h.txt", 0)
    chunks = chunk_paper(paper, Chunking(max_tokens=16, overlap_sentences=0), approx_tokens)
    assert "".join(c.text for c in chunks) == "::::::::::::"
    assert all(approx_tokens(c.text) <= 16 for c in chunks)


@settings(max_examples=150, deadline=None)
@given(st.text(min_size=1, max_size=3000), st.integers(min_value=16, max_value=256), st.integers(0, 3))
def test_chunker_properties_on_arbitrary_text(text: str, max_tokens: int, overlap: int) -> None:
    paper = make_paper(text, "h.txt", 0)
    if not paper.abstract:
        return
    cfg = Chunking(max_tokens=max_tokens, overlap_sentences=overlap)
    chunks = chunk_paper(paper, cfg, approx_tokens)
    assert chunks == chunk_paper(paper, cfg, approx_tokens)
    for c in chunks:
        assert c.text.strip()
        assert approx_tokens(c.text) <= max_tokens
