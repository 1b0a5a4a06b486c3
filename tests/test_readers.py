"""Readers and writers (`vistkit.data.readers`): every format on small inline files, errors that name the
file, record and field, writer round trips (hypothesis), and counts / cross-checks on the real files in
../shared."""

from __future__ import annotations

import csv
import gzip
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import shared_file
from vistkit.data.readers import (
    detect_format,
    load_json,
    read_stories,
    read_template,
    write_challenge,
    write_csv,
    write_jsonl,
)
from vistkit.data.story import Story
from vistkit.errors import InputError


def _storylet(sid: str, order: int, text: str, photo: str, album: str = "al1", **extra: Any) -> dict:
    return {
        "story_id": sid,
        "album_id": album,
        "photo_flickr_id": photo,
        "worker_arranged_photo_order": order,
        "text": text,
        **extra,
    }


# Two stories, storylets deliberately out of order: the reader must sort by worker_arranged_photo_order.
STORYLETS = [
    _storylet("s1", 2, "third .", "p3", predicted_story="gen one ."),
    _storylet("s1", 0, "first .", "p1", predicted_story="gen one ."),
    _storylet("s2", 0, "alpha .", "q1", album="al2", predicted_story="gen two ."),
    _storylet("s1", 1, "second .", "p2", predicted_story="gen one ."),
    _storylet("s2", 1, "beta .", "q2", album="al2", predicted_story="gen two ."),
]
EXPECTED = [
    Story(
        story_id="s1",
        text="first . second . third .",
        sentences=("first .", "second .", "third ."),
        photo_ids=("p1", "p2", "p3"),
        album_id="al1",
        system="human",
    ),
    Story(
        story_id="s2",
        text="alpha . beta .",
        sentences=("alpha .", "beta ."),
        photo_ids=("q1", "q2"),
        album_id="al2",
        system="human",
    ),
]


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------- formats
def test_sis_list_of_one_element_lists(tmp_path: Path) -> None:
    p = _write(tmp_path / "sis.json", {"annotations": [[r] for r in STORYLETS]})
    assert detect_format(load_json(p)) == "sis"
    assert list(read_stories(p)) == EXPECTED


def test_sis_flat_annotations(tmp_path: Path) -> None:
    p = _write(tmp_path / "sis.json", {"annotations": STORYLETS})
    assert list(read_stories(p)) == EXPECTED


def test_bare_storylet_list_zipped_and_unzipped(tmp_path: Path) -> None:
    plain = _write(tmp_path / "PR.json", STORYLETS)
    zipped = tmp_path / "PR.json.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("__MACOSX/._PR.json", b"\x00\x05junk")  # the macOS stub PR-VIST's zip also carries
        zf.writestr("PR.json", json.dumps(STORYLETS))
    assert detect_format(load_json(plain)) == "storylets"
    assert list(read_stories(plain)) == EXPECTED == list(read_stories(zipped))
    gen = read_stories(zipped, field="predicted_story")
    assert [(s.story_id, s.text, s.sentences, s.system) for s in gen] == [
        ("s1", "gen one .", None, None),
        ("s2", "gen two .", None, None),
    ]
    assert gen[0].photo_ids == ("p1", "p2", "p3")
    gz = tmp_path / "PR.json.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    assert list(read_stories(gz)) == EXPECTED


def test_challenge_submission(tmp_path: Path) -> None:
    data = {
        "team_name": "team",
        "output_stories": [
            {"album_id": "a1", "photo_sequence": ["1", "2", "3"], "story_text_normalized": "x ."},
            {"album_id": 7, "photo_sequence": [4, 5], "story_text_normalized": "y ."},
        ],
    }
    p = _write(tmp_path / "sub.json", data)
    stories = read_stories(p)
    assert [(s.story_id, s.text, s.photo_ids, s.album_id, s.system) for s in stories] == [
        ("1-2-3", "x .", ("1", "2", "3"), "a1", "team"),
        ("4-5", "y .", ("4", "5"), "7", "team"),
    ]
    assert read_stories(p, system="mine")[0].system == "mine"
    assert read_template(p) == ["1-2-3", "4-5"]


