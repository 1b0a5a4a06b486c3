"""Probes, round 16: meta-evaluation with odd inputs, numbers checked against references computed here.

- `meta correlate` / `meta errors` without ``--key``, given the stories as ``--stories`` files (which carry their
  photos), matched the table's items to the files by story id but the references by photo sequence: a story of a
  sequence the references tell twice was scored against both references, so the same table gave another number
  (there: n/a) than with its ``text`` column, signed ``key:sequence``. Where the two keys give other references,
  it is now refused, naming ``--key story`` and ``--key sequence``.
- ``--key sequence`` found a ``--stories`` story only when the table's item spelt the photos ``1-2-3``; the table's
  own text was matched under any spelling (``1_2_3``, ``1 2 3``, ``['1', '2']``).
- A story over the length limit in a pairs, rankings or Likert file was refused as "story 'u0'" (an internal id),
  after the models loaded; it is now refused as the file is read, naming the line and column.
- A table whose only rating column has an id name ('story') said "no aspect column ''"; an error column the labels
  lack was called an aspect.
- `meta correlate` / `meta errors` with references sharing no key with the table said "no pair could be scored",
  blamed Reference Absent (no story there was a human one), and only after every model had loaded.
- `vrank train` / `vrank predict -o` on `meta build-pairs` output (PROXY labels) said nothing about it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from meta_dummies import dummy_metrics_registered, run_vistkit
from scipy import stats


@pytest.fixture(scope="module", autouse=True)
def dummy_metrics() -> Iterator[None]:
    with dummy_metrics_registered():
        yield


def _jsonl(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ------------------------------------------------------------------ --stories files without --key: which key?
REFS = [
    ("h1", "1-2-3", "we went to the park . the kids ran . it was fun ."),
    ("h2", "4-5-6", "my dog is old . he still plays . we love him ."),
    ("h3", "7-8-9", "the city was busy . we ate noodles . the lights were bright ."),
    ("h4", "7-8-9", "a trip downtown . food everywhere . so many lights ."),
]
MACHINE = [
    ("h1", "1-2-3", "we went to the park . it was fun ."),
    ("h2", "4-5-6", "my dog plays . we love him ."),
    ("h3", "7-8-9", "a trip downtown . so many lights ."),
    ("h4", "7-8-9", "the city was busy . we ate noodles ."),
]


def _key_case(tmp_path: Path, refs: list[tuple[str, str, str]] = REFS) -> tuple[Path, Path, Path, Path]:
    """References, a machine file carrying photos, and the same ratings with and without a text column."""
    ref = _jsonl(tmp_path / "refs.jsonl", [{"story_id": s, "photo_ids": p, "text": t} for s, p, t in refs])
    machine = _jsonl(tmp_path / "m1.jsonl", [{"story_id": s, "photo_ids": p, "text": t} for s, p, t in MACHINE])
    ratings = [5, 4, 1, 2]
    bare = tmp_path / "l.csv"
    bare.write_text(
        "system,item,worker,focused\n"
        + "".join(f"m1,{s},w1,{r}\n" for (s, _, _), r in zip(MACHINE, ratings, strict=True)),
        encoding="utf-8",
    )
    texts = tmp_path / "l2.csv"
    texts.write_text(
        "system,item,worker,focused,text\n"
        + "".join(f"m1,{s},w1,{r},{t}\n" for (s, _, t), r in zip(MACHINE, ratings, strict=True)),
        encoding="utf-8",
    )
    return ref, machine, bare, texts


def _story_rs(out: str) -> dict[str, float | None]:
    return {r["method"]: r["r"] for r in json.loads(out)["correlations"] if r["level"] == "story"}


def test_stories_files_without_a_key_whose_references_differ_by_key_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Were scored against every reference of their photos (another number than the table's own text gave)."""
    ref, machine, bare, _ = _key_case(tmp_path)
    common = ("-m", "meta-test-overlap", "-r", ref, "--bootstrap", "10", "--level", "story", "-f", "json")
    code, _, err = run_vistkit(capsys, "meta", "correlate", bare, "-s", f"m1={machine}", *common)
    assert code == 1, err
    assert "--key story" in err and "--key sequence" in err and "'h3'" in err, err


