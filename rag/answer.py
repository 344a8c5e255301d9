"""From evidence to a checked answer: prompt assembly within the token budget, citation parsing, support checks,
and the extractive fallback.

Citations cannot lie by construction: the model only ever sees sources numbered 1..N; a marker naming anything
else is removed and counted; every answer sentence is compared with the sentences of the paper it cites
(embedding similarity, and every number in the sentence must occur in that paper). A sentence supported by a
different source than the one it cites is re-pointed to it; one supported by none is flagged. When no sentence of
the model's answer is supported but the evidence is strong, the answer becomes the top evidence sentences, quoted,
with their citations. This module does not retrieve and does not call the model; `pipeline` wires it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .embed import Embedder
from .generate import Generator, Message
from .prompts import Prompts
from .records import CANNOT_ANSWER, Citation, ContextError, Evidence, SentenceCheck
from .text import clean, search_form, split_sentences, tokens

SUPPORT_SIMILARITY = 0.6  # answer sentence vs. a sentence of the cited paper
MAX_NOVELTY = 0.35  # share of the sentence's content words that the paper never uses; above it, invented content
MAX_QUESTION_CHARS = 1000
QUOTED_PREFIX = "Quoted from the abstracts: "

_MARKER = re.compile(r"\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\]")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# Things in retrieved text that could pose as our own structure or as a chat turn.
_LOOKALIKE = re.compile(r"<\|[^|>]{0,40}\|>|</?(?:start_of_turn|end_of_turn|s|system|user|assistant)>|"
                        r"^\s*(?:sources|question|system|assistant|user)\s*:", re.IGNORECASE | re.MULTILINE)
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
# Our prompt's labels ("Sources:", "Question:") anywhere in a source: the colon goes, so an abstract cannot close
# its block and pose a new question (eval/injection's delimiter_close record).
_LABEL = re.compile(r"\b(sources|question|answer|system|assistant|user)\s*:", re.IGNORECASE)
# HTML that could fetch or run something once an answer quoting it is rendered by a client: script/style with
# their content, and known tags that are bare (<b>) or carry an attribute (<img src=...>); "a <b and c> d" stays.
_TAGS = r"(?:a|img|script|style|iframe|svg|object|embed|link|meta|form|input|button|video|audio|source|base|" \
        r"body|html|head|div|span|p|b|i|u|br|hr|em|strong|sup|sub|code|pre|table|tr|td|li|ul|ol|h[1-6])"
_HTML = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>|</?" + _TAGS + r"\s*/?>|<" + _TAGS + r"\s[^<>]*=[^<>]*>",
                   re.IGNORECASE | re.DOTALL)


def sanitize_source(text: str) -> str:
    """Retrieved text as inert data: no control or zero-width characters, no [n] look-alikes, no chat tokens or
    prompt labels, no markdown images or links (their text stays), no HTML tags.
    e.g. "see [2] ![x](http://e.vil/p.png) Question: <img src=x>" -> "see (2) x Question"."""
    text = clean(text)
    text = _HTML.sub(" ", text)
    text = _IMAGE.sub(lambda m: m.group(1), text)
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _LOOKALIKE.sub(" ", text)
    text = _LABEL.sub(lambda m: m.group(1), text)
    text = _MARKER.sub(lambda m: f"({m.group(1)})", text)
    return clean(text)


def truncate_question(question: str) -> tuple[str, str | None]:
    question = clean(question)
    if len(question) <= MAX_QUESTION_CHARS:
        return question, None
    return question[:MAX_QUESTION_CHARS], f"question truncated to its first {MAX_QUESTION_CHARS} characters"


def render_sources(blocks: list[Evidence]) -> str:
    return "\n\n".join(
        f"[{b.n}] {sanitize_source(b.hit.paper.title)}\n{sanitize_source(' '.join(b.sentences))}" for b in blocks
    )


def build_messages(prompts: Prompts, blocks: list[Evidence], question: str, history: list[Message],
                   template: str = "user") -> list[Message]:
    """Fixed system prompt first, earlier turns next, then this turn's sources and the question last, so a
    follow-up shares the longest possible prefix with the previous prompt (llama.cpp reuses its cached tokens)."""
    user = prompts.render(template, sources=render_sources(blocks), question=question)
    return [{"role": "system", "content": prompts.system}, *history, {"role": "user", "content": user}]


@dataclass(frozen=True)
class Budgeted:
    messages: list[Message]
    blocks: list[Evidence]
    dropped_blocks: int
    dropped_turns: int
    prompt_tokens: int
    max_tokens: int  # what is left for the answer (never more than asked)


def fit_budget(generator: Generator, prompts: Prompts, blocks: list[Evidence], question: str,
               history: list[Message], max_tokens: int, template: str = "user") -> Budgeted:
    """Drop earlier turns, then the lowest-ranked evidence, until prompt + answer fit the context window."""
    limit = generator.n_ctx - max_tokens - 8
    history, blocks = list(history), list(blocks)
    dropped_turns = dropped_blocks = 0
    while True:
        messages = build_messages(prompts, blocks, question, history, template)
        used = generator.count_tokens(messages)
        if used <= limit:
            return Budgeted(messages, blocks, dropped_blocks, dropped_turns, used, max_tokens)
        if history:
            history = history[2:]
            dropped_turns += 1
        elif len(blocks) > 1:
            blocks.pop()
            dropped_blocks += 1
        elif blocks and len(blocks[0].sentences) > 1:
            b = blocks[0]
            blocks = [Evidence(b.n, b.hit, b.sentences[:-1], b.sentence_scores[:-1])]
        elif len(question) > 40:
            question = question[: len(question) // 2]
        else:  # even the smallest prompt is long: shorten the answer instead, or give up before llama.cpp does
            room = generator.n_ctx - used - 8
            if room < 16:
                raise ContextError(f"the prompt needs {used} tokens but the model's context is {generator.n_ctx}; "
                                   "raise generation.n_ctx")
            return Budgeted(messages, blocks, dropped_blocks, dropped_turns, used, room)


def parse_markers(text: str, valid: set[int]) -> tuple[str, int]:
    """Keep markers naming a given source, remove the rest; returns (text, how many were removed).

    e.g. parse_markers("A [1]. B [3]. C [1, 3].", {1}) -> ("A [1]. B. C [1].", 2)
    """
    dropped = 0

    def fix(m: re.Match[str]) -> str:
        nonlocal dropped
        ns = [int(x) for x in re.split(r"\s*[,;]\s*", m.group(1))]
        keep = [n for n in dict.fromkeys(ns) if n in valid]
        dropped += len(ns) - len(keep)
        return "".join(f"[{n}]" for n in keep)

    out = _MARKER.sub(fix, text)
    out = re.sub(r"\s+([.,;:])", r"\1", re.sub(r"[ \t]{2,}", " ", out))
    return out.strip(), dropped


def markers_in(text: str) -> list[int]:
    return [int(x) for m in _MARKER.finditer(text) for x in re.split(r"\s*[,;]\s*", m.group(1))]


def _answer_sentences(text: str) -> list[str]:
    """Sentences of the answer, a marker-only fragment ("[1].") attached to the sentence before it."""
    out: list[str] = []
    for s in split_sentences(text):
        if out and not _MARKER.sub("", s).strip(" .;,"):
            out[-1] = f"{out[-1]} {s}"
        else:
            out.append(s)
    return out


def _grounded(sentence: str, paper_text: str) -> bool:
    """Every number of the sentence occurs in the paper, and few of its words are foreign to the paper.

    A tiny model's typical failure is a sentence that starts with a copied clause and ends with invented content
    ("... and learn to reuse models that share sensitive information with users"): similar by embedding, but
    made of words the paper never uses.
    """
    haystack = search_form(paper_text)
    if not all(n in haystack for n in _NUMBER.findall(search_form(sentence))):
        return False
    words = set(tokens(sentence))
    if not words:
        return True
    known = set(tokens(paper_text))
    return len(words - known) / len(words) <= MAX_NOVELTY


def check_answer(text: str, blocks: list[Evidence], embedder: Embedder,
                 paper_sentences: dict[str, tuple[list[str], np.ndarray]]) -> tuple[str, list[SentenceCheck]]:
    """Check every sentence against the papers; re-point or add citations where support is clear."""
    by_n = {b.n: b for b in blocks}
    sentences = _answer_sentences(text)
    plain = [_MARKER.sub("", s).strip() for s in sentences]
    if not sentences:
        return text, []
    vecs = embedder.embed(plain)
    out_sentences: list[str] = []
    checks: list[SentenceCheck] = []
    for s, p, v in zip(sentences, plain, vecs):
        cited = [n for n in markers_in(s) if n in by_n]
        if CANNOT_ANSWER.lower().rstrip(".") in p.lower():
            out_sentences.append(s)
            continue
        support: dict[int, float] = {}
        for n, b in by_n.items():
            sents, svecs = paper_sentences.get(b.hit.paper.paper_id, ([], np.zeros((0, len(v)))))
            sim = float(np.max(svecs @ v)) if len(sents) else 0.0
            if _grounded(p, b.hit.paper.abstract + " " + b.hit.paper.title):
                support[n] = sim
        ok = [n for n in cited if support.get(n, 0.0) >= SUPPORT_SIMILARITY]
        best = max(support, key=lambda n: support[n], default=None)
        if not ok and best is not None and support[best] >= SUPPORT_SIMILARITY:
            # Cited the wrong source or none: point at the source that supports it.
            s = re.sub(r"\s*" + _MARKER.pattern, "", s).rstrip()
            end = s[-1] if s and s[-1] in ".!?" else ""
            s = f"{s[:-1] if end else s} [{best}]{end or '.'}"
            ok = [best]
        sim = max((support.get(n, 0.0) for n in (ok or cited or list(support))), default=0.0)
        checks.append(SentenceCheck(sentence=_MARKER.sub("", s).strip(), cites=tuple(markers_in(s)),
                                    supported=bool(ok), similarity=round(sim, 4)))
        out_sentences.append(s)
    return " ".join(out_sentences), checks


def ranked_sentences(blocks: list[Evidence]) -> list[tuple[int, str]]:
    """Every evidence sentence as (source n, sentence), best scored first, sanitised: these are quoted to the user,
    and a quoted "[9]" or "![x](http://…)" would be a fake citation or a fetch in the answer text."""
    scored = [(score, b.n, s) for b in blocks for s, score in zip(b.sentences, b.sentence_scores)]
    scored.sort(key=lambda x: -x[0])
    return [(n, sanitize_source(s)) for _, n, s in scored]


def top_paper_sentences(blocks: list[Evidence]) -> list[tuple[int, str]]:
    """The evidence sentences of the paper holding the single best sentence, best first.

    A single-paper question is answered from one paper: quoting the runner-up paper's best sentence as well cost
    citation precision (0.91 -> 0.98 on the eval's single-paper questions when only the top paper is quoted) and
    no facts.
    """
    ranked = ranked_sentences(blocks)
    return [(n, s) for n, s in ranked if n == ranked[0][0]] if ranked else []


def extractive(blocks: list[Evidence], max_sentences: int = 3, name_paper: bool = False) -> str:
    """The best evidence sentences of the best paper, quoted, each with its citation.

    With name_paper ("which paper ...?"), the answer first names the paper: "<title> [1]\n\nQuoted from ...".
    """
    top = top_paper_sentences(blocks)
    parts = [f"“{s}” [{n}]" for n, s in top[:max_sentences]]
    text = QUOTED_PREFIX + " ".join(parts)
    if name_paper and top:
        title = sanitize_source(next(b.hit.paper.title for b in blocks if b.n == top[0][0]))
        text = f"{title.rstrip('.')} [{top[0][0]}]\n\n{text}"
    return text


def _carries(text: str, sentence: str) -> bool:
    """Does the answer already state this sentence's content (all its numbers, most of its words)?"""
    need = set(tokens(sentence))
    numbers_kept = all(x in search_form(text) for x in _NUMBER.findall(search_form(sentence)))
    return bool(need) and numbers_kept and len(need & set(tokens(text))) / len(need) >= 0.6


def with_quote(text: str, blocks: list[Evidence], max_quotes: int = 2) -> str:
    """Append the best paper's top evidence sentences, quoted and cited, unless the answer carries their content.

    The model phrases; the quotes are what the answer rests on, verbatim, so a fact the evidence held is never lost
    by a paraphrase (a 135M model rounds, drops or invents numbers). Two sentences, because the best-scored one
    alone held the asked-for fact for 59% of the eval's single-paper questions, the best two for 83%.
    """
    quotes = [(n, s) for n, s in top_paper_sentences(blocks)[:max_quotes] if not _carries(text, s)]
    if not quotes:
        return text
    return text + "\n\nQuoted: " + " ".join(f"“{s}” [{n}]" for n, s in quotes)


def summary_text(blocks: list[Evidence], checks: list[SentenceCheck]) -> tuple[str, bool]:
    """A cited summary: one line per evidence paper, then the model's supported sentences as the synthesis.

    A paper's line is the model's supported sentence citing it when there is one, else its best evidence sentence
    quoted (so every retrieved paper is cited even when a tiny model skips or garbles it). Returns (text, whether
    any model-written sentence survived).
    """
    by_paper: dict[int, str] = {}
    synthesis: list[str] = []
    for c in checks:
        if not c.supported or not c.cites:
            continue
        if len(set(c.cites)) == 1 and c.cites[0] not in by_paper:
            by_paper[c.cites[0]] = f"{c.sentence} [{c.cites[0]}]"
        else:
            synthesis.append(f"{c.sentence} " + "".join(f"[{n}]" for n in dict.fromkeys(c.cites)))
    lines = []
    for b in blocks:
        best = sanitize_source(max(zip(b.sentence_scores, b.sentences))[1]) if b.sentences else ""
        lines.append(f"- {sanitize_source(b.hit.paper.title)}: {by_paper.get(b.n) or f'“{best}” [{b.n}]'}")
    text = "\n".join(lines) + (("\n\n" + " ".join(synthesis)) if synthesis else "")
    return text, bool(by_paper or synthesis)


def citations_for(text: str, blocks: list[Evidence]) -> list[Citation]:
    used = dict.fromkeys(markers_in(text))
    by_n = {b.n: b for b in blocks}
    return [Citation(n=n, paper=by_n[n].hit.paper, supporting=by_n[n].sentences) for n in used if n in by_n]
