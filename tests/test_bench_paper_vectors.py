"""bench/paper_vectors.py on a real index of the seeds (fake embedder): one unit vector per paper for each
representation, in catalog order (a paper's chunk centroid is nearest its own whole-abstract vector)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from helpers import seeded_assistant

from bench.paper_vectors import paper_vectors


def test_each_representation_is_one_unit_vector_per_paper(tmp_path: Path) -> None:
    assistant = seeded_assistant(tmp_path / "data")
    ids, vectors = paper_vectors(assistant)
    papers = list(assistant.catalog.iter_papers())
    assert ids == [p.paper_id for p in papers] and len(ids) > 10
    assert set(vectors) == {"whole", "centroid", "keyphrases"}
    for v in vectors.values():
        assert v.shape[0] == len(ids) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    # Rows are papers in the order of `ids`: each paper's chunk centroid is nearest its own whole-abstract vector.
    nearest = np.argmax(vectors["centroid"] @ vectors["whole"].T, axis=1)
    assert list(nearest) == list(range(len(ids)))