def test_stories_files_with_key_story_score_as_the_tables_own_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref, machine, bare, texts = _key_case(tmp_path)
    common = ("-m", "meta-test-overlap", "-r", ref, "--bootstrap", "10", "--level", "story", "-f", "json")
    code, with_file, err = run_vistkit(
        capsys, "meta", "correlate", bare, "-s", f"m1={machine}", "--key", "story", *common
    )
    assert code == 0, err
    code, with_text, err = run_vistkit(capsys, "meta", "correlate", texts, *common)
    assert code == 0, err
    assert _story_rs(with_file) == _story_rs(with_text)
    assert "|key:story|" in json.loads(with_file)["signatures"]["meta-test-overlap"]


def test_stories_files_without_a_key_where_both_keys_agree_still_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One reference per photo sequence, each with the story's id: no ambiguity, no refusal."""
    refs = [*REFS[:3], ("h4", "10-11-12", REFS[3][2])]
    ref, _, bare, _ = _key_case(tmp_path, refs)
    machine = _jsonl(
        tmp_path / "m2.jsonl",
        [{"story_id": s, "photo_ids": p, "text": t} for (s, p, _), (_, _, t) in zip(refs, MACHINE, strict=True)],
    )
    code, out, err = run_vistkit(
        capsys, "meta", "correlate", bare, "-s", f"m1={machine}", "-m", "meta-test-overlap", "-r", ref,
        "--bootstrap", "10", "--level", "story", "-f", "json",
    )
    assert code == 0, err
    assert _story_rs(out)["pearson"] is not None


def test_errors_with_stories_files_without_a_key_is_refused_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref, machine, _, _ = _key_case(tmp_path)
    labels = tmp_path / "e.csv"
    labels.write_text("system,item,Rep\n" + "".join(f"m1,{s},{i % 2}\n" for i, (s, _, _) in enumerate(MACHINE)))
    code, _, err = run_vistkit(
        capsys, "meta", "errors", labels, "-s", f"m1={machine}", "-m", "meta-test-overlap", "-r", ref
    )
    assert code == 1 and "--key story" in err, err


@pytest.mark.parametrize("item", ["1_2_3", "1 2 3", "['1', '2', '3']"])
def test_a_sequence_item_spelt_otherwise_finds_its_story_in_a_stories_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], item: str
) -> None:
    """The table's own text was matched under any spelling of the photo ids; a --stories file only under 1-2-3."""
    stories = _jsonl(
        tmp_path / "m.jsonl",
        [
            {"story_id": "x1", "photo_ids": "1-2-3", "text": "we went to the park"},
            {"story_id": "x2", "photo_ids": "4-5-6", "text": "my dog is old"},
            {"story_id": "x3", "photo_ids": "7-8-9", "text": "a trip downtown so many"},
        ],
    )
    table = tmp_path / "l.csv"
    items = [item, item.replace("1", "4").replace("2", "5").replace("3", "6"), "7-8-9"]
    table.write_text(
        "system,item,worker,focused\n" + "".join(f'm1,"{i}",w1,{r}\n' for i, r in zip(items, [5, 4, 1], strict=True)),
        encoding="utf-8",
    )
    code, out, err = run_vistkit(
        capsys, "meta", "correlate", table, "-s", f"m1={stories}", "--key", "sequence", "-m", "meta-test-length",
        "--bootstrap", "10", "--level", "story", "-f", "json",
    )
    assert code == 0, err
    expected = stats.pearsonr([5, 4, 5], [5, 4, 1])[0]  # the stories' word counts against the ratings
    assert _story_rs(out)["pearson"] == pytest.approx(expected)


# ------------------------------------------------------------------------------- a story over the length limit
PAIRS_HEAD = "sent1,sent2,label,story_id,img_seq,model_base,model_comp,agreement,avg_rank_base,avg_rank_comp,order\n"


