"""Shared by the story-ranker text probes: the VIST val file and one plain five-sentence story the odd forms of a
story are compared with (tests/test_probes_ranker_r14.py, _r15.py, tests/test_probes_session_r15.py)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VAL = REPO.parent / "shared" / "data" / "vist-11777-baselines" / "arel_reference" / "val_reference.json"

SENTENCES = [
    "We went to the park with our dog.",
    "It was a sunny day and the grass was green.",
    "The dog ran after a red ball.",
    "We ate sandwiches under a big tree.",
    "Then we drove home tired.",
]
PLAIN = " ".join(SENTENCES)
