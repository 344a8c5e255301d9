"""The onnxruntime adapter (the only module that imports onnxruntime): a sentence encoder exported to ONNX once,
cached in the data folder, optionally quantized to int8, and run with onnxruntime on the CPU.

It owns the cached artefact: `<cache_dir>/<stem>.onnx` plus `<stem>.json`, a record of the key it was built for
(model files, library versions, format) and the file's sha256. Both are written atomically (a temp file in the same
folder, then a rename; the record last, so a model file without a matching record is never trusted), and the file
is checked against the record on every load: a corrupt, truncated or stale artefact is rebuilt, never used.

It does not tokenize or pool (the caller feeds token ids; pooling is baked into the exported graph) and does not
export: the torch side of the export lives with the sentence-transformers adapter (rag/embed.py) and is passed in.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from .files import file_sha256
from .records import ConfigError

log = logging.getLogger(__name__)

T = TypeVar("T")
FORMAT = 2  # bump when the exported graph changes shape, so old artefacts are rebuilt (2: the lean graph, `_lean`)


def runtime_version() -> str:
    import onnxruntime

    return str(onnxruntime.__version__)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with tmp.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)


def _record(record: Path) -> dict[str, Any]:
    """The artefact's record, {} when it is missing or unreadable."""
    try:
        rec = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def _verified(model: Path, record: Path, key: str) -> bool:
    """True when the record names this key and the file's digest matches it."""
    rec = _record(record)
    try:
        return bool(rec.get("key") == key and rec.get("bytes") == model.stat().st_size
                    and rec.get("sha256") == file_sha256(model))
    except OSError:
        return False


def _lean(path: Path) -> None:
    """Rewrite the exported graph in place without the work that cannot change its output:

    - `Where(IsNaN(p), c, p)` becomes `p`: torch's sdpa export guards every attention softmax against rows whose
      keys are all masked, which an encoder never gets: its tokenizer adds [CLS] and [SEP] (or <s> and </s>) to every
      text, "" included, and those are never masked, so `p` holds no NaN;
    - a node computing what an earlier node already computed (the same op on the same inputs, constants compared by
      value) is dropped for the earlier one: the export rebuilds the same additive mask in each of the six layers.

    On an Intel Xeon with AMX these were about 13 % of an int8 run's time; the vectors stay the same bit for bit
    (tests/test_embed_backends.py).
    """
    import onnx

    try:
        model = onnx.load(str(path))
    except Exception as e:  # not a graph onnx can read: left as it is, onnxruntime then says what is wrong with it
        log.debug("%s: not rewritten (%s)", path, e)
        return
    graph = model.graph
    made_by = {out: node for node in graph.node for out in node.output}
    alias: dict[str, str] = {}

    def name(value: str) -> str:
        while value in alias:
            value = alias[value]
        return value

    seen: dict[bytes, onnx.NodeProto] = {}
    kept = []
    for node in graph.node:
        node.input[:] = [name(i) for i in node.input]
        source = made_by.get(node.input[0]) if node.op_type == "Where" and len(node.input) == 3 else None
        if source is not None and source.op_type == "IsNaN" and name(source.input[0]) == node.input[2]:
            alias[node.output[0]] = node.input[2]
            continue
        if node.op_type.startswith("Random") or node.op_type in ("Dropout", "Multinomial"):  # not pure: kept
            kept.append(node)
            continue
        attributes = [onnx.AttributeProto.FromString(a.SerializeToString()) for a in node.attribute]
        for a in attributes:  # a constant's tensor carries a name of its own; compare values only
            a.t.name = ""
        key = onnx.NodeProto(op_type=node.op_type, domain=node.domain, input=node.input,
                             attribute=attributes).SerializeToString(deterministic=True)
        if key in seen and len(seen[key].output) == len(node.output):
            alias.update(zip(node.output, seen[key].output, strict=True))
            continue
        seen[key] = node
        kept.append(node)
    while True:  # drop what only dropped nodes read, e.g. the IsNaN and the constant of a removed Where
        used = {i for node in kept for i in node.input} | {out.name for out in graph.output}
        live = [node for node in kept if any(out in used for out in node.output)]
        if len(live) == len(kept):
            break
        kept = live
    # The graph's outputs keep their names: an output produced by a dropped node would be renamed, so keep it.
    if any(out.name in alias for out in graph.output):
        return
    del graph.node[:]
    graph.node.extend(kept)
    onnx.save(model, str(path))


def _build(folder: Path, export: Callable[[Path], None], quantize: bool) -> Path:
    """Export (leaner, then quantized if asked) into `folder`; returns the finished file."""
    fp32 = folder / "fp32.onnx"
    export(fp32)
    _lean(fp32)
    if not quantize:
        return fp32
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out = folder / "int8.onnx"
    # Weights int8 per output channel, activations quantized per batch at run time (u8 x s8: the VNNI path).
    with _quiet_root_logger():
        quantize_dynamic(fp32, out, weight_type=QuantType.QInt8, per_channel=True)
    return out


