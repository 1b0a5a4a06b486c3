"""``vistkit compare`` (systems x metrics, CIs, significance against a baseline) and the Reference Absent
Algorithm (Vrank Eq. 3) on reference-based metrics."""

from __future__ import annotations

import csv
import io
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sacrebleu

from vistkit.cli import main
from vistkit.data.readers import write_jsonl
from vistkit.data.story import Story
from vistkit.metrics.base import get_metric
from vistkit.metrics.sacrebleu_bleu import sacrebleu_score
from vistkit.scores import stats

WORDS = "we went to the park and had a great time with our friends family dog cat beach sun cake party".split()


def make_data(n: int = 40, seed: int = 0) -> tuple[list[Story], dict[str, list[Story]]]:
    """References (1-3 per sequence) and three systems of decreasing quality."""
    rng = random.Random(seed)
    refs: list[Story] = []
    systems: dict[str, list[Story]] = {"good": [], "mid": [], "bad": []}
    for i in range(n):
        photos = tuple(f"{i}{j}" for j in range(5))
        texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16))) for _ in range(rng.randint(1, 3))]
        refs += [Story(f"r{i}-{j}", t, photo_ids=photos, system="human") for j, t in enumerate(texts)]
        for name, keep in (("good", 0.8), ("mid", 0.6), ("bad", 0.3)):
            words = [w if rng.random() < keep else rng.choice(WORDS) for w in texts[0].split()]
            systems[name].append(Story(f"{name}{i}", " ".join(words), photo_ids=photos, system=name))
    return refs, systems


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    refs, systems = make_data()
    out = {"refs": tmp_path / "refs.jsonl"}
    write_jsonl(refs, out["refs"])
    for name, stories in systems.items():
        out[name] = tmp_path / f"{name}.jsonl"
        write_jsonl(stories, out[name])
    return out


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def compare_json(capsys: pytest.CaptureFixture[str], systems: list[Path], refs: Path, *args: str) -> dict[str, Any]:
    """``vistkit compare SYSTEMS -r REFS -m sacrebleu -f json ARGS...``: its JSON payload (the run must succeed)."""
    command = ["compare", *map(str, systems), "-r", str(refs), "-m", "sacrebleu", "-f", "json", *args]
    code, out, err = run(command, capsys)
    assert code == 0, err
    return json.loads(out)


def references_by_sequence(refs: list[Story]) -> dict[str, list[str]]:
    """The reference texts of each photo sequence, in file order."""
    grouped: dict[str, list[str]] = {}
    for r in refs:
        grouped.setdefault(r.sequence, []).append(r.text)
    return grouped


def streams(refs: list[list[str]]) -> list[list[str | None]]:
    width = max(map(len, refs))
    return [[rs[j] if j < len(rs) else None for rs in refs] for j in range(width)]


