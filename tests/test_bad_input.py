"""Bad input never loses stored data: the seeds are ingested first, then each bad file is added to the same folder
and ingested again. The file gets one clear line (a skip with its reason, or a note when it was ingested after a
repair such as decoding cp1252), the run goes on, and every paper and chunk stored before is still there, unchanged.

Then Hypothesis properties of the parser and chunker: nothing but the project's IngestError escapes, no empty
chunk, every embedded text within the embedder's limit, and the same input always gives the same output. (No
example database: tests write nothing into the working directory.)
"""

from __future__ import annotations

import codecs
import json
import os
import shutil
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes import HashEmbedder
from helpers import SEEDS, make_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag.catalog import Catalog
from rag.chunk import approx_tokens
from rag.index import IndexPaths, open_store
from rag.indexer import build_index, chunk_texts
from rag.parse import MAX_ABSTRACT_CHARS, MIN_ABSTRACT_CHARS, ParseReport, iter_papers, make_paper, read_papers
from rag.records import IngestError

ABSTRACT = ("We study café naïveté in a résumé corpus, with “smart quotes” — and dashes. "
            "It reports accuracy carefully across many settings.")


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")

    ihdr = (1).to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0])
    body = chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00\x00")) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


def _write(name: str, data: bytes) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        (folder / name).write_bytes(data)

    return make


def _big(name: str, line: bytes, size: int) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        with (folder / name).open("wb") as fh:
            for _ in range(size // len(line)):
                fh.write(line)

    return make


def _symlink_out(folder: Path) -> None:
    outside = folder.parent / "outside-secret.txt"
    outside.write_text("Venue\n\nA secret outside the corpus that must never be read or followed by ingest.\n")
    (folder / "link.txt").symlink_to(outside)


def _hidden(folder: Path) -> None:
    (folder / ".hidden.txt").write_text("Venue\n\n" + ABSTRACT.replace("café", "hidden"), encoding="utf-8")
    (folder / ".git").mkdir()
    (folder / ".git" / "notes.txt").write_text("Venue\n\n" + ABSTRACT.replace("café", "git"), encoding="utf-8")


def _fifo(folder: Path) -> None:
    os.mkfifo(folder / "pipe.txt")  # reading it would block forever


def _duplicate(folder: Path) -> None:
    text = (folder / "000_938f08ec0059db85.txt").read_text(encoding="utf-8").split("\n\n")[3]
    (folder / "copy.txt").write_text("Another venue\n\n" + text + "\n", encoding="utf-8")


def _zero_width_duplicate(folder: Path) -> None:
    text = (folder / "000_938f08ec0059db85.txt").read_text(encoding="utf-8").split("\n\n")[4]
    words = text.split(" ")
    sneaky = " ".join(w + ("\u200b" if i % 3 else "\u202e") for i, w in enumerate(words))
    (folder / "sneaky.txt").write_text("Venue\n\n" + sneaky + "\n", encoding="utf-8")


def _invalid_utf8(folder: Path) -> None:
    (folder / "broken.txt").write_bytes("Venue\n\ncafé ".encode() + b"\xc3\x28 " + ABSTRACT.encode())


# name -> (make the file(s), how the line in `skipped` starts)
CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "empty file": (_write("empty.txt", b""), "empty.txt: empty file"),
    "whitespace only": (_write("blank.txt", b"  \n\n\t \r\n"), "blank.txt: whitespace only"),
    "NUL bytes": (_write("nul.txt", b"Venue\n\nabc\x00def " * 20), "nul.txt: binary file"),
    "a PNG": (_write("figure.png", _png()), "figure.png: binary file"),
    "a PNG named .txt": (_write("figure.txt", _png()), "figure.txt: binary file"),
    "a 50 MB text file": (_big("huge.txt", b"Lorem ipsum dolor sit amet. " * 64 + b"\n", 50 << 20),
                          "huge.txt: too large for the text format"),
    "a 50 MB JSONL line": (_big("huge.jsonl", b'{"abstract": "' + b"x" * 1022 + b'",', 50 << 20),
                           "huge.jsonl:1: line longer than 1000000 characters"),
    "a 1 MB line without spaces": (_write("oneline.txt", b"Venue\n\n" + b"x" * (1 << 20) + b"\n"),
                                   "oneline.txt:3: too long to be an abstract"),
    "invalid UTF-8": (_invalid_utf8, "broken.txt:3: invalid UTF-8"),
    "UTF-16 without a BOM": (_write("u16.txt", ("Venue\n\n" + ABSTRACT).encode("utf-16-le")), "u16.txt: binary"),
    "a symlink out of the folder": (_symlink_out, "link.txt: symlink pointing outside the corpus folder"),
    "hidden files": (_hidden, ".hidden.txt: hidden file"),
    "a named pipe": (_fifo, "pipe.txt: not a regular file"),
    "a duplicate abstract": (_duplicate, "copy.txt#0: duplicate of 000_938f08ec0059db85.txt#2; ingested once"),
    "a duplicate hidden by zero-width and bidi characters": (
        _zero_width_duplicate, "sneaky.txt#0: duplicate of 000_938f08ec0059db85.txt#3; ingested once"),
    "a JSONL of bad records": (_write("bad.jsonl", b'{bad json\n[1, 2]\n{"abstract": 12}\n' + b"[" * 100_000 + b"\n"
                                      + b'{"abstract": ' + b"9" * 5000 + b"}\n"), "bad.jsonl:1: not valid JSON"),
    "a CSV without an abstract column": (_write("table.csv", b"title,year\nA,2020\n"),
                                         'table.csv:1: no "abstract" column'),
    "a CSV field over the csv limit": (_write("wide.csv", b'abstract\n"' + b"word " * 40_000 + b'"\n'),
                                       "wide.csv: CSV error after line 1"),
}

