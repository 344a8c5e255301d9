"""Embedding backends: the setting, the fingerprint, the cached ONNX artefact (fake export), and the real backends
(slow: all-MiniLM-L6-v2 under torch-int8 / onnx / onnx-int8 against float32 torch; the onnx embedder's own
tokenizer against transformers' tokenizer, which fed the graph before)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from helpers import SEEDS

from rag.config import Chunking, Embedding, Settings, load
from rag.onnx_embed import artefact
from rag.records import ConfigError

# Floor on the cosine between a backend's vector and float32 torch's for the same text. Measured on 2,000 chunk
# texts of the synthetic corpus (bench/RESULTS.md, Ingest): min 1.0 / 0.986 / 0.952 (mean 1.0 / 0.9925 / 0.975).
MIN_COSINE = {"onnx": 0.9999, "onnx-int8": 0.98, "torch-int8": 0.94}


def test_fingerprint_tracks_the_backend_and_keeps_torch_indexes() -> None:
    prints = {b: load(flags={"embedding.backend": b}, env={}).fingerprint() for b in MIN_COSINE | {"torch": 1}}
    assert len(set(prints.values())) == 4
    # torch hashes exactly what it hashed before the setting existed, so existing indexes stay valid.
    legacy = {"embedding_model": Embedding().model, "chunking": Chunking().model_dump()}
    blob = json.dumps(legacy, sort_keys=True, default=str).encode()
    assert prints["torch"] == hashlib.sha256(blob).hexdigest()[:12]
    assert load(flags={"embedding.batch_size": 8}, env={}).fingerprint() == Settings().fingerprint()
    assert load(flags={"embedding.ingest_batch_size": 32}, env={}).fingerprint() == Settings().fingerprint()


def test_unknown_backend_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="embedding.backend"):
        load(flags={"embedding.backend": "tensorrt"}, env={})


class FakeExport:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, out: Path) -> None:
        self.calls += 1
        out.write_bytes(b"graph" * 1000)


def test_artefact_is_built_once_then_reused(tmp_path: Path) -> None:
    export = FakeExport()
    first = artefact(tmp_path, "m", "key1", export, quantize=False)
    again = artefact(tmp_path, "m", "key1", export, quantize=False)
    assert first == again and export.calls == 1
    assert first.read_bytes() == b"graph" * 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.onnx"]  # no temp files left behind


@pytest.mark.parametrize("damage", ["flip_byte", "truncate", "bad_record", "no_record", "other_key"])
def test_corrupt_or_stale_artefact_is_rebuilt(tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    export = FakeExport()
    model = artefact(tmp_path, "m", "key1", export, quantize=False)
    record = tmp_path / "m.json"
    key = "key1"
    if damage == "flip_byte":
        data = bytearray(model.read_bytes())
        data[100] ^= 0xFF
        model.write_bytes(bytes(data))
    elif damage == "truncate":
        model.write_bytes(model.read_bytes()[:10])
    elif damage == "bad_record":
        record.write_text("{not json")
    elif damage == "no_record":
        record.unlink()
    else:
        key = "key2"  # e.g. the model files or onnxruntime changed
    with caplog.at_level("INFO", logger="rag.onnx_embed"):
        artefact(tmp_path, "m", key, export, quantize=False)
    assert export.calls == 2
    # An artefact from before an upgrade is expected, not a fault: said quietly, without "corrupt".
    said = [(r.levelname, r.getMessage()) for r in caplog.records if ": exported (" not in r.getMessage()]
    assert said == ([("INFO", f"{model}: built for other model files, libraries or export format; exporting it "
                              "again")] if damage == "other_key"
                    else [("WARNING", f"{model}: corrupt or incomplete ONNX artefact, rebuilding it")])
    assert model.read_bytes() == b"graph" * 1000
    assert json.loads(record.read_text())["key"] == key


def test_unwritable_cache_raises_oserror(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data folder should be")  # unwritable even for root
    with pytest.raises(OSError):
        artefact(blocker / "onnx", "m", "k", FakeExport(), quantize=False)


# --- the real model -------------------------------------------------------------------------------------------


def _chunk_texts(n: int = 64) -> list[str]:
    from rag.chunk import approx_tokens, chunk_paper, embed_text
    from rag.parse import ParseReport, iter_papers

    out = []
    for paper in iter_papers([SEEDS], ParseReport()):
        out += [embed_text(paper.title, c.text) for c in chunk_paper(paper, Chunking(), approx_tokens)]
    return out[:n]


@pytest.fixture(scope="module")
def reference() -> tuple[list[str], np.ndarray]:
    from rag.embed import SentenceTransformerEmbedder

    texts = _chunk_texts()
    return texts, SentenceTransformerEmbedder(Embedding(backend="torch")).embed(texts)


@pytest.fixture(scope="module")
def hf_tokenizer():  # type: ignore[no-untyped-def]
    """transformers' tokenizer for the default model, as sentence-transformers loads it."""
    from rag.embed import _sentence_transformer, model_dir

    return _sentence_transformer(model_dir(Embedding().model), Embedding()).tokenizer


