"""The admin page's results chart (inline SVG drawn on the server): what each task's bars mean, escaping, and the
page carrying the chart and the progress bar."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from studio_helpers import make_study, read_page

from vistkit.studio.charts import chart_spec, results_chart_svg


def test_chart_values_per_task() -> None:
    rows = [{"system": "human", "mean rank": 1.25, "n": 4}, {"system": "m1", "mean rank": 2.75, "n": 4}]
    rank = chart_spec("rank", rows)
    assert rank["bars"] == [("human", 1.25, 4), ("m1", 2.75, 4)] and (rank["low"], rank["high"]) == (1.0, 2.0)
    pair = chart_spec("pairwise", [{"system": "a", "win": 0.6, "tie": 0.1, "loss": 0.3, "n": 10}])
    assert pair["bars"] == [("a", 0.6, 10)] and (pair["low"], pair["high"]) == (0.0, 1.0)
    likert = chart_spec("likert", [{"system": "a", "focused": 4.0, "coherent": 2.0, "n": 3}])
    assert likert["bars"] == [("a", 3.0, 3)] and (likert["low"], likert["high"]) == (1.0, 5.0)
    assert results_chart_svg("rank", []) == ""


def test_chart_escapes_names_and_draws_one_bar_per_system() -> None:
    svg = results_chart_svg(
        "pairwise", [{"system": "<script>x</script>", "win": 0.5, "n": 2}, {"system": "human", "win": 0.25, "n": 2}]
    )
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert svg.count('class="bar"') == 2 and 'role="img"' in svg and "<title" in svg
    assert "style=" not in svg  # the studio's CSP allows no inline style
    widths = [float(w) for w in re.findall(r'class="bar" x="[\d.]+" y="\d+" width="([\d.]+)"', svg)]
    assert widths[0] == pytest.approx(2 * widths[1])  # 0.5 vs 0.25 on a 0-1 axis


def test_admin_page_shows_progress_bar_and_chart(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from vistkit.studio.app import create_app

    made = make_study(tmp_path, task="rank", n_items=2, per_item=1, annotators=1)
    c = TestClient(create_app(made.study))
    page = c.get(f"/admin/{made.admin}").text
    assert re.search(r'<progress id="progress-bar" max="2" value="0"', page) and "results-chart" not in page
    p = read_page(c, made.tokens[0])
    form = {"assignment": p.assignment, "csrf": p.csrf, "ranking": "1,2,3"}
    assert c.post(f"/a/{made.tokens[0]}/submit", data=form, headers={"accept": "application/json"}).json()["saved"]
    page = c.get(f"/admin/{made.admin}").text
    assert re.search(r'<progress id="progress-bar" max="2" value="1"', page)
    assert '<figure id="results-chart"><svg' in page and page.count('class="bar"') == 3
    assert "Mean rank per system (1 = best), from 1 judgement;" in page  # no gold items: nothing left out