# name -> (file name, bytes, the note expected; "" for none). Each abstract must read right once decoded.
ENCODED: dict[str, tuple[str, bytes, str]] = {
    "cp1252": ("win.txt", ("Venue\n\n" + ABSTRACT).encode("cp1252"), "decoded as cp1252"),
    "latin-1": ("latin.txt", ("Venue\n\n" + ABSTRACT.replace("“", '"').replace("”", '"').replace("—", "-")
                              .replace("café", "caf\u00e9 \u0081")).encode("latin-1"), "decoded as latin-1"),
    "UTF-16 with BOM": ("u16bom.txt", codecs.BOM_UTF16_LE + ("Venue\n\n" + ABSTRACT).encode("utf-16-le"), ""),
    "UTF-8 with BOM": ("u8bom.txt", codecs.BOM_UTF8 + ("Venue\n\n" + ABSTRACT).encode(), ""),
    "cp1252 JSONL": ("win.jsonl", json.dumps({"abstract": ABSTRACT}, ensure_ascii=False).encode("cp1252"),
                     "decoded as cp1252"),
    "zero-width and bidi characters": ("zw.txt", ("Venue\n\n" + ABSTRACT.replace("café", "ca\u200bf\u00e9\u2066")
                                                  .replace("corpus", "cor\u202epus")).encode(),
                                       "removed 3 invisible characters"),
}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The seeds ingested once (fake embedder, real Chroma); each test copies the folder and the store."""
    root = tmp_path_factory.mktemp("bad-input")
    corpus = root / "corpus"
    shutil.copytree(SEEDS, corpus)
    build_index(make_settings(root / "data", **{"paths.seeds_dir": corpus}), HashEmbedder())
    return corpus, root / "data"


def _snapshot(data: Path, corpus: Path) -> tuple[dict[str, Any], dict[str, tuple[str, str]]]:
    s = make_settings(data, **{"paths.seeds_dir": corpus})
    catalog = Catalog(IndexPaths.of(s).catalog)
    papers = {p.paper_id: p.to_dict() for p in catalog.iter_papers()}
    catalog.close()
    chunks = {cid: (pid, text) for cid, pid, text in open_store(s, HashEmbedder(), create=False).all_chunks()}
    return papers, chunks


def _reingest(stored: tuple[Path, Path], tmp_path: Path, make: Callable[[Path], None]) -> Any:
    corpus, data = tmp_path / "corpus", tmp_path / "data"
    shutil.copytree(stored[0], corpus)  # same relative names as the stored manifest, so only the new file differs
    shutil.copytree(stored[1], data)
    before = _snapshot(data, corpus)
    make(corpus)
    summary = build_index(make_settings(data, **{"paths.seeds_dir": corpus}), HashEmbedder())
    return before, _snapshot(data, corpus), summary


@pytest.mark.parametrize("case", list(CASES))
def test_bad_file_is_skipped_with_one_line_and_stored_data_is_untouched(stored, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                        case: str) -> None:
    make, expected_line = CASES[case]
    (before_papers, before_chunks), (after_papers, after_chunks), summary = _reingest(stored, tmp_path, make)
    lines = [str(s) for s in summary.skipped]
    assert any(line.startswith(expected_line) for line in lines), lines
    assert all("\n" not in line and len(line) < 400 for line in lines)
    assert after_papers == before_papers and after_chunks == before_chunks  # nothing lost, nothing changed
    assert summary.papers == 38


@pytest.mark.parametrize("case", list(ENCODED))
def test_known_encodings_are_decoded_and_stored_data_is_untouched(stored, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                  case: str) -> None:
    name, data, note = ENCODED[case]
    (before_papers, before_chunks), (after_papers, after_chunks), summary = _reingest(
        stored, tmp_path, _write(name, data))
    new = [p for pid, p in after_papers.items() if pid not in before_papers]
    assert len(new) == 1 and new[0]["source"] == name, summary.skipped
    assert "naïveté in a résumé" in new[0]["abstract"]
    assert not any(c in new[0]["abstract"] + new[0]["raw"] for c in "\u200b\u202e\u2066\ufeff")
    if case == "cp1252":
        assert "“smart quotes” — and" in new[0]["abstract"]
    if note:
        assert any(str(n).startswith(f"{name}") and note in str(n) for n in summary.notes), summary.notes
    assert {k: v for k, v in after_papers.items() if k in before_papers} == before_papers
    assert {k: v for k, v in after_chunks.items() if k in before_chunks} == before_chunks


def test_a_stored_file_overwritten_with_garbage_keeps_its_papers(stored, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    target = "003_fcd762a5da0c7c9c.txt"
    (before_papers, before_chunks), (after_papers, after_chunks), summary = _reingest(
        stored, tmp_path, _write(target, b"\x00\x01garbage" * 1000))
    assert any(str(s).startswith(f"{target}: binary file") for s in summary.skipped)
    assert after_papers == before_papers and after_chunks == before_chunks
    # And again: the garbage is still there, the papers still are too.
    again = build_index(make_settings(tmp_path / "data", **{"paths.seeds_dir": tmp_path / "corpus"}), HashEmbedder())
    assert again.papers == 38 and again.embedded_chunks == 0


# --- properties -----------------------------------------------------------------------------------------------------

SUFFIXES = [".txt", ".jsonl", ".csv", ".tsv", ".md", ""]


@pytest.fixture(scope="module")
def scratch() -> Any:
    folder = Path(tempfile.mkdtemp(prefix="rag-hypothesis-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _parse_bytes(folder: Path, data: bytes, suffix: str) -> tuple[list[Any], list[str]]:
    """Parse one file; anything but IngestError fails the test. Returns the papers and the skip lines."""
    path = folder / f"input{suffix}"
    path.write_bytes(data)
    report = ParseReport()
    try:
        papers = list(read_papers(path, report))
    except IngestError as e:
        assert "\n" not in str(e)
        return [], [str(e)]
    finally:
        path.unlink()
    for p in papers:
        assert MIN_ABSTRACT_CHARS <= len(p.raw) <= MAX_ABSTRACT_CHARS and p.abstract.strip()
        assert len(p.paper_id) == 16 and p.title.strip() and p.title == p.title.strip()
    return [p.to_dict() for p in papers], [str(s) for s in report.skipped]


def _json_value() -> Any:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=300))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8),
                                                                                               inner, max_size=3),
                        max_leaves=8)


_record = st.dictionaries(st.sampled_from(["abstract", "summary", "text", "title", "authors", "year", "url", "id",
                                           "venue", "junk"]), _json_value(), max_size=6)


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4000), st.sampled_from(SUFFIXES))
def test_parser_on_arbitrary_bytes(scratch: Path, data: bytes, suffix: str) -> None:
    assert _parse_bytes(scratch, data, suffix) == _parse_bytes(scratch, data, suffix)


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=3000), st.sampled_from(SUFFIXES), st.sampled_from(["utf-8", "utf-16", "cp1252", "latin-1"]))
def test_parser_on_arbitrary_text_in_any_encoding(scratch: Path, text: str, suffix: str, encoding: str) -> None:
    data = text.encode(encoding, errors="replace")
    assert _parse_bytes(scratch, data, suffix) == _parse_bytes(scratch, data, suffix)


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_record, _json_value()), max_size=6), st.sampled_from([".jsonl", ".csv"]))
def test_parser_on_arbitrary_records(scratch: Path, records: list[Any], suffix: str) -> None:
    if suffix == ".jsonl":
        data = "\n".join(json.dumps(r, ensure_ascii=False) for r in records).encode()
    else:
        keys = sorted({k for r in records if isinstance(r, dict) for k in r}) or ["abstract"]
        rows = [",".join(keys)] + [",".join(json.dumps(str(r.get(k, "")) if isinstance(r, dict) else "")
                                            for k in keys) for r in records]
        data = "\n".join(rows).encode()
    assert _parse_bytes(scratch, data, suffix) == _parse_bytes(scratch, data, suffix)


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(min_size=1, max_size=4000), st.text(max_size=600), st.integers(16, 256), st.integers(0, 3))
def test_chunks_are_never_empty_always_fit_and_are_deterministic(scratch: Path, abstract: str, title: str,
                                                                 max_tokens: int, overlap: int) -> None:
    paper = make_paper(abstract, "h.txt", 0, title=title)
    if not paper.abstract:
        return
    s = make_settings(scratch, **{"chunking.max_tokens": max_tokens, "chunking.overlap_sentences": overlap})
    emb = HashEmbedder()
    pairs = chunk_texts(paper, s, emb)
    assert pairs and pairs == chunk_texts(paper, s, emb)
    for chunk, embedded in pairs:
        assert chunk.text.strip() and embedded.strip()
        assert approx_tokens(embedded) <= max_tokens <= emb.max_tokens  # within the embedder's limit
    assert [c.index for c, _ in pairs] == list(range(len(pairs)))


def test_seeds_parse_the_same_twice() -> None:
    first = [p.to_dict() for p in iter_papers([SEEDS], ParseReport())]
    assert first == [p.to_dict() for p in iter_papers([SEEDS], ParseReport())] and len(first) == 38


def test_utf16_text_starting_with_nul_is_not_mistaken_for_utf32(tmp_path: Path) -> None:
    """FF FE 00 00 is the UTF-32 LE mark and also UTF-16 LE's mark + U+0000 (found by the property test above)."""
    from rag.files import detect_encoding

    assert detect_encoding(["\x000".encode("utf-16-le").join([codecs.BOM_UTF16_LE, b""])], "f") == "utf-16"
    assert detect_encoding(["hi".encode("utf-32")], "f") == "utf-32"
    with pytest.raises(IngestError, match="invalid utf-32 / utf-16"):
        detect_encoding([codecs.BOM_UTF32_LE + b"0"], "f.jsonl")
    f = tmp_path / "odd.jsonl"
    f.write_bytes("\x000".encode("utf-16"))
    report = ParseReport()
    assert list(read_papers(f, report)) == [] and report.files == ["odd.jsonl"]