@pytest.mark.slow
@pytest.mark.parametrize("backend", sorted(MIN_COSINE))
def test_backend_agrees_with_float32(backend: str, reference: tuple[list[str], np.ndarray],
                                     tmp_path: Path, hf_tokenizer) -> None:  # type: ignore[no-untyped-def]
    from rag.embed import embed_documents, load_embedder

    texts, ref = reference
    emb = load_embedder(Embedding(backend=backend), cache_dir=tmp_path)
    vectors = emb.embed(texts)
    assert vectors.shape == ref.shape and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(emb.embed(texts), vectors)  # deterministic
    cosine = (vectors * ref).sum(axis=1)
    assert cosine.min() >= MIN_COSINE[backend], (backend, float(cosine.min()))
    assert emb.count_tokens(texts[0]) == len(hf_tokenizer(texts[0])["input_ids"])
    assert (emb.name, emb.dim, emb.max_tokens) == ("all-MiniLM-L6-v2", 384, 256)
    # A query is a batch of one. int8 activations are quantized with one scale per batch, so a text's vector moves a
    # little with its batch-mates (measured 0.993 for onnx-int8 here), within the same floor as against float32.
    assert float(emb.embed([texts[3]])[0] @ vectors[3]) >= MIN_COSINE[backend]
    # Stored chunks go through `embed_documents`, batched by `ingest_batch_size`: the same texts, same floor.
    docs = embed_documents(emb, texts)
    assert docs.shape == ref.shape and float((docs * ref).sum(axis=1).min()) >= MIN_COSINE[backend]


