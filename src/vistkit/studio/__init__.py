"""vistkit studio: collect human judgements of visual stories (ranking, pairwise, Likert) for `vistkit meta`.

A study is one database (SQLite file by default, any SQLAlchemy URL such as ``postgresql://...`` for a team):
`vistkit.studio.db` (schema, migrations, tokens), `vistkit.studio.plan` (building a study and its assignment plan),
`vistkit.studio.service` (claiming and storing judgements), `vistkit.studio.app` (the ASGI web app),
`vistkit.studio.analysis` (agreement, progress, export) and `vistkit.studio.demo`.

Everything here imports SQLAlchemy lazily from the CLI, so ``vistkit --help`` stays fast.
"""

from __future__ import annotations

TASKS = ("rank", "pairwise", "likert")

#: bounds of a study's sizes (a typo such as --per-item 1e12 is refused, never planned): invite links per call,
#: annotators per unit, assignment slots in all, and how long a claimed task stays with its annotator
MAX_INVITES = 10_000
MAX_PER_ITEM = 1_000
MAX_SLOTS = 10_000_000
MAX_CLAIM_TIMEOUT_S = 365 * 24 * 3600.0

#: The six statements of the VIST challenge's human evaluation (NAACL 2018 interface, verbatim wording).
LIKERT_STATEMENTS: dict[str, str] = {
    "focused": "This story is focused.",
    "coherent": "The story is coherent.",
    "share": "If these were my photos, I would like using a story like this to share my experience with my friends.",
    "human": "This story sounds like it was written by a human.",
    "grounded": "This story directly reflects concrete entities in the photos.",
    "detailed": "This story provides an appropriate level of details.",
}

LIKERT_LABELS = ("Strongly Disagree", "Disagree", "Neither Agree Nor Disagree", "Agree", "Strongly Agree")
