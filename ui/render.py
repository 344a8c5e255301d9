"""Model output and paper records -> inert HTML for the Gradio components. Pure functions, no gradio import.

Everything the model writes is untrusted: it is HTML-escaped, markdown images are dropped (keeping their alt
text), markdown links keep only their text, and every remaining `[`, `]`, `://`, `www.` and `@` is written as an
HTML entity so the chat's markdown renderer cannot turn it into a link, a reference link or an autolink.
The only links left are the ones made here: `[n]` markers naming a real citation become
`<a class="cite" href="#cite-n">[n]</a>`, pointing at the paper card with id `cite-n` in the sources panel.
e.g. render_answer("See ![x](http://e.vil/p.png) <b>it</b> [1][9].", {1})
  -> 'See x &lt;b&gt;it&lt;/b&gt; <a class="cite" href="#cite-1">[1]</a>&#91;9&#93;.'

Paper cards come from our own catalog, but abstracts are third-party text too: escaped the same way, with the
answer's supporting sentences wrapped in <mark>. This module does not talk to the pipeline; app.py does.

The markup lives in `ui/templates/*.html.j2` (Jinja2, autoescaped: a plain string given to a template is escaped
there; HTML made here, such as `safe_text`'s, goes in as `Markup`). Only the token-level escaping above (entities,
citation links) is done in Python, on text already escaped.
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jinja2
from jinja2.ext import Extension
from markupsafe import Markup

from rag.answer import MARKER
from rag.orders import addressed, title_problem
from rag.records import Answer, Citation, Hit, Paper
from rag.text import split_sentences

_IMAGE = re.compile(r"!\[([^\]\n]{0,300})\]\([^)\n]{0,2000}\)")
_LINK = re.compile(r"\[([^\]\n]{0,300})\]\([^)\n]{0,2000}\)")
# Applied to escaped text: a marker we link, or a character the markdown renderer could make a link of.
_ESCAPED_TOKEN = re.compile(MARKER.pattern + r"|\[|\]|://|www\.|@", re.IGNORECASE)
# Between a flagged sentence's words: anything but a word, markers included; after it, its markers and full stop.
_GAP = r"(?:\W|" + MARKER.pattern + r")*?"
_TAIL = re.compile(r"(?:\s*" + MARKER.pattern + r")*[.!?]?")
_ENTITY = {"[": "&#91;", "]": "&#93;", "://": "&#58;//", "@": "&#64;"}
_WORD = re.compile(r"\w+")


class _OneLine(Extension):
    """Templates are written one element a line; the HTML they make has no line break or indentation of its own (in
    a chat message a markdown renderer would read them: a blank line ends an HTML block, four spaces start code).
    Only the template's source is joined, never the text it is given (an abstract keeps its own line breaks)."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        return re.sub(r"[ \t]*\n[ \t]*", "", source)


_TEMPLATES = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                                autoescape=True, undefined=jinja2.StrictUndefined, extensions=[_OneLine])
_CARDS: Any = _TEMPLATES.get_template("cards.html.j2").module  # its macros, as functions returning Markup


def _render(template: str, **context: Any) -> str:
    return str(_TEMPLATES.get_template(template).render(**context))