def test_story_dict(tmp_path: Path) -> None:
    p = _write(tmp_path / "d.json", {"45530": "a story .", "tt0104348_0007_6;2": "vwp story ."})
    assert detect_format(load_json(p)) == "story-dict"
    stories = read_stories(p, system="llava")
    assert [(s.story_id, s.text, s.photo_ids, s.album_id, s.system) for s in stories] == [
        ("45530", "a story .", (), None, "llava"),
        ("tt0104348_0007_6;2", "vwp story .", (), None, "llava"),
    ]


def test_field_none_means_the_default_and_a_non_text_field_is_refused(tmp_path: Path) -> None:
    """``field=None`` is the API's "no field given" (scripts pass it through); only a field name is a field."""
    p = _write(tmp_path / "d.json", {"45530": "a story ."})
    assert [s.text for s in read_stories(p, field=None)] == ["a story ."]
    with pytest.raises(InputError, match="field must be a text field name"):
        read_stories(p, field=3)  # type: ignore[arg-type]


def test_tapm_flat_and_nested(tmp_path: Path) -> None:
    flat = _write(tmp_path / "flat.json", {"44277_1_2_3_4_5": "x .", "9_6_7_8_9_10": "y ."})
    nested = _write(tmp_path / "nested.json", {"44277": {"1_2_3_4_5": "x ."}, "9": {"6_7_8_9_10": "y ."}})
    assert detect_format(load_json(flat)) == "tapm"
    assert detect_format(load_json(nested)) == "tapm-nested"
    a, b = read_stories(flat), read_stories(nested)
    for stories in (a, b):
        assert [(s.story_id, s.text, s.photo_ids, s.album_id) for s in stories] == [
            ("44277_1_2_3_4_5", "x .", ("1", "2", "3", "4", "5"), "44277"),
            ("9_6_7_8_9_10", "y .", ("6", "7", "8", "9", "10"), "9"),
        ]
    assert [s.sequence for s in a] == ["1-2-3-4-5", "6-7-8-9-10"]


def test_arel_album_lists(tmp_path: Path) -> None:
    p = _write(tmp_path / "arel.json", {"100": [" one ."], "200": ["two .", "three ."]})
    assert detect_format(load_json(p)) == "arel"
    stories = read_stories(p)
    assert [(s.story_id, s.text, s.album_id) for s in stories] == [
        ("100", " one .", "100"),
        ("200#0", "two .", "200"),
        ("200#1", "three .", "200"),
    ]
    assert {k: len(v) for k, v in stories.group("album").items()} == {"100": 1, "200": 2}


def test_story_dict_hypotheses_against_arel_references(tmp_path: Path) -> None:
    """{id: text} against {id: [texts]}: no story key is shared, and the error says how to read them (the
    hypotheses as albums); forced to arel, {album: text} is that album's one story. AREL against AREL by story
    key names --key album."""
    from vistkit.metrics.base import align

    refs = read_stories(_write(tmp_path / "refs.json", {"a": ["we went .", "it was fun ."], "b": ["x y .", "z ."]}))
    hyps_path = _write(tmp_path / "hyps.json", {"a": "we went to a park .", "b": "x ."})
    with pytest.raises(InputError, match=r"2 hypothesis ids are album ids of the references .* --hyp-format arel"):
        align(read_stories(hyps_path), refs)
    as_albums = read_stories(hyps_path, format="arel")
    assert [(s.story_id, s.album_id) for s in as_albums] == [("a", "a"), ("b", "b")]
    assert [len(i.references) for i in align(as_albums, refs, keying="album").items] == [2, 2]
    with pytest.raises(InputError, match="with --key album, 2 of 2 hypotheses would"):
        align(as_albums, refs)


