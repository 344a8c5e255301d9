"""rag.catalog.Catalog on its own: `find` (SQL) and `at` agree with a pass over every record, and reads from many
threads at once see whole writes only."""

from __future__ import annotations

import threading
from pathlib import Path

from helpers import SEEDS

from rag.catalog import Catalog
from rag.parse import ParseReport, iter_papers
from rag.records import Paper


def test_catalog_find_agrees_with_filtering_every_record(tmp_path: Path) -> None:
    """`Catalog.find` (SQL) returns what a pass over every paper in (source, position) order returns."""
    cat = Catalog(tmp_path / "c.sqlite")
    papers = list(iter_papers([SEEDS], ParseReport()))
    # Characters whose lower case is ASCII (the Kelvin sign -> "k"), quotes and backslashes escaped in the stored JSON,
    # and a phrase across the title/abstract join: each must be found as a pass over the records finds it.
    papers.append(Paper(paper_id="odd", title="\u212aELVIN \"quoted\" back\\slash end", venue="V", source="zz.txt",
                        position=0, raw="", abstract="start of the text 100% done_ok"))
    papers.append(Paper(paper_id="odd2", title="Cities", venue="V", source="zz.txt", position=1, raw="",
                        abstract="İstanbul, NAKİ"))
    cat.put_papers(papers)
    ordered = sorted(papers, key=lambda p: (p.source, p.position))
    sources = sorted({p.source for p in papers})
    cases = [(None, False, ""), (None, True, ""), (sources[-1], False, ""), (None, False, "Privacy"),
             (None, True, "the"), (None, False, "zzzz-not-there"), (sources[0], False, "a"), (None, False, "kelvin"),
             (None, False, '"quoted"'), (None, False, "back\\slash"), (None, False, "end start"),
             (None, False, "İstanbul".lower()), (None, False, "100%"), (None, False, "done_ok"),
             (None, False, "privacy leakage"), (None, False, "naki")]
    for source, code, text in cases:
        want = [p.paper_id for p in ordered if (source is None or p.source == source) and (p.has_code or not code)
                and text.lower() in f"{p.title} {p.abstract}".lower()]
        assert [p.paper_id for p in cat.find(source, code, text, limit=1000)] == want, (source, code, text)
        if text in ("kelvin", '"quoted"', "back\\slash", "end start", "100%", "done_ok"):
            assert want == ["odd"], text  # the odd record is found, whichever path the filter takes
        if text in ("İstanbul".lower(), "naki"):  # "İ" lower-cases to "i" + a combining dot
            assert want == ["odd2"]
        assert [p.paper_id for p in cat.find(source, code, text, limit=3)] == want[:3]
    first = ordered[0]
    assert cat.at(first.source, first.position) == first and cat.at(first.source, 10**6) is None


def test_the_catalog_is_read_from_many_threads_at_once(tmp_path: Path) -> None:
    """Library events read the catalog outside the queue, on many threads, while others use it: each read is
    whole, never a write's half-done batch (one shared connection showed readers 1..37 of a 38-paper batch)."""
    catalog = Catalog(tmp_path / "c.sqlite")
    papers = list(iter_papers([SEEDS], ParseReport()))
    ids = [p.paper_id for p in papers]
    seen: set[int] = set()
    errors: list[BaseException] = []
    done = threading.Event()

    def writer() -> None:
        try:
            for _ in range(30):  # each call is one transaction of the 38 papers
                catalog.put_papers(papers)
                catalog.delete_papers(ids)
        finally:
            done.set()

    def reader() -> None:
        try:
            while not done.is_set():
                seen.add(catalog.count())
                seen.add(len(catalog.find(None, False, "", 1000)))
                seen.add(len(catalog.get_many(ids)))
        except BaseException as e:  # noqa: BLE001 - any failure in a thread fails the test
            errors.append(e)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == [] and seen <= {0, len(papers)}, (errors, sorted(seen))
    catalog.close()
