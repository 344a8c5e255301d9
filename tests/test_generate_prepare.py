"""`rag.quantize.prepare_model`: which GGUFs get a Q8_0 copy, that the copy is made once and reused, and that every
way it can go wrong (changed source, truncated copy, failed or interrupted quantize, read-only folder) ends with a
good copy or the original file, never a half file.

Fast tests use a header-only GGUF (enough for `gguf_file_type` and the decisions; llama.cpp never reads it) and a
stand-in for llama.cpp's quantize call; the slow ones quantize the real SmolLM2 Q4_1 (~1 s each).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT

from rag import generate as G
from rag import gguf, quantize
from rag.config import Generation


def fake_gguf(path: Path, file_type: int | None, size: int = gguf.MIN_GGUF_BYTES) -> Path:
    """A GGUF v3 header (architecture, an array to skip, file type) padded to `size` bytes (sparse: no disk use)."""
    def s(text: str) -> bytes:
        return struct.pack("<Q", len(text)) + text.encode()

    kvs = [s("general.architecture") + struct.pack("<I", 8) + s("llama"),
           s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2) + s("a") + s("b")]
    if file_type is not None:
        kvs.append(s("general.file_type") + struct.pack("<II", 4, file_type))
    with path.open("wb") as fh:
        fh.write(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs))
        fh.truncate(size)
    return path


def _folder_files(data_dir: Path) -> list[str]:
    folder = data_dir / "models" / "prepared"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


# --- fast: decisions and failure handling ---------------------------------------------------------------------


def test_file_type_is_read_from_the_header(tmp_path: Path) -> None:
    assert gguf.gguf_file_type(fake_gguf(tmp_path / "a.gguf", gguf.FTYPE_Q4_1)) == gguf.FTYPE_Q4_1
    assert gguf.gguf_file_type(fake_gguf(tmp_path / "b.gguf", None)) is None
    (tmp_path / "c.gguf").write_bytes(b"not a gguf at all")
    assert gguf.gguf_file_type(tmp_path / "c.gguf") is None


@pytest.mark.parametrize("mode, file_type, size", [
    ("off", gguf.FTYPE_Q4_1, gguf.MIN_GGUF_BYTES),  # never
    ("auto", 15, gguf.MIN_GGUF_BYTES),  # Q4_K_M: K-quants already have fast kernels
    ("auto", gguf.FTYPE_Q8_0, gguf.MIN_GGUF_BYTES),
    ("q8_0", gguf.FTYPE_Q8_0, gguf.MIN_GGUF_BYTES),  # already what "q8_0" would make
    ("auto", gguf.FTYPE_Q4_1, quantize.AUTO_MAX_BYTES),  # a 4-bit file of 1 GB or more is not doubled silently
    ("auto", gguf.FTYPE_Q4_0, gguf.MIN_GGUF_BYTES),  # Q4_0's repacked kernels beat its own Q8_0 copy (bench formats)
])
def test_files_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, file_type: int,
                          size: int) -> None:
    src = fake_gguf(tmp_path / "m.gguf", file_type, size)
    monkeypatch.setattr(quantize, "quantized_copy", lambda *a, **k: pytest.fail("must not quantize"))
    assert quantize.prepare_model(src, Generation(quantize=mode), tmp_path / "data") == src
    assert not (tmp_path / "data").exists()


def test_auto_and_forced_modes_ask_for_a_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []

    def fake_copy(src: Path, folder: Path, threads: int) -> tuple[Path, bool]:
        calls.append(folder)
        return folder / "copy.gguf", True

    monkeypatch.setattr(quantize, "quantized_copy", fake_copy)
    data = tmp_path / "data"
    cases = [("auto", gguf.FTYPE_Q4_1), ("auto", gguf.FTYPE_Q5_0), ("auto", gguf.FTYPE_Q5_1), ("q8_0", 15),
             ("q8_0", gguf.FTYPE_Q4_0)]
    for mode, ftype in cases:
        src = fake_gguf(tmp_path / f"{mode}{ftype}.gguf", ftype)
        want = data / "models/prepared/copy.gguf"
        assert quantize.prepare_model(src, Generation(quantize=mode), data) == want
    assert calls == [data / "models" / "prepared"] * len(cases)


def _failing_quantize(rc: int | None) -> Any:
    """A stand-in for llama_model_quantize that writes half a file, then fails (rc) or is interrupted (None)."""
    def quantize(src: bytes, dst: bytes, params: Any) -> int:
        Path(dst.decode()).write_bytes(b"GGUF" + b"\0" * 1000)
        if rc is None:
            raise KeyboardInterrupt
        return rc
    return quantize


def test_a_failed_quantize_leaves_no_file_and_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    import llama_cpp

    src = fake_gguf(tmp_path / "m.Q4_1.gguf", gguf.FTYPE_Q4_1)
    monkeypatch.setattr(llama_cpp, "llama_model_quantize", _failing_quantize(1))
    assert quantize.prepare_model(src, Generation(), tmp_path / "data") == src
    assert _folder_files(tmp_path / "data") == []
    assert "no Q8_0 copy" in caplog.text and "quantize returned 1" in caplog.text


def test_an_interrupted_quantize_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import llama_cpp

    src = fake_gguf(tmp_path / "m.Q4_1.gguf", gguf.FTYPE_Q4_1)
    monkeypatch.setattr(llama_cpp, "llama_model_quantize", _failing_quantize(None))
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C is not swallowed, but cleans up on its way out
        quantize.prepare_model(src, Generation(), tmp_path / "data")
    assert _folder_files(tmp_path / "data") == []


def test_a_killed_quantize_leftover_is_removed_next_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import llama_cpp

    folder = tmp_path / "data" / "models" / "prepared"
    folder.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leftover = folder / f".m.Q4_1.Q8_0.x.gguf.{int(dead.stdout)}.tmp"  # a process killed mid-quantize left this
    leftover.write_bytes(b"GGUF half")
    mine = folder / f".other.gguf.{os.getpid()}.tmp"  # a live process's file is not touched
    mine.write_bytes(b"GGUF busy")
    monkeypatch.setattr(llama_cpp, "llama_model_quantize", _failing_quantize(1))
    quantize.prepare_model(fake_gguf(tmp_path / "m.Q4_1.gguf", gguf.FTYPE_Q4_1), Generation(), tmp_path / "data")
    assert not leftover.exists() and mine.exists()


def test_an_unwritable_data_dir_falls_back(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "models").write_text("a file where the models folder should be")  # mkdir fails, as on a full disk
    src = fake_gguf(tmp_path / "m.Q4_1.gguf", gguf.FTYPE_Q4_1)
    assert quantize.prepare_model(src, Generation(), data) == src
    assert "no Q8_0 copy" in caplog.text


def test_a_read_only_data_dir_falls_back(tmp_path: Path) -> None:
    """Read-only for root too: a read-only bind mount in a private mount namespace (as tests/test_readonly_store)."""
    probe = tmp_path / "probe"
    probe.mkdir()
    ok = shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-m", "sh", "-c", f"mount --bind {probe} {probe} && mount -o remount,bind,ro {probe} && "
         f"! touch {probe}/x 2>/dev/null"], capture_output=True).returncode == 0
    if not ok:
        pytest.skip("no private mount namespace here (unshare -m); cannot make a folder read-only for root")
    data = tmp_path / "data"
    data.mkdir()
    src = fake_gguf(tmp_path / "m.Q4_1.gguf", gguf.FTYPE_Q4_1)
    code = ("import sys; from pathlib import Path; from rag.quantize import prepare_model; from rag.config import "
            "Generation; print(prepare_model(Path(sys.argv[1]), Generation(), Path(sys.argv[2])))")
    done = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {data} {data} && "
                           f"mount -o remount,bind,ro {data} && {sys.executable} -c '{code}' {src} {data}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(src) and "no Q8_0 copy" in done.stderr
    assert list(data.iterdir()) == []


# --- slow: the real SmolLM2 GGUF through llama.cpp's quantize -------------------------------------------------


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(a private copy of the Q4_1 source, the data folder, its Q8_0 copy), made once for the module."""
    root = tmp_path_factory.mktemp("prep")
    smollm2 = gguf.model_file("smollm2", None)  # Q4_1: the quantization the copy replaces
    src = root / smollm2.name
    shutil.copy2(smollm2, src)
    data = root / "data"
    copy = quantize.prepare_model(src, Generation(), data)
    return src, data, copy