_QUESTION_WORDS = ["and", "ok", "what", "which", "how", "many", "much", "is", "there", "a", "paper", "on", "it", "its",
                   "that", "was", "does", "(how many items)", "(e.g.", ")", "(", ",", "?", ";", "—", "or", "papers",
                   "about", "privacy", "PrivGate", "SOLAR", "summarize", "compare", "them", "the", "second", "one",
                   "why", "usually", "before", "existing", "methods", "fix", "\n", "  ", "é", "[1]"]


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.lists(st.sampled_from(_QUESTION_WORDS), max_size=14).map(" ".join), st.text(max_size=300)))
def test_reading_and_completing_any_question_never_raises(question: str) -> None:
    """A user question never crashes the answer: a turn of the conversation eval ("ok and what about ...?") once
    raised IndexError in question.read through compound_parts. Any text, and any run of question words, is read,
    split into its parts and completed against an evidence block."""
    from rag import compose
    from rag import question as Q
    from rag.records import Evidence, Hit

    parts = Q.compound_parts(question)
    assert parts and all(isinstance(p, str) for p in parts)
    q = Q.read(question)
    paper = make_paper("We propose PrivGate. It cuts leakage by 62.6% on PrivacyLens with 18 people.", "p.txt", 0)
    block = Evidence(1, Hit(paper, 1.0), ("We propose PrivGate.",), (0.5,))
    compose.completed("It cuts leakage [1].", [block], q)
    compose.declined(q)
