"""Settings: defaults < TOML < RAG_* variables < flags; bad names and values are clear errors."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from rag.config import ALIASES, MOVED, Answering, Settings, describe, env_name, load
from rag.records import ConfigError


def test_precedence(tmp_path: Path) -> None:
    toml = tmp_path / "rag.toml"
    toml.write_text('[retrieval]\ntop_k = 7\nmode = "dense"\n[generation]\ntemperature = 0.5\n')
    env = {"RAG_RETRIEVAL_TOP_K": "9", "RAG_DATA_DIR": str(tmp_path / "d"), "RAG_MODEL": "/m/x.gguf"}
    s = load(toml, flags={"retrieval.top_k": 3}, env=env)
    assert s.retrieval.top_k == 3  # flag beats env beats TOML
    assert s.retrieval.mode == "dense"  # TOML beats default
    assert s.generation.temperature == 0.5
    assert s.paths.data_dir == tmp_path / "d" and s.paths.models_dir == tmp_path / "d" / "models"
    assert s.generation.model_path == "/m/x.gguf"


def test_unknown_and_bad_values_name_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="retrieval.topk"):
        load(flags={"retrieval.topk": 3}, env={})
    with pytest.raises(ConfigError, match="retrieval.top_k"):
        load(env={"RAG_RETRIEVAL_TOP_K": "many"})
    with pytest.raises(ConfigError, match="retrieval.mode"):
        load(flags={"retrieval.mode": "magic"}, env={})
    bad = tmp_path / "bad.toml"
    bad.write_text("[retrieval\n")
    with pytest.raises(ConfigError, match="bad.toml"):
        load(bad, env={})


def test_settings_are_frozen_and_fingerprint_tracks_the_index_shape() -> None:
    s = Settings()
    with pytest.raises(ValidationError):
        s.retrieval.top_k = 3  # type: ignore[misc]
    assert load(env={}).fingerprint() == s.fingerprint()
    assert load(flags={"chunking.max_tokens": 96}, env={}).fingerprint() != s.fingerprint()
    assert load(flags={"retrieval.top_k": 9}, env={}).fingerprint() == s.fingerprint()  # not index-shaping
    assert s.fingerprint() == "891cad0650aa"  # the default index's name: existing indexes must keep theirs


def test_todays_names_still_work(tmp_path: Path) -> None:
    """TOML `[group] field`, RAG_<GROUP>_<FIELD>, the short aliases, and the old names of the knobs that moved
    from [generation] to [answer]."""
    toml = tmp_path / "old.toml"
    toml.write_text("[generation]\nevidence_margin = 0.2\nsummary_max_papers = 4\nn_ctx = 4096\n"
                    "[retrieval]\nbm25_weight = 1.5\n")
    env = {"RAG_GENERATION_N_THREADS": "1", "RAG_GENERATION_HISTORY_TURNS": "2", "RAG_RETRIEVAL_TOP_K": "8",
           "RAG_DATA_DIR": str(tmp_path / "d"), "RAG_MODEL": "qwen2.5-coder-0.5b", "RAG_CHROMA_URL": "http://c:8000",
           "RAG_SEEDS_DIR": str(tmp_path / "seeds"), "RAG_PORT": "7000", "RAG_UI_API_TOKEN": "t0ken",
           "RAG_ANSWER_SUPPORT_SIMILARITY": "0.7", "RAG_EMBEDDING_BACKEND": "torch", "RAG_GENERATION_FLASH_ATTN": "yes"}
    s = load(toml, flags={"generation.locate_similarity": 0.55, "answer.lexical_weight": 0.3}, env=env)
    assert (s.answer.evidence_margin, s.answer.summary_max_papers, s.generation.n_ctx) == (0.2, 4, 4096)
    assert (s.retrieval.bm25_weight, s.retrieval.top_k, s.generation.n_threads) == (1.5, 8, 1)
    assert (s.answer.history_turns, s.answer.locate_similarity, s.answer.lexical_weight) == (2, 0.55, 0.3)
    assert s.answer.support_similarity == 0.7 and s.embedding.backend == "torch" and s.generation.flash_attn
    assert s.paths.data_dir == tmp_path / "d" and s.paths.models_dir == tmp_path / "d" / "models"
    assert s.paths.seeds_dir == tmp_path / "seeds" and s.store.chroma_url == "http://c:8000"
    assert (s.generation.model_path, s.ui.port, s.ui.api_token) == ("qwen2.5-coder-0.5b", 7000, "t0ken")
    assert s.to_dict()["ui"]["api_token"] == "***" and s.to_dict()["answer"]["evidence_margin"] == 0.2
    # An old name in the environment still beats the new name in the file; in one place the new name wins.
    toml.write_text("[answer]\nevidence_margin = 0.3\n[generation]\nevidence_margin = 0.4\n")
    assert load(toml, env={}).answer.evidence_margin == 0.3
    assert load(toml, env={"RAG_GENERATION_EVIDENCE_MARGIN": "0.25"}).answer.evidence_margin == 0.25
    assert load(env={"RAG_MODELS_DIR": str(tmp_path / "m"), "RAG_DATA_DIR": "x"}).paths.models_dir == tmp_path / "m"
    # The full name wins over its alias.
    assert load(env={"RAG_PORT": "7001", "RAG_UI_PORT": "7002"}).ui.port == 7002
    assert MOVED["generation.evidence_margin"] == "answer.evidence_margin"
    assert load(flags={"retrieval.chroma_url": "http://old:8000"}, env={}).store.chroma_url == "http://old:8000"
    assert load(env={"RAG_RETRIEVAL_CHROMA_URL": "http://old:8001"}).store.chroma_url == "http://old:8001"
    assert ALIASES["RAG_MODEL"] == "generation.model_path" and env_name("ui.api_token") == "RAG_UI_API_TOKEN"


def test_only_load_reads_the_environment_and_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAG_RETRIEVAL_TOP_K", "9")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rag.toml").write_text("[retrieval]\nmode = \"bm25\"\n")
    assert Settings().retrieval.top_k == 5 and Settings().retrieval.mode == "hybrid"
    assert load().retrieval.top_k == 9 and load().retrieval.mode == "bm25"


def test_checks_across_settings_and_where_a_bad_value_came_from(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="chunking.max_tokens: 300 must be between 16 and 256"):
        load(flags={"chunking.max_tokens": 300}, env={})
    assert load(flags={"chunking.max_tokens": 300, "embedding.limit_tokens": 512}, env={}).chunking.max_tokens == 300
    toml = tmp_path / "a.toml"
    toml.write_text("[generation]\ntemperature = 3.0\n")
    with pytest.raises(ConfigError, match="a.toml: setting generation.temperature"):
        load(toml, env={})
    with pytest.raises(ConfigError, match="environment: unknown setting 'answer.margin'"):
        load(env={"RAG_ANSWER_MARGIN": "1"})
    with pytest.raises(ConfigError, match="settings file not found"):
        load(tmp_path / "missing.toml", env={})


def test_with_values_changes_and_checks() -> None:
    s = load(env={})
    t = s.with_values({"generation.model_path": "x.gguf", "answer.evidence_papers": 1, "generation.history_turns": 3})
    assert (t.generation.model_path, t.answer.evidence_papers, t.answer.history_turns) == ("x.gguf", 1, 3)
    assert t.generation.n_ctx == s.generation.n_ctx and s.generation.model_path == ""
    with pytest.raises(ConfigError, match="retrieval.mode"):
        s.with_values({"retrieval.mode": "magic"})
    with pytest.raises(ConfigError, match="answer.nope"):
        s.with_values({"answer.nope": 1})


def test_every_setting_is_described() -> None:
    rows = describe()
    assert all(r["description"] for r in rows)
    assert {"key": "retrieval.top_k", "value": 5, "env": "RAG_RETRIEVAL_TOP_K"}.items() <= next(
        r for r in rows if r["key"] == "retrieval.top_k").items()


def test_the_config_command_prints_every_setting_with_its_description(capsys: pytest.CaptureFixture[str]) -> None:
    from rag.cli import main

    assert main(["config", "--json", "--data-dir", "/tmp/somewhere"]) == 0
    rows = {r["key"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["paths.data_dir"]["value"] == "/tmp/somewhere" and rows["paths.data_dir"]["alias"] == "RAG_DATA_DIR"
    assert rows["answer.evidence_margin"]["description"] == Answering.model_fields["evidence_margin"].description
    assert main(["config"]) == 0
    assert "[answer]\nsentences_per_paper = 3  # RAG_ANSWER_SENTENCES_PER_PAPER" in capsys.readouterr().out