@pytest.mark.slow
def test_the_copy_is_q8_0_loads_and_answers(prepared: tuple[Path, Path, Path]) -> None:
    src, data, copy = prepared
    assert copy != src and copy.parent == data / "models" / "prepared" and gguf.gguf_file_type(copy) == gguf.FTYPE_Q8_0
    record = json.loads(copy.with_suffix(".json").read_text())
    assert record["source"] == str(src.resolve()) and record["size"] == copy.stat().st_size
    gen = G.LlamaGenerator(Generation(model_path=str(src), probe_timeout=0), data)
    assert gen.path == copy and gen.name == f"{src.name} → Q8_0"
    text = "".join(gen.stream([{"role": "user", "content": "What is 2+2?"}], 20, 0.0))
    assert "4" in text


@pytest.mark.slow
def test_the_copy_is_reused_then_remade_when_source_or_copy_change(prepared: tuple[Path, Path, Path]) -> None:
    src, data, copy = prepared
    folder = data / "models" / "prepared"
    before = copy.stat()
    assert quantize.quantized_copy(src, folder, 2) == (copy, False)
    assert (copy.stat().st_ino, copy.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    os.utime(src)  # a new mtime, same content: re-hashed, still reused
    assert quantize.quantized_copy(src, folder, 2) == (copy, False)
    assert copy.stat().st_ino == before.st_ino

    with copy.open("r+b") as fh:  # a truncated copy is detected and made again
        fh.truncate(before.st_size // 2)
    assert quantize.quantized_copy(src, folder, 2) == (copy, True)
    assert copy.stat().st_size == before.st_size and gguf.gguf_file_type(copy) == gguf.FTYPE_Q8_0

    made = json.loads(copy.with_suffix(".json").read_text())
    with src.open("r+b") as fh:  # a changed source (one weight byte of the last tensor, same size): made again
        fh.seek(-1, os.SEEK_END)
        last = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([last[0] ^ 1]))
    assert quantize.quantized_copy(src, folder, 2) == (copy, True)
    remade = json.loads(copy.with_suffix(".json").read_text())
    assert remade["source_sha256"] != made["source_sha256"]
    assert sorted(p.name for p in folder.iterdir()) == sorted([copy.name, copy.with_suffix(".json").name])


@pytest.mark.slow
def test_off_loads_the_original(prepared: tuple[Path, Path, Path]) -> None:
    src, data, _ = prepared
    gen = G.LlamaGenerator(Generation(model_path=str(src), probe_timeout=0, quantize="off"), data)
    assert gen.path == src and gen.name == src.name
