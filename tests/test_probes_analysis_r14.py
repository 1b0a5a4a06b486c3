"""Probe round 14 (second wave): the studio's analysis (agreement, summaries, charts) and the report writers."""

from __future__ import annotations

import random
import tracemalloc
from collections import defaultdict
from collections.abc import Callable

import pytest

from vistkit.studio import analysis


# --------------------------------------------------------------------------------------------------- agreement
def _reference_alpha(triples: list[tuple[str, int, float]], level: str) -> float:
    """Krippendorff's alpha written out from his 2011 note: the coincidence matrix of the values of units judged
    twice or more, the expected coincidences from its margins, and the level's squared distance."""
    by_unit: dict[int, list[float]] = defaultdict(list)
    for _, u, v in triples:
        by_unit[u].append(v)
    values = sorted({v for vs in by_unit.values() if len(vs) >= 2 for v in vs})
    o = {(c, k): 0.0 for c in values for k in values}
    for vs in by_unit.values():
        m = len(vs)
        if m < 2:
            continue
        for i, c in enumerate(vs):
            for j, k in enumerate(vs):
                if i != j:
                    o[c, k] += 1 / (m - 1)
    n_c = {c: sum(o[c, k] for k in values) for c in values}
    n = sum(n_c.values())

    def delta(c: float, k: float) -> float:
        if level == "nominal":
            return float(c != k)
        if level == "interval":
            return (c - k) ** 2
        lo, hi = sorted((values.index(c), values.index(k)))
        return (sum(n_c[values[g]] for g in range(lo, hi + 1)) - (n_c[c] + n_c[k]) / 2) ** 2

    observed = sum(o[c, k] * delta(c, k) for c in values for k in values)
    expected = sum(n_c[c] * n_c[k] * delta(c, k) for c in values for k in values) / (n - 1)
    return 1 - observed / expected


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
@pytest.mark.parametrize("seed", range(4))
def test_alpha_matches_krippendorffs_formula(level: str, seed: int) -> None:
    """Random studies (some units judged once, annotators of a few units each, ranks of 1-5 or -1/0/1) give the
    alpha of the formula itself."""
    rng = random.Random(seed)
    values = [1.0, 2.0, 3.0, 4.0, 5.0] if seed % 2 else [-1.0, 0.0, 1.0]
    coders = [f"w{i}" for i in range(rng.randint(2, 12))]
    triples = []
    for u in range(rng.randint(3, 40)):
        truth = rng.choice(values)
        for c in rng.sample(coders, rng.randint(1, min(4, len(coders)))):
            triples.append((c, u, truth if rng.random() < 0.6 else rng.choice(values)))
    ours, why = analysis.alpha_with_reason(triples, level=level)
    if why is None:
        assert ours == pytest.approx(_reference_alpha(triples, level), abs=1e-9)


def _crowd(n_annotators: int, n_units: int, per_unit: int = 3) -> list[tuple[str, int, float]]:
    rng = random.Random(0)
    return [
        (f"worker-{a}", u, float(rng.choice([-1, 0, 1])))
        for u in range(n_units)
        for a in rng.sample(range(n_annotators), per_unit)
    ]


