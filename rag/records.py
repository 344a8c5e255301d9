"""Plain frozen records passed between modules, and the project's exceptions.

Every module speaks in these types: ingest makes `Paper`s, chunk makes `Chunk`s, the retriever returns `Hit`s, the
answerer returns an `Answer`. No third-party shapes (Chroma results, OpenAI-style dicts) cross a module boundary.
This module deliberately holds no logic beyond serialisation helpers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# The one "cannot answer" sentence, shared by the prompt, the no-evidence short circuit, the UI and the tests.
CANNOT_ANSWER = "I cannot answer this from these abstracts."


@dataclass(frozen=True)
class Paper:
    """One abstract, as parsed from a source file."""

    paper_id: str  # stable: derived from the abstract's normalised text, unchanged across re-ingest
    title: str  # short display title: the source's own, else derived from the abstract; never an order or a URL
    venue: str  # e.g. "ICML 2026 Papers", the seed file's title line
    source: str  # file name the abstract came from (not a full path)
    position: int  # 0-based index of the abstract within its source file
    abstract: str  # readable text: LaTeX markup rendered for display; a line break only where a sentence ends
    raw: str  # the abstract exactly as found, used for search
    links: tuple[str, ...] = ()  # URLs found in the abstract (code repositories, project pages), then `url`
    authors: str = ""
    year: int | None = None
    url: str = ""  # the record's own link (its url field, or its arXiv id): the one link a card makes clickable
    # The title the source gave, when it is not shown because it is an order to an assistant, a spreadsheet formula
    # or a URL (rag.orders.title_problem); `title` is then derived from the abstract. Kept, never displayed as a title.
    withheld_title: str = ""

    @property
    def has_code(self) -> bool:
        return bool(self.links)

    @property
    def title_is_opening(self) -> bool:
        """The title is only the abstract's opening words (derived where the source gave none): it names nothing."""
        return self.abstract.startswith(self.title.rstrip("…").strip())

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["links"] = list(self.links)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Paper:
        return cls(**{**d, "links": tuple(d.get("links", ()))})


@dataclass(frozen=True)
class Chunk:
    """A window of consecutive sentences of one paper, small enough for the embedder."""

    chunk_id: str  # f"{paper_id}:{index}"
    paper_id: str
    index: int
    text: str
    first_sentence: int  # index of the window's first sentence within the paper
    n_sentences: int


@dataclass(frozen=True)
class Passage:
    """A matched chunk of a paper and how it scored."""

    chunk_id: str
    text: str
    score: float


@dataclass(frozen=True)
class Hit:
    """One retrieved paper with its score, the passages that matched and why."""

    paper: Paper
    score: float
    passages: tuple[Passage, ...] = ()
    why: str = ""  # e.g. "dense #1, bm25 #3; terms: privgate, leakage"
    dense_rank: int | None = None
    bm25_rank: int | None = None
    best_similarity: float = 0.0  # best cosine similarity of a chunk of this paper to the question


@dataclass(frozen=True)
class Evidence:
    """Sentences of one retrieved paper chosen to support an answer, numbered as the model sees them."""

    n: int  # the [n] the model cites
    hit: Hit
    sentences: tuple[str, ...]
    sentence_scores: tuple[float, ...] = ()


@dataclass(frozen=True)
class Citation:
    """An [n] marker of the answer mapped to the paper it names."""

    n: int
    paper: Paper
    supporting: tuple[str, ...] = ()  # evidence sentences of that paper, highlighted in the UI

    def to_dict(self) -> dict[str, Any]:
        p = self.paper
        return {
            "n": self.n,
            "paper_id": p.paper_id,
            "title": p.title,
            "venue": p.venue,
            "source": p.source,
            "position": p.position,
            "links": list(p.links),
            "abstract": p.abstract,
            "supporting": list(self.supporting),
        }


@dataclass(frozen=True)
class SentenceCheck:
    """Whether one sentence of the answer is supported by the papers it cites."""

    sentence: str
    cites: tuple[int, ...]
    supported: bool
    similarity: float
    note: str = ""  # why it is not supported, e.g. "restates the question", "a number the paper does not give"
    stated: bool = False  # nearly all its content words and numbers are in one sentence of the cited paper


@dataclass(frozen=True)
class Answer:
    """What the assistant says, with everything needed to check it."""

    question: str
    text: str
    citations: tuple[Citation, ...]
    hits: tuple[Hit, ...]
    abstained: bool
    timings: dict[str, float]
    model: str
    settings_fingerprint: str
    prompt_version: str = ""
    searched: str = ""  # the standalone question that was retrieved for (differs from question for follow-ups)
    focus: tuple[str, ...] = ()  # paper ids of earlier answers this question points at ("it", "the second one")
    mode: str = "generated"  # "generated", "extractive" (quoted evidence), "abstained"
    dropped_markers: int = 0  # [n] markers naming no source given to the model, removed from the text
    dropped_evidence: int = 0  # evidence blocks dropped to fit the model's context
    checks: tuple[SentenceCheck, ...] = ()
    notices: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = field(default=(), repr=False)
    # A summary's papers on the topic past the ones it lists, best first: not cited in the text, each numbered on
    # from the listed ones and carrying its best sentence, so the reader can open the rest of the list.
    more: tuple[Citation, ...] = ()
    # The answer says first that the abstracts do not hold what was asked ("No abstract mentions federated; the
    # closest: ...", "No paper is clearly on this topic; the closest: ..."), then shows the closest papers.
    said_absent: bool = False

    @property
    def declined(self) -> bool:
        """Whether the answer declines: it abstained, or said first that no abstract holds what was asked."""
        return self.abstained or self.said_absent

    @property
    def drafted(self) -> bool:
        """Whether the model wrote a draft (a summary whose settings want none of its sentences is listed without)."""
        return "first_token_ms" in self.timings

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "searched": self.searched or self.question,
            "resolved_papers": list(self.focus),
            "answer": self.text,
            "abstained": self.abstained,
            "declined": self.declined,
            "mode": self.mode,
            "citations": [c.to_dict() for c in self.citations],
            "more": [c.to_dict() for c in self.more],
            "hits": [
                {
                    "paper_id": h.paper.paper_id,
                    "title": h.paper.title,
                    "score": round(h.score, 6),
                    "similarity": round(h.best_similarity, 4),
                    "why": h.why,
                    "text": h.passages[0].text if h.passages else h.paper.abstract,
                }
                for h in self.hits
            ],
            "unsupported_sentences": [c.sentence for c in self.checks if not c.supported],
            "dropped_markers": self.dropped_markers,
            "dropped_evidence": self.dropped_evidence,
            "notices": list(self.notices),
            "timings": {k: round(v, 2) for k, v in self.timings.items()},
            "model": self.model,
            "prompt_version": self.prompt_version,
            "settings_fingerprint": self.settings_fingerprint,
        }


# --- errors: the library raises these; the CLI and UI translate them into one line --------------------------------


class RagError(Exception):
    """Base of every error this project raises on purpose."""


class ConfigError(RagError):
    """A setting has a bad value (names the setting and the value)."""


class IngestError(RagError):
    """A source file cannot be read as papers (names the file and, when known, the line)."""

    def __init__(self, path: str, reason: str, line: int | None = None) -> None:
        self.path, self.reason, self.line = path, reason, line
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")


class StoreError(RagError):
    """The index cannot be opened or written (names the store path and the fix)."""


class StoreLockedError(StoreError):
    """Another process is writing this store."""


class ContextError(RagError):
    """A prompt cannot be made to fit the model's context window."""


class ModelError(RagError):
    """A GGUF model cannot be found or loaded (names the path)."""
