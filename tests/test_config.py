"""Settings: defaults < TOML < RAG_* variables < flags; bad names and values are clear errors."""

from pathlib import Path

import pytest

from rag.config import Settings, load
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
    with pytest.raises(AttributeError):
        s.retrieval.top_k = 3  # type: ignore[misc]
    assert load(env={}).fingerprint() == s.fingerprint()
    assert load(flags={"chunking.max_tokens": 96}, env={}).fingerprint() != s.fingerprint()
    assert load(flags={"retrieval.top_k": 9}, env={}).fingerprint() == s.fingerprint()  # not index-shaping