@pytest.mark.parametrize("column", ["sent1", "sent2"])
def test_a_pairs_story_over_the_length_limit_names_its_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, column: str
) -> None:
    """Was "story 'u0' holds 200 characters": the id of an internal scoring unit, after the models loaded."""
    monkeypatch.setenv("VISTKIT_MAX_STORY_CHARS", "100")
    long = " ".join(["w"] * 100)
    texts = {"sent1": "a b c", "sent2": "a b"}
    texts[column] = long
    path = tmp_path / "p.csv"
    path.write_text(
        PAIRS_HEAD
        + "x y z,x y,-1.6,s0,0-1-2,gt,m1,5,1.4,3.0,5\n"
        + f"{texts['sent1']},{texts['sent2']},-1.6,s1,1-2-3,gt,m1,5,1.4,3.0,5\n",
        encoding="utf-8",
    )
    code, _, err = run_vistkit(capsys, "meta", "pairs", path, "-m", "meta-test-length")
    assert code == 1, err
    assert "line 3" in err and repr(column) in err and "VISTKIT_MAX_STORY_CHARS" in err and "'u0'" not in err, err


def test_a_ranked_story_over_the_length_limit_names_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VISTKIT_MAX_STORY_CHARS", "100")
    path = tmp_path / "r.csv"
    long = " ".join(["w"] * 100)
    path.write_text(
        f"task,worker,story,rank,text\nT1,w1,A,1,short one\nT1,w1,B,2,{long}\n"
        f"T1,w2,A,2,short one\nT1,w2,B,1,{long}\n",
        encoding="utf-8",
    )
    code, _, err = run_vistkit(capsys, "meta", "rankings-to-pairs", path, "-o", tmp_path / "out.csv")
    assert code == 1, err
    assert "line 3" in err and "VISTKIT_MAX_STORY_CHARS" in err, err
    assert not (tmp_path / "out.csv").exists()


def test_a_judged_story_over_the_length_limit_names_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VISTKIT_MAX_STORY_CHARS", "100")
    path = tmp_path / "l.csv"
    long = " ".join(["w"] * 100)
    path.write_text(
        f"system,item,worker,focused,text\nm1,a,w1,1,a b\nm1,b,w1,2,{long}\nm1,c,w1,3,c\n", encoding="utf-8"
    )
    code, _, err = run_vistkit(capsys, "meta", "correlate", path, "-m", "meta-test-length", "--bootstrap", "10")
    assert code == 1, err
    assert "line 3" in err and "VISTKIT_MAX_STORY_CHARS" in err, err


