"""The paper catalog and source manifest (SQLite, stdlib).

Chroma holds chunk vectors; this holds the records they point at: every `Paper` by id, and for every source file
its content hash and the ids of its papers, so an unchanged file is skipped without parsing or embedding, and a
removed or edited file's papers can be found and dropped. SQLite commits are atomic, so a killed ingest leaves
either the old or the new row, never half of one.

Not here: the one-writer lock that guards writes to the catalog and the store (lock.py).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from .records import Paper, StoreError

_SCHEMA = """
create table if not exists papers (paper_id text primary key, source text, position integer, body text not null);
create table if not exists files (source text primary key, sha256 text not null, paper_ids text not null,
                                  root text not null default '');
create table if not exists meta (key text primary key, value text not null);
create index if not exists papers_source on papers(source);
"""


class Catalog:
    """Papers and the source manifest of one index.

    Thread-safe: each thread uses a connection of its own (made on its first call), since one sqlite3 connection
    used from several threads at once fails ("Recursive use of cursors") or mixes their transactions; the app's
    Library events run on many threads while answers read the same catalog.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"{path}: cannot open the paper catalog ({e})") from None
        db = self._db
        try:
            db.executescript(_SCHEMA)
            try:  # the Library's order: a filtered page walks this index and stops at its limit (added later,
                # so made on first open by a writer; a read-only catalog without it sorts instead)
                db.execute("create index if not exists papers_order on papers(source, position)")
            except sqlite3.OperationalError:
                pass
        except sqlite3.DatabaseError as e:
            self.close()
            hint = "" if isinstance(e, sqlite3.OperationalError) else (
                "; it is damaged: rebuild the index with `python -m rag ingest --rebuild`")
            raise StoreError(f"{path}: cannot open the paper catalog ({e}){hint}") from None

    @property
    def _db(self) -> sqlite3.Connection:
        """This thread's connection."""
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            try:
                db = sqlite3.connect(str(self.path), timeout=5.0, check_same_thread=False)
                # Case folding as Python does it (SQLite's lower() folds ASCII only: "Über" would miss "über").
                db.create_function("pyfold", 1, lambda t: t.lower() if isinstance(t, str) else t,
                                   deterministic=True)
            except sqlite3.Error as e:
                raise StoreError(f"{self.path}: cannot open the paper catalog ({e})") from None
            self._local.db = db
            with self._lock:
                self._all.append(db)
        return db

    def close(self) -> None:
        """Close every thread's connection (a later call opens a new one)."""
        with self._lock:
            conns, self._all = self._all, []
        for db in conns:
            db.close()
        self._local = threading.local()

    # --- papers -----------------------------------------------------------------------------------------------

    def put_papers(self, papers: Iterable[Paper]) -> None:
        rows = [(p.paper_id, p.source, p.position, json.dumps(p.to_dict())) for p in papers]
        with self._db:
            self._db.executemany("insert or replace into papers values (?, ?, ?, ?)", rows)

    def delete_papers(self, paper_ids: Iterable[str]) -> None:
        with self._db:
            self._db.executemany("delete from papers where paper_id = ?", [(i,) for i in paper_ids])

    def get(self, paper_id: str) -> Paper | None:
        row = self._db.execute("select body from papers where paper_id = ?", (paper_id,)).fetchone()
        return Paper.from_dict(json.loads(row[0])) if row else None

    def get_many(self, paper_ids: Iterable[str]) -> dict[str, Paper]:
        ids = list(dict.fromkeys(paper_ids))
        out: dict[str, Paper] = {}
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            marks = ",".join("?" * len(part))
            for (body,) in self._db.execute(f"select body from papers where paper_id in ({marks})", part):
                paper = Paper.from_dict(json.loads(body))
                out[paper.paper_id] = paper
        return out

    def ids(self) -> set[str]:
        return {r[0] for r in self._db.execute("select paper_id from papers")}

    def ids_where(self, sources: Iterable[str] = (), has_code: bool | None = None,
                  paper_ids: Iterable[str] = ()) -> set[str]:
        """Ids of the papers passing a filter, selected in SQL (no record is decoded)."""
        clauses, args = [], []
        sources, paper_ids = list(sources), list(paper_ids)
        if sources:
            clauses.append(f"source in ({','.join('?' * len(sources))})")
            args += sources
        if has_code is not None:
            clauses.append("json_array_length(json_extract(body, '$.links')) " + ("> 0" if has_code else "= 0"))
        if paper_ids:
            clauses.append(f"paper_id in ({','.join('?' * len(paper_ids))})")
            args += paper_ids
        where = " where " + " and ".join(clauses) if clauses else ""
        return {r[0] for r in self._db.execute(f"select paper_id from papers{where}", args)}

    def count(self) -> int:
        return int(self._db.execute("select count(*) from papers").fetchone()[0])

    def iter_papers(self) -> Iterator[Paper]:
        for (body,) in self._db.execute("select body from papers order by source, position"):
            yield Paper.from_dict(json.loads(body))

    def find(self, source: str | None = None, has_code: bool = False, text: str = "", limit: int = 500) -> list[Paper]:
        """The Library's rows: papers in (source, position) order from one source file (None = any), with a code
        link if `has_code`, whose title or abstract contains `text` (case-folded), at most `limit` of them.

        Selected in SQL, so the app never holds every record (at 100,000 papers that cost seconds and hundreds of
        MB). A one-word ASCII filter first keeps rows whose stored JSON contains it (`like`
        folds ASCII case) and checks those exactly in Python; that pre-filter can
        only miss a match through the two characters whose lower case holds ASCII (the Kelvin sign -> "k", "İ" ->
        "i" + a combining dot), so rows holding one go on to the exact check too when the filter has that letter.
        Other filters (several words, non-ASCII) run the exact test in SQL (~1 s at 100k).
        """
        clauses: list[str] = []
        args: list[object] = []
        if source:
            clauses.append("source = ?")
            args.append(source)
        if has_code:
            clauses.append("json_array_length(json_extract(body, '$.links')) > 0")
        needle = text.strip().lower()
        prefilter = bool(needle) and needle.isascii() and not set(needle) & set(' "\\%_')
        if prefilter:
            # Bodies are json.dumps' ASCII (put_papers is the only writer): the two characters are stored escaped.
            # Each `like` is a pass over every body (~0.14 s at 100k), so only the ones that could matter are asked.
            ors = ["body like ?"] + [f"body like '%\\u{code}%'" for letter, code in (("k", "212a"), ("i", "0130"))
                                     if letter in needle]
            clauses.append(f"({' or '.join(ors)})")
            args.append(f"%{needle}%")
        elif needle:
            clauses.append("instr(pyfold(json_extract(body, '$.title') || ' ' || json_extract(body, '$.abstract')), "
                           "?) > 0")
            args.append(needle)
        where = " where " + " and ".join(clauses) if clauses else ""
        if not prefilter:
            rows = self._db.execute(f"select body from papers{where} order by source, position limit ?",
                                    [*args, limit])
            return [Paper.from_dict(json.loads(body)) for (body,) in rows]
        out: list[Paper] = []
        for (body,) in self._db.execute(f"select body from papers{where} order by source, position", args):
            paper = Paper.from_dict(json.loads(body))
            if needle in f"{paper.title} {paper.abstract}".lower():
                out.append(paper)
                if len(out) >= limit:
                    break
        return out

    def at(self, source: str, position: int) -> Paper | None:
        """The paper at a position of a source file (a Library row's address)."""
        row = self._db.execute("select body from papers where source = ? and position = ?",
                               (source, position)).fetchone()
        return Paper.from_dict(json.loads(row[0])) if row else None

    def sources(self) -> list[str]:
        return [r[0] for r in self._db.execute("select distinct source from papers order by source")]

    # --- manifest ---------------------------------------------------------------------------------------------

    def file_entry(self, source: str) -> tuple[str, list[str]] | None:
        row = self._db.execute("select sha256, paper_ids from files where source = ?", (source,)).fetchone()
        return (row[0], json.loads(row[1])) if row else None

    def put_file(self, source: str, sha256: str, paper_ids: list[str], root: str) -> None:
        """Record a file's hash, its papers and the folder (or file) it was ingested from."""
        with self._db:
            self._db.execute("insert or replace into files values (?, ?, ?, ?)",
                             (source, sha256, json.dumps(paper_ids), root))

    def delete_file(self, source: str) -> None:
        with self._db:
            self._db.execute("delete from files where source = ?", (source,))

    def files(self) -> dict[str, tuple[list[str], str]]:
        """source -> (paper ids, root it was ingested from)."""
        return {r[0]: (json.loads(r[1]), r[2]) for r in self._db.execute("select source, paper_ids, root from files")}

    def get_meta(self, key: str) -> str | None:
        row = self._db.execute("select value from meta where key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._db:
            self._db.execute("insert or replace into meta values (?, ?)", (key, value))


def read_meta(path: Path, key: str) -> str | None:
    """One meta value of the catalog at `path`, read without creating or writing anything (None when the catalog,
    its meta table or the key is not there): what readers need before they open the store."""
    rows = _read_only(path, "select value from meta where key = ?", (key,))
    return rows[0][0] if rows else None


def read_roots(path: Path) -> list[str]:
    """The folders and files the catalog at `path` was ingested from (what `ingest` was given), read like
    `read_meta`: to name them when an index must be built again."""
    return [r[0] for r in _read_only(path, "select distinct root from files where root != '' order by root", ())]


def _read_only(path: Path, sql: str, args: tuple[str, ...]) -> list[tuple[str, ...]]:
    if not path.is_file():
        return []
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
        try:
            return db.execute(sql, args).fetchall()
        finally:
            db.close()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e) or "no such column" in str(e):  # older than the table or column
            return []
        raise StoreError(f"{path}: cannot open the paper catalog ({e})") from None
    except sqlite3.Error as e:
        raise StoreError(f"{path}: cannot open the paper catalog ({e}); it is damaged: rebuild the index with "
                         "`python -m rag ingest --rebuild`") from None