def _neutralise(escaped: str, valid: Collection[int]) -> str:
    def fix(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            ns = [int(x) for x in re.split(r"\s*[,;]\s*", m.group(1))]
            if ns and all(n in valid for n in ns):
                return "".join(f'<a class="cite" href="#cite-{n}">[{n}]</a>' for n in ns)
            return f"&#91;{m.group(1)}&#93;"
        token = m.group(0)
        if token.lower() == "www.":
            return token[:3] + "&#46;"
        return _ENTITY[token]

    return _ESCAPED_TOKEN.sub(fix, escaped)


def safe_text(text: str, valid: Collection[int] = ()) -> str:
    """Untrusted text -> HTML safe for a markdown renderer; `[n]` for n in `valid` becomes a citation link."""
    text = _IMAGE.sub(lambda m: m.group(1), text)
    text = _LINK.sub(lambda m: m.group(1), text)
    return _neutralise(html.escape(text, quote=True), valid)


def _find(sentence: str, text: str, start: int = 0) -> tuple[int, int] | None:
    """Span of `sentence` in `text`, exact or ignoring punctuation, spacing and [n] markers in between."""
    sentence = sentence.strip()
    if not sentence:
        return None
    exact = re.compile(r"(?<!\w)" + re.escape(sentence) + r"(?!\w)").search(text, start)
    if exact:
        return exact.start(), exact.end()
    words = _WORD.findall(MARKER.sub(" ", sentence))
    if not words:
        return None
    m = re.compile(r"(?<!\w)" + _GAP.join(re.escape(w) for w in words) + r"(?!\w)[.!?%)”’\"']*").search(text, start)
    return (m.start(), m.end()) if m else None


def _spans(text: str, sentences: Iterable[str]) -> list[tuple[int, int]]:
    """Non-overlapping, sorted spans of the sentences found in text. A fragment without a word of two letters
    ("1.") is skipped: it would match inside a number or a marker."""
    wordy = [x for x in sentences if re.search(r"[^\W\d_]{2}", x)]
    found = sorted(s for s in (_find(x, text) for x in wordy) if s and not text[:s[0]].endswith("["))
    out: list[tuple[int, int]] = []
    for a, b in found:
        if not out or a >= out[-1][1]:
            out.append((a, b))
    return out


def render_stream(text: str) -> str:
    """Text streamed so far: escaped and neutralised, markers left as plain text until the answer is checked."""
    return safe_text(text)


def render_answer(text: str, valid: Collection[int], unsupported: Sequence[str] = ()) -> str:
    """The checked answer: citation links for valid markers, unsupported sentences visibly flagged."""
    parts: list[str] = []
    at = 0
    for a, b in _spans(text, unsupported):
        # carry the sentence's own trailing markers and full stop into the flagged span
        tail = _TAIL.match(text, b)
        b = tail.end() if tail else b
        parts.append(safe_text(text[at:a], valid))
        parts.append(_render("unsupported.html.j2", sentence=Markup(safe_text(text[a:b], valid))))
        at = b
    parts.append(safe_text(text[at:], valid))
    return "".join(parts)


def small_print(answer: Answer) -> str:
    """Model, latency, retrieval time, the standalone question a follow-up was searched as, the earlier papers it
    was resolved to, and the evidence behind each citation (collapsed: the supporting sentences of every cited
    paper, escaped, under the paper's [n] and title); under a summary, the papers on its topic past those it lists
    (collapsed: "6 more papers on this topic", each with its best sentence and its id for the Library)."""
    t = answer.timings
    stats = [answer.model or "model"]
    if "first_token_ms" in t:
        stats.append(f"first token {t['first_token_ms']:.0f} ms")
    if "total_ms" in t:
        stats.append(f"total {t['total_ms']:.0f} ms")
    if t.get("tokens_per_s"):
        stats.append(f"{t['tokens_per_s']:.1f} tok/s")
    if "retrieve_ms" in t:
        stats.append(f"retrieval {t['retrieve_ms']:.0f} ms")
    searched = answer.searched if answer.searched and answer.searched != answer.question else ""
    titles = {c.paper.paper_id: c.paper.title for c in answer.citations}
    return _render("small_print.html.j2", stats=stats, extractive=answer.mode == "extractive" and answer.drafted,
                   searched=Markup(safe_text(searched)) if searched else "",
                   focus=[titles.get(pid, pid) for pid in answer.focus],
                   notices=[Markup(safe_text(n)) for n in answer.notices], citations=answer.citations,
                   more=answer.more)


def safe_url(url: str) -> str | None:
    """An http(s) link from an abstract, escaped for an attribute; anything else (javascript:, data:) -> None."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if parts.scheme.lower() not in {"http", "https"} or not parts.netloc:
        return None
    return html.escape(url.strip(), quote=True)


ADDRESSED_NOTE = "addressed to an assistant: shown as data, never used as evidence"


def highlight(abstract: str, supporting: Sequence[str]) -> str:
    """The abstract, escaped, with the supporting sentences in <mark> and the sentences addressed to an assistant
    (planted orders, rag.orders.addressed) marked as such: the card shows them, the answer never uses them."""
    supported = _spans(abstract, supporting)
    flagged = [(a, b) for a, b in _spans(abstract, [x for x in split_sentences(abstract) if addressed(x)])
               if not any(a < d and c < b for c, d in supported)]
    parts: list[str] = []
    at = 0
    for a, b in sorted(supported + flagged):
        parts.append(html.escape(abstract[at:a]))
        inner = html.escape(abstract[a:b])
        parts.append(f"<mark>{inner}</mark>" if (a, b) in supported else
                     f'<span class="addressed" title="{ADDRESSED_NOTE}">{inner}</span>')
        at = b
    parts.append(html.escape(abstract[at:]))
    return "".join(parts)


WITHHELD_NOTE = "the source's title, not shown as a title"


def paper_card(paper: Paper, n: int | None = None, supporting: Sequence[str] = (), extra: str = "",
               open_abstract: bool = True, rank: int | None = None) -> str:
    """One paper: title, venue, where it came from, links, the abstract (supporting sentences highlighted).
    `extra` is HTML put under the title (a search hit's scores and passages).

    Only the record's own `url` is a link. URLs written in the abstract (a code repository, or a planted
    "http://evil.example/...") are listed as plain text: whoever wrote the abstract chose them, so the card does not
    make them a click away. A title the parser withheld (an order, a formula, a URL) is shown struck through, as data.
    """
    own = safe_url(paper.url) if paper.url else None
    mentioned = [Markup(u) for u in (safe_url(x) for x in paper.links if x != paper.url) if u]
    return str(_CARDS.paper_card(paper, Markup(highlight(paper.abstract, supporting)), Markup(own) if own else "",
                                 mentioned, extra=Markup(extra), n=n, rank=rank, open_abstract=open_abstract,
                                 withheld_note=f"{WITHHELD_NOTE} ({title_problem(paper.withheld_title)})"
                                 if paper.withheld_title else ""))


def citation_cards(citations: Sequence[Citation]) -> str:
    return "".join(paper_card(c.paper, n=c.n, supporting=c.supporting) for c in citations)


def sources_panel(answer: Answer) -> str:
    """Cited papers as cards (ids cite-n), then the retrieved-but-not-cited ones, collapsed."""
    if answer.abstained:
        closest = "".join(paper_card(h.paper, extra=_CARDS.score_line(h), open_abstract=False) for h in answer.hits)
        return _render("sources_panel.html.j2", abstained=True, closest=Markup(closest))
    cited = {c.paper.paper_id for c in answer.citations}
    rest = [h for h in answer.hits if h.paper.paper_id not in cited]
    return _render("sources_panel.html.j2", abstained=False, cards=Markup(citation_cards(answer.citations)),
                   rest=rest)


def search_results(hits: Sequence[Hit], timings: dict[str, float] | None = None) -> str:
    """The Search tab: ranked papers with scores, why they matched, and the matching passages."""
    cards = [Markup(paper_card(h.paper, extra=_render("passages.html.j2", hit=h), open_abstract=False, rank=i))
             for i, h in enumerate(hits, 1)]
    return _render("search_results.html.j2", cards=cards, retrieve_ms=(timings or {}).get("retrieve_ms"))


def message(text: str, kind: str = "notice") -> str:
    """A plain notice or error box (text is escaped)."""
    return _render("message.html.j2", text=text, kind=kind)


def hits_json(hits: Sequence[Hit]) -> list[dict[str, Any]]:
    """Hits as plain JSON for API clients."""
    return [
        {"rank": i, "paper_id": h.paper.paper_id, "title": h.paper.title, "venue": h.paper.venue,
         "source": h.paper.source, "position": h.paper.position, "score": round(h.score, 6),
         "similarity": round(h.best_similarity, 4), "why": h.why, "links": list(h.paper.links),
         "passages": [{"text": p.text, "score": round(p.score, 4)} for p in h.passages]}
        for i, h in enumerate(hits, 1)
    ]


CSS = """
.paper-card { border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 8px 10px; margin: 6px 0; }
.paper-card:target, .paper-card.flash { outline: 2px solid var(--color-accent); }
.card-title { font-weight: 600; }
.card-meta, .card-score, .smallprint { font-size: 0.8em; opacity: 0.75; }
.smallprint { margin-top: 6px; }
.card-abstract { font-size: 0.9em; line-height: 1.45; }
.card-abstract mark { background: #fde68a; color: inherit; }
.card-abstract .addressed { text-decoration: line-through; opacity: 0.6; }
.unsupported { text-decoration: underline wavy #dc2626; }
.unsupported-flag { color: #dc2626; font-size: 0.7em; margin-left: 2px; }
.abstain { font-weight: 600; padding: 6px 0; }
.error { color: #b91c1c; font-weight: 600; }
a.cite { text-decoration: none; font-weight: 600; }
.passage { margin: 4px 0 4px 8px; font-size: 0.85em; }
"""

# Citation links scroll to their card in the sources panel (which sits in its own scroll box) and flash it.
HEAD = """<script>
document.addEventListener("click", function (e) {
  var a = e.target && e.target.closest ? e.target.closest('a[href^="#cite-"]') : null;
  if (!a) return;
  var card = document.getElementById(a.getAttribute("href").slice(1));
  if (!card) return;
  e.preventDefault();
  card.scrollIntoView({block: "start"});
  card.classList.add("flash");
  setTimeout(function () { card.classList.remove("flash"); }, 1500);
}, true);
</script>"""