# ------------------------------------------------------------------------------- a table without rating columns
def test_a_likert_table_whose_only_rating_column_has_an_id_name_says_to_name_it(tmp_path: Path) -> None:
    """Was "no aspect column ''": the default skips id and text columns, and a rating named 'story' is one."""
    from vistkit.errors import InputError
    from vistkit.meta.human import read_likert

    path = tmp_path / "l.csv"
    path.write_text("system,item,worker,story,text\nm1,a,w1,3,a b\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_likert(path)
    said = str(info.value)
    assert "''" not in said and "--aspects story" in said, said
    assert read_likert(path, aspects=["story"]).aspects == ["story"]


def test_an_error_column_the_labels_lack_is_named_as_an_error(tmp_path: Path) -> None:
    from vistkit.errors import InputError
    from vistkit.meta.human import read_error_labels

    path = tmp_path / "e.csv"
    path.write_text("system,item,Gram\nm1,a,1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"no error column 'Rep'; columns are system, item, Gram") as info:
        read_error_labels(path, errors=["Rep"])
    assert "aspect" not in str(info.value)
    path.write_text("system,item,worker,text\nm1,a,w1,x\n", encoding="utf-8")
    with pytest.raises(InputError, match="--errors") as info:
        read_error_labels(path)
    assert "''" not in str(info.value)


# ------------------------------------------------------------------ references that share no key with the table
def _unkeyed(tmp_path: Path) -> tuple[Path, Path]:
    """A table of machine stories only, and references none of whose story ids is one of its items."""
    ref, _, _, texts = _key_case(tmp_path)
    table = tmp_path / "other.csv"
    table.write_text(texts.read_text(encoding="utf-8").replace(",h", ",x"), encoding="utf-8")
    return ref, table


@pytest.mark.parametrize("verb", ["correlate", "errors"])
def test_references_sharing_no_key_with_the_table_are_said_before_any_metric_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, verb: str
) -> None:
    """Was "no pair could be scored ... (Reference Absent ... removes each story from its own references ...)",
    after every model had loaded: there are no pairs, and no human story whose reference was removed."""
    import vistkit.commands.meta.judged as judged

    ref, table = _unkeyed(tmp_path)
    if verb == "errors":
        labels = tmp_path / "e.csv"
        labels.write_text("system,item,Rep,text\n" + "".join(
            f"m1,x{i},{i % 2},{t}\n" for i, (_, _, t) in enumerate(MACHINE, start=1)
        ), encoding="utf-8")
        table = labels

    def built(*args: object, **kwargs: object) -> None:
        raise AssertionError("a metric was built")

    monkeypatch.setattr(judged, "_metrics", built)
    args = ("--bootstrap", "10") if verb == "correlate" else ()
    code, _, err = run_vistkit(capsys, "meta", verb, table, "-m", "meta-test-overlap", "-r", ref, *args)
    assert code == 1, err
    assert "pair" not in err and "Reference Absent" not in err, err
    assert "story key" in err and "'x1'" in err and "--key" in err, err


def test_stories_that_no_reference_serves_are_not_blamed_on_reference_absent() -> None:
    from vistkit.data.story import Story, StorySet
    from vistkit.errors import InputError
    from vistkit.meta.scoring import score_stories
    from vistkit.metrics.base import get_metric

    refs = StorySet([Story(story_id="r1", text="a b c", system="human")])
    machine = [Story(story_id="s1", text="a b", system="m1"), Story(story_id="s2", text="a", system="m1")]
    with pytest.raises(InputError) as info:
        score_stories(get_metric("meta-test-overlap"), machine, references=refs, key="story")
    said = str(info.value)
    assert "no story could be scored" in said and "Reference Absent" not in said and "'s1'" in said, said
    # a human story whose only reference is itself: Reference Absent is the reason, and said
    human = [Story(story_id="r1", text="a b c", system="human")]
    with pytest.raises(InputError, match="Reference Absent"):
        score_stories(get_metric("meta-test-overlap"), human, references=refs, key="story")


# ------------------------------------------------------------------------------------ vrank on PROXY labels
def test_vrank_train_on_proxy_pairs_warns_that_it_learns_the_assumption(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`meta build-pairs` labels every pair "the human story is better" (a PROXY, said in its label_source
    column); `vrank train` trained on it as on people's rankings without a word."""
    import vistkit.models.vrank as vr
    from vistkit.errors import InputError

    refs = _jsonl(tmp_path / "refs.jsonl", [{"story_id": s, "photo_ids": p, "text": t} for s, p, t in REFS])
    machine = _jsonl(tmp_path / "m.jsonl", [{"story_id": s, "photo_ids": p, "text": t} for s, p, t in MACHINE])
    pairs = tmp_path / "proxy.csv"
    code, _, err = run_vistkit(capsys, "meta", "build-pairs", "-r", refs, "--machine", f"m1={machine}", "-o", pairs)
    assert code == 0, err

    def stop(*args: object, **kwargs: object) -> None:
        raise InputError("stopped before training")

    monkeypatch.setattr(vr, "resolve_encoder", lambda encoder: Path(str(encoder)))
    monkeypatch.setattr(vr, "train_vrank", stop)
    code, _, err = run_vistkit(capsys, "vrank", "train", pairs, "-o", tmp_path / "model", "--device", "cpu")
    assert code == 1 and "stopped before training" in err, err
    assert "warning:" in err and "4 of 4 pairs" in err and "proxy" in err.lower(), err