def test_jsonl(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text(
        "\n".join(
            [
                json.dumps({"story_id": "a", "text": "x .", "photo_ids": ["1", "2"], "album_id": "al"}),
                "",
                json.dumps({"story": "y .", "photo_ids": "3-4", "sentences": ["y ."], "system": "m"}),
                json.dumps({"story_id": "c", "text": "z ."}),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    stories = read_stories(p)
    assert list(stories) == [
        Story(story_id="a", text="x .", photo_ids=("1", "2"), album_id="al"),
        Story(story_id="3-4", text="y .", sentences=("y .",), photo_ids=("3", "4"), system="m"),
        Story(story_id="c", text="z ."),
    ]


def test_csv_and_tsv(tmp_path: Path) -> None:
    p = tmp_path / "s.csv"
    content = 'story_id,photo_ids,sentences,text\na,1-2,"x . ||| y .","x . y ."\nb,,,"multi\nline"\n'
    p.write_text(content, encoding="utf-8")
    stories = read_stories(p)
    assert list(stories) == [
        Story(story_id="a", text="x . y .", sentences=("x .", "y ."), photo_ids=("1", "2")),
        Story(story_id="b", text="multi\nline"),
    ]
    t = tmp_path / "s.tsv"
    t.write_text("story_id\ttext\nq\thello , world\n", encoding="utf-8")
    assert read_stories(t)[0] == Story(story_id="q", text="hello , world")


def test_forced_format_overrides_detection(tmp_path: Path) -> None:
    p = _write(tmp_path / "x.json", {"1_2_3": "text"})
    assert read_stories(p)[0].photo_ids == ("2", "3")
    assert read_stories(p, format="story-dict")[0] == Story(story_id="1_2_3", text="text")


# ------------------------------------------------------------------------------------------- errors
def _error(tmp_path: Path, name: str, content: str | bytes, **kw: Any) -> str:
    p = tmp_path / name
    p.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(InputError) as info:
        read_stories(p, **kw)
    message = str(info.value)
    assert name in message, message  # every message names the file
    return message


def test_errors_name_file_record_and_field(tmp_path: Path) -> None:
    assert "line 2, column" in _error(tmp_path, "bad.json", '{"a":\n  "x" "y"}')
    assert "not UTF-8" in _error(tmp_path, "latin.json", '{"1": "caf\u00e9"}'.encode("latin-1"))
    assert "holds no stories" in _error(tmp_path, "empty.jsonl", "\n\n")
    assert "empty" in _error(tmp_path, "empty.json", "{}")
    assert "r.jsonl line 2: expected an object" in _error(
        tmp_path, "r.jsonl", '{"text": "a", "story_id": 1}\n[2]\n'
    )
    assert "line 1: invalid JSON" in _error(tmp_path, "j.jsonl", "{nope\n")
    msg = _error(tmp_path, "noid.jsonl", '{"text": "a"}\n')
    assert "story_id" in msg and "photo_ids" in msg
    msg = _error(tmp_path, "st.json", json.dumps([STORYLETS[0]]), format="sis")
    assert "annotations" in msg
    msg = _error(tmp_path, "st2.json", json.dumps([{k: v for k, v in STORYLETS[0].items() if k != "text"}]))
    assert "storylet 1" in msg and "'text'" in msg
    msg = _error(tmp_path, "order.json", json.dumps([{**STORYLETS[0], "worker_arranged_photo_order": "x"}]))
    assert "story s1" in msg and "worker_arranged_photo_order" in msg
    sub = {"output_stories": [{"album_id": "a", "photo_sequence": "1-2", "story_text_normalized": "x"}]}
    msg = _error(tmp_path, "sub.json", json.dumps(sub))
    assert "output_stories[0]" in msg and "photo_sequence" in msg
    msg = _error(tmp_path, "dict.json", json.dumps({"a": "x", "b": 3}))
    assert "mixes value types" in msg
    assert "album '1'" in _error(tmp_path, "arel.json", json.dumps({"1": ["x", 2]}))
    assert "'text' column" in _error(tmp_path, "c.csv", "story_id,words\n1,hello\n")
    with pytest.raises(InputError, match="unknown format 'xml'; choose one of sis"):  # an option, not a file
        read_stories(tmp_path / "f.json", format="xml")
    assert "not a valid zip" in _error(tmp_path, "z.json.zip", b"PK not really")
    assert "cannot be read" in _error(tmp_path, "g.json.gz", b"garbage")
    assert "cannot be read" in _error(tmp_path, "h.json.gz", gzip.compress(b'{"1": "x"}')[:-6])


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_stories(tmp_path / "nope.json")
    with pytest.raises(InputError, match="is a folder"):
        read_stories(tmp_path)


# ------------------------------------------------------------------------------------------- round trips
# no NUL in a text, no control or invisible character in an id: vistkit refuses them (tests/test_probes_inputs_r3.py)
text_st = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
id_st = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs", "Zs", "Cc", "Cf", "Zl", "Zp"), blacklist_characters="\u115f\u1160\u3164\uffa0"
    ),
    min_size=1,
    max_size=8,
)  # without the invisible Hangul fillers, which an id refuses (vistkit.data.story._INVISIBLE_LETTERS)
photo_st = id_st.filter(lambda x: "-" not in x)
sentence_st = text_st.filter(lambda x: x == x.strip() and "|||" not in x and x != "")


@st.composite
def stories_st(draw: st.DrawFn, *, need_photos: bool = False) -> Story:
    photos = draw(st.lists(photo_st, min_size=1 if need_photos else 0, max_size=5))
    return Story(
        story_id=draw(id_st),
        text=draw(text_st),
        sentences=draw(st.none() | st.lists(sentence_st, min_size=1, max_size=5).map(tuple)),
        photo_ids=tuple(photos),
        album_id=draw(st.none() | id_st),
        system=draw(st.none() | id_st),
    )


ROUND_TRIP = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@ROUND_TRIP
@given(st.lists(stories_st(), min_size=1, max_size=5))
def test_jsonl_round_trip(tmp_path: Path, stories: list[Story]) -> None:
    p = tmp_path / "rt.jsonl"
    write_jsonl(stories, p)
    assert list(read_stories(p)) == stories


@ROUND_TRIP
@given(st.lists(stories_st(), min_size=1, max_size=5))
def test_csv_round_trip(tmp_path: Path, stories: list[Story]) -> None:
    p = tmp_path / "rt.csv"
    write_csv(stories, p)
    assert list(read_stories(p)) == stories


@ROUND_TRIP
@given(st.lists(stories_st(need_photos=True), min_size=1, max_size=5))
def test_challenge_round_trip(tmp_path: Path, stories: list[Story]) -> None:
    p = tmp_path / "rt.json"
    write_challenge(stories, p, team_name="t")
    back = read_stories(p)
    assert [(s.story_id, s.text, s.photo_ids, s.album_id, s.system) for s in back] == [
        (s.sequence, s.text, s.photo_ids, s.album_id, "t") for s in stories  # no album: written "", read None
    ]


def test_challenge_writer_needs_photos(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no photo sequence"):
        write_challenge([Story(story_id="a", text="x")], tmp_path / "c.json")


# ------------------------------------------------------------------------------------------- real files
def test_pr_vist_counts_and_story_text() -> None:
    stories = read_stories(shared_file("pr-vist", "PR_VIST.json.zip"))
    assert len(stories) == 5005
    assert len({s.sequence for s in stories}) == 1999
    assert len({s.album_id for s in stories}) == 1001
    assert all(len(s.photo_ids) == 5 and s.sentences is not None and len(s.sentences) == 5 for s in stories)
    first = stories.by_key("story")["45530"]
    assert first.sentences is not None
    assert first.sentences[0] == "the local parish holds a craft show each year ."
    assert first.photo_ids == ("1741642", "1741640", "1741632", "1741622", "1741587")
    assert first.album_id == "44277"
    # story = storylets sorted by worker_arranged_photo_order = dHM's gt_test.json text, for all 5,005 ids
    gt = load_json(shared_file("dhm-visual-storytelling", "data", "stories", "vist", "gt_test.json"))
    assert len(gt) == 5055
    assert all(gt[s.story_id] == s.text for s in stories)
    # and the photo order is KE-VIST's storyid2images.json for all of them
    order = load_json(shared_file("ke-vist", "storyid2images.json"))
    assert all(list(s.photo_ids) == order[s.story_id] for s in stories)


def test_pr_vist_predicted_story() -> None:
    stories = read_stories(shared_file("pr-vist", "PR_VIST.json.zip"), field="predicted_story")
    assert len(stories) == 5005
    story = stories.by_key("story")["45530"]
    assert story.text.startswith("[location] is a great history of [organization] .")


def test_challenge_files() -> None:
    template = read_stories(shared_file("vist-challenge-naacl2018", "vist-challenge-template.json"))
    assert len(template) == 1938 and len({s.album_id for s in template}) == 971
    assert all(s.text == "" for s in template)
    folder = ("vist-challenge-naacl2018", "example_submission_json")
    example = read_stories(shared_file(*folder, "example-submission-file.test.json"))
    assert len(example) == 2019 and len({s.album_id for s in example}) == 1011
    keys = read_template(shared_file("vist-challenge-naacl2018", "vist-challenge-template.json"))
    assert len(keys) == 1938 and set(keys) <= {s.sequence for s in example}


def test_tapm_outputs() -> None:
    ours = read_stories(shared_file("tapm-vist-outputs", "vist", "ours.json"))
    assert len(ours) == 2019 and len({s.album_id for s in ours}) == 1011
    nested = read_stories(shared_file("tapm-vist-outputs", "vist", "AREL.json"))
    assert len(nested) == 2017 and len({s.album_id for s in nested}) == 1010
    gt = read_stories(shared_file("tapm-vist-outputs", "vist", "structured", "gt.json"))
    assert len(gt) == 2019 and all(len(s.photo_ids) == 5 for s in gt)
    # the same sequences as the challenge-format file of the same system
    assert {s.sequence for s in gt} == {s.sequence for s in ours}


def test_arel_and_11777_files() -> None:
    save = ("arel-outputs", "data", "save", "IRL-init-iter100")
    pred = read_stories(shared_file(*save, "prediction_test.json"))
    assert len(pred) == 1010 and len({s.album_id for s in pred}) == 1010
    refs = read_stories(shared_file("vist-11777-baselines", "arel_reference", "test_reference.json"))
    assert len(refs) == 2997 and len(refs.group("album")) == 897
    challenge = read_stories(shared_file(*save, "challenge.json"))
    assert len(challenge) == 2017 and {s.system for s in challenge} == {"UCSB-NLP"}


def test_dhm_story_files() -> None:
    vist = read_stories(shared_file("dhm-visual-storytelling", "data", "stories", "vist", "llava_vc_p3.json"))
    assert len(vist) == 5055
    vwp = read_stories(shared_file("dhm-visual-storytelling", "data", "stories", "vwp", "gt_test.json"))
    assert len(vwp) == 586
    assert all(s.photo_ids == () for s in vwp)  # VWP keys are story ids, not TAPM sequences


def test_csv_writer_layout(tmp_path: Path) -> None:
    p = tmp_path / "o.csv"
    write_csv([EXPECTED[0]], p)
    rows = list(csv.reader(p.open(newline="", encoding="utf-8")))
    assert rows == [
        ["story_id", "album_id", "photo_ids", "system", "sentences", "text"],
        ["s1", "al1", "p1-p2-p3", "human", "first . ||| second . ||| third .", "first . second . third ."],
    ]


def test_a_key_that_matches_few_hypotheses_warns_when_another_matches_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """AREL predictions against AREL references by the default story key matched only the album with a single
    reference story (1 of 897 in the 11-777 test references: BLEU 1.0 over n = 1); it now warns, once."""
    from vistkit.metrics.base import align

    refs = read_stories(_write(tmp_path / "refs.json", {"a": ["a ."], "b": ["b .", "bb ."], "c": ["c .", "cc ."]}))
    hyps = read_stories(_write(tmp_path / "hyps.json", {"a": ["a ."], "b": ["b ."], "c": ["c ."]}))
    assert [i.item_id for i in align(hyps, refs).items] == ["a"]
    align(hyps, refs)
    err = capsys.readouterr().err
    assert err.count("warning: only 1 of 3 hypotheses share a story key") == 1 and "--key album, 3 would" in err
    assert len(align(hyps, refs, keying="album").items) == 3 and capsys.readouterr().err == ""
