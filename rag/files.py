"""Finding corpus files and decoding their bytes: the part of ingest that touches the file system.

`find_files` expands folders into the files worth reading (hidden entries, symlinks leaving the folder and
anything that is not a regular file are skipped with a reason); `detect_encoding` / `decode` turn bytes into text
(BOMs, UTF-8, cp1252/latin-1) or refuse them with an `IngestError` (binary, corrupt UTF-8). Parsing formats into
papers is `parse.py`'s job, not this module's.
"""

from __future__ import annotations

import codecs
import hashlib
import itertools
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .records import IngestError

_BINARY_MAGIC = (b"\x89PNG", b"%PDF", b"PK\x03\x04", b"\x7fELF", b"GIF8", b"\xff\xd8\xff", b"\x1f\x8b")


@dataclass(frozen=True)
class Skip:
    """Something not ingested, and why: e.g. Skip("seeds/x.txt", "binary file (NUL bytes)", None)."""

    where: str
    reason: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.where}:{self.line}: {self.reason}" if self.line is not None else f"{self.where}: {self.reason}"


@dataclass
class ParseReport:
    """What reading some files produced; filled in as the paper iterator is consumed."""

    files: list[str] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    notes: list[Skip] = field(default_factory=list)  # ingested, but worth telling (e.g. decoded as cp1252)


# --- finding files ---------------------------------------------------------------------------------------------------


def find_files(paths: Iterable[Path], report: ParseReport) -> list[Path]:
    """Expand folders (sorted) into readable files. Hidden entries, symlinks leaving the folder, and anything that
    is not a regular file are skipped with a reason; hidden folders are not descended into."""
    out: list[Path] = []
    for root in paths:
        root = Path(root)
        if not root.exists():
            raise IngestError(str(root), "no such file or folder")
        if root.is_file():
            out.append(root)
            continue
        base = root.resolve()
        for folder, dirs, files in os.walk(root):  # does not follow symlinked folders
            here = Path(folder)
            for name in sorted(dirs):
                rel = (here / name).relative_to(root)
                if name.startswith("."):
                    report.skipped.append(Skip(f"{rel}/", "hidden folder; not read"))
                    dirs.remove(name)
                elif (here / name).is_symlink():
                    dirs.remove(name)
                    if not _inside(here / name, base):
                        report.skipped.append(Skip(str(rel), "symlink pointing outside the corpus folder; "
                                                             "not followed"))
            dirs.sort()
            for name in sorted(files):
                path = here / name
                rel = path.relative_to(root)
                if name.startswith("."):
                    report.skipped.append(Skip(str(rel), "hidden file; not read"))
                elif path.is_symlink() and not _inside(path, base):
                    report.skipped.append(Skip(str(rel), "symlink pointing outside the corpus folder (or broken); "
                                                         "not followed"))
                elif not path.is_file():
                    report.skipped.append(Skip(str(rel), "not a regular file; skipped"))
                elif name.lower() != "readme.md":
                    out.append(path)
    return out


def _inside(link: Path, base: Path) -> bool:
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):  # broken link or a loop (3.11 raises RuntimeError for loops)
        return False
    return target.is_relative_to(base)


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks (models and exports are hundreds of MB)."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- decoding --------------------------------------------------------------------------------------------------------


def decode(data: bytes, where: str) -> tuple[str, str]:
    """Bytes -> (text, encoding). UTF-8/UTF-16 by BOM, then UTF-8, then cp1252 when the bytes look like it."""
    encoding = detect_encoding([data], where)
    return _strict(data, encoding, where), encoding


def detect_encoding(blocks: Iterable[bytes], where: str) -> str:
    """The encoding of a file given as consecutive blocks (the first at least a few KB), or IngestError.

    The whole file is checked, so a streamed file does not turn out to be broken after its first megabyte;
    a UTF-8 character cut by a block boundary is fine (incremental decoder).
    """
    it = iter(blocks)
    first = next(it, b"")
    by_bom = _by_bom(first, it, where)
    if by_bom is not None:
        return by_bom
    if first.startswith(_BINARY_MAGIC) or b"\x00" in first[:65536]:
        raise IngestError(where, "binary file (not text); skipped")
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset, multibyte, undefined, error = 0, False, False, None
    for i, block in enumerate(itertools.chain([first], it)):
        multibyte = multibyte or _has_utf8_multibyte(block)
        undefined = undefined or re.search(rb"[\x81\x8d\x8f\x90\x9d]", block) is not None
        if error is None:
            try:
                decoder.decode(block, final=False)
            except UnicodeDecodeError as e:
                error = (offset + e.start, block[: e.start].count(b"\n"), i)
        offset += len(block)
        if error is not None and multibyte:
            break
    if error is None:
        try:
            decoder.decode(b"", final=True)
            return "utf-8"
        except UnicodeDecodeError:
            error = (offset, 0, -1)
    # A real cp1252/latin-1 file has high bytes but (almost) never a valid UTF-8 multi-byte sequence; a file that
    # mixes valid UTF-8 with broken sequences is corrupt UTF-8 and decoding it as cp1252 would garble it.
    if multibyte:
        line = error[1] + 1 if error[2] == 0 else None
        raise IngestError(where, f"invalid UTF-8 at byte {error[0]}; skipped", line)
    return "latin-1" if undefined else "cp1252"  # five bytes are undefined in cp1252; latin-1 maps every byte


def _by_bom(first: bytes, rest: Iterator[bytes], where: str) -> str | None:
    """The encoding a byte-order mark names, checked over the whole file; None without a BOM.

    FF FE 00 00 is the UTF-32 LE mark but also the UTF-16 LE mark followed by a NUL character, so both are tried
    (UTF-32 first) and the one that decodes the whole file wins; a file neither decodes is an IngestError, never a
    UnicodeDecodeError halfway through a streamed parse.
    """
    candidates = [enc for enc, boms in (("utf-32", (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)),
                                        ("utf-16", (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)),
                                        ("utf-8-sig", (codecs.BOM_UTF8,))) if first.startswith(boms)]
    if not candidates:
        return None
    decoders = {enc: codecs.getincrementaldecoder(enc)() for enc in candidates}
    valid = dict.fromkeys(candidates, True)
    for block in itertools.chain([first], rest, [b""]):
        for enc, decoder in decoders.items():
            if valid[enc]:
                try:
                    decoder.decode(block, final=not block)
                except UnicodeDecodeError:
                    valid[enc] = False
    for enc in candidates:
        if valid[enc]:
            return enc
    raise IngestError(where, f"invalid {' / '.join(candidates)} (the file starts with its byte-order mark); skipped")


def _strict(data: bytes, encoding: str, where: str) -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        raise IngestError(where, f"invalid {encoding} at byte {e.start}; skipped") from None


def _has_utf8_multibyte(data: bytes) -> bool:
    return re.search(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}", data) is not None


def blocks(path: Path, size: int = 1 << 20) -> Iterator[bytes]:
    with path.open("rb") as fh:
        yield from iter(lambda: fh.read(size), b"")
