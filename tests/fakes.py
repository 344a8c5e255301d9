"""Small deterministic fakes behind the real interfaces (Embedder, Generator), for fast tests."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import numpy as np

from rag.chunk import approx_tokens
from rag.text import tokens


class HashEmbedder:
    """Bag of words hashed into `dim` buckets, L2-normalised: texts sharing words are similar, others are not."""

    name = "fake-hash"
    max_tokens = 256

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.calls = 0
        self.embedded = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.embedded += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for tok in tokens(text):
                h = int(hashlib.md5(tok.encode()).hexdigest()[:8], 16)
                out[i, h % self.dim] += 1.0
            norm = np.linalg.norm(out[i])
            out[i] = out[i] / norm if norm else out[i]
            if not norm:
                out[i, 0] = 1.0
        return out

    def count_tokens(self, text: str) -> int:
        return approx_tokens(text)


class ScriptedGenerator:
    """Replays queued replies word by word and records the prompts it was given."""

    name = "scripted"

    def __init__(self, replies: list[str] | None = None, n_ctx: int = 2048) -> None:
        self.replies = list(replies or [])
        self.n_ctx = n_ctx
        self.prompts: list[list[dict[str, str]]] = []

    def stream(self, messages: list[dict[str, str]], max_tokens: int, temperature: float,
               stop: list[str] | None = None) -> Iterator[str]:
        self.prompts.append(messages)
        reply = self.replies.pop(0) if self.replies else "ok"
        words = reply.split(" ")
        for i, word in enumerate(words):
            yield word if i == 0 else " " + word

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        return sum(approx_tokens(m["content"]) for m in messages)
