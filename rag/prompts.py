"""Prompt templates: files under `prompts/`, loaded once and checked against the variables the code supplies.

A template whose `{variables}` differ from what the code fills in is refused at start-up (not at the first
question), naming the file and the difference. The version stamped on every answer is a hash of all templates, so
an eval report says exactly which wording produced it.

`example.md` is a worked exchange shown to the model before a question as a turn of its own (sources, question and
answer, the three parts separated by lines of `---`; several examples follow one another): a small model that
answered "[1]" alone, the example only described in the system prompt, is asked again with it
(`answer.worked_example`). An empty file shows none.
"""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from pathlib import Path

from .records import CANNOT_ANSWER, ConfigError

# file stem -> the variables the code supplies to it
EXPECTED: dict[str, frozenset[str]] = {
    "system": frozenset({"cannot_answer"}),
    "user": frozenset({"sources", "question"}),
    "summary": frozenset({"sources", "question"}),
    "example": frozenset(),
}
_PART = re.compile(r"^---[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Example:
    """A worked exchange: the sources and question as the user template shows them, and the answer."""

    sources: str
    question: str
    answer: str


@dataclass(frozen=True)
class Prompts:
    system: str  # already rendered: it has no per-question variables, so it is a fixed prefix
    user: str
    summary: str
    version: str
    examples: tuple[Example, ...] = ()

    def render(self, name: str, **values: str) -> str:
        template: str = getattr(self, name)
        return template.format(**values)


def _variables(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def load_prompts(folder: Path) -> Prompts:
    texts: dict[str, str] = {}
    digest = hashlib.sha256()
    for stem, expected in sorted(EXPECTED.items()):
        path = folder / f"{stem}.md"
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError as e:
            raise ConfigError(f"{path}: cannot read prompt template ({e.strerror or e})") from None
        try:
            found = _variables(text)
        except ValueError as e:
            raise ConfigError(f"{path}: malformed template ({e})") from None
        if found != expected:
            missing, extra = sorted(expected - found), sorted(found - expected)
            raise ConfigError(f"{path}: template variables do not match the code (missing {missing}, unknown {extra})")
        texts[stem] = text
        digest.update(stem.encode() + b"\0" + text.encode() + b"\0")
    return Prompts(
        system=texts["system"].format(cannot_answer=CANNOT_ANSWER),
        user=texts["user"],
        summary=texts["summary"],
        version=digest.hexdigest()[:10],
        examples=_examples(texts["example"], folder / "example.md"),
    )


def _examples(text: str, path: Path) -> tuple[Example, ...]:
    """The worked exchanges of `example.md`: sources, question and answer, separated by lines of `---`."""
    if not text:
        return ()
    parts = [p.strip() for p in _PART.split(text)]
    if len(parts) % 3 or not all(parts):
        raise ConfigError(f"{path}: an example is three non-empty parts (sources, question, answer) separated by "
                          f"lines of '---'; found {len(parts)} parts")
    return tuple(Example(*parts[i:i + 3]) for i in range(0, len(parts), 3))
