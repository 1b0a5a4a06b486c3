"""Smoke test of the whole meta-evaluation pipeline on real VIST data in ../shared: human-vs-machine pairs
from the VIST test references (PR-VIST's copy) and the LLaVA / TAPM / PR-VIST outputs, with a PROXY label (the
human story is assumed better), scored by the cheap reference-based metrics that are registered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import shared_file

from vistkit.cli import main
from vistkit.meta.human import read_pairs
from vistkit.metrics.base import list_metrics

pytestmark = [pytest.mark.slow, pytest.mark.shared]

CHEAP = ("bleu-4", "rouge-l", "cider-d", "sacrebleu")


@pytest.fixture(scope="module")
def demo_pairs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    refs = shared_file("pr-vist", "PR_VIST.json.zip")
    llava = shared_file("dhm-visual-storytelling", "data", "stories", "vist", "llava_vc_p3.json")
    tapm = shared_file("tapm-vist-outputs", "vist", "ours.json")
    out = tmp_path_factory.mktemp("meta") / "pairs.csv"
    code = main(
        [
            "meta",
            "build-pairs",
            "-r",
            str(refs),
            "--machine",
            f"llava={llava}",
            "--machine",
            f"tapm={tapm}",
            "--key",
            "tapm=sequence",
            "--machine",
            f"pr-vist={refs}:predicted_story",
            "--limit",
            "25",
            "-o",
            str(out),
        ]
    )
    assert code == 0
    return out, refs


def test_build_pairs_from_real_outputs(demo_pairs: tuple[Path, Path]) -> None:
    pairs = read_pairs(demo_pairs[0])
    assert len(pairs) == 75
    assert {p.system_2 for p in pairs} == {"llava", "tapm", "pr-vist"}
    assert all(p.system_1 == "human" and p.preference == 1 and len(p.img_seq) == 5 for p in pairs)
    first = pairs[0]  # story 45530 (SOURCE.md's example record)
    assert first.story_id == "45530" and first.text_1.startswith("the local parish holds a craft show")


def test_whole_pipeline_on_real_pairs(
    demo_pairs: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    names = [m for m in CHEAP if m in list_metrics()]
    if not names:
        pytest.skip("no cheap reference-based metric registered yet")
    pairs_csv, refs = demo_pairs
    args = [
        "meta",
        "pairs",
        str(pairs_csv),
        "-m",
        ",".join(names),
        "-r",
        str(refs),
        "-f",
        "json",
        "--bootstrap",
        "100",
    ]
    assert main([*args, "--report", str(tmp_path / "rep")]) == 0
    on = json.loads(capsys.readouterr().out)
    assert main([*args, "--no-reference-absent"]) == 0
    off = json.loads(capsys.readouterr().out)
    for m in names:
        acc = on["accuracy"][m]["all"]
        assert 0.0 <= acc <= 1.0 and on["n"][m]["all"] > 0
        assert on["accuracy"][m]["omega_5"] is None  # proxy pairs carry no agreement
        # scored against itself, the human story wins (nearly) every pair: the reason for the RAA
        assert off["accuracy"][m]["all"] >= 0.95 > acc
    assert all(v["ratio"] == 0.0 for v in on["beats_reference"]["human"].values())  # the proxy label
    assert on["proxy_label_pairs"] == 75
    assert "PROXY label" in (tmp_path / "rep" / "index.html").read_text()
    assert (tmp_path / "rep" / "index.html").stat().st_size > 10_000
