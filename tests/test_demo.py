"""`vistkit demo` runs on the data the package ships, with no ../shared and no download."""

from __future__ import annotations

import re

import pytest

from vistkit.cli import main
from vistkit.commands.demo import DEMO_METRICS


@pytest.mark.slow
def test_demo_scores_every_offline_metric_and_the_distance(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out, err = capsys.readouterr()
    assert "skipped" not in err  # every demo metric runs offline here
    for name in DEMO_METRICS:
        assert f"{name}: {name}|" in out  # its signature line
    assert "dHM, human vs LLaVA" in out and "rovist-nr (human)" in out
    # mixed scales say so: each metric's declared range beside its score
    assert re.search(r"│ sacrebleu\s+│\s+[\d.]+ │ 0-100\s+│", out)
    assert re.search(r"│ bleu-4\s+│\s+[\d.]+ │ 0-1\s+│", out)
