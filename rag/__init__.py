"""abstracts-qa: cited answers about research papers from their abstracts, fully offline. Re-exports only."""

from .config import Settings, load
from .pipeline import Assistant, Filters, build_index, ingest
from .records import (
    CANNOT_ANSWER,
    Answer,
    Chunk,
    Citation,
    ConfigError,
    Hit,
    IngestError,
    ModelError,
    Paper,
    RagError,
    StoreError,
    StoreLockedError,
)

__all__ = [
    "CANNOT_ANSWER", "Answer", "Assistant", "Chunk", "Citation", "ConfigError", "Filters", "Hit", "IngestError",
    "ModelError", "Paper", "RagError", "Settings", "StoreError", "StoreLockedError", "build_index", "ingest", "load",
]
