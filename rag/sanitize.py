"""Retrieved text as inert data: what is shown to the model and quoted to the user can pose as nothing of ours.

Abstracts are third-party text. Before any of it goes into a prompt or an answer, control and zero-width
characters, chat-template tokens, prompt labels ("Question:"), `[n]` look-alikes, markdown images and links and
HTML tags are removed (their visible text stays), so an abstract can neither open a chat turn, close our sources
block, fake a citation nor make a client fetch something.
"""

from __future__ import annotations

import re

from .text import MARKER, clean

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
    text = MARKER.sub(lambda m: f"({m.group(1)})", text)
    return clean(text)
