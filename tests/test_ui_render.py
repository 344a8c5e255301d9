"""ui.render: model output and abstracts become inert HTML; only our own [n] citation links survive. Fast, no models."""

from __future__ import annotations

import re

import pytest

from rag.records import Answer, Citation, Hit, Paper, SentenceCheck
from ui import render as R

PAPER = Paper(paper_id="p1", title="PrivGate <b>gating</b>", venue="ICML 2026 Papers", source="000_x.txt",
              position=12, abstract="We study leakage. PrivGate cuts privacy leakage by 62.6%. Code is public.",
              raw="", links=("https://github.com/x/privgate", "javascript:alert(1)"), url="https://github.com/x/privgate")


def _tags(html: str) -> set[str]:
    return {t.lower() for t in re.findall(r"<\s*([a-zA-Z][\w-]*)", html)}


@pytest.mark.parametrize("evil", [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "<iframe src='http://evil/'></iframe>",
    '<a href="javascript:alert(1)">x</a>',
])
def test_raw_html_is_escaped(evil: str) -> None:
    out = R.render_answer(f"Answer {evil} end [1].", {1})
    assert _tags(out) <= {"a"}  # only our citation link is a tag
    assert "&lt;" in out
    assert "onerror=" not in out.replace("onerror=&quot;", "")  # survives only as escaped text


def test_markdown_image_is_stripped_keeping_alt_text() -> None:
    out = R.render_answer("See ![x](http://evil/x.png) here.", set())
    assert "evil" not in out and "![" not in out and "(http" not in out
    assert "See x here." == out


def test_markdown_links_keep_only_their_text() -> None:
    out = R.render_answer("Click [a](javascript:alert(1)) or [b](http://evil/) or [c][ref].\n\n[ref]: http://evil",
                          set())
    assert "javascript" not in out.lower().split("alert")[0] or "href" not in out
    assert "href" not in out
    assert "](" not in out
    # the remaining brackets cannot form a reference link: they are entities
    assert "[" not in out and "]" not in out


def test_autolinks_are_neutralised() -> None:
    out = R.safe_text("visit http://evil.example/x or www.evil.example or mail me@evil.example or <http://evil>")
    assert "://" not in out and "www." not in out and "@" not in out and "<" not in out
    assert "http&#58;//evil.example/x" in out


def test_markers_link_only_valid_citations() -> None:
    out = R.render_answer("A [1]. B [2]. C [7]. D [1, 2].", {1, 2})
    assert out.count('href="#cite-1"') == 2 and out.count('href="#cite-2"') == 2
    assert "#cite-7" not in out and "&#91;7&#93;" in out
    # a marker group naming any unknown source stays text as a whole
    assert 'href="#cite-3"' not in R.render_answer("E [1, 3].", {1})


def test_streamed_text_has_no_links_yet() -> None:
    out = R.render_stream("PrivGate cuts leakage [1] <b>")
    assert "<a" not in out and "&lt;b&gt;" in out and "&#91;1&#93;" in out


def test_unsupported_sentences_are_flagged() -> None:
    text = "PrivGate cuts leakage by 62.6% [1]. It also cures cancer [1]."
    out = R.render_answer(text, {1}, ["It also cures cancer."])
    assert out.count('class="unsupported"') == 1
    flagged = out.split('class="unsupported"')[1]
    assert flagged.index("cures cancer") < flagged.index("⚠ unsupported")
    assert out.index("62.6%") < out.index('class="unsupported"')


def test_fragments_never_flag_inside_markers_or_words() -> None:
    text = "Quoted: “It cut leakage by 62.1.” [1] and more leakage [2]."
    assert "unsupported" not in R.render_answer(text, {1, 2}, ["1.", "[1]", "age"])
    assert R.render_answer(text, {1, 2}, ["and more leakage ."]).count('class="unsupported"') == 1


def test_paper_card_escapes_and_highlights() -> None:
    card = R.paper_card(PAPER, n=1, supporting=["PrivGate cuts privacy leakage by 62.6%."])
    assert 'id="cite-1"' in card
    assert "<mark>PrivGate cuts privacy leakage by 62.6%.</mark>" in card
    assert "&lt;b&gt;gating&lt;/b&gt;" in card
    assert 'href="https://github.com/x/privgate"' in card and "javascript:" not in card
    assert "000_x.txt #12" in card