def test_json_scores_cis_and_p_values_match_sacrebleu(files: dict[str, Path], capsys, monkeypatch) -> None:
    """Each corpus score is sacreBLEU's; each p-value is sacreBLEU's PairedTest p-value for the same seed."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    payload = compare_json(capsys, [files["good"], files["mid"], files["bad"]], files["refs"], "--n-samples", "500")
    assert payload["baseline"] == "good" and payload["systems"] == ["good", "mid", "bad"]
    assert payload["metrics"]["sacrebleu"]["n_items"] == 40
    refs, systems = make_data()
    grouped = references_by_sequence(refs)
    ref_lists = [grouped[s.sequence] for s in systems["good"]]
    monkeypatch.setenv("SACREBLEU_SEED", "12345")
    named = [(k, [s.text for s in v]) for k, v in systems.items()]
    _, theirs = PairedTest(named, {"BLEU": BLEU()}, streams(ref_lists), test_type="bs", n_samples=500)()
    for k, (name, hyps) in enumerate(named):
        res = payload["results"][name]["sacrebleu"]
        assert res["score"] == pytest.approx(sacrebleu.corpus_bleu(hyps, streams(ref_lists)).score, abs=1e-9)
        lo, hi = res["ci"]
        assert lo <= res["score"] <= hi
        if k:
            assert res["p_value"] == pytest.approx(theirs["BLEU"][k].p_value, abs=1e-12)
            assert res["mark"] == stats.significance_mark(res["p_value"])
        else:
            assert res["p_value"] is None and res["mark"] == ""
    assert payload["results"]["bad"]["sacrebleu"]["mark"] == "**"  # far worse than good on 40 items


def test_text_csv_latex_baseline_and_ar(files: dict[str, Path], capsys) -> None:
    base = ["compare", str(files["bad"]), str(files["good"]), "-r", str(files["refs"]), "-m", "sacrebleu"]
    code, out, _ = run([*base, "--baseline", "good", "--test", "ar", "--n-samples", "300"], capsys)
    assert code == 0
    assert "good (baseline)" in out and "**" in out and "approximate randomisation, 300 samples" in out
    assert "sb:[nrefs:var" in out
    code, out, err = run([*base, "--format", "csv"], capsys)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["system"] for r in rows] == ["bad", "good"] and rows[0]["p_value"] == ""
    assert "sb:[nrefs:var" in err and "* p < 0.05" in err  # a CSV has no caption: signatures and notes on stderr
    assert float(rows[1]["ci_low"]) <= float(rows[1]["score"]) <= float(rows[1]["ci_high"])
    code, out, _ = run([*base, "--format", "latex"], capsys)
    assert code == 0 and r"\begin{tabular}" in out and "bad (baseline)" in out


def test_systems_are_compared_on_shared_items_only(files: dict[str, Path], tmp_path: Path, capsys) -> None:
    refs, systems = make_data()
    partial = tmp_path / "partial.jsonl"
    write_jsonl(systems["mid"][:30], partial)
    payload = compare_json(capsys, [files["good"], partial], files["refs"])
    assert payload["metrics"]["sacrebleu"]["n_items"] == 30
    assert payload["metrics"]["sacrebleu"]["dropped"] == {"good": 10, "partial": 0}
    good30 = sacrebleu_score(systems["good"][:30], refs).corpus
    assert payload["results"]["good"]["sacrebleu"]["score"] == pytest.approx(good30, abs=1e-9)


def test_each_systems_signature_is_shown_where_it_differs(files: dict[str, Path], tmp_path: Path, capsys) -> None:
    """A system that scored only one-reference items ran as nrefs:1 while the baseline's run was nrefs:1-3; only
    the baseline's signature was shown (probe r9)."""
    refs, systems = make_data()
    per_sequence = Counter(s.photo_ids for s in refs)
    partial = tmp_path / "partial.jsonl"
    write_jsonl([s for s in systems["mid"] if per_sequence[s.photo_ids] == 1], partial)
    payload = compare_json(capsys, [files["good"], partial], files["refs"])
    own = payload["metrics"]["sacrebleu"]["system_signatures"]
    assert own["good"] == payload["signatures"]["sacrebleu"] and "nrefs:1-3|" in own["good"]
    assert "nrefs:1|" in own["partial"]
    code, out, _ = run(["compare", str(files["good"]), str(partial), "-r", str(files["refs"]), "-m", "sacrebleu"],
                         capsys)  # fmt: skip
    assert code == 0 and f"sacrebleu: partial's run was signed {own['partial']}" in out
    code, out, _ = run(["compare", str(files["good"]), str(partial), "-r", str(files["refs"]), "-m", "sacrebleu",
                          "-f", "csv"], capsys)  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["signature"] for r in rows] == [own["good"], own["partial"]]


