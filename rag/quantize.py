"""Prepared copies of GGUF files: a file of a type with slow CPU kernels requantized to Q8_0 once, then reused.

llama.cpp's Q4_1, Q5_0 and Q5_1 CPU kernels are slow (a Q8_0 requantization prefills about twice as fast), so by
default (`prepare_model`) a small file of those types is requantized to Q8_0 once with llama.cpp's own quantize API
and the copy is loaded instead. Q4_0 is left alone: llama.cpp repacks it at load into interleaved blocks with fast
AVX2/AVX-512 and NEON kernels, so it prefills and decodes faster than its own Q8_0 copy; Q8_0 of a Q4_1 file, by
contrast, is near-lossless where Q4_0 of it is not, so "auto" never goes down to Q4_0 either (bench/formats.py
measures all of this; bench/RESULTS.md has the figures). The copy lives in `<data_dir>/models/prepared` beside a JSON
record of its source; it is remade when the source, the copy or llama-cpp-python changes, and any failure (read-only
folder, full disk, quantize error) falls back to the original with a warning.

Not here: loading a model (generate.py), checking or reading a file's header (gguf.py). Nothing else is downloaded
or converted (no other formats, no K-quants: those already have fast kernels). llama_cpp is imported here only for
its quantize API, inside `quantized_copy`.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from .config import Generation
from .cpu import physical_cores
from .files import file_sha256
from .gguf import FTYPE_NAMES, FTYPE_Q4_1, FTYPE_Q5_0, FTYPE_Q5_1, FTYPE_Q8_0, check_gguf, gguf_file_type
from .records import ModelError

log = logging.getLogger(__name__)

AUTO_FTYPES = (FTYPE_Q4_1, FTYPE_Q5_0, FTYPE_Q5_1)  # the types whose CPU kernels prefill slower than Q8_0
# "auto" leaves bigger files alone: Q8_0 is ~1.9x the bytes of Q4, so a 4-bit 7B model would silently take ~7 GB.
AUTO_MAX_BYTES = 1 << 30


def prepare_model(path: Path, settings: Generation, data_dir: Path) -> Path:
    """The file to load for the GGUF at `path`: its cached Q8_0 copy when `settings.quantize` asks for one
    ("auto": the file is Q4_1/Q5_0/Q5_1 and under AUTO_MAX_BYTES; "q8_0": any file not already Q8_0), else `path`.

    Never raises for a copy that cannot be made or kept (read-only data folder, full disk, quantize error): that
    logs a warning and returns `path`, since the original still answers, only slower.
    """
    if settings.quantize == "off":
        return path
    ftype = gguf_file_type(path)
    if ftype == FTYPE_Q8_0:
        return path
    if settings.quantize == "auto" and (ftype not in AUTO_FTYPES or path.stat().st_size >= AUTO_MAX_BYTES):
        return path
    try:
        return quantized_copy(path, data_dir / "models" / "prepared", settings.n_threads or physical_cores())[0]
    except (OSError, ModelError) as e:
        log.warning("%s: no Q8_0 copy (%s); loading the original, which prefills about half as fast", path.name, e)
        return path


def quantized_copy(src: Path, folder: Path, threads: int, ftype: int = FTYPE_Q8_0) -> tuple[Path, bool]:
    """(the copy, whether it was made now): a requantized copy of `src` in `folder`, reused while its record matches.

    The record (`<copy>.json`) names the source and holds its size, mtime and sha256, the copy's size, mtime and
    sha256, and the llama-cpp-python version. Reuse checks size + mtime of both files (a stat each); only when one
    differs is that file re-hashed, and a matching hash is accepted (a `touch` or a copy with a new mtime). Hashing
    every start instead would cost 0.12 s for the 138 MB SmolLM2 copy warm, seconds for large models or a cold
    disk, and guard only against an edit that keeps both size and mtime, which nothing in normal operation does;
    a truncated or replaced copy changes its size or mtime and is re-hashed, fails, and is made again.
    """
    import llama_cpp

    st = src.stat()
    # The source's folder in the name: two models called the same in different folders never share one copy.
    tag = hashlib.sha256(str(src.resolve().parent).encode()).hexdigest()[:8]
    dst = folder / f"{src.name.removesuffix('.gguf')}.{FTYPE_NAMES.get(ftype, f'ftype{ftype}')}.{tag}.gguf"
    record_path = dst.with_suffix(".json")
    version = getattr(llama_cpp, "__version__", "unknown")
    record = _read_record(record_path)
    if record is not None and record.get("llama_cpp") == version and record.get("ftype") == ftype and \
            record.get("source") == str(src.resolve()) and _same(src, record, "source_") and _same(dst, record, ""):
        if record.get("_refreshed"):  # a new mtime with the same content: remember it, so the next start only stats
            record.pop("_refreshed")
            _write_record(record_path, record, quiet=True)
        return dst, False

    folder.mkdir(parents=True, exist_ok=True)
    _remove_stale_tmp(folder)
    src_sha = file_sha256(src)
    # A per-process temporary name: a crash or kill mid-quantize leaves at most this file, never a half `dst`,
    # and it is removed by the next start (`_remove_stale_tmp`) once its process is gone.
    tmp = folder / f".{dst.name}.{os.getpid()}.tmp"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True  # the source is already quantized
    params.nthread = threads
    # llama.cpp logs every tensor while quantizing; keep that out of the terminal unless debugging.
    logging.getLogger("llama-cpp-python").setLevel(logging.DEBUG if log.isEnabledFor(logging.DEBUG) else logging.ERROR)
    log.info("requantizing %s to %s in %s (once)", src.name, FTYPE_NAMES.get(ftype, ftype), folder)
    try:
        rc = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params))
        if rc != 0 or not tmp.is_file():
            raise ModelError(f"llama.cpp's quantize returned {rc}")
        check_gguf(tmp)
        out = tmp.stat()
        out_sha = file_sha256(tmp)
        tmp.replace(dst)
    finally:
        tmp.unlink(missing_ok=True)
    _write_record(record_path, {
        "source": str(src.resolve()), "source_size": st.st_size, "source_mtime_ns": st.st_mtime_ns,
        "source_sha256": src_sha, "size": out.st_size, "mtime_ns": out.st_mtime_ns, "sha256": out_sha,
        "ftype": ftype, "llama_cpp": version})
    return dst, True


def _same(path: Path, record: dict[str, Any], prefix: str) -> bool:
    """Whether `path` is the file the record describes: same size + mtime, or same size + sha256 (then the record
    is marked for a refresh of its mtime)."""
    try:
        st = path.stat()
    except OSError:
        return False
    if st.st_size != record.get(f"{prefix}size"):
        return False
    if st.st_mtime_ns == record.get(f"{prefix}mtime_ns"):
        return True
    if file_sha256(path) != record.get(f"{prefix}sha256"):
        return False
    record[f"{prefix}mtime_ns"] = st.st_mtime_ns
    record["_refreshed"] = True
    return True


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_record(path: Path, record: dict[str, Any], quiet: bool = False) -> None:
    """Atomically (temporary file + rename), so a reader never sees half a record."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(record, indent=1), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)
        if not quiet:
            raise


def _remove_stale_tmp(folder: Path) -> None:
    """Delete temporary files left by a quantize or record write whose process no longer runs."""
    for tmp in folder.glob(".*.tmp"):
        try:
            pid = int(tmp.name.rsplit(".", 2)[1])
            os.kill(pid, 0)  # raises if no such process
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
        except (ValueError, OSError):
            continue
