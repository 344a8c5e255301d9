"""Files -> Paper records: parsing the formats we read (finding files and decoding bytes is `files.py`).

Formats: the seed text format (a venue title line, then abstracts separated by blank lines), JSON lines (one
object per line with `abstract` and optionally `title`, `authors`, `year`, `url`/`id`: the arXiv metadata snapshot
fits), and CSV with an `abstract` column. JSONL and CSV are streamed, so a large dump never sits in memory whole.

Every problem becomes either an `IngestError` for the whole file (the caller records it as a skip with the reason)
or a per-record skip; nothing here raises anything else. This module does no embedding and touches no store.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import re
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path

from .files import ParseReport, Skip, blocks, decode, detect_encoding, find_files
from .orders import title_problem
from .records import IngestError, Paper
from .text import clean, clean_lines, derive_title, find_links, latex_to_text

log = logging.getLogger(__name__)

# Bump when the same file parses into different records (e.g. a better derived title, sentence split): the indexer
# then reads every file once more and updates the papers whose record changed.
PARSE_VERSION = 3  # 3: line breaks after a sentence end kept, CJK full stops, titles that are orders withheld
TEXT_SUFFIXES = {".txt", ".text", ".md", ""}
JSONL_SUFFIXES = {".jsonl", ".ndjson", ".json"}
CSV_SUFFIXES = {".csv", ".tsv"}
MAX_TEXT_BYTES = 16 * 1024 * 1024  # the text format is read whole; bigger dumps should be JSONL/CSV (streamed)
MIN_ABSTRACT_CHARS = 40
# A real abstract is under ~3,000 characters (arXiv caps them at 1,920); 20,000 leaves room for long ones while a
# 1 MB line of junk is refused instead of becoming ~8,000 chunks to embed.
MAX_ABSTRACT_CHARS = 20_000
MAX_LINE_CHARS = 1_000_000  # a JSONL line longer than this is not one paper; it is skipped without being held whole
MAX_TITLE_CHARS = 300


def paper_id(raw_abstract: str) -> str:
    """Stable id from the abstract's content: the same text gives the same id in any file, at any position."""
    return hashlib.sha256(("abstract\0" + clean(raw_abstract)).encode("utf-8")).hexdigest()[:16]


# --- building papers -------------------------------------------------------------------------------------------------


def make_paper(raw: str, source: str, position: int, venue: str = "", title: str = "", authors: str = "",
               year: int | None = None, url: str = "") -> Paper:
    lines = clean_lines(raw)  # a line break after a sentence end stays a sentence boundary (text.clean_lines)
    raw = clean(raw)
    readable = "\n".join(latex_to_text(line) for line in lines.split("\n"))
    links = find_links(raw)
    if url and url not in links:
        links = (*links, url)
    given = _shorten(clean(latex_to_text(title))) if title else ""
    withheld = given if given and (title_problem(clean(title)) or title_problem(given)) else ""
    return Paper(
        paper_id=paper_id(raw),
        title=(given if not withheld else "") or _derived_title(readable),  # e.g. a title of "{}" renders as nothing
        venue=venue,
        source=source,
        position=position,
        abstract=readable,
        raw=raw,
        links=links,
        authors=clean(authors),
        year=year,
        url=url,
        withheld_title=withheld,
    )


def _derived_title(readable: str) -> str:
    """The abstract's named method or opening sentence, from sentences that are not planted orders and hold no
    URL; "Untitled" when there is none (a title is quoted to the model and opens a which-paper answer)."""
    title = derive_title(readable, skip=lambda sentence: title_problem(sentence) is not None)
    return title if title and title_problem(title) is None else "Untitled"


def _shorten(title: str) -> str:
    return title if len(title) <= MAX_TITLE_CHARS else title[: MAX_TITLE_CHARS - 1].rstrip() + "…"


def _size_problem(body: str) -> str | None:
    """Why a cleaned abstract cannot be one, or None: e.g. "too long to be an abstract (1000000 characters > 20000)"."""
    if len(body) > MAX_ABSTRACT_CHARS:
        return f"too long to be an abstract ({len(body)} characters > {MAX_ABSTRACT_CHARS})"
    if len(body) < MIN_ABSTRACT_CHARS or len(body.split()) < 5:
        return f"too short to be an abstract ({len(body)} characters, {len(body.split())} words)"
    return None