@contextlib.contextmanager
def _quiet_root_logger() -> Iterator[None]:
    """onnxruntime.quantization logs advice through the root logger (`logging.warning`), which also installs a
    stderr handler on the root when it has none: the CLI's one-line errors would gain a line. Keep both out."""
    root = logging.getLogger()
    guard = logging.NullHandler()  # a handler present, so logging.warning() does not call basicConfig()
    root.addHandler(guard)
    previous = root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)
        root.removeHandler(guard)


def artefact(cache_dir: Path, stem: str, key: str, export: Callable[[Path], None], quantize: bool) -> Path:
    """The verified cached model for `key`, exported (and quantized) first when missing, stale or corrupt.

    Raises OSError when cache_dir cannot be written (the caller then builds a throwaway copy).
    """
    model, record = cache_dir / f"{stem}.onnx", cache_dir / f"{stem}.json"
    if _verified(model, record, key):
        return model
    if model.exists() or record.exists():
        if _record(record).get("key") not in (None, key):  # e.g. after an upgrade: expected once, nothing is wrong
            log.info("%s: built for other model files, libraries or export format; exporting it again", model)
        else:
            log.warning("%s: corrupt or incomplete ONNX artefact, rebuilding it", model)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".export-") as tmp:
        built = _build(Path(tmp), export, quantize)
        digest, size = file_sha256(built), built.stat().st_size
        built.replace(model)  # same folder, so the rename is atomic
        _write_atomic(record, json.dumps({"key": key, "sha256": digest, "bytes": size}, indent=1).encode())
    log.info("%s: exported (%.1f MB)", model, size / 1e6)
    return model


def _options(threads: int) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads  # 0 = one per physical core
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    # No busy-waiting between runs: the two cores are shared with Chroma's threads during ingest and with
    # llama.cpp right after a query is embedded, and spinning workers would take CPU from both.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return opts


class OnnxEncoder:
    """An onnxruntime session over an exported sentence encoder: token ids in, pooled vectors out.

    Two ways to run it: `run` (one batch on every core, what a question takes) and `run_spread` (many batches at
    once, one per core, each on a single thread: what stored chunks take at ingest). One batch of 8 chunks is too
    little work to keep two threads busy inside each operator; two batches side by side are not. Both give the same
    vectors bit for bit: threads split a kernel's output, never its sums (tests compare them).
    """

    def __init__(self, cache_dir: Path | None, stem: str, key: str, export: Callable[[Path], None],
                 quantize: bool, threads: int = 0) -> None:
        import onnxruntime as ort

        try:
            if cache_dir is None:
                raise OSError("no cache folder given")
            self._graph: str | bytes = str(artefact(cache_dir, stem, key, export, quantize))
        except OSError as e:
            # e.g. a read-only data folder: build a throwaway copy, kept in memory for the sessions.
            log.warning("ONNX artefact not cached (%s); exporting to a temporary folder", e)
            with tempfile.TemporaryDirectory(prefix="rag-onnx-") as tmp:
                self._graph = _build(Path(tmp), export, quantize).read_bytes()
        except Exception as e:  # an export or quantization the graph does not survive
            raise ConfigError(f"embedding.backend: onnxruntime cannot run {stem}: {e}") from e
        try:
            self._session = ort.InferenceSession(self._graph, _options(threads), providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own types for a graph it cannot run
            raise ConfigError(f"embedding.backend: onnxruntime cannot run {stem}: {e}") from e
        self._single: Any = None  # the one-thread session run_spread shares between its threads, made on first use
        self._made = threading.Lock()
        self.inputs = [i.name for i in self._session.get_inputs()]
        width = self._session.get_outputs()[0].shape[-1]
        self.dim: int | None = width if isinstance(width, int) else None  # None: a symbolic width

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """Pooled vectors (not normalised) for one padded batch."""
        return self._run(self._session, feeds)

    def run_spread(self, jobs: Iterable[T], feeds: Callable[[T], dict[str, np.ndarray]],
                   workers: int) -> list[np.ndarray]:
        """Pooled vectors for each job's batch, in order: `workers` threads each take the next job, build its feeds
        (tokenizing, which releases the GIL too) and run it on one core. onnxruntime runs one session from several
        threads at once, so the weights are held once."""
        jobs = list(jobs)
        if workers <= 1 or len(jobs) <= 1:
            return [self.run(feeds(job)) for job in jobs]
        with self._made:
            if self._single is None:
                import onnxruntime as ort

                self._single = ort.InferenceSession(self._graph, _options(1), providers=["CPUExecutionProvider"])
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embed") as pool:
            return list(pool.map(lambda job: self._run(self._single, feeds(job)), jobs))

    def _run(self, session: Any, feeds: dict[str, np.ndarray]) -> np.ndarray:
        out = session.run(None, {name: np.asarray(feeds[name], dtype=np.int64) for name in self.inputs})
        return np.asarray(out[0], dtype=np.float32)