@pytest.mark.slow
def test_onnx_artefact_cached_and_rebuilt_when_corrupt(tmp_path: Path,
                                                       reference: tuple[list[str], np.ndarray]) -> None:
    from rag.embed import load_embedder

    texts = reference[0][:8]
    first = load_embedder(Embedding(backend="onnx-int8"), cache_dir=tmp_path).embed(texts)
    (model,) = (tmp_path / "onnx").glob("*.onnx")
    stamp = model.stat().st_mtime_ns
    load_embedder(Embedding(backend="onnx-int8"), cache_dir=tmp_path)
    assert model.stat().st_mtime_ns == stamp  # reused, not re-exported
    model.write_bytes(model.read_bytes()[: model.stat().st_size // 2])  # a torn write
    again = load_embedder(Embedding(backend="onnx-int8"), cache_dir=tmp_path).embed(texts)
    assert np.array_equal(again, first)
    assert model.stat().st_size > 0 and model.stat().st_mtime_ns != stamp


# Texts the tokenizers must agree on besides real chunks: accents, case, CJK, emoji, control and zero-width
# characters, an over-long text (truncated at max_tokens in a batch, counted whole), empty and blank strings.
ODD_TEXTS = ["", " ", "Café RÉSUMÉ naïve Ångström", "深度学习 模型 と 日本語", "emoji 🙂 ok", "tab\tand\nnewline",
             "zero\u200bwidth", "x" * 600, "word " * 400, "9.7x faster; p<0.05, 62.7 % (±3)", "Ω ≥ µ ∑ ∂"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_onnx_embedder_gives_the_transformers_path_vectors(backend: str,
                                                           tmp_path: Path, hf_tokenizer) -> None:  # type: ignore[no-untyped-def]
    """The onnx embedder tokenizes with tokenizer.json through `tokenizers` (no transformers import). Before, the
    graph was fed by transformers' tokenizer (`padding=True, truncation=True, max_length`, longest text first):
    same ids, masks and counts on every seed chunk and odd text, hence the same vectors bit for bit."""
    from rag.embed import OnnxEmbedder, _by_length

    emb = OnnxEmbedder(Embedding(backend=backend), cache_dir=tmp_path)
    texts = _chunk_texts(10_000) + ODD_TEXTS
    for text in texts:
        assert emb.count_tokens(text) == len(hf_tokenizer(text, add_special_tokens=True, truncation=False)
                                             ["input_ids"]), text[:60]
    for idx in _by_length(texts, 32):
        batch = [texts[i] for i in idx]
        want = hf_tokenizer(batch, padding=True, truncation=True, max_length=emb.max_tokens, return_tensors="np")
        got = emb._tokens.batch(batch)
        assert set(want.keys()) == set(got)
        for name in got:
            assert np.array_equal(np.asarray(want[name], dtype=np.int64), got[name]), (name, batch[0][:60])
    # The transformers path as it was (rag/embed.py before the tokenizers one), on the same graph.
    old = np.zeros((len(texts), emb.dim), dtype=np.float32)
    for idx in _by_length(texts, 32):
        feeds = hf_tokenizer([texts[i] for i in idx], padding=True, truncation=True, max_length=emb.max_tokens,
                             return_tensors="np")
        old[idx] = emb._onnx.run(dict(feeds))
    old /= np.maximum(np.linalg.norm(old, axis=1, keepdims=True), 1e-12)
    assert np.array_equal(emb.embed(texts), old)
    # Stored chunks: the same path in batches of ingest_batch_size, so as the transformers path gave them.
    chunks = texts[: -len(ODD_TEXTS)]
    old_docs = np.zeros((len(chunks), emb.dim), dtype=np.float32)
    for idx in _by_length(chunks, Embedding().ingest_batch_size):
        feeds = hf_tokenizer([chunks[i] for i in idx], padding=True, truncation=True, max_length=emb.max_tokens,
                             return_tensors="np")
        old_docs[idx] = emb._onnx.run(dict(feeds))
    old_docs /= np.maximum(np.linalg.norm(old_docs, axis=1, keepdims=True), 1e-12)
    assert np.array_equal(emb.embed_documents(chunks), old_docs)


TINY_EXPORT = """
import sys
from pathlib import Path
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from rag.onnx_embed import artefact

def export(out: Path) -> None:  # one MatMul with constant weights: enough for the int8 quantizer to act on
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "tiny",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), out)

model = artefact(Path(sys.argv[1]), "tiny", "k", export, quantize=True)
print(sorted({n.op_type for n in onnx.load(str(model)).graph.node}))
"""


def test_int8_artefact_is_quantized_and_prints_nothing(tmp_path: Path) -> None:
    """onnxruntime's quantizer logs through the root logger; a CLI error must stay one line (fresh process, no
    pytest log handlers in the way)."""
    import subprocess
    import sys

    from helpers import ROOT

    done = subprocess.run([sys.executable, "-c", TINY_EXPORT, str(tmp_path)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "MatMulInteger" in done.stdout or "DynamicQuantizeMatMul" in done.stdout, done.stdout


def _tiny_encoder(tmp_path: Path | None):  # type: ignore[no-untyped-def]
    """An OnnxEncoder over a one-MatMul graph fed token ids (int64 [batch, 8] -> float [batch, 4]); None: no cache
    folder, so the graph is built in a temporary folder and held in memory."""
    from onnx import TensorProto, helper, numpy_helper, save

    from rag.onnx_embed import OnnxEncoder

    def export(out: Path) -> None:
        w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32), "w")
        graph = helper.make_graph(
            [helper.make_node("Cast", ["input_ids"], ["x"], to=TensorProto.FLOAT),
             helper.make_node("MatMul", ["x", "w"], ["y"])], "tiny",
            [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [None, 8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])], [w])
        save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), out)

    return OnnxEncoder(tmp_path, "tiny", "k", export, quantize=False)


def test_spread_batches_run_side_by_side_and_come_back_in_order(tmp_path: Path) -> None:
    """run_spread (what ingest embeds with) gives each job's vectors in job order, the same as `run` gives them,
    with the jobs' feeds built on as many threads as workers asked for."""
    import threading

    enc = _tiny_encoder(tmp_path)
    rng = np.random.default_rng(1)
    jobs = [rng.integers(0, 50, size=(int(rng.integers(1, 5)), 8)) for _ in range(12)]
    threads: set[str] = set()
    met = threading.Barrier(2, timeout=10)  # each worker waits once for the other: two jobs held at once

    def feeds(job: np.ndarray) -> dict[str, np.ndarray]:
        name = threading.current_thread().name
        if name not in threads:
            threads.add(name)
            met.wait()  # raises BrokenBarrierError when no second worker ever comes
        return {"input_ids": job}

    got = enc.run_spread(jobs, feeds, workers=2)
    assert len(threads) == 2 and all(name.startswith("embed") for name in threads)
    assert len(got) == len(jobs)
    for job, vectors in zip(jobs, got, strict=True):
        assert np.array_equal(vectors, enc.run({"input_ids": job}))
    # One worker, or one job: the plain path, on the calling thread.
    callers: list[str] = []

    def plain(job: np.ndarray) -> dict[str, np.ndarray]:
        callers.append(threading.current_thread().name)
        return {"input_ids": job}

    assert np.array_equal(enc.run_spread(jobs[:1], plain, workers=2)[0], enc.run({"input_ids": jobs[0]}))
    assert np.array_equal(np.concatenate(enc.run_spread(jobs, plain, workers=1)), np.concatenate(got))
    assert set(callers) == {threading.current_thread().name}
    # Without a cache folder (a read-only data folder) both paths run the graph held in memory.
    uncached = _tiny_encoder(None)
    assert np.array_equal(np.concatenate(uncached.run_spread(jobs, plain, workers=2)), np.concatenate(got))


