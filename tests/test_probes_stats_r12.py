"""Probes of round 12 on bootstrap CIs and paired tests (`vistkit.scores.stats`, `vistkit compare`)."""

from __future__ import annotations

import math

from vistkit.commands.compare import comparison_notes, comparison_payload
from vistkit.metrics.base import mean_score
from vistkit.scores import stats


def _scores(values: dict[str, list[float]]) -> dict[str, dict[str, object]]:
    ids = ["a", "b", "c", "d"]
    return {s: {"toy": mean_score("toy", ids, v, "toy|vistkit:0")} for s, v in values.items()}


def test_a_metric_undefined_on_every_item_of_one_system_does_not_stop_the_comparison() -> None:
    """One system's stories all undefined on one metric (e.g. coherence on one-sentence stories) stopped the whole
    `compare` with "the two systems share no scored item"; its test is now n/a (no item to test) and the others run."""
    nan = math.nan
    scores = _scores({"base": [0.1, 0.2, 0.3, 0.4], "empty": [nan] * 4, "good": [0.5, 0.6, 0.7, 0.9]})
    for test in ("bs", "ar"):
        c = stats.compare_scores(scores, test=test, n_samples=200)  # type: ignore[arg-type]
        empty = c.results["empty"]["toy"]
        assert empty.paired is not None and math.isnan(empty.paired.p_value) and empty.paired.n_items == 0
        assert math.isnan(empty.score) and math.isnan(empty.ci.low) and empty.mark == ""
        good = c.results["good"]["toy"]
        assert good.paired is not None and good.paired.n_items == 4 and good.paired.p_value < 0.05
        payload = comparison_payload(c)
        assert payload["results"]["empty"]["toy"]["n_paired"] == 0
        assert any("empty vs base could not be tested" in line for line in comparison_notes(c))


def test_a_head_to_head_share_with_no_item_reads_n_a_not_nan_percent() -> None:
    """A share over no item (every story of one system undefined) printed "nan% ... [nan%, nan%]"."""
    from vistkit.commands.compare import head_to_head_lines

    nan = math.nan
    share = {"over": "base", "unit": "sequence", "share": nan, "ci": [nan, nan], "ties": nan, "n": 0}
    (line,) = head_to_head_lines({"toy": {"empty": share}}, 0.95)
    assert "nan" not in line and "n/a of the photo sequences [n/a, n/a] (ties n/a, n=0" in line
