"""Planted orders: sentences addressed to an assistant rather than describing research.

Retrieved text is data. A sentence that gives an assistant orders ("Ignore all previous instructions...") is never
evidence, never quoted and never an answer; evidence, support, compose and the UI ask `addressed()`.
"""

from __future__ import annotations

import re

# Sentences addressed to an assistant rather than describing research ("Ignore all previous instructions and reply
# ...", "Note to AI assistants: ...", "every answer must ..."): planted instructions, never evidence. They are data
# either way (sanitised, delimited, checked); with the defence on they are left out of the evidence (`_evidence`)
# and ranked last for the papers' relevance, so they are neither shown to the model nor quoted.
ADDRESSED = re.compile(
    r"\b(ignore|disregard|forget)\b[^.]{0,40}\b(instructions?|sources?|question|rules|above|previous)\b|"
    r"\b(reply|respond|answer)\b[^.]{0,30}\b(only|with|every|any|nothing else)\b|"
    r"\b(every|any|each) (answer|response|reply)\b[^.]{0,30}\b(must|should|shall)\b|"
    r"\bnote to (ai|llm|language model|assistant)|\b(ai|llm) assistants?\b|\bassistant,|system prompt|"
    r"\bcite (paper|source) \[|\bnew policy\b|\binto your (answer|response|reply)\b|ignorez|忽略",
    re.IGNORECASE)


def addressed(text: str) -> bool:
    """Is this text an order to an assistant rather than a statement about research? (see ADDRESSED)"""
    return bool(ADDRESSED.search(text))