def test_an_export_that_fails_is_one_config_error(tmp_path: Path) -> None:
    """The library raises its own error naming the model, whatever the exporter threw; nothing half-made is left."""
    from rag.onnx_embed import OnnxEncoder
    from rag.records import ConfigError

    def export(out: Path) -> None:
        raise RuntimeError("tracer gave up")

    with pytest.raises(ConfigError, match="onnxruntime cannot run broken: tracer gave up"):
        OnnxEncoder(tmp_path, "broken", "k", export, quantize=False)
    assert not list(tmp_path.glob("broken*"))


def _guarded_softmax_graph(path: Path) -> None:
    """softmax(x + mask) guarded as torch's sdpa export guards it, the mask built twice from equal constants."""
    import onnx
    from onnx import TensorProto, helper

    def const(name: str, value: float) -> onnx.NodeProto:
        return helper.make_node("Constant", [], [name], value=helper.make_tensor(f"t_{name}", TensorProto.FLOAT,
                                                                                   [], [value]))

    nodes = [const("zero_a", 0.0), const("zero_b", 0.0), const("one", 1.0),
             helper.make_node("Mul", ["m", "zero_a"], ["mask_a"]), helper.make_node("Mul", ["m", "zero_b"], ["mask_b"]),
             helper.make_node("Add", ["x", "mask_a"], ["s1"]), helper.make_node("Softmax", ["s1"], ["p1"]),
             helper.make_node("IsNaN", ["p1"], ["nan1"]), helper.make_node("Where", ["nan1", "zero_a", "p1"], ["q1"]),
             helper.make_node("Add", ["q1", "mask_b"], ["s2"]), helper.make_node("Mul", ["s2", "one"], ["y"])]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("x", "m", "y")]
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", io[:2], io[2:]),
                                opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_the_lean_graph_drops_the_nan_guard_and_repeated_work_and_answers_the_same(tmp_path: Path) -> None:
    import onnx
    import onnxruntime as ort

    from rag.onnx_embed import _lean

    before, after = tmp_path / "before.onnx", tmp_path / "after.onnx"
    _guarded_softmax_graph(before)
    _guarded_softmax_graph(after)
    _lean(after)
    ops = [n.op_type for n in onnx.load(str(after)).graph.node]
    assert "IsNaN" not in ops and "Where" not in ops
    assert ops.count("Constant") == 2 and ops.count("Mul") == 2  # one zero, one mask: the copies merged
    assert [o.name for o in onnx.load(str(after)).graph.output] == ["y"]
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((2, 3)).astype(np.float32), "m": rng.standard_normal((2, 3)).astype(np.float32)}
    got = [ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
           for p in (before, after)]
    assert np.array_equal(got[0], got[1])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_the_lean_export_gives_the_plain_exports_vectors_bit_for_bit(backend: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The real model: the graph without the NaN guard and the repeated mask embeds every seed chunk and odd text,
    in padded batches and one at a time, exactly as the export as torch wrote it."""
    import onnx

    import rag.onnx_embed
    from rag.embed import OnnxEmbedder

    lean = OnnxEmbedder(Embedding(backend=backend), cache_dir=tmp_path / "lean")
    with monkeypatch.context() as m:
        m.setattr(rag.onnx_embed, "_lean", lambda path: None)
        plain = OnnxEmbedder(Embedding(backend=backend), cache_dir=tmp_path / "plain")
    (lean_file,) = (tmp_path / "lean" / "onnx").glob("*.onnx")
    (plain_file,) = (tmp_path / "plain" / "onnx").glob("*.onnx")
    lean_ops = [n.op_type for n in onnx.load(str(lean_file)).graph.node]
    plain_ops = [n.op_type for n in onnx.load(str(plain_file)).graph.node]
    assert "IsNaN" in plain_ops and "IsNaN" not in lean_ops and len(lean_ops) < 0.7 * len(plain_ops)
    texts = _chunk_texts(10_000) + ODD_TEXTS
    assert np.array_equal(lean.embed(texts), plain.embed(texts))
    assert np.array_equal(lean.embed_documents(texts), plain.embed_documents(texts))
    assert np.array_equal(lean.embed(texts[:5]), plain.embed(texts[:5]))
