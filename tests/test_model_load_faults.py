"""Loading a GGUF model file: missing, random, truncated, garbage or crashing files fail in a child process with one
clear error, a hanging load times out, a good file probes once; chat templates render only in llama-cpp-python's
sandbox, and a file whose template escapes is refused and never runs."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from rag import generate as G
from rag import gguf
from rag.config import Generation
from rag.records import ModelError


def _gen(path: Path, **kw: Any) -> Generation:
    return Generation(model_path=str(path), **kw)


@pytest.mark.parametrize(("name", "data", "message"), [
    ("missing.gguf", None, "model file not found"),
    ("random.gguf", os.urandom(2 << 20), "not a GGUF model file (bad header)"),
    ("tiny.gguf", b"GGUF" + os.urandom(1000), "model file is only 1004 bytes; truncated?"),
    ("garbage.gguf", b"GGUF" + os.urandom(2 << 20), "llama.cpp cannot load this file (this GGUF file is version"),
    ("badkv.gguf", b"GGUF\x03\x00\x00\x00" + (1).to_bytes(8, "little") + (10**12).to_bytes(8, "little")
     + os.urandom(2 << 20), "llama.cpp cannot load this file"),
])
def test_bad_model_files_are_one_clear_error(tmp_path: Path, name: str, data: bytes | None, message: str) -> None:
    path = tmp_path / name
    if data is not None:
        path.write_bytes(data)
    with pytest.raises(ModelError) as e:
        G.LlamaGenerator(_gen(path))
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value) and "\n" not in str(e.value)


def test_a_crashing_or_hanging_load_stays_in_the_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + os.urandom(2 << 20))
    monkeypatch.setattr(gguf, "_PROBE", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    with pytest.raises(ModelError, match=r"llama.cpp crashed reading this file \(signal 11\)"):
        G.LlamaGenerator(_gen(path))
    monkeypatch.setattr(gguf, "_PROBE", "import time; time.sleep(60)")
    t = time.perf_counter()
    with pytest.raises(ModelError, match="did not load within 1 s"):
        gguf.probe_gguf(path, timeout=1)
    assert time.perf_counter() - t < 10


@pytest.mark.slow
def test_a_truncated_real_model_is_rejected_and_a_good_one_probes_quickly(tmp_path: Path) -> None:
    good = gguf.default_model_path()
    cut = tmp_path / "cut.gguf"
    with good.open("rb") as src, cut.open("wb") as dst:
        dst.write(src.read(good.stat().st_size // 2))
    with pytest.raises(ModelError, match="data is not within the file bounds, model is corrupted or incomplete"):
        G.LlamaGenerator(_gen(cut))
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(good, copy)
    t = time.perf_counter()
    gguf.probe_gguf(copy, timeout=60)
    probe_s = time.perf_counter() - t
    t = time.perf_counter()
    gguf.probe_gguf(copy, timeout=60)  # remembered: picking the model again costs nothing
    assert probe_s < 10 and time.perf_counter() - t < 0.05
    assert gguf.is_installed_preset(good) and not gguf.is_installed_preset(copy)
    named = copy.rename(tmp_path / good.name)  # the preset's file name, but no install record: probed like any file
    assert not gguf.is_installed_preset(named)


ESCAPES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.system('echo pwned') }}",
    "{{ messages.__class__.__base__ }}",
    "{% set _ = messages.append({'role': 'system', 'content': 'injected'}) %}ok",
    "{{ raise_exception.__globals__.os }}",
]


@pytest.mark.parametrize("template", ESCAPES)
def test_gguf_chat_templates_render_only_in_a_sandbox(template: str) -> None:
    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    formatter = Jinja2ChatFormatter(template, eos_token="</s>", bos_token="<s>")
    assert isinstance(formatter._environment.environment, ImmutableSandboxedEnvironment)
    with pytest.raises(SecurityError):
        formatter(messages=[{"role": "user", "content": "hi"}])


def test_llama_cpp_uses_the_sandboxed_formatter_for_gguf_templates() -> None:
    """What the test above relies on, read from the installed source: GGUF templates go to Jinja2ChatFormatter,
    which builds an ImmutableSandboxedEnvironment, and no plain jinja2 Environment is made anywhere."""
    import llama_cpp

    pkg = Path(llama_cpp.__file__).parent
    fmt, llama = (pkg / "llama_chat_format.py").read_text(), (pkg / "llama.py").read_text()
    assert "environment = ImmutableSandboxedEnvironment(" in fmt
    assert "llama_chat_format.Jinja2ChatFormatter(" in llama
    assert "jinja2.Environment(" not in fmt + llama and "from jinja2 import Environment" not in fmt + llama


@pytest.mark.slow
def test_a_gguf_whose_template_escapes_is_refused_and_never_runs(tmp_path: Path) -> None:
    good = gguf.default_model_path()
    data = bytearray(good.read_bytes())
    from llama_cpp import Llama

    template = Llama(model_path=str(good), vocab_only=True, verbose=False).metadata["tokenizer.chat_template"]
    marker = tmp_path / "pwned"
    evil = "{{ cycler.__init__.__globals__.os.system('touch " + str(marker) + "') }}"
    evil += "{#" + " " * (len(template.encode()) - len(evil.encode()) - 4) + "#}"  # same length: offsets unchanged
    at = data.find(template.encode())
    data[at : at + len(template.encode())] = evil.encode()
    path = tmp_path / "evil.gguf"
    path.write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"its chat template was refused \(SecurityError: access to attribute "
                                         r"'__init__' of '\w+' object is unsafe"):
        G.LlamaGenerator(_gen(path, n_ctx=512))
    # Even with the probe off, llama-cpp-python renders it in its sandbox: refused, nothing ran.
    from jinja2.exceptions import SecurityError

    gen = G.LlamaGenerator(_gen(path, n_ctx=512, probe_timeout=0))
    with pytest.raises(SecurityError):
        list(gen.stream([{"role": "user", "content": "hi"}], max_tokens=4, temperature=0.0))
    assert not marker.exists()
