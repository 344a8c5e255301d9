"""The glossary: plain words read as the field's terms (rag/glossary.py), searched at their weight (rag/lexical.py),
and a paper described in plain words found first by the real embedder, BM25 and Chroma (rag/retrieve.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_retrieve import _toy_index

from rag.config import load as load_settings
from rag.glossary import BUILTIN, load_glossary
from rag.records import ConfigError
from rag.retrieve import Retriever


def test_the_builtin_glossary_loads_and_reads_plain_words_as_field_terms() -> None:
    g = load_glossary("builtin")
    assert len(g.entries) > 50
    q = "Which paper shows hidden causes can be pinned down without labels along perpendicular directions?"
    assert set(g.expand(q)) == {"latent", "unsupervised", "factors", "identifiability", "identifiable", "orthogonal"}
    # Whole words only, any case, an optional plural, a phrase across a hyphen or a space.
    assert g.expand("Pictures of cats") == ("image", "visual")
    assert g.expand("picture-and-text search") == ("image", "visual")
    assert g.expand("a picturesque view") == ()
    assert g.expand("each new category") == g.expand("new categories") == ("novel", "classes", "incremental")
    assert g.expand("a friend's network") == ("social",)
    assert g.expand("made up facts") == g.expand("made-up facts") == ("hallucination",)
    # A term the question already uses is not added twice; `known` keeps only what the index writes.
    assert g.expand("hidden latent factors") == ()
    assert g.expand("hidden causes", known=lambda t: t != "factors") == ("latent",)
    assert load_glossary("off").expand(q) == ()
    # Words the question denies are not its topic; a hyphenated term is added whole, not its parts.
    assert g.expand("traced without looking inside the model") == ()
    assert g.expand("a way to look inside the model") == ("interpretability", "probing")
    assert g.expand("trained with no annotations") == ("unsupervised", "self-supervised")


def test_a_glossary_of_ones_own_is_checked_line_by_line(tmp_path: Path) -> None:
    own = tmp_path / "bio.txt"
    own.write_text("# biology\nheart attack => myocardial infarction\n\nkidney => renal\n", encoding="utf-8")
    assert load_glossary(str(own)).expand("Kidneys after a heart attack?") == ("myocardial", "infarction", "renal")
    bad = tmp_path / "bad.txt"
    bad.write_text("kidney => renal\nliver hepatic\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.txt, line 2: expected 'plain words => field terms'"):
        load_glossary(str(bad))
    with pytest.raises(ConfigError, match="cannot read the glossary"):
        load_glossary(str(tmp_path / "missing.txt"))
    # "builtin" is the bundled file, read once however it is named.
    assert load_glossary("builtin") is load_glossary(str(BUILTIN))


def test_extra_words_score_their_weight_in_bm25_and_in_its_ceiling() -> None:
    index = _toy_index()
    for q, extra in (("w1", ["burst"]), ("w1 w2", ["solo", "w3"]), ("absent", ["w4"]), ("w5", ["absent"])):
        base = {c: s for c, _, s in index.search(q, len(index))}
        alone = {c: s for c, _, s in index.search(" ".join(extra), len(index))}
        both = {c: s for c, _, s in index.search(q, len(index), extra=extra, extra_weight=0.5)}
        assert set(both) == set(base) | set(alone), q
        for chunk, score in both.items():
            assert score == pytest.approx(base.get(chunk, 0.0) + 0.5 * alone.get(chunk, 0.0), rel=1e-5), (q, chunk)
        assert index.ceiling(q, extra, 0.5) == pytest.approx(index.ceiling(q) + 0.5 * index.ceiling(" ".join(extra)))
        # Weight 0: the extra words change nothing.
        assert index.search(q, len(index), extra=extra, extra_weight=0.0) == index.search(q, len(index))
    assert index.has("burst") and not index.has("absent")


@pytest.mark.slow
def test_a_paper_described_in_plain_words_is_found_first_through_the_glossary(real_assistant) -> None:  # type: ignore[no-untyped-def]
    r = real_assistant.retriever
    off = Retriever(r.embedder, r.store, r.lexical, r.catalog, r.settings.model_copy(update={"glossary": "off"}))
    q = ("Is there work showing that the hidden causes of observations can be pinned down without labels, as long as "
         "they act at right angles to each other?")
    on_hits, off_hits = r.search(q).hits, off.search(q).hits
    found = on_hits[0]
    assert found.paper.title.startswith("This paper explores unsupervised disentangled")
    assert "read as: latent" in found.why
    assert off_hits[0].paper.paper_id != found.paper.paper_id  # the same search without the glossary misses it
    # The settings name the glossary; "off" is a setting, not a file.
    assert load_settings(flags={"retrieval.glossary": "off"}).retrieval.glossary == "off"
