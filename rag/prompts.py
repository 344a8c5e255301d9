"""Prompt templates: files under `prompts/`, loaded once and checked against the variables the code supplies.

A template whose `{variables}` differ from what the code fills in is refused at start-up (not at the first
question), naming the file and the difference. The version stamped on every answer is a hash of all templates, so
an eval report says exactly which wording produced it.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from pathlib import Path

from .records import CANNOT_ANSWER, ConfigError

# file stem -> the variables the code supplies to it
EXPECTED: dict[str, frozenset[str]] = {
    "system": frozenset({"cannot_answer"}),
    "user": frozenset({"sources", "question"}),
    "summary": frozenset({"sources", "question"}),
}


@dataclass(frozen=True)
class Prompts:
    system: str  # already rendered: it has no per-question variables, so it is a fixed prefix
    user: str
    summary: str
    version: str

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
    )
