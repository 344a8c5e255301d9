"""From evidence to a prompt and back: prompt assembly within the token budget, citation markers, cited records.

Citations cannot lie by construction: the model only ever sees sources numbered 1..N, and a marker naming anything
else is removed and counted. Whether each sentence is supported is `support`'s job; what the user reads is
`compose`'s. This module does not retrieve and does not call the model; `pipeline` wires it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .generate import Generator, Message
from .prompts import Prompts
from .records import Citation, ContextError, Evidence
from .sanitize import sanitize_source
from .support import markers_in, source_header
from .text import MARKER, clean

__all__ = ["MARKER", "sanitize_source", "markers_in", "truncate_question", "render_sources", "build_messages",
           "fit_budget", "parse_markers", "citations_for", "MAX_QUESTION_CHARS"]

MAX_QUESTION_CHARS = 1000


def truncate_question(question: str) -> tuple[str, str | None]:
    question = clean(question)
    if len(question) <= MAX_QUESTION_CHARS:
        return question, None
    return question[:MAX_QUESTION_CHARS], f"question truncated to its first {MAX_QUESTION_CHARS} characters"


def render_sources(blocks: list[Evidence]) -> str:
    return "\n\n".join(
        f"{source_header(b)}\n{sanitize_source(' '.join(b.sentences))}" for b in blocks
    )


def build_messages(prompts: Prompts, blocks: list[Evidence], question: str, history: list[Message],
                   template: str = "user", examples: bool = False) -> list[Message]:
    """Fixed system prompt first, then (with `examples`) the worked example, for a question and not a summary,
    earlier turns next, then this turn's sources and the question last, so a follow-up shares the longest possible
    prefix with the previous prompt (llama.cpp reuses its cached tokens)."""
    user = prompts.render(template, sources=render_sources(blocks), question=question)
    shown: list[Message] = []
    for ex in prompts.examples if examples and template == "user" else ():
        shown += [{"role": "user", "content": prompts.render(template, sources=ex.sources, question=ex.question)},
                  {"role": "assistant", "content": ex.answer}]
    return [{"role": "system", "content": prompts.system}, *shown, *history, {"role": "user", "content": user}]


@dataclass(frozen=True)
class Budgeted:
    messages: list[Message]
    blocks: list[Evidence]
    dropped_blocks: int
    dropped_turns: int
    prompt_tokens: int
    max_tokens: int  # what is left for the answer (never more than asked)


def fit_budget(generator: Generator, prompts: Prompts, blocks: list[Evidence], question: str,
               history: list[Message], max_tokens: int, template: str = "user", examples: bool = False) -> Budgeted:
    """Drop earlier turns, then the lowest-ranked evidence, until prompt + answer fit the context window."""
    limit = generator.n_ctx - max_tokens - 8
    history, blocks = list(history), list(blocks)
    dropped_turns = dropped_blocks = 0
    while True:
        messages = build_messages(prompts, blocks, question, history, template, examples)
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

    out = MARKER.sub(fix, text)
    out = re.sub(r"\s+([.,;:])", r"\1", re.sub(r"[ \t]{2,}", " ", out))
    return out.strip(), dropped


def citations_for(text: str, blocks: list[Evidence]) -> list[Citation]:
    used = dict.fromkeys(markers_in(text))
    by_n = {b.n: b for b in blocks}
    return [Citation(n=n, paper=by_n[n].hit.paper, supporting=by_n[n].sentences) for n in used if n in by_n]
