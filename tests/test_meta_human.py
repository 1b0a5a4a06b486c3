"""Readers and builders of human-judgement data (vistkit.meta.human): VHED pairs, raw rankings, Likert,
errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError
from vistkit.meta.human import (
    build_reference_pairs,
    detect_label_sign,
    pairs_from_rankings,
    parse_img_seq,
    read_error_labels,
    read_likert,
    read_pairs,
    read_rankings,
    write_pairs,
)

FIX = Path(__file__).parent / "fixtures" / "meta"


def test_vhed_reader_detects_label_sign_from_average_ranks() -> None:
    pairs = read_pairs(FIX / "vhed_small.csv")
    assert len(pairs) == 8
    # row 1: avg ranks 1.4 (base) vs 3.0 (comp), label -1.6 -> label = base - comp; story 1 better
    assert pairs[0].gap == pytest.approx(1.6) and pairs[0].preference == 1
    assert pairs[3].preference == -1  # 4.0 vs 1.2: comp better
    assert pairs[6].preference == 0  # zero gap kept by the reader, skipped by assessments
    assert pairs[0].rank_norm == pytest.approx(0.32)
    assert pairs[0].swapped().rank_norm == pytest.approx(0.32)
    assert pairs[0].img_seq == ("1", "2", "3", "4", "5")
    assert pairs[0].kind == "reference-machine" and pairs[1].kind == "machine-machine"
    assert [p.agreement for p in pairs] == [5, 4, 3, 5, 4, 3, 3, 5]


def test_label_sign_explicit_and_inconsistent(tmp_path: Path) -> None:
    rows = (FIX / "vhed_small.csv").read_text().splitlines()
    assert (
        detect_label_sign([{"label": "-1", "avg_rank_base": "1", "avg_rank_comp": "2"}]) == "base-minus-comp"
    )
    assert (
        detect_label_sign([{"label": "1", "avg_rank_base": "1", "avg_rank_comp": "2"}]) == "comp-minus-base"
    )
    flipped = read_pairs(FIX / "vhed_small.csv", label_sign="comp-minus-base")
    assert flipped[0].preference == -1
    # a file mixing both conventions is refused
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([rows[0], rows[1], rows[2].replace(",-1.2,", ",1.2,")]) + "\n")
    with pytest.raises(InputError, match="disagrees"):
        read_pairs(bad)
    # without average ranks the sign must be given
    noranks = tmp_path / "noranks.csv"
    noranks.write_text("sent1,sent2,label\na,b,1\n")
    with pytest.raises(InputError, match="--label-sign"):
        read_pairs(noranks)
    assert read_pairs(noranks, label_sign="base-minus-comp")[0].preference == -1


def test_write_then_read_round_trip(tmp_path: Path) -> None:
    pairs = read_pairs(FIX / "vhed_small.csv")
    out = tmp_path / "pairs.csv"
    write_pairs(pairs, out)
    back = read_pairs(out)
    assert [p.preference for p in back] == [p.preference for p in pairs]
    assert [p.gap for p in back] == pytest.approx([p.gap for p in pairs])
    assert [p.text_2 for p in back] == [p.text_2 for p in pairs]


def test_parse_img_seq_spellings() -> None:
    for v in ("1-2-3", "1_2_3", "['1', '2', '3']", "1 2 3", "1,2,3"):
        assert parse_img_seq(v) == ("1", "2", "3")


def test_rankings_to_pairs_hand_computed() -> None:
    pairs = pairs_from_rankings(read_rankings(FIX / "rankings_small.csv"))
    by_id = {p.pair_id: p for p in pairs}
    # T2 (D, E) has mean ranks 1.5 and 1.5: zero gap, dropped
    assert sorted(by_id) == ["T1:A:B", "T1:A:C", "T1:B:C", "T3:P:Q", "T3:P:R", "T3:Q:R"]
    ab = by_id["T1:A:B"]  # means A 1.6, B 1.8
    assert ab.gap == pytest.approx(0.2) and ab.agreement == 3 and ab.n_stories == 3
    assert ab.rank_norm == pytest.approx(0.2 / 3)
    assert ab.avg_rank_1 == pytest.approx(1.6 / 3) and ab.avg_rank_2 == pytest.approx(1.8 / 3)
    assert (ab.system_1, ab.system_2, ab.text_1) == ("gt", "m1", "story a")
    assert by_id["T1:A:C"].agreement == 4 and by_id["T1:A:C"].gap == pytest.approx(1.0)
    assert by_id["T1:B:C"].agreement == 4 and by_id["T1:B:C"].gap == pytest.approx(0.8)
    # T3: Q is better on average (1.6 vs 1.8) but only 2 of 5 workers rank Q above P -> folded to 3
    pq = by_id["T3:P:Q"]
    assert pq.preference == -1 and pq.agreement == 3
    assert by_id["T3:P:R"].agreement == 3 and by_id["T3:Q:R"].agreement == 5
    assert all(p.agreement in (3, 4, 5) for p in pairs)


def test_rankings_missing_rank_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "r.csv"
    f.write_text("task,worker,story,rank\nT,w1,A,1\nT,w1,B,2\nT,w2,A,1\n")
    with pytest.raises(InputError, match="did not rank"):
        pairs_from_rankings(read_rankings(f))


def test_likert_means_over_workers() -> None:
    t = read_likert(FIX / "likert_small.csv")
    assert t.aspects == ["focused", "coherent"]
    assert t.systems == ["human", "human", "m1", "m1", "m2", "m2"]
    assert t.column("focused").tolist() == [5, 4, 2.5, 3, 1.5, 2]
    assert t.column("coherent").tolist() == [4.5, 5, 3, 2, 2.5, 1]
    assert t.texts[0] == "w w w w w w" and t.n_workers.tolist() == [2] * 6


def test_error_labels_majority_vote() -> None:
    t = read_error_labels(FIX / "errors_small.csv")
    assert t.aspects == ["Gram", "Rep"]
    assert t.column("Gram").tolist() == [0, 0, 1, 0, 1, 1]  # m2/i2: 2 of 3 annotators -> 1
    assert t.column("Rep").tolist() == [0, 0, 0, 1, 1, 0]  # m2/i2: 1 of 3 -> 0


def test_error_labels_must_be_binary(tmp_path: Path) -> None:
    f = tmp_path / "e.csv"
    f.write_text("system,item,Gram\nm,i,2\n")
    with pytest.raises(InputError, match="0 or 1"):
        read_error_labels(f)


def test_build_reference_pairs_proxy_label() -> None:
    refs = StorySet(
        [Story("1", "human one", photo_ids=("a", "b")), Story("2", "human two", photo_ids=("c", "d"))]
    )
    machine = StorySet([Story("1", "machine one", system="m"), Story("9", "orphan", system="m")])
    pairs = build_reference_pairs(refs, [machine], key="story")
    assert len(pairs) == 1
    p = pairs[0]
    assert (p.text_1, p.text_2, p.system_1, p.system_2) == ("human one", "machine one", "human", "m")
    assert p.preference == 1 and p.img_seq == ("a", "b") and p.agreement is None
    seq_machine = StorySet([Story("x", "machine by seq", photo_ids=("c", "d"), system="t")])
    assert build_reference_pairs(refs, [seq_machine], key="sequence")[0].text_1 == "human two"
    with pytest.raises(InputError):
        build_reference_pairs(refs, [StorySet([Story("7", "x", system="m")])], key="story")
    assert np.isfinite(p.gap)


def test_proxy_label_survives_writing(tmp_path: Path) -> None:
    refs = StorySet([Story("1", "human one", photo_ids=("a", "b"))])
    pairs = build_reference_pairs(refs, [StorySet([Story("1", "machine", system="m")])], key="story")
    write_pairs(pairs, tmp_path / "p.csv")
    assert (tmp_path / "p.csv").read_text().splitlines()[0].endswith(",rank_norm,label_source")
    back = read_pairs(tmp_path / "p.csv")
    assert back[0].meta["label"].startswith("proxy") and back[0].preference == 1


def test_rank_norm_from_the_file_wins(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text(
        "sent1,sent2,label,avg_rank_base,avg_rank_comp,order,rank_norm\na,b,-1.0,1,2,5,-0.25\na,b,-1.0,1,2,5,\n"
    )
    first, second = read_pairs(f)
    assert first.rank_norm == pytest.approx(0.25) and second.rank_norm == pytest.approx(0.2)


RANKING_HEAD = "task,worker,story,rank,text,system,story_id,img_seq\n"


@pytest.mark.parametrize(
    ("second", "what"),
    [("T,w2,A,1,another story,gt,1,1-2", "text"), ("T,w2,A,1,story a,m9,1,1-2", "system")],
)
def test_rankings_refuse_one_story_with_two_texts_or_systems(tmp_path: Path, second: str, what: str) -> None:
    """Two workers of a task giving one story another text or system is refused naming task, story and lines,
    as the Likert reader refuses it (finding 4), instead of keeping the first silently."""
    f = tmp_path / "r.csv"
    f.write_text(RANKING_HEAD + "T,w1,A,1,story a,gt,1,1-2\nT,w1,B,2,story b,m1,1,1-2\n" + second + "\n")
    with pytest.raises(InputError, match=rf"line 4: story 'A' of task 'T' has a different {what} than on line 2"):
        read_rankings(f)
    # spacing is not a different text, and a row without text or system takes the other row's
    f.write_text(
        RANKING_HEAD + "T,w1,A,1,,,1,1-2\nT,w1,B,2,story b,m1,1,1-2\nT,w2,A,1,story  a,gt,1,1-2\n"
        "T,w2,B,2,story b,m1,1,1-2\n"
    )
    assert read_rankings(f)["T"]["stories"]["A"].system == "gt"


def test_huge_rank_is_shown_readably(tmp_path: Path) -> None:
    f = tmp_path / "r.csv"
    f.write_text("task,worker,story,rank\nT,w1,A,1e30\nT,w1,B,1\n")
    with pytest.raises(InputError) as info:
        read_rankings(f)
    assert "ranks story 'A' 1e+30, but ranks run from 1" in str(info.value)
    assert "1000000000000000019884624838656" not in str(info.value)


VHED_HEAD = "sent1,sent2,label,avg_rank_base,avg_rank_comp,order,rank_norm\n"


@pytest.mark.parametrize(
    ("rank_norm", "instead"), [("0.2", "label / order is -0.2"), ("-0.6", "label / order is -0.2")]
)
def test_rank_norm_that_disagrees_with_label_and_order_is_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rank_norm: str, instead: str
) -> None:
    """A rank_norm with the wrong sign or size (x3) is said in one warning naming the first line (finding 5)."""
    f = tmp_path / "p.csv"
    f.write_text(VHED_HEAD + f"a,b,-1.0,1,2,5,{rank_norm}\nc,d,2.0,3,1,5,0.4\n")
    pairs = read_pairs(f)
    err = capsys.readouterr().err
    assert err.count("warning:") == 1
    assert f"rank_norm disagrees with label / order in 1 of 2 rows (first: line 2, rank_norm {rank_norm} where " \
        f"{instead})" in " ".join(err.split())
    assert pairs[1].rank_norm == pytest.approx(0.4)
    f.write_text(VHED_HEAD + "a,b,-1.0,1,2,5,-0.2\nc,d,2.0,3,1,5,0.4\ne,f,1.2,3,1,5,0.24000000000000002\n")
    read_pairs(f)
    assert "warning" not in capsys.readouterr().err  # consistent rows (float noise included) say nothing
    f.write_text("sent1,sent2,label,rank_norm\na,b,-1.0,0.2\n")  # no order: the sign is still checked
    read_pairs(f, label_sign="base-minus-comp")
    assert "rank_norm 0.2 where label is -1" in capsys.readouterr().err


def test_impossible_rank_norm_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text(VHED_HEAD + "a,b,-1.0,1,2,5,99\n")
    with pytest.raises(InputError, match=r"p\.csv line 2: rank_norm is 99, but .* lies between -1 and 1"):
        read_pairs(f)


def test_error_label_ties_are_marked(tmp_path: Path) -> None:
    """A 1:1 tie counts as the error present (majority vote) and is marked in `HumanScores.ties`."""
    t = read_error_labels(FIX / "errors_small.csv")
    assert t.ties is not None and not t.ties.any()  # m2/i2 is 2 of 3 and 1 of 3: no tie
    f = tmp_path / "e.csv"
    f.write_text("system,item,Gram,Rep\nm,i,1,0\nm,i,0,0\nm,j,1,1\n")
    t = read_error_labels(f)
    assert t.column("Gram").tolist() == [1, 1] and t.ties is not None
    assert t.ties[:, 0].tolist() == [True, False] and not t.ties[:, 1].any()
