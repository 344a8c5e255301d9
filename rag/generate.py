"""The generator interface and its llama.cpp adapter (with quantize.py, the only modules that import llama_cpp).

A generator streams the text of a chat completion and counts tokens with the model's own tokenizer, so prompts
can be budgeted against `n_ctx` before anything reaches llama.cpp. One `Llama` object lives for the process; every
call, including consuming a stream to its end, holds one lock, because a llama.cpp context is not re-entrant.

Loading: the GGUF the settings name is resolved, checked and, unless it is the packaged default, test-loaded in a
child process first (gguf.py), so a bad file is a one-line `ModelError`, never a crash here; then its prepared Q8_0
copy, if it gets one, is loaded instead (quantize.py), with the original as the fallback should the copy not load.
The chat template comes from the GGUF and is rendered by llama-cpp-python in a sandboxed Jinja environment
(`ImmutableSandboxedEnvironment`); a GGUF without a template falls back to `chat_format`.

Not here: finding, checking, probing or preparing model files (gguf.py, quantize.py); a generator on another
machine (remote.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from .config import Generation
from .cpu import physical_cores
from .gguf import FTYPE_NAMES, check_gguf, gguf_file_type, is_installed_preset, probe_gguf, resolve_model
from .quantize import prepare_model
from .records import ModelError

log = logging.getLogger(__name__)

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}
# Chat-turn tokens some models print as text when their template does not match: never part of an answer.
TURN_MARKERS = ["<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>", "<|endoftext|>"]


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


class LlamaGenerator:
    """One long-lived llama.cpp model, serialised by a lock."""

    def __init__(self, settings: Generation, data_dir: Path | None = None) -> None:
        """`data_dir`: where installed presets live (`models/`) and where `prepare_model` may keep a faster copy of
        the GGUF; None resolves only paths and the default, and loads the file as it is."""
        source = resolve_model(settings, data_dir)
        check_gguf(source)
        if settings.probe_timeout > 0 and not is_installed_preset(source):
            probe_gguf(source, settings.probe_timeout)  # a bad file fails in a child process, not in this one
        # The copy needs no probe: llama.cpp itself wrote it from a file that passed, and its record checks it.
        path = prepare_model(source, settings, data_dir) if data_dir is not None else source
        from llama_cpp import Llama

        self.n_ctx = settings.n_ctx
        self.repeat_penalty = settings.repeat_penalty
        threads = settings.n_threads or physical_cores()
        draft = None
        if settings.prompt_lookup > 0:  # answers copy names and numbers out of the evidence: draft them from it
            from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

            draft = LlamaPromptLookupDecoding(num_pred_tokens=settings.prompt_lookup)
        for candidate in dict.fromkeys([path, source]):  # the copy, then the original should the copy not load
            try:
                self._llm = Llama(
                    model_path=str(candidate), n_ctx=settings.n_ctx, n_threads=threads, n_threads_batch=threads,
                    n_batch=settings.n_batch, n_ubatch=settings.n_ubatch or settings.n_batch,
                    flash_attn=settings.flash_attn, n_gpu_layers=settings.n_gpu_layers, seed=settings.seed,
                    # logits_all with a draft: llama-cpp-python 0.3.x turns it on itself but sizes its logits
                    # buffer from the argument (n_batch rows), and the second prompt batch overflows it
                    draft_model=draft, logits_all=draft is not None, verbose=False,
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
                top_p=0.95 if temperature > 0 else 1.0, stop=[*(stop or []), *TURN_MARKERS],
                repeat_penalty=self.repeat_penalty,
            )
            for chunk in chunks:
                piece = chunk["choices"][0]["delta"].get("content")
                if piece:
                    yield str(piece)
