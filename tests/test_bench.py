"""The bench runs end to end on fakes and a tiny synthetic corpus and emits its JSON keys (timings never asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from fakes import HashEmbedder, ScriptedGenerator
from helpers import SEEDS, make_settings

from bench import cli, report
from bench.corpus import corpus_file, records


def test_synthetic_corpus_is_deterministic_and_unique(tmp_path: Path) -> None:
    a = list(records(200, SEEDS, seed=3))
    assert a == list(records(200, SEEDS, seed=3))
    assert len({r["id"] for r in a}) == len({r["abstract"] for r in a}) == 200
    assert all({"id", "title", "abstract", "authors", "year"} <= set(r) for r in a)
    path = corpus_file(50, SEEDS, tmp_path)
    assert corpus_file(50, SEEDS, tmp_path) == path  # cached, not rewritten
    assert len(path.read_text(encoding="utf-8").splitlines()) == 50


def test_bench_smoke_on_fakes(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data", **{"retrieval.min_similarity": 0.0})
    embedder = HashEmbedder()
    plan = cli.Plan(sizes=[38, 60, 120], repeats=2, approx_above=50, workers=False, sweep=False, replicate=True,
                    ceiling_mb=8)
    res = cli.run(plan, settings, embedder, generator=ScriptedGenerator(),
                  make_embedder=lambda batch: HashEmbedder(), command="python -m rag bench (test)")
    assert {"machine", "ceilings", "ingest", "retrieval", "hnsw", "embed", "generation", "end_to_end"} <= set(res)
    assert set(res["ingest"]) == {"38", "60", "120"}
    assert res["ingest"]["60"]["approx_vectors"] and not res["ingest"]["38"]["approx_vectors"]
    for size in ("38", "60"):
        ing = res["ingest"][size]
        assert {"parse", "embed", "store", "total", "peak_rss_mb", "store_mb"} <= set(ing)
        assert {"papers_per_s", "chunks_per_s"} <= set(ing["embed"])
        assert {"embed_ms", "dense_ms", "bm25_ms", "fuse_ms", "retrieve_ms"} <= set(res["retrieval"][size])
        assert {"p50", "p95"} <= set(res["retrieval"][size]["dense_ms"])
    assert res["ingest"]["60"]["papers"] == 60
    big = res["ingest"]["120"]  # two noisy copies of the 60-paper index, searched like any index
    assert (big["vectors"], big["papers"], big["chunks"]) == ("replicated", 120, 2 * res["ingest"]["60"]["chunks"])
    assert res["retrieval"]["120"]["papers"] == 120 and res["hnsw"]["papers"] == 120
    assert {"recall@10", "recall@40", "query_ms"} <= set(next(iter(res["hnsw"]["by_ef_search"].values())))
    assert "where_ms" in res["hnsw"]["filter"]
    stream = res["generation"]["models"]["scripted"]["stream"]
    assert {"cold", "other", "followup_pipeline"} <= set(stream)
    assert {"warm_s", "first_question"} <= set(res["end_to_end"]["38"])
    json.dumps(res)  # serialisable as it is written
    md = report.markdown(res)
    assert "### Ingest" in md and "### Retrieval" in md and "### End to end" in md
    written = cli.write(res, tmp_path / "results")
    assert json.loads(written.read_text())["command"] == "python -m rag bench (test)"
    assert (tmp_path / "results" / "latest.md").is_file()
    print(md)