def _peak_mib(fn: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_alpha_of_a_crowd_study_takes_memory_in_its_judgements_not_annotators_times_units() -> None:
    """A crowdsourced study: 2,000 workers, 10,000 pair units, 3 judgements each (30,000 judgements). Alpha was
    computed on a dense annotators x units matrix (160 MB of floats, plus a 100 MB comparison inside the
    package; 4,000 x 20,000 took 1.5 GB and 10 s on every `studio status` and admin page)."""
    triples = _crowd(2_000, 10_000)
    peak = _peak_mib(lambda: analysis.alpha_with_reason(triples, level="ordinal"))
    assert peak < 40, f"{peak:.0f} MiB"
    ours, why = analysis.alpha_with_reason(triples, level="ordinal")
    assert why is None and ours == pytest.approx(_reference_alpha(triples, "ordinal"), abs=1e-9)


def test_alpha_keeps_the_last_answer_of_an_annotator_who_judged_a_unit_twice() -> None:
    """As before: one value per annotator and unit, the later one."""
    triples = [("a", 1, 1.0), ("a", 1, 2.0), ("b", 1, 2.0), ("a", 2, 1.0), ("b", 2, 1.0), ("c", 2, 3.0)]
    want = _reference_alpha([t for t in triples if t != ("a", 1, 1.0)], "nominal")
    assert analysis.krippendorff_alpha(triples, level="nominal") == pytest.approx(want)
    # a NaN value is no value, as in the package's reliability data
    assert analysis.krippendorff_alpha([*triples, ("d", 2, float("nan"))], level="nominal") == pytest.approx(want)


# --------------------------------------------------------------------------------------------------- charts
def _bar_labels(svg: str) -> list[tuple[float, str]]:
    """(x where it ends, text) of each system's label of a results chart."""
    import html
    import re

    return [
        (float(x), html.unescape(t))
        for x, t in re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="end" fill="#1b1f24">(.*?)</text>', svg)
    ]


@pytest.mark.parametrize(
    "names",
    [
        ["llava-1.5-13b-finetuned-on-vist-beam5", "blip2-opt-6.7b-finetuned-on-vist-beam5", "human"],
        ["x" * 300 + "-a", "x" * 300 + "-b", "y" * 300 + "-a"],
        ["\u4e2d\u6587\u7cfb\u7edf\u540d\u5b57" * 6 + "A", "\u4e2d\u6587\u7cfb\u7edf\u540d\u5b57" * 6 + "B"],
    ],
)
def test_results_chart_labels_fit_beside_their_bars_and_stay_apart(names: list[str]) -> None:
    """System names longer than ~20 characters ran off the left edge of the admin page's chart (the label ends
    at x=142 whatever its length), so `llava-...-finetuned-on-vist-beam5` and `blip2-...-finetuned-on-vist-beam5`
    both showed as `finetuned-on-vist-beam5`. Labels now fit (a wider label column, then shortened in the middle)
    and names shown alike get #k; the bar's tooltip keeps the whole name."""
    from rich.cells import cell_len

    from vistkit.studio.charts import results_chart_svg

    results = [{"system": s, "mean rank": 1.0 + i, "n": 3} for i, s in enumerate(names)]
    svg = results_chart_svg("rank", results, n_systems=len(names))
    labels = _bar_labels(svg)
    assert len(labels) == len(names)
    assert len({t for _, t in labels}) == len(names), labels
    for x, text in labels:
        assert cell_len(text) * 7.5 <= x, (x, text)  # 13 px text: about 7.5 px a column, wide characters two
    for s in names:
        assert f"<title>{s}: " in svg  # the bar's tooltip names the system in full


# --------------------------------------------------------------------------------------------------- tables
def test_numpy_numbers_in_a_table_are_written_as_numbers_in_every_format() -> None:
    """A numpy float64 cell was written to CSV as ``np.float64(0.5)`` (its repr under numpy 2), a float32 was not
    rounded in text and LaTeX (``0.12345679``) and its NaN was ``nan`` (CSV, text, LaTeX) instead of empty /
    ``n/a``."""
    import json

    import numpy as np

    from vistkit.report.tables import render_table

    cols = ["f64", "f32", "i64", "none32", "none64"]
    row = [np.float64(0.5), np.float32(0.123456789), np.int64(3), np.float32("nan"), np.float64("nan")]
    csv_text = render_table(cols, [row], "csv")
    assert csv_text.splitlines()[1] == f"0.5,{float(np.float32(0.123456789))!r},3,,", csv_text
    for fmt in ("text", "latex"):
        out = render_table(cols, [row], fmt)
        assert "0.5000" in out and "0.1235" in out and "0.12345679" not in out and "nan" not in out, out
    assert json.loads(render_table(cols, [row], "json"))[0]["none32"] is None
    from vistkit.report.html import html_table

    page = html_table(cols, [row])
    assert page.count("class=num") == 5 and "0.1235" in page and "n/a" in page and "np." not in page


HOSTILE = "m1\x1b[2J\x1b]0;pwned\x07\rX\x9b31m\x7f\u202egnp.exe\u2066"


@pytest.mark.parametrize("where", ["cell", "header", "title", "caption"])
def test_text_tables_show_control_characters_instead_of_sending_them_to_the_terminal(where: str) -> None:
    """A system name from a downloaded pairs CSV (`meta beats-ref`, `studio status`, ...) holding ESC sequences
    reached the terminal through the text table: ``\\x1b]0;`` opened an operating-system command that swallowed
    the rest of the output, ``\\x1b[2J`` cleared the screen, U+202E showed a name reversed. Control and bidi
    override characters are now shown as escapes (``\\x1b``); line ends of multi-line cells stay."""
    import unicodedata

    from vistkit.report.tables import render_table

    cols, rows = ["system", "ratio"], [["human", 0.5], ["two\nlines", 0.25]]
    kw: dict[str, str] = {}
    if where == "cell":
        rows.append([HOSTILE, 0.75])
    elif where == "header":
        cols[0] = HOSTILE
    else:
        kw[where] = HOSTILE
    out = render_table(cols, rows, "text", **kw)
    overrides = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    bad = [ch for ch in out if ch != "\n" and (unicodedata.category(ch) == "Cc" or ch in overrides)]
    assert not bad, (bad, out)
    assert "\\x1b]0;pwned\\x07" in out.replace("\n", "").replace("│", "").replace(" ", "") or where != "cell"
    assert "\\x1b" in out and "\\u202e" in out
    assert "two" in out and "lines" in out


# --------------------------------------------------------------------------------------------------- report pages
def test_score_distributions_count_a_repeated_story_once_per_item() -> None:
    """A model that writes the same generic story for many photo sequences (common in VIST) was drawn on the report
    page's score-distribution figure as ONE story: the stories were told apart by system and text only, so its
    scores on the other items (different references) were dropped. Each item's story counts once, as in
    `meta correlate`'s page; a story met in several pairs of one item still counts once."""
    from types import SimpleNamespace

    from vistkit.meta.human import StoryPair
    from vistkit.report.html import _scores_by_system

    pairs, s1, s2 = [], [], []
    for item in range(3):
        human = f"we went to the beach number {item} ."
        seq = tuple(f"p{item}{k}" for k in range(5))
        for other, (a, b) in (("m1", (0.9, 0.1 * (item + 1))), ("m2", (0.9, 0.5))):
            text = "a beach . a beach ." if other == "m1" else f"the sea {item} ."
            pairs.append(StoryPair(f"{item}-{other}", f"s{item}", seq, human, text, "human", other, 1.0))
            s1.append(a)
            s2.append(b)
    # the two machine stories of each item compared with each other too: m1's story is met twice in that item
    for item in range(3):
        seq = tuple(f"p{item}{k}" for k in range(5))
        generic, own = "a beach . a beach .", f"the sea {item} ."
        pairs.append(StoryPair(f"{item}-mm", f"s{item}", seq, generic, own, "m1", "m2", 1.0))
        s1.append(0.1 * (item + 1))
        s2.append(0.5)
    got = _scores_by_system(pairs, [SimpleNamespace(metric="x", score_1=s1, score_2=s2)])["x"]
    assert sorted(got["m1"].tolist()) == pytest.approx([0.1, 0.2, 0.3])
    assert len(got["m2"]) == 3 and len(got["human"]) == 3


# --------------------------------------------------------------------------------------------------- summaries
def test_a_study_of_one_annotator_per_task_says_agreement_cannot_be_measured(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """With --per-item 1 no task is ever judged twice, but `studio status` said alpha was undefined because "no
    task has been judged by two annotators yet" (or "only one annotator has judged so far"), as if waiting
    would help."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient
    from studio_helpers import make_study, submit_ranking

    from vistkit.studio.app import create_app

    made = make_study(tmp_path, n_items=3, per_item=1, annotators=2)
    c = TestClient(create_app(made.study))
    for reason_after in range(2):
        assert submit_ranking(c, made.tokens[reason_after]).status_code == 200
        why = analysis.summary(analysis.load(made.study))["alpha_undefined"]["rank"]
        assert "yet" not in why and "so far" not in why, why
        assert "--per-item 1" in why and "one annotator" in why, why


@pytest.mark.parametrize("created_at", [1.7e12, 1.7e15, 1e300, -1e12])
def test_a_judgement_time_out_of_the_calendar_is_one_sentence(tmp_path, capsys, created_at: float) -> None:  # type: ignore[no-untyped-def]
    """A judgement time in milliseconds or microseconds (a study filled by another tool) stopped `studio status`
    and every export with "unexpected ValueError: year 53872825 is out of range - this is a bug in vistkit"; it
    is now the damaged-study sentence naming the judgement and saying the time is seconds since 1970."""
    pytest.importorskip("starlette")
    from sqlalchemy import update
    from starlette.testclient import TestClient
    from studio_helpers import make_study, submit_ranking

    from vistkit.cli import main
    from vistkit.studio import db
    from vistkit.studio.app import create_app

    made = make_study(tmp_path, n_items=2, per_item=2, annotators=2)
    assert submit_ranking(TestClient(create_app(made.study)), made.tokens[0]).status_code == 200
    with made.study.write() as conn:
        conn.execute(update(db.judgements).values(created_at=created_at))
    made.study.engine.dispose()
    capsys.readouterr()
    for args in (["status"], ["export", "-f", "jsonl", "-o", str(tmp_path / "x.jsonl")]):
        assert main(["studio", args[0], str(made.path), *args[1:]]) == 1
        err = capsys.readouterr().err
        assert "unexpected" not in err and "judgement 1" in err and "seconds since 1970" in err, err


def test_a_study_creation_time_out_of_the_calendar_is_said_before_an_export_writes(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The same for the study's own creation time: the export wrote its file, then stopped with "unexpected
    ValueError" making the provenance, leaving the file without one."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient
    from studio_helpers import make_study, submit_ranking

    from vistkit.cli import main
    from vistkit.studio import db
    from vistkit.studio.app import create_app

    made = make_study(tmp_path, n_items=2, per_item=2, annotators=2)
    assert submit_ranking(TestClient(create_app(made.study)), made.tokens[0]).status_code == 200
    with made.study.write() as conn:
        db.put_settings(conn, {"created_at": 1.7e12})
    made.study.engine.dispose()
    capsys.readouterr()
    out = tmp_path / "r.csv"
    assert main(["studio", "export", str(made.path), "-f", "rankings", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "unexpected" not in err and "creation time" in err and "seconds since 1970" in err, err
    assert not out.exists()


def test_latex_tables_write_control_characters_as_text() -> None:
    """The same names in a LaTeX table (`-f latex`, a report's .tex files) put the raw ESC, BEL or NUL byte into
    the .tex file, where pdflatex stops ("Text line contains an invalid character"); they are written as visible
    escapes, and a tab as a space."""
    import unicodedata

    from vistkit.report.tables import render_table

    out = render_table(["system", "ratio"], [[HOSTILE + "\x00\ttab", 0.5]], "latex", caption="cap\x1b[0m")
    assert not [ch for ch in out if ch != "\n" and unicodedata.category(ch) == "Cc"], repr(out)
    assert r"\textbackslash{}x1b" in out and r"\textbackslash{}x00" in out and " tab" in out


def test_the_report_summary_counts_the_files_it_lists(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`--report` printed "wrote 17 files" above a list of 16: vistkit's hidden marker file was counted."""
    import time

    from vistkit.data.output import MARKER
    from vistkit.report.html import describe_written

    start = time.time()
    for name in ("index.html", "a.png", "a.pdf", "t.csv", MARKER):
        (tmp_path / name).write_text("x")
    text = describe_written(tmp_path, start)
    assert text.splitlines()[0] == f"report: wrote 4 files to {tmp_path}/", text
    assert MARKER not in text