def test_only_the_records_own_url_is_a_link_on_a_card() -> None:
    """A URL written in an abstract (a planted "http://evil.example/...") is listed as text, never a link; the
    record's own url field stays a link. Parsed for real, as ingest makes the record."""
    from rag.parse import make_paper

    paper = make_paper("PlumeNet forecasts smoke plumes from satellite images with a video transformer. It cuts the "
                       "error by 12%. See ![chart](http://evil.example/leak.png) and http://evil.example/docs for "
                       "details. Code: https://github.com/x/plumenet.", "p.jsonl", 0, title="PlumeNet",
                       url="https://example.org/plumenet")
    assert paper.url == "https://example.org/plumenet" and "http://evil.example/docs" in paper.links
    card = R.paper_card(paper, n=1)
    hrefs = re.findall(r'href="([^"]*)"', card)
    assert hrefs == ["https://example.org/plumenet"]
    assert '<span class="mentioned" title="written in the abstract; not a link">http://evil.example/docs</span>' in card
    assert "https://github.com/x/plumenet" in card and "evil.example" not in "".join(hrefs)
    # a record without a url of its own (the seeds): every link is text
    bare = make_paper("PlumeNet forecasts smoke plumes. Code: https://github.com/x/plumenet.", "p.txt", 0)
    assert "href=" not in R.paper_card(bare) and bare.has_code


def test_a_withheld_title_is_shown_as_data_never_as_a_title_or_a_link() -> None:
    from rag.parse import make_paper

    paper = make_paper("MeshFix repairs non-manifold meshes in one pass. It makes 97.3% of scans watertight.",
                       "m.csv", 0, title='=HYPERLINK("http://csv.evil.example/x","MeshFix")')
    card = R.paper_card(paper, n=1)
    title = re.search(r'<div class="card-title">(.*?)</div>', card)
    assert title and "HYPERLINK" not in title.group(1) and "MeshFix repairs" in title.group(1)
    assert "title as given: <span class=\"addressed\"" in card and "a spreadsheet formula" in card
    assert "href=" not in card and "<a" not in card


def test_highlight_finds_sentences_despite_spacing() -> None:
    out = R.highlight("One  sentence\nhere. Two.", ["One sentence here."])
    assert out.startswith("<mark>One  sentence\nhere.</mark>")


def _answer(**kw: object) -> Answer:
    base: dict[str, object] = dict(question="q", text="PrivGate cuts leakage by 62.6% [1].", citations=(),
                                   hits=(Hit(PAPER, 0.03, best_similarity=0.7),), abstained=False,
                                   timings={"first_token_ms": 812.0, "total_ms": 2400.0, "tokens_per_s": 31.5,
                                            "retrieve_ms": 45.0},
                                   model="SmolLM2.gguf", settings_fingerprint="abc", searched="q")
    base.update(kw)
    return Answer(**base)  # type: ignore[arg-type]


def test_sources_panel_cards_and_uncited() -> None:
    other = Paper(paper_id="p2", title="Other", venue="V", source="003_y.txt", position=1, abstract="Else.", raw="")
    ans = _answer(citations=(Citation(1, PAPER, ("PrivGate cuts privacy leakage by 62.6%.",)),),
                  hits=(Hit(PAPER, 0.03), Hit(other, 0.02, why="dense #2")))
    panel = R.sources_panel(ans)
    assert 'id="cite-1"' in panel and "<mark>" in panel
    assert "<details><summary>Retrieved but not cited (1)</summary>" in panel and "dense #2" in panel


def test_abstained_panel_shows_closest_papers() -> None:
    panel = R.sources_panel(_answer(abstained=True, text="I cannot answer this from these abstracts.",
                                    mode="abstained"))
    assert "Cannot answer from these abstracts" in panel and "PrivGate" in panel and "cite-" not in panel