def _note_invisible(raw: str, source: str, line: int | None, report: ParseReport) -> None:
    """Zero-width and bidi controls (Unicode format characters) are removed by clean(); say so."""
    n = sum(1 for c in raw if unicodedata.category(c) == "Cf")
    if n:
        report.notes.append(Skip(source, f"removed {n} invisible characters (zero-width or bidi controls)", line))


def _parse_text(text: str, source: str, report: ParseReport) -> Iterator[Paper]:
    """Seed format: optional title line (the venue), blank line, then one abstract per blank-line-separated block."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[tuple[int, str]] = []  # (first line number, text)
    current: list[str] = []
    start = 1
    for number, text_line in enumerate(lines, start=1):
        if text_line.strip():
            if not current:
                start = number
            current.append(text_line.strip())
        elif current:
            blocks.append((start, "\n".join(current)))
            current = []
    if current:
        blocks.append((start, "\n".join(current)))
    if not blocks:
        raise IngestError(source, "empty file (no text); skipped")
    venue = ""
    _, first = blocks[0]
    if len(blocks) > 1 and len(first) <= 120 and not first.rstrip().endswith((".", "?", "!")):
        venue = clean(first)
        blocks = blocks[1:]
    for position, (line, block) in enumerate(blocks):
        body = clean(block)
        problem = _size_problem(body)
        if problem:
            report.skipped.append(Skip(source, problem, line))
            continue
        _note_invisible(block, source, line, report)
        if not re.sub(r"\s*\S*https?://\S+$", ".", body).rstrip("\"”’)] ").endswith((".", "!", "?")):
            report.notes.append(Skip(source, "abstract has no sentence end; ingested as it is", line))
        yield make_paper(block, source, position, venue=venue)


def _field(record: dict[str, object], *names: str) -> str:
    for name in names:
        value = record.get(name)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return ", ".join(value)  # type: ignore[arg-type]
    return ""


def _year(text: str) -> int | None:
    digits = "".join(c for c in text[:4] if c.isdigit())
    return int(digits) if len(digits) == 4 else None


def _record_paper(record: dict[str, object], source: str, position: int, line: int,
                  report: ParseReport) -> Paper | None:
    abstract = _field(record, "abstract", "summary", "text")
    if len(clean(abstract)) < MIN_ABSTRACT_CHARS:
        report.skipped.append(Skip(source, 'missing or too short "abstract"', line))
        return None
    problem = _size_problem(clean(abstract))
    if problem:
        report.skipped.append(Skip(source, problem, line))
        return None
    _note_invisible(abstract, source, line, report)
    url = _field(record, "url", "link", "pdf_url")
    if not url and _field(record, "id") and "/" not in _field(record, "id")[:3]:
        arxiv = _field(record, "id")
        url = f"https://arxiv.org/abs/{arxiv}" if any(c.isdigit() for c in arxiv[:4]) else ""
    return make_paper(
        abstract, source, position, venue=_field(record, "venue", "journal-ref", "journal"),
        title=_field(record, "title"), authors=_field(record, "authors", "author"),
        year=_year(_field(record, "year", "update_date", "published")), url=url,
    )


def _lines(handle: io.TextIOBase) -> Iterator[tuple[int, str | None]]:
    """(line number, line) pairs; a line over MAX_LINE_CHARS comes back as None, read past but never held whole."""
    number = 0
    while True:
        line = handle.readline(MAX_LINE_CHARS)
        if not line:
            return
        number += 1
        if len(line) >= MAX_LINE_CHARS and not line.endswith(("\n", "\r")):
            while (more := handle.readline(MAX_LINE_CHARS)) and not more.endswith(("\n", "\r")):
                pass
            yield number, None
            continue
        yield number, line


def _parse_jsonl(handle: io.TextIOBase, source: str, report: ParseReport) -> Iterator[Paper]:
    position = 0
    for line_no, line in _lines(handle):
        if line is None:
            report.skipped.append(Skip(source, f"line longer than {MAX_LINE_CHARS} characters; skipped", line_no))
            continue
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            report.skipped.append(Skip(source, f"not valid JSON ({e.msg})", line_no))
            continue
        except (ValueError, RecursionError) as e:  # e.g. a 5,000-digit number, or arrays nested 100,000 deep
            report.skipped.append(Skip(source, f"not usable JSON ({type(e).__name__})", line_no))
            continue
        if not isinstance(record, dict):
            report.skipped.append(Skip(source, "expected a JSON object", line_no))
            continue
        paper = _record_paper(record, source, position, line_no, report)
        position += 1
        if paper is not None:
            yield paper


def _parse_csv(stream: Iterable[str], source: str, report: ParseReport, delimiter: str) -> Iterator[Paper]:
    reader = csv.DictReader(stream, delimiter=delimiter)
    try:
        names = reader.fieldnames
    except csv.Error as e:
        raise IngestError(source, f"not readable as CSV ({e}); skipped", 1) from None
    if not names or not ({"abstract", "summary", "text"} & {f.strip().lower() for f in names}):
        raise IngestError(source, 'no "abstract" column in the header; skipped', 1)
    position = 0
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:  # e.g. a field over the csv module's limit: the rest of the file cannot be trusted
            report.skipped.append(Skip(source, f"CSV error after line {reader.line_num} ({e}); the rest of the file "
                                               "is skipped"))
            return
        record: dict[str, object] = {(k or "").strip().lower(): v if isinstance(v, str) else ""
                                     for k, v in row.items()}
        paper = _record_paper(record, source, position, reader.line_num, report)
        position += 1
        if paper is not None:
            yield paper


def read_papers(path: Path, report: ParseReport, source: str | None = None) -> Iterator[Paper]:
    """Papers of one file. Raises IngestError (file-level problem) before yielding anything; a problem found
    later in a streamed file skips the rest of it with a reason and keeps the papers before it."""
    name = source or path.name
    suffix = path.suffix.lower()
    try:
        size = path.stat().st_size
        if size == 0:
            raise IngestError(name, "empty file; skipped")
        if suffix in JSONL_SUFFIXES | CSV_SUFFIXES:
            encoding = detect_encoding(blocks(path), name)  # reads the whole file once; cheap next to embedding
            with io.TextIOWrapper(path.open("rb"), encoding=encoding, newline="") as handle:
                if not handle.read(65536).strip() and not handle.read(1):
                    raise IngestError(name, "whitespace only; skipped")
                handle.seek(0)
                report.files.append(name)
                try:
                    if suffix in JSONL_SUFFIXES:
                        yield from _parse_jsonl(handle, name, report)
                    else:
                        yield from _parse_csv(handle, name, report, "\t" if suffix == ".tsv" else ",")
                except UnicodeDecodeError as e:  # the file changed under us since its encoding was checked
                    report.skipped.append(Skip(name, f"invalid {encoding} ({e.reason}); the rest of the file is "
                                                     "skipped"))
            if encoding not in {"utf-8", "utf-8-sig"}:
                report.notes.append(Skip(name, f"decoded as {encoding}"))
            return
        if size > MAX_TEXT_BYTES:
            raise IngestError(name, f"too large for the text format ({size / 2**20:.1f} MB > "
                                    f"{MAX_TEXT_BYTES // 2**20} MB); convert it to JSONL, which is streamed")
        text, encoding = decode(path.read_bytes(), name)
    except OSError as e:
        raise IngestError(name, f"cannot read ({e.strerror or e})") from None
    if not text.strip():
        raise IngestError(name, "whitespace only; skipped")
    if encoding not in {"utf-8", "utf-8-sig"}:
        report.notes.append(Skip(name, f"decoded as {encoding}"))
    report.files.append(name)
    yield from _parse_text(text, name, report)


def iter_papers(paths: Iterable[Path], report: ParseReport) -> Iterator[Paper]:
    """Papers of every file under paths, each abstract once (a duplicate of an earlier one is skipped)."""
    seen: dict[str, str] = {}
    for path in find_files(paths, report):
        try:
            for paper in read_papers(path, report):
                first = seen.get(paper.paper_id)
                if first is not None:
                    report.skipped.append(Skip(paper.source, f"duplicate of {first}; ingested once", None))
                    continue
                seen[paper.paper_id] = f"{paper.source}#{paper.position}"
                yield paper
        except IngestError as e:
            report.skipped.append(Skip(e.path, e.reason, e.line))
