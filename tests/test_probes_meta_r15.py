"""Probes, round 15: `vistkit meta` statistics and reports with few pairs, odd judgement files and options.

- `meta compare` printed "n/a" for the paired bootstrap p without saying why, and with a handful of pairs that
  only one metric gets right it printed a bootstrap p far below McNemar's exact p (0.008 against 0.07) with no
  word that the bootstrap is a large-sample method.
- `meta pairs` computed those tests (its docs promise them) but printed them only with -f json and on the page.
- A pair accuracy (or `compare`'s preference share) on which every counted pair agrees had the bootstrap "95%
  CI" [1, 1], even for one pair; it is now the exact binomial (Clopper-Pearson) interval, and the page says so.
- System-level Kendall of 2,000 systems took two minutes (all k^2 concordance signs per resample).
- A rating cell of NA (R) or #N/A said only "must be a number"; a ';'- or tab-separated .csv said "needs
  columns system and item; found system;item;...".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from meta_dummies import dummy_metrics_registered, run_vistkit

HEADER = "sent1,sent2,label,story_id,img_seq,model_base,model_comp,agreement,avg_rank_base,avg_rank_comp,order"
METRICS = "meta-test-length,meta-test-shortness"


@pytest.fixture(scope="module", autouse=True)
def dummy_metrics() -> Iterator[None]:
    with dummy_metrics_registered():
        yield


def _pairs(path: Path, longer_wins: int, shorter_wins: int) -> Path:
    """Pairs of a longer and a shorter story: ``longer_wins`` in which people prefer the longer one (length gets
    them right, shortness wrong), ``shorter_wins`` the reverse."""
    rows = [HEADER]
    for i in range(longer_wins + shorter_wins):
        label, base, comp = ("-1", "1", "2") if i < longer_wins else ("1", "2", "1")
        rows.append(f"a b c d e,a b,{label},s{i},{2 * i}-{2 * i + 1},m0,m1,5,{base},{comp},2")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------- the paired bootstrap's p with few pairs
def test_compare_says_why_the_bootstrap_p_is_na(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_vistkit(capsys, "meta", "compare", _pairs(tmp_path / "p.csv", 4, 0), "-m", METRICS)
    assert code == 0, err
    assert "n/a" in out
    assert "bootstrap" in out and "every counted pair" in out and "McNemar" in out


def test_compare_warns_that_the_bootstrap_is_overconfident_on_few_pairs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_vistkit(capsys, "meta", "compare", _pairs(tmp_path / "p.csv", 7, 1), "-m", METRICS)
    assert code == 0, err
    text = " ".join(out.split())
    assert "(8)" in text and "overconfident" in text and "McNemar" in text
    code, out, _ = run_vistkit(capsys, "meta", "compare", _pairs(tmp_path / "p.csv", 7, 1), "-m", METRICS, "-f", "json")
    boot = json.loads(out)["comparisons"][0]["bootstrap"]
    assert boot["p"] < 0.05 and "McNemar" in boot["p_caution"]


def test_compare_on_many_pairs_has_no_caution(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_vistkit(
        capsys, "meta", "compare", _pairs(tmp_path / "p.csv", 30, 10), "-m", METRICS, "-f", "json"
    )
    assert code == 0
    boot = json.loads(out)["comparisons"][0]["bootstrap"]
    assert "p_caution" not in boot and "p_undefined" not in boot and "notes" not in json.loads(out)


@pytest.mark.parametrize("wins", [(4, 0), (7, 1)])
def test_the_pairs_report_page_says_what_the_bootstrap_p_is_worth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wins: tuple[int, int]
) -> None:
    code, _, err = run_vistkit(
        capsys, "meta", "pairs", _pairs(tmp_path / "p.csv", *wins), "-m", METRICS, "--report", tmp_path / "r"
    )
    assert code == 0, err
    page = " ".join((tmp_path / "r" / "index.html").read_text(encoding="utf-8").split())
    assert "McNemar" in page and ("every counted pair" in page if wins[1] == 0 else "overconfident" in page)


# ------------------------------------------------------------------------- Kendall of thousands of systems
def test_system_level_kendall_of_thousands_of_systems_takes_seconds() -> None:
    """2,000 systems: every resample's tau-b was computed from all 2 million concordance signs (0.09 s each, two
    minutes for `meta correlate`'s 1,000 resamples); scipy's O(n log n) tau per resample gives the same CI."""
    import time

    import numpy as np
    from scipy import stats

    from vistkit.meta.correlation import system_correlation_ci

    rng = np.random.default_rng(3)
    systems = [f"s{i}" for i in range(2000) for _ in range(2)]
    metric, human = rng.normal(size=4000), rng.integers(1, 6, 4000).astype(float)
    start = time.perf_counter()
    out = system_correlation_ci(systems, metric, human, method="kendall", n_resamples=100, seed=5)
    assert time.perf_counter() - start < 4.0
    mx, hy = metric.reshape(-1, 2).mean(axis=1), human.reshape(-1, 2).mean(axis=1)
    assert out["r"] == pytest.approx(stats.kendalltau(mx, hy)[0], abs=1e-12)
    assert out["ci"][0] < out["r"] < out["ci"][1]


@pytest.mark.parametrize("variant", ["b", "c"])
@pytest.mark.parametrize("k", [3, 60, 65, 300])
def test_kendall_of_resampled_rows_is_scipys_at_any_length(variant: str, k: int) -> None:
    import numpy as np
    from scipy import stats

    from vistkit.meta.correlation import _rows_kendall

    rng = np.random.default_rng(k)
    a, b = rng.integers(1, 6, (7, k)).astype(float), rng.normal(size=(7, k))
    a[0] = 2.0  # a constant row: undefined
    got = _rows_kendall(a, b, variant)
    assert np.isnan(got[0])
    want = [stats.kendalltau(a[i], b[i], variant=variant)[0] for i in range(1, 7)]
    assert got[1:] == pytest.approx(want, abs=1e-12)


# ------------------------------------------------------------------------- an accuracy every pair agrees on
def test_an_accuracy_of_every_pair_right_gets_an_exact_interval_not_a_point() -> None:
    """4 pairs, all right: every bootstrap resample is 1.0, so the "95% CI" was [1, 1]; the exact binomial
    (Clopper-Pearson) interval is [0.40, 1]."""
    from scipy import stats

    from vistkit.meta.pairs import accuracy_interval, preference_share

    for k in (0, 4):
        want = stats.binomtest(k, 4).proportion_ci(0.95, method="exact")
        got = accuracy_interval([float(k > 0)] * 4 + [float("nan")])
        assert got == pytest.approx((want.low, want.high))
    assert accuracy_interval([1.0]) == pytest.approx((0.025, 1.0))
    share = preference_share([0.5, 0.2, 0.1])  # story A preferred on all three items
    assert share["ci"] == pytest.approx([stats.binomtest(3, 3).proportion_ci(0.95, method="exact").low, 1.0])
    assert "Clopper-Pearson" in share["ci_method"]
    assert accuracy_interval([1.0, 0.0, 1.0, 1.0], n_resamples=200)[1] == 1.0  # variation: the bootstrap as before


def test_the_pairs_report_says_which_interval_is_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_vistkit(capsys, "meta", "pairs", _pairs(tmp_path / "p.csv", 4, 0), "-m", METRICS, "-f", "json")
    assert code == 0, err
    got = json.loads(out)
    assert got["accuracy_ci"]["meta-test-length"] == pytest.approx([0.3976, 1.0], abs=1e-4)
    assert got["accuracy_ci"]["meta-test-shortness"] == pytest.approx([0.0, 0.6024], abs=1e-4)
    assert set(got["accuracy_ci_exact"]) == {"meta-test-length", "meta-test-shortness"}
    code, _, err = run_vistkit(
        capsys, "meta", "pairs", _pairs(tmp_path / "p.csv", 4, 0), "-m", METRICS, "--report", tmp_path / "r"
    )
    assert code == 0, err
    page = " ".join((tmp_path / "r" / "index.html").read_text(encoding="utf-8").split())
    assert "Clopper-Pearson" in page


# ------------------------------------------------------------------------- a missing-value marker in a rating cell
@pytest.mark.parametrize("marker", ["NA", "n/a", "#N/A", "null", "None", "-", "?", "missing"])
def test_a_missing_value_marker_in_a_rating_says_how_to_write_a_missing_rating(tmp_path: Path, marker: str) -> None:
    """R writes a missing rating as NA, spreadsheets as #N/A or -: "must be a number" did not say that an empty
    cell (or pandas' nan) is how a missing rating is written."""
    from vistkit.errors import InputError
    from vistkit.meta.human import read_likert

    path = tmp_path / "likert.csv"
    path.write_text(f"system,item,worker,focused\nm1,i1,w1,{marker}\nm1,i2,w1,4\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 2") as got:
        read_likert(path)
    assert "empty" in str(got.value) and repr(marker) in str(got.value)


# ------------------------------------------------------------------------- a table separated by semicolons
SEMICOLON_TABLES = {
    "likert": "system;item;worker;focused\nm1;i1;w1;4\n",
    "errors": "system;item;Gram\nm1;i1;1\n",
    "pairs": f"{HEADER.replace(',', ';')}\na b;a;-1;s1;1-2;m0;m1;5;1;2;2\n",
    "rankings": "task;worker;story;rank\nt1;w1;a;1\n",
}


@pytest.mark.parametrize("kind", sorted(SEMICOLON_TABLES))
@pytest.mark.parametrize("sep", [";", "\t"])
def test_a_table_separated_by_semicolons_or_tabs_says_so(tmp_path: Path, kind: str, sep: str) -> None:
    """A spreadsheet saved in a language whose decimal mark is a comma writes ';' between cells: the error named
    the one column 'system;item;worker;focused' as if columns were missing."""
    from vistkit.errors import InputError
    from vistkit.meta.human import read_error_labels, read_likert, read_pairs, read_rankings

    path = tmp_path / f"{kind}.csv"
    path.write_text(SEMICOLON_TABLES[kind].replace(";", sep), encoding="utf-8")
    reader = {"likert": read_likert, "errors": read_error_labels, "pairs": read_pairs, "rankings": read_rankings}
    with pytest.raises(InputError) as got:
        reader[kind](path)
    assert f"separated by {sep!r}" in str(got.value) and "comma" in str(got.value)


# ------------------------------------------------------------------------- meta pairs prints the A-vs-B tests
def test_meta_pairs_prints_the_significance_it_promises(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`meta pairs` computes McNemar and the paired bootstrap of every two metrics (its help and docs/meta.md say
    so), but printed them only with -f json and on the --report page."""
    monkeypatch.setenv("COLUMNS", "200")  # a narrower terminal wraps the column heads ("p" / "McNemar")
    pairs = _pairs(tmp_path / "p.csv", 7, 1)
    code, out, err = run_vistkit(capsys, "meta", "pairs", pairs, "-m", METRICS)
    assert code == 0, err
    text = " ".join(out.split())
    assert "p McNemar" in text and "0.0703" in text and "overconfident" in text
    code, out, err = run_vistkit(capsys, "meta", "pairs", pairs, "-m", METRICS, "-f", "latex")
    assert code == 0 and out.count("\\begin{tabular}") == 2 and "p McNemar" in out
    code, out, err = run_vistkit(capsys, "meta", "pairs", pairs, "-m", METRICS, "-f", "csv")
    assert code == 0 and "p McNemar" not in out and "meta compare" in err
    code, out, err = run_vistkit(capsys, "meta", "pairs", pairs, "-m", "meta-test-length")
    assert code == 0 and "p McNemar" not in out  # one metric: nothing to compare