def test_small_print() -> None:
    sp = R.small_print(_answer(question="and how?", searched="and how? (previous question: <x>)",
                               checks=(SentenceCheck("s", (1,), False, 0.2),)))
    assert "SmolLM2.gguf" in sp and "first token 812 ms" in sp and "31.5 tok/s" in sp and "retrieval 45 ms" in sp
    assert "searched: and how? (previous question: &lt;x&gt;)" in sp
    assert "searched:" not in R.small_print(_answer())


def test_safe_url() -> None:
    assert R.safe_url("https://x.org/a?b=1&c=2") == "https://x.org/a?b=1&amp;c=2"
    for bad in ("javascript:alert(1)", "data:text/html,x", "//evil", "http:/x", " vbscript:x"):
        assert R.safe_url(bad) is None


def test_evaluation_tab_reads_the_latest_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json
    import os

    from ui import evaluation

    assert evaluation.load(tmp_path)[0].startswith("No evaluation run yet")
    old, new = tmp_path / "old", tmp_path / "new"
    for run, kind in ((old, "full"), (new, "retrieval-only")):
        run.mkdir()
        (run / "summary.json").write_text(json.dumps({"kind": kind}))
        (run / "report.md").write_text(f"# {run.name}\n![plot](x.png)\n")
    os.utime(old / "summary.json", (1, 1))
    (old / "questions.jsonl").write_text(json.dumps({
        "id": "f001", "kind": "factoid", "question": "Q?", "answer": "A [1]", "citations": [{"n": 1, "paper_id": "ab"}],
        "metrics": {"correct": 1.0}}) + "\n")
    assert evaluation.latest_run(tmp_path) == old  # a full run wins over a newer retrieval-only one
    summary, comparison, rows, *images = evaluation.load(tmp_path)
    assert "# old" in summary and "![plot]" not in summary
    assert rows == [["f001", "factoid", "Q?", "A [1]", "1:ab", "pass"]]
    assert "No model comparison" in comparison and images == [None] * 4


def test_evidence_is_collapsed_under_the_answer_and_escaped() -> None:
    evil = "PrivGate cuts leakage <img src=x onerror=alert(1)> by 62.6%."
    sp = R.small_print(_answer(citations=(Citation(1, PAPER, (evil,)),), focus=(PAPER.paper_id,),
                               searched="and its gains? (about: PrivGate)"))
    assert '<details class="evidence"><summary>Evidence</summary>' in sp
    assert "&lt;img src=x onerror=alert(1)&gt;" in sp and "<img" not in sp
    assert f"about the earlier cited paper: {R.html.escape(PAPER.title)}" in sp
    assert "Evidence" not in R.small_print(_answer())  # nothing cited, nothing to show


def test_retrieved_text_is_escaped_in_every_template() -> None:
    """Titles, venues, file names, abstracts, passages and match reasons are third-party text: the templates escape
    them (autoescape), so a `<script>` in any of them reaches the page as text."""
    from rag.records import Passage

    evil = "<script>alert(1)</script>"
    paper = Paper(paper_id="e1", title=f"Title {evil}", venue=f"Venue {evil}", source=f"{evil}.txt", position=1,
                  abstract=f"Evil abstract. {evil} It cuts leakage.", raw="", links=("https://x.org/a?b=<s>",),
                  url="https://x.org/a?b=<s>")
    hit = Hit(paper, 0.5, best_similarity=0.6, why=f"dense {evil}", passages=(Passage("c", f"passage {evil}", 0.4),))
    cited = _answer(citations=(Citation(1, paper, (f"Evil abstract. {evil}",)),), hits=(hit,), focus=("e1",),
                    model=f"m {evil}", notices=(f"note {evil}",), searched=f"s {evil}")
    rendered = [R.paper_card(paper, n=1, supporting=["It cuts leakage."]), R.sources_panel(cited),
                R.sources_panel(_answer(abstained=True, hits=(hit,))), R.search_results([hit], {"retrieve_ms": 3.0}),
                R.small_print(cited), R.message(evil, kind=evil)]
    for html in rendered:
        assert "<script" not in html and "&lt;script&gt;" in html, html
        assert "\n" not in html  # the templates' own line breaks never reach a markdown renderer
    assert 'href="https://x.org/a?b=&lt;s&gt;"' in rendered[0]
