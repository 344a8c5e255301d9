"""`generation.n_gpu_layers` reaches llama.cpp: from the flag, the environment and a TOML file into Settings, and from
Settings into the real `llama_cpp.Llama` the generator loads (its model parameters), on a machine without a GPU.

A CPU-only build of llama.cpp accepts the value and offloads nothing; a CUDA or Metal build offloads that many layers
(-1 = all; README "On a GPU").
"""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import pytest

from rag.cli import build_parser, settings_from
from rag.config import Generation, load
from rag.generate import LlamaGenerator

ALL_LAYERS = 0x7FFFFFFF  # llama-cpp-python's spelling of -1 ("every layer") in llama.cpp's model parameters


@pytest.mark.parametrize("layers", [-1, 0, 12])
def test_n_gpu_layers_reaches_the_llama_constructor_and_llama_cpp(layers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    real = llama_cpp.Llama

    class Recording(real):  # type: ignore[misc,valid-type]
        """The real class; it only notes the argument on the way in."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            seen.append(int(kwargs["n_gpu_layers"]))  # type: ignore[call-overload]
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(llama_cpp, "Llama", Recording)
    gen = LlamaGenerator(Generation(n_gpu_layers=layers, n_ctx=256))
    assert seen == [layers]
    assert gen._llm.model_params.n_gpu_layers == (ALL_LAYERS if layers == -1 else layers)
    assert list(gen.stream([{"role": "user", "content": "Hi"}], max_tokens=2, temperature=0.0))  # and it runs


def test_n_gpu_layers_from_flag_environment_and_file(tmp_path: Path) -> None:
    args = build_parser().parse_args(["serve", "--n-gpu-layers", "-1", "--data-dir", str(tmp_path)])
    assert settings_from(args).generation.n_gpu_layers == -1
    assert load(env={"RAG_GENERATION_N_GPU_LAYERS": "-1"}).generation.n_gpu_layers == -1
    toml = tmp_path / "gpu.toml"
    toml.write_text("[generation]\nn_gpu_layers = -1\n")
    assert load(toml, env={}).generation.n_gpu_layers == -1
    assert load(env={}).generation.n_gpu_layers == 0  # CPU by default