def test_an_undefined_score_leaves_the_item_out_of_the_paired_test(tmp_path: Path, capsys) -> None:
    """rovist-nr leaves a one-sentence story undefined: the table's means run over each system's own scored
    stories, the paired test over the stories both scored, and the notes say so with the paired means (here the
    paired difference points the other way from the table's)."""
    texts_a = ["we went out . we went out .", "a dog ran .", "the sun rose . we ate eggs . we left ."]
    texts_b = ["we went out . we saw a bird .", "a dog ran . it barked at a cat .", "the sun rose ."]
    for name, texts in (("a", texts_a), ("b", texts_b)):
        write_jsonl([Story(f"s{i}", t) for i, t in enumerate(texts)], tmp_path / f"{name}.jsonl")
    command = ["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "-m", "rovist-nr"]
    code, out, err = run([*command, "-f", "json", "--n-samples", "50"], capsys)
    assert code == 0, err
    result = json.loads(out)["results"]["b"]["rovist-nr"]
    assert result["n_paired"] == 1
    nr = {t: get_metric("rovist-nr").score([Story("x", t)]).item_scores[0] for t in texts_a[:1] + texts_b[:1]}
    assert result["difference"] == pytest.approx(nr[texts_b[0]] - nr[texts_a[0]])
    code, out, err = run([*command, "--n-samples", "50"], capsys)
    assert code == 0, err
    assert "rovist-nr: b vs a was tested on the 1 item both scored" in " ".join(out.split())


def test_user_errors_exit_1_with_one_sentence(files: dict[str, Path], capsys) -> None:
    base = ["compare", str(files["good"]), str(files["mid"]), "-r", str(files["refs"]), "-m", "sacrebleu"]
    code, _, err = run([*base, "--baseline", "nope"], capsys)
    assert code == 1 and "--baseline 'nope' is not one of the systems" in err
    code, _, err = run([*base, "--test", "t"], capsys)
    assert code == 2 and "Invalid value for '--test': use bs or ar, not 't'" in err  # a usage error, as --format
    code, _, err = run(["compare", str(files["good"]), "-r", str(files["refs"]), "-m", "sacrebleu"], capsys)
    assert code == 1 and "at least two" in err
    code, _, err = run([*base, "--name", "only-one"], capsys)
    assert code == 1 and "one --name per system" in err


def test_compare_two_identical_systems_is_not_significant(files: dict[str, Path], capsys) -> None:
    payload = compare_json(capsys, [files["mid"], files["mid"]], files["refs"])
    assert payload["systems"] == ["mid", "mid-2"]
    assert payload["results"]["mid-2"]["sacrebleu"]["p_value"] == 1.0


# ------------------------------------------------------------------------- Reference Absent Algorithm (Eq. 3)
def human_pool() -> list[Story]:
    """Three human stories for one sequence, two for another, one for a third."""
    texts = {
        "s1": [
            "we went to the beach .",
            "the family had fun at the beach today .",
            "a great day in the sun .",
        ],
        "s2": ["the dog played in the park .", "our dog ran with the cat in the park ."],
        "s3": ["a birthday party with cake ."],
    }
    return [
        Story(f"{seq}-{j}", t, photo_ids=(seq, "x"), system="human")
        for seq, ts in texts.items()
        for j, t in enumerate(ts)
    ]


def test_reference_absent_removes_the_scored_story_from_its_references() -> None:
    pool = human_pool()
    scored = [pool[0], pool[3]]  # the first human story of s1 and of s2, scored against all humans
    metric = get_metric("sacrebleu")
    with_self = metric.score(scored, pool, key="story")  # story keys: each meets only itself
    assert with_self.corpus == pytest.approx(100.0)
    by_seq = metric.score(scored, pool, key="sequence")
    assert by_seq.corpus == pytest.approx(100.0)  # it is among its own references: a perfect, meaningless match
    absent = metric.score(scored, pool, key="sequence", reference_absent=True)
    expected = sacrebleu.corpus_bleu(
        [pool[0].text, pool[3].text], [[pool[1].text, pool[4].text], [pool[2].text, None]]
    ).score
    assert absent.corpus == pytest.approx(expected, abs=1e-9) and absent.corpus < 100.0
    assert "refabsent:yes" in absent.signature and "nrefs:1-2" in absent.signature


def test_reference_absent_excludes_a_story_that_is_its_only_reference() -> None:
    pool = human_pool()
    result = get_metric("sacrebleu").score([pool[5], pool[0]], pool, key="sequence", reference_absent=True)
    assert result.item_ids == ["s1-x"]
    assert "reference absent" in result.excluded["s3-x"]


def test_reference_absent_matches_by_text_for_a_differently_named_copy() -> None:
    pool = human_pool()
    copy = Story("model-1", "  we went to the   beach . ", photo_ids=("s1", "x"), system="model")
    absent = get_metric("sacrebleu").score([copy], pool, key="sequence", reference_absent=True)
    plain = sacrebleu_score([copy], [p for p in pool if p.story_id != "s1-0"], key="sequence")
    assert absent.corpus == pytest.approx(plain.corpus)


@pytest.mark.models
def test_reference_absent_on_bertscore() -> None:
    pytest.importorskip("torch")
    pool = human_pool()
    metric = get_metric("bertscore")
    self_included = metric.score([pool[0]], pool, key="sequence")
    assert self_included.corpus == pytest.approx(1.0, abs=1e-5)  # max over refs finds itself
    absent = metric.score([pool[0]], pool, key="sequence", reference_absent=True)
    _, _, f = metric.score_pairs([pool[0].text], [[pool[1].text, pool[2].text]])
    assert absent.corpus == pytest.approx(float(f[0]), abs=1e-6) and absent.corpus < 0.99


def test_compare_with_reference_absent_on_human_stories(tmp_path: Path, capsys) -> None:
    pool = human_pool()
    refs = tmp_path / "humans.jsonl"
    write_jsonl(pool, refs)
    first = tmp_path / "first.jsonl"
    second = tmp_path / "second.jsonl"
    write_jsonl([pool[0], pool[3]], first)
    write_jsonl([pool[1], pool[4]], second)
    payload = compare_json(
        capsys, [first, second], refs, "--reference-absent", "--n-samples", "200", "--n-bootstrap", "200"
    )
    assert "refabsent:yes" in payload["metrics"]["sacrebleu"]["signature"]
    scores = [payload["results"][s]["sacrebleu"]["score"] for s in ("first", "second")]
    assert all(s < 100.0 for s in scores)
    assert np.isfinite(scores).all()


# ------------------------------------------------------------------------------ vistkit score --confidence
def test_score_confidence_intervals_follow_sacrebleus_bootstrap(files: dict[str, Path], capsys, monkeypatch) -> None:
    """``vistkit score --confidence 0.9``: the percentiles of sacreBLEU's own bootstrap draws (seed 12345)."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import _bootstrap_resample

    monkeypatch.setenv("SACREBLEU_SEED", "12345")
    command = ["score", str(files["mid"]), "-r", str(files["refs"]), "-m", "sacrebleu", "--confidence", "0.9"]
    code, out, err = run([*command, "-f", "json"], capsys)
    assert code == 0, err
    lo, hi = json.loads(out)["ci"]["sacrebleu"]
    refs, systems = make_data()
    grouped = references_by_sequence(refs)
    bleu = BLEU()
    bl_stats = bleu._extract_corpus_statistics(
        [s.text for s in systems["mid"]], streams([grouped[s.sequence] for s in systems["mid"]])
    )
    _, draws = _bootstrap_resample(bl_stats, bleu, 1000)
    expected = np.quantile([d.score for d in draws], [0.05, 0.95])
    assert (lo, hi) == pytest.approx(tuple(expected), rel=1e-6)
    code, out, _ = run([*command, "-f", "csv"], capsys)
    header = out.splitlines()[0].split(",")
    assert header[:4] == ["metric", "score", "ci_low", "ci_high"]
