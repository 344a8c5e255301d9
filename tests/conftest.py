"""Shared fixtures: fakes, a seeded index on the real embedder, and a network guard.

The guard makes any connection to a non-loopback address fail at once, so a test that would reach the network
fails instead of hanging (and proves the suite runs offline).
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
from pathlib import Path

import pytest

from rag.config import Settings, load

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT / "seeds"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _loopback(address: object) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX paths
    host = str(address[0])
    if host in {"localhost", ""}:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: object) -> None:
    if not _loopback(address):
        raise ConnectionRefusedError(f"tests are offline: refused connection to {address!r}")
    return _real_connect(self, address)  # type: ignore[arg-type]


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    if not _loopback(address):
        raise ConnectionRefusedError(f"tests are offline: refused connection to {address!r}")
    return _real_connect_ex(self, address)  # type: ignore[arg-type]


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]


def make_settings(data_dir: Path, **flags: object) -> Settings:
    return load(flags={"paths.data_dir": data_dir, "paths.seeds_dir": SEEDS, **flags}, env={})


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path / "data")


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The seeds ingested once with the real embedder into a session-wide data folder."""
    from rag.pipeline import ingest

    data = tmp_path_factory.mktemp("seeded")
    s = make_settings(data)
    ingest(s)
    return s


@pytest.fixture(scope="session")
def real_assistant(seeded: Settings):  # type: ignore[no-untyped-def]
    from rag.pipeline import Assistant

    assistant = Assistant(seeded)
    assistant.warm()
    return assistant


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A copy of the seeds to edit."""
    dst = tmp_path / "corpus"
    shutil.copytree(SEEDS, dst)
    return dst
