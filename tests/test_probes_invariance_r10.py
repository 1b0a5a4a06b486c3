"""Probe round 10: format and keying invariance of the numbers. The same 40 TAPM stories (and their PR-VIST human
references) written in every container vistkit reads (challenge JSON, TAPM, TAPM nested, AREL, records, storylets,
JSONL, CSV, TSV, .gz, .zip, standard input; CSV with a BOM, CRLF, quoted new lines, a ``story`` column and extra
columns) must give bit-identical numbers, n, keys and signatures; ids that differ only in spaces must match; a
shuffled file must give the same corpus numbers; keying must be explicit (a format without the key asked for is
refused naming the file) and a story given twice must never count twice."""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import random
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import shared_file

from vistkit.data.readers import read_stories, write_challenge, write_csv, write_jsonl
from vistkit.data.story import Keying, Story, StorySet
from vistkit.errors import InputError
from vistkit.metrics.base import corpus_mean, get_metric

CHEAP = "bleu-4,rouge-l,cider-d,sacrebleu,rovist-nr"
N = 40


# ------------------------------------------------------------------------------------------------ the data
@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """40 TAPM stories (tapm-vist-outputs ours.json) whose photo sequences have PR-VIST human stories, and those
    human stories as storylets (96 stories, 1 to 4 per sequence)."""
    ours = shared_file("tapm-vist-outputs", "vist", "ours.json")
    pr = shared_file("pr-vist", "PR_VIST.json.zip")
    with zipfile.ZipFile(pr) as zf:
        raw = json.loads(zf.read(zf.namelist()[0]))
    by_story: dict[str, list[dict[str, Any]]] = {}
    for rec in raw:
        by_story.setdefault(rec["story_id"], []).append(rec)
    by_seq: dict[str, list[str]] = {}
    for sid, recs in by_story.items():
        recs.sort(key=lambda r: int(r["worker_arranged_photo_order"]))
        by_seq.setdefault("-".join(r["photo_flickr_id"] for r in recs), []).append(sid)
    hyps = [s for s in read_stories(ours) if s.sequence in by_seq][:N]
    keep = ("story_id", "photo_flickr_id", "worker_arranged_photo_order", "text", "album_id")
    storylets = [{k: r[k] for k in keep} for s in hyps for sid in by_seq[s.sequence] for r in by_story[sid]]
    d = tmp_path_factory.mktemp("inv")
    (d / "refs.storylets.json").write_text(json.dumps(storylets), encoding="utf-8")
    return {"dir": d, "hyps": hyps, "storylets": storylets}


def records(hyps: list[Story]) -> list[dict[str, Any]]:
    """The stories as JSONL / CSV records (story id = sequence key, as the challenge reader gives)."""
    return [
        {"story_id": s.sequence, "album_id": s.album_id, "photo_ids": list(s.photo_ids), "text": s.text} for s in hyps
    ]


def write_table(path: Path, rows: list[dict[str, Any]], *, delimiter: str = ",", text: str = "text") -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, delimiter=delimiter)  # the csv module ends rows with CRLF, as Excel does
        w.writerow(["story_id", "album_id", "photo_ids", text])
        for r in rows:
            w.writerow([r["story_id"], r["album_id"], "-".join(r["photo_ids"]), r["text"]])
    return path


def containers(d: Path, hyps: list[Story]) -> dict[str, Path]:
    """The same stories in every hypothesis container (name -> file)."""
    out: dict[str, Path] = {}
    rows = records(hyps)

    def put(name: str, content: str | bytes) -> None:
        p = d / name
        p.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        out[name] = p

    put("h.challenge.json", json.dumps({"team_name": "t", "output_stories": [
        {"album_id": s.album_id, "photo_sequence": list(s.photo_ids), "story_text_normalized": s.text} for s in hyps
    ]}))  # fmt: skip
    put("h_ints.challenge.json", json.dumps({"output_stories": [  # ids as JSON numbers, as some tools write them
        {"album_id": int(str(s.album_id)), "photo_sequence": [int(p) for p in s.photo_ids],
         "story_text_normalized": s.text} for s in hyps
    ]}))  # fmt: skip
    put("h_ints.jsonl", "".join(json.dumps(dict(r, album_id=int(r["album_id"]), photo_ids=[int(p) for p in
        r["photo_ids"]])) + "\n" for r in rows))  # fmt: skip
    put("h.tapm.json", json.dumps({f"{s.album_id}_{'_'.join(s.photo_ids)}": s.text for s in hyps}))
    nested: dict[str, dict[str, str]] = {}
    for s in hyps:
        nested.setdefault(str(s.album_id), {})["_".join(s.photo_ids)] = s.text
    put("h.tapm-nested.json", json.dumps(nested))
    put("h.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    put("h.records.json", json.dumps(rows))
    out["h.csv"] = write_table(d / "h.csv", rows)
    out["h.tsv"] = write_table(d / "h.tsv", rows, delimiter="\t")
    put("h_bom_lf.csv", b"\xef\xbb\xbf" + out["h.csv"].read_bytes().replace(b"\r\n", b"\n"))
    with (d / "h_story_extra.csv").open("w", newline="", encoding="utf-8") as fh:  # other column order, extras
        w = csv.writer(fh)
        w.writerow(["note", "story", "photo_ids", "album_id", "story_id", "score"])
        for r in rows:
            w.writerow(["x", r["text"], "-".join(r["photo_ids"]), r["album_id"], r["story_id"], "1"])
    out["h_story_extra.csv"] = d / "h_story_extra.csv"
    storylets = []
    for s in hyps:  # the story cut at '. ' into its five storylets (their texts joined by one space give it back)
        parts = s.text.split(". ")
        parts = [p + "." for p in parts[:-1]] + parts[-1:]
        parts = [*parts[:4], " ".join(parts[4:])] if len(parts) > 5 else parts + [""] * (5 - len(parts))
        assert " ".join(p for p in parts if p) == s.text
        storylets += [
            {"story_id": s.sequence, "album_id": s.album_id, "photo_flickr_id": ph, "worker_arranged_photo_order": j,
             "text": p}
            for j, (p, ph) in enumerate(zip(parts, s.photo_ids, strict=True))
        ]  # fmt: skip
    put("h.storylets.json", json.dumps(storylets))
    for name in ("h.challenge.json", "h.jsonl", "h.csv", "h.tsv", "h.tapm.json"):
        put(name + ".gz", gzip.compress(out[name].read_bytes()))
        with zipfile.ZipFile(d / (name + ".zip"), "w") as zf:
            zf.write(out[name], name)
        out[name + ".zip"] = d / (name + ".zip")
    return out


def cli(*args: Any, stdin: bytes | None = None) -> tuple[int, str, str]:
    """``vistkit ARGS`` in process: (exit code, stdout, stderr); ``stdin``: the bytes piped in."""
    from vistkit.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(a) for a in args])
    finally:
        sys.stdin = old
    return code, out.getvalue(), err.getvalue()


def score(*args: Any, stdin: bytes | None = None) -> dict[str, Any]:
    """``vistkit score ARGS -f json -q``: the scores, signatures, n, keys, exclusions and details (BLEU lengths,
    sacreBLEU precisions)."""
    code, out, err = cli("score", *args, "-f", "json", "-q", stdin=stdin)
    assert code == 0, err
    got = json.loads(out)
    return {k: got.get(k) for k in ("scores", "signatures", "n", "key", "excluded", "details")}


def error(*args: Any) -> str:
    """The one ``error:`` line of ``vistkit ARGS`` (exit code 1, nothing else on stderr)."""
    code, _, err = cli(*args, "-q")
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and lines[0].startswith("error: "), (code, err)
    return lines[0]


@pytest.fixture(scope="module")
def files(data: dict[str, Any]) -> dict[str, Path]:
    return containers(data["dir"], data["hyps"])


@pytest.fixture(scope="module")
def refs(data: dict[str, Any]) -> Path:
    return Path(data["dir"]) / "refs.storylets.json"


@pytest.fixture(scope="module")
def baseline(files: dict[str, Path], refs: Path) -> dict[str, Any]:
    """The numbers of the challenge file (TAPM's own container) against the storylets."""
    out = score(files["h.challenge.json"], "-r", refs, "-m", CHEAP)
    assert out["n"] == dict.fromkeys(CHEAP.split(","), N) and set(out["key"].values()) == {"sequence"}
    assert out["scores"]["bleu-4"] == pytest.approx(0.05756, abs=1e-5)  # real stories, real references
    assert out["signatures"]["cider-d"].startswith("cider-d|nrefs:1-4|key:sequence|")
    return out


# ------------------------------------------------------------------------------------------------ containers
HYP_CONTAINERS = [
    "h.challenge.json.gz", "h.challenge.json.zip", "h.tapm.json", "h.tapm.json.gz", "h.tapm.json.zip",
    "h.tapm-nested.json", "h.jsonl", "h.jsonl.gz", "h.jsonl.zip", "h.records.json", "h.csv", "h.csv.gz", "h.csv.zip",
    "h.tsv", "h.tsv.gz", "h.tsv.zip", "h_bom_lf.csv", "h_story_extra.csv", "h.storylets.json",
    "h_ints.challenge.json", "h_ints.jsonl",
]  # fmt: skip


@pytest.mark.parametrize("name", HYP_CONTAINERS)
def test_every_container_gives_the_same_numbers(
    name: str, files: dict[str, Path], refs: Path, baseline: dict[str, Any]
) -> None:
    """The same 40 stories in any container: bit-identical scores, n, keys and signatures (one code path). This
    held on every container probed; it guards the readers against drifting apart (a stripped text, a lost
    sentence, a photo id read as a number)."""
    assert score(files[name], "-r", refs, "-m", CHEAP) == baseline


@pytest.mark.parametrize("name", ["h.challenge.json", "h.jsonl", "h.csv", "h.tsv", "h.tapm.json"])
def test_standard_input_gives_the_same_numbers(
    name: str, files: dict[str, Path], refs: Path, baseline: dict[str, Any]
) -> None:
    """``-`` detects the format from the content: the same numbers as the file itself."""
    assert score("-", "-r", refs, "-m", CHEAP, stdin=files[name].read_bytes()) == baseline


def test_every_reference_container_gives_the_same_numbers(
    files: dict[str, Path], refs: Path, data: dict[str, Any], baseline: dict[str, Any]
) -> None:
    """The 96 references as SIS, JSONL, CSV (sentences ``|||``-joined) and challenge JSON (several stories per
    sequence): the numbers of the storylets."""
    d = Path(data["dir"])
    stories = read_stories(refs)
    (d / "refs.sis.json").write_text(json.dumps({"annotations": [[r] for r in data["storylets"]]}), encoding="utf-8")
    write_jsonl(stories, d / "refs.jsonl")
    write_csv(stories, d / "refs.csv")
    write_challenge(stories, d / "refs.challenge.json")
    for name in ("refs.sis.json", "refs.jsonl", "refs.csv", "refs.challenge.json"):
        assert score(files["h.challenge.json"], "-r", d / name, "-m", CHEAP) == baseline, name


def test_quoted_new_lines_and_crlf_inside_a_story(data: dict[str, Any]) -> None:
    """A story holding new lines: JSONL with ``\\n``, JSONL with ``\\r\\n`` and a CSV cell quoting ``\\r\\n`` (kept as
    it is by the CSV reader) score the same: every tokenizer reads a line break as a space."""
    d = Path(data["dir"])
    rows = records(data["hyps"][:8])
    for r in rows:
        r["text"] = r["text"].replace(". ", ".\n", 2)
    (d / "nl.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    crlf = [dict(r, text=r["text"].replace("\n", "\r\n")) for r in rows]
    (d / "crlf.jsonl").write_text("".join(json.dumps(r) + "\n" for r in crlf), encoding="utf-8")
    write_table(d / "nl.csv", crlf)
    assert "\r\n" in read_stories(d / "nl.csv")[0].text
    ref = Path(data["dir"]) / "refs.storylets.json"
    first = score(d / "nl.jsonl", "-r", ref, "-m", CHEAP)
    assert first["n"]["bleu-4"] == 8
    assert score(d / "crlf.jsonl", "-r", ref, "-m", CHEAP) == first
    assert score(d / "nl.csv", "-r", ref, "-m", CHEAP) == first


@pytest.mark.java
@pytest.mark.skipif(shutil.which("java") is None, reason="needs Java 8+ (meteor-vist runs the METEOR 1.5 jar)")
def test_meteor_vist_is_the_same_in_two_containers(files: dict[str, Path], refs: Path) -> None:
    """meteor-vist (one JVM) on 5 stories from the challenge file and from the CSV: the same values."""
    metric = get_metric("meteor-vist")
    references = read_stories(refs)
    a = metric.score(read_stories(files["h.challenge.json"])[:5], references)
    b = metric.score(read_stories(files["h_story_extra.csv"])[:5], references)
    assert a.corpus == b.corpus and a.signature == b.signature and a.n == 5
    assert a.item_scores.tolist() == b.item_scores.tolist() and 0.1 < a.corpus < 0.5


# ------------------------------------------------------------------------------------------------ order
def test_shuffled_files_give_the_same_corpus_numbers(
    files: dict[str, Path], data: dict[str, Any], baseline: dict[str, Any]
) -> None:
    """Was: rouge-l 0.20080453851824642 became ...637 and rovist-nr 0.9164920162812136 became ...134 when the
    stories were shuffled (numpy's pairwise mean adds in file order). Now a corpus mean is the exactly rounded
    sum over the count, the same for any order; the per-item scores follow their stories."""
    d = Path(data["dir"])
    rows = records(data["hyps"])
    for seed in range(3):
        random.Random(seed).shuffle(rows)
        storylets = list(data["storylets"])
        random.Random(seed + 10).shuffle(storylets)
        (d / "shuf.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        (d / "shuf_refs.json").write_text(json.dumps(storylets), encoding="utf-8")
        assert score(d / "shuf.jsonl", "-r", d / "shuf_refs.json", "-m", CHEAP) == baseline, seed


def test_corpus_mean_does_not_depend_on_the_order() -> None:
    """`corpus_mean`: every permutation gives the same float; it is np.mean up to rounding; NaN skipped."""
    rng = np.random.default_rng(0)
    values = rng.random(1000) * rng.choice([1e-3, 1.0, 1e3], 1000)
    got = {corpus_mean(rng.permutation(values)) for _ in range(20)}
    assert len(got) == 1
    assert next(iter(got)) == pytest.approx(float(np.mean(values)), rel=1e-14)
    numpy_means = {float(np.mean(rng.permutation(values))) for _ in range(20)}
    assert len(numpy_means) > 1  # what it was
    assert corpus_mean([1.0, float("nan"), 2.0]) == 1.5
    assert np.isnan(corpus_mean([float("nan")])) and np.isnan(corpus_mean([]))
    assert corpus_mean([float("inf"), 1.0]) == float("inf")


# ------------------------------------------------------------------------------------------------ keying
def test_album_keying_is_the_same_in_every_container(files: dict[str, Path], refs: Path, data: dict[str, Any]) -> None:
    """``--key album`` (one sequence per album here): AREL's ``{album: [text]}``, TAPM, JSONL, CSV and storylets
    give the challenge file's numbers, and so do AREL-format references."""
    d = Path(data["dir"])
    arel: dict[str, list[str]] = {}
    for s in data["hyps"]:
        arel.setdefault(str(s.album_id), []).append(s.text)
    (d / "h.arel.json").write_text(json.dumps(arel), encoding="utf-8")
    write_arel_refs(d, refs)
    album = score(files["h.challenge.json"], "-r", refs, "-m", CHEAP, "--key", "album")
    assert set(album["key"].values()) == {"album"} and album["n"]["cider-d"] == N
    for name in (d / "h.arel.json", files["h.tapm.json"], files["h.csv"], files["h.storylets.json"]):
        assert score(name, "-r", refs, "-m", CHEAP, "--key", "album") == album, name
    assert score(files["h.challenge.json"], "-r", d / "refs.arel.json", "-m", CHEAP, "--key", "album") == album


def write_arel_refs(d: Path, refs: Path) -> Path:
    """The references as AREL's ``{album: [texts]}`` (no photo sequences)."""
    ref_arel: dict[str, list[str]] = {}
    for s in read_stories(refs):
        ref_arel.setdefault(str(s.album_id), []).append(s.text)
    (d / "refs.arel.json").write_text(json.dumps(ref_arel), encoding="utf-8")
    return d / "refs.arel.json"


def test_default_key_per_format(files: dict[str, Path], data: dict[str, Any]) -> None:
    """The default key is ``sequence`` when every story carries its photos, else ``story`` (README, "Keying is
    explicit"): per format as docs/data.md's table says; one CSV row without photos makes the file ``story``."""
    d = Path(data["dir"])
    for name in ("h.challenge.json", "h.tapm.json", "h.tapm-nested.json", "h.jsonl", "h.csv", "h.storylets.json"):
        assert read_stories(files[name]).default_keying() is Keying.SEQUENCE, name
    (d / "h.story-dict.json").write_text(json.dumps({s.sequence: s.text for s in data["hyps"]}), encoding="utf-8")
    assert read_stories(d / "h.story-dict.json").default_keying() is Keying.STORY
    (d / "h.arel-only.json").write_text(json.dumps({"1": ["a .", "b ."], "2": ["c ."]}), encoding="utf-8")
    arel = read_stories(d / "h.arel-only.json")
    assert arel.default_keying() is Keying.STORY and [s.story_id for s in arel] == ["1#0", "1#1", "2"]
    rows = records(data["hyps"][:3])
    rows[1]["photo_ids"] = []
    assert read_stories(write_table(d / "partial.csv", rows)).default_keying() is Keying.STORY
    # `vistkit formats` says the same (was: only the keys each format has, no default)
    _, out, _ = cli("formats", "-f", "json")
    claims = {row["format"]: row["keys it supports"] for row in json.loads(out)}
    examples = {"sis": "h.storylets.json", "storylets": "h.storylets.json", "challenge": "h.challenge.json",
                "tapm": "h.tapm.json", "tapm-nested": "h.tapm-nested.json"}  # fmt: skip
    for fmt, name in examples.items():
        assert claims[fmt].startswith("sequence (default)"), fmt
        assert read_stories(files[name]).default_keying() is Keying.SEQUENCE
    assert claims["story-dict"] == "story (default)" and claims["arel"].startswith("story (default")
    assert "default sequence when every story has photo_ids, else story" in claims["jsonl"]


def test_reference_free_numbers_do_not_depend_on_the_key(files: dict[str, Path], data: dict[str, Any]) -> None:
    """rovist-nr reads no reference: a {id: text} file (keyed by story) and the challenge file (by sequence) give
    the same number; the signature names the key used (docs/data.md), and ``--key story`` makes them equal."""
    d = Path(data["dir"])
    (d / "h.story-dict.json").write_text(json.dumps({s.sequence: s.text for s in data["hyps"]}), encoding="utf-8")
    plain = score(d / "h.story-dict.json", "-m", "rovist-nr")
    challenge = score(files["h.challenge.json"], "-m", "rovist-nr")
    assert plain["scores"] == challenge["scores"] and plain["key"] == {"rovist-nr": "story"}
    assert score(files["h.challenge.json"], "-m", "rovist-nr", "--key", "story") == plain
    # sentences=source reads the storylets' own sentences where the format has them (docs/data.md says so)
    source = [score(files[n], "-m", "rovist-nr", "-O", "rovist-nr.sentences=source") for n in
              ("h.challenge.json", "h.storylets.json")]  # fmt: skip
    assert source[0]["signatures"] == source[1]["signatures"] and "sent:source" in source[0]["signatures"]["rovist-nr"]
    assert source[0]["scores"] == challenge["scores"] != source[1]["scores"]


def test_a_file_without_the_key_is_named(files: dict[str, Path], data: dict[str, Any]) -> None:
    """Was: "story '72157623189575342#0' has no photo ids, so it cannot be keyed by sequence" without saying
    which input (hypotheses or references) lacks them. Now the file is named first."""
    d = Path(data["dir"])
    arel = write_arel_refs(d, d / "refs.storylets.json")
    line = error("score", files["h.challenge.json"], "-r", arel, "-m", "bleu-4", "--key", "sequence")
    assert "refs.arel.json: story '" in line and "has no photo ids, so it cannot be keyed by sequence" in line
    (d / "h.story-dict.json").write_text(json.dumps({s.sequence: s.text for s in data["hyps"]}), encoding="utf-8")
    line = error("score", d / "h.story-dict.json", "-m", "rovist-nr", "--key", "album")
    assert "h.story-dict.json: story '" in line and "has no album id" in line
    # {sequence key: text} against storylets: was "check --key and the files"; now says what the ids are
    line = error("score", d / "h.story-dict.json", "-r", Path(data["dir"]) / "refs.storylets.json", "-m", "bleu-4")
    assert f"40 hypothesis ids are photo sequences of the references (e.g. '{data['hyps'][0].sequence}')" in line
    assert "JSONL or CSV with photo_ids) and --key sequence" in line


def test_no_shared_album_key_reads_an_album(files: dict[str, Path], data: dict[str, Any]) -> None:
    """Was: "no hypothesis shares a album key"; now "an album key" (and "a story key", "a sequence key")."""
    d = Path(data["dir"])
    rows = [dict(r, album_id="x" + str(r["album_id"])) for r in records(data["hyps"][:3])]
    (d / "other_albums.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    line = error("score", d / "other_albums.jsonl", "-r", files["h.jsonl"], "-m", "bleu-4", "--key", "album")
    assert "no hypothesis shares an album key with the references" in line


# ------------------------------------------------------------------------------------------------ ids
def test_ids_that_differ_only_in_spaces_match(
    files: dict[str, Path], refs: Path, data: dict[str, Any], baseline: dict[str, Any]
) -> None:
    """Was: a photo id "4266029369 " (a CSV cell written "a, b"), a photo list "1 - 2 - 3" or an album id with a
    trailing space silently matched nothing ("no hypothesis shares a sequence key"). Spaces around an id are now
    dropped in every container (tabs and new lines stay refused), so the numbers are the challenge file's."""
    d = Path(data["dir"])
    rows = records(data["hyps"])
    spaced = [dict(r, photo_ids=[p + " " for p in r["photo_ids"]], story_id=" " + r["story_id"]) for r in rows]
    (d / "sp_list.jsonl").write_text("".join(json.dumps(r) + "\n" for r in spaced), encoding="utf-8")
    joined = [dict(r, photo_ids=" - ".join(r["photo_ids"])) for r in rows]
    (d / "sp_joined.jsonl").write_text("".join(json.dumps(r) + "\n" for r in joined), encoding="utf-8")
    with (d / "sp_cells.csv").open("w", newline="", encoding="utf-8") as fh:
        fh.write("story_id, album_id, photo_ids, text\n")
        for r in rows:
            fh.write(f'{r["story_id"]}, {r["album_id"]} , {"-".join(r["photo_ids"])} ,"{r["text"]}"\n')
    for name in ("sp_list.jsonl", "sp_joined.jsonl", "sp_cells.csv"):
        assert score(d / name, "-r", refs, "-m", CHEAP) == baseline, name
    album = score(files["h.jsonl"], "-r", refs, "-m", "bleu-4", "--key", "album")
    assert score(d / "sp_cells.csv", "-r", refs, "-m", "bleu-4", "--key", "album") == album
    assert Story("a", "t", photo_ids=("1 ", "\u00a02"), album_id=" 7").photo_ids == ("1", "2")
    assert Story(" a\u3000", "t", album_id=" 7").story_id == "a" and Story("a", "t", album_id=" 7").album_id == "7"
    with pytest.raises(InputError, match="U\\+0009"):
        Story("a\t", "t")
    # a cell of spaces is an empty cell: the story id falls back to the sequence key, the album to none
    (d / "blank_ids.csv").write_text("story_id,album_id,photo_ids,text\n  ,  ,1-2,a day .\n", encoding="utf-8")
    blank = read_stories(d / "blank_ids.csv")[0]
    assert (blank.story_id, blank.album_id) == ("1-2", None)


def test_a_joined_photo_list_is_checked_as_a_list_is(data: dict[str, Any]) -> None:
    """Was: JSONL/CSV ``photo_ids`` "1--2" silently read as ("1", "2") while the list ["1", "", "2"] was refused.
    Now each part is checked like a list's (an empty id refused); the challenge's one trailing '-' is welcome."""
    d = Path(data["dir"])
    row = records(data["hyps"][:1])[0]
    ids = row["photo_ids"]
    (d / "dd.jsonl").write_text(json.dumps(dict(row, photo_ids=ids[0] + "--" + "-".join(ids[1:]))) + "\n", "utf-8")
    with pytest.raises(InputError, match="line 1: photo id 2 is empty"):
        read_stories(d / "dd.jsonl")
    (d / "trail.jsonl").write_text(json.dumps(dict(row, photo_ids="-".join(ids) + "-")) + "\n", "utf-8")
    assert read_stories(d / "trail.jsonl")[0].photo_ids == tuple(ids)
    (d / "blank.jsonl").write_text(json.dumps(dict(row, photo_ids=" ")) + "\n", "utf-8")
    assert read_stories(d / "blank.jsonl")[0].photo_ids == ()


def test_unicode_forms_of_an_id_match(data: dict[str, Any]) -> None:
    """Story ids in NFD (e + combining accent) match the same ids in NFC in any container; letter case is part
    of an id (documented: "A1" and "a1" are two stories)."""
    hyps = StorySet([Story("cafe\u0301-1", "we went out ."), Story("A1", "a day .")], source="h")
    refs_ = StorySet([Story("caf\u00e9-1", "we went out today ."), Story("a1", "a day out .")], source="r")
    metric = get_metric("bleu-4")
    result = metric.score(hyps, refs_, key="story")
    assert result.item_ids == ["caf\u00e9-1"] and result.excluded == {"A1": "no reference story has this key"}


# ------------------------------------------------------------------------------------------------ duplicates
def test_a_reference_given_twice_is_refused_in_every_container(
    files: dict[str, Path], refs: Path, data: dict[str, Any]
) -> None:
    """Was: a reference file holding one story twice (a file joined with itself) counted it as two references in
    JSONL, CSV and challenge JSON: cider-d 0.10375826176923916 became 0.10775540044952485 and nrefs 1-4 became
    1-5, while the storylet formats refused the same repeat. Now every container refuses it naming the story;
    two different stories of one sequence stay several references."""
    d = Path(data["dir"])
    stories = list(read_stories(refs))
    write_jsonl([*stories, stories[0]], d / "dup_refs.jsonl")
    write_csv([*stories, stories[0]], d / "dup_refs.csv")
    for name in ("dup_refs.jsonl", "dup_refs.csv"):
        line = error("score", files["h.challenge.json"], "-r", d / name, "-m", "cider-d")
        assert f"{name}: story '{stories[0].story_id}' is given twice with the same text" in line
    (d / "dup_storylets.json").write_text(json.dumps(data["storylets"] + data["storylets"][:5]), encoding="utf-8")
    assert "two storylets at worker_arranged_photo_order" in error(
        "score", files["h.challenge.json"], "-r", d / "dup_storylets.json", "-m", "cider-d"
    )
    metric = get_metric("bleu-4")  # references given as lists of texts: identical texts stay two references
    assert metric.score(["the cat ."], [["the cat .", "the cat ."]]).n == 1


def test_several_hypotheses_of_one_sequence_score_and_validate_agree(
    files: dict[str, Path], data: dict[str, Any]
) -> None:
    """Two hypotheses for one sequence: ``score`` refuses the file naming the key, ``validate`` fails it with the
    challenge's own message; several references of one sequence are welcome (nrefs 1-4 above)."""
    d = Path(data["dir"])
    sub = json.loads(files["h.challenge.json"].read_text(encoding="utf-8"))
    sub["output_stories"].append(dict(sub["output_stories"][0], story_text_normalized="another story ."))
    (d / "dup.challenge.json").write_text(json.dumps(sub), encoding="utf-8")
    seq = data["hyps"][0].sequence
    line = error("score", d / "dup.challenge.json", "-r", files["h.jsonl"], "-m", "bleu-4")
    assert f"more than one story has sequence key '{seq}'" in line
    code, out, _ = cli("validate", d / "dup.challenge.json")
    assert code == 1 and f"One photo sequence has more than one stories. Photo seq: {seq}-" in out


def test_a_photo_list_in_another_shape_is_refused(data: dict[str, Any]) -> None:
    """Was: a CSV ``photo_ids`` cell holding pandas' ``['1', '2']``, json's ``["1", "2"]`` or ids joined by spaces
    was read as ONE photo id, and scoring said only "no hypothesis shares a sequence key ... check --key". Now a
    space inside a joined id refuses the cell naming the line and the '-'-joined form (commas stay possible ids)."""
    d = Path(data["dir"])
    rows = records(data["hyps"][:2])
    for name, cell in (("pandas.csv", str), ("spaced.csv", " ".join), ("json.csv", json.dumps)):
        with (d / name).open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["story_id", "photo_ids", "text"])
            for r in rows:
                w.writerow([r["story_id"], cell(r["photo_ids"]), r["text"]])
        with pytest.raises(InputError, match=f"{name} line 2: photo_ids '.*' is not a '-'-joined list of photo ids"):
            read_stories(d / name)


def test_keys_that_differ_only_in_case_are_pointed_out(data: dict[str, Any]) -> None:
    """Letter case is part of an id, so "Day1" and "day1" are two stories; was: "no hypothesis shares a story
    key ... check --key and the files". Now the error says the keys differ only in case, with an example."""
    d = Path(data["dir"])
    (d / "upper.json").write_text(json.dumps({"Day1": "we went out .", "Day2": "a day ."}), encoding="utf-8")
    (d / "lower.json").write_text(json.dumps({"day1": "we went out today .", "day2": "a day out ."}), "utf-8")
    line = error("score", d / "upper.json", "-r", d / "lower.json", "-m", "bleu-4")
    assert "2 hypothesis keys differ from reference keys only in letter case (e.g. 'Day1' and 'day1')" in line


def test_compare_does_not_pair_items_across_two_keys(files: dict[str, Path], data: dict[str, Any]) -> None:
    """Was: ``compare`` of a challenge file (keyed by sequence by default) and a {id: text} file (by story) scored
    each under its own key and paired the items by id (the signature note said key:story for one system only).
    Now, without --key, systems keyed differently by default are refused in one sentence; with --key they
    compare (the same stories: every item a tie)."""
    d = Path(data["dir"])
    (d / "h.story-dict.json").write_text(json.dumps({s.sequence: s.text for s in data["hyps"]}), encoding="utf-8")
    line = error("compare", files["h.challenge.json"], d / "h.story-dict.json", "-m", "rovist-nr")
    assert "keyed differently by default" in line and "by sequence" in line and "by story" in line
    code, out, err = cli("compare", files["h.challenge.json"], d / "h.story-dict.json", "-m", "rovist-nr",
                         "--key", "story", "-f", "json", "-q")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["n"] == {"rovist-nr": N}


def test_validate_names_a_reference_file_without_photo_sequences(
    files: dict[str, Path], data: dict[str, Any]
) -> None:
    """``validate -r`` with AREL-format references (no photo sequences) said only "story 'A#0' has no photo ids";
    now it names the file, as ``score`` does, and it reads the references of every container alike."""
    d = Path(data["dir"])
    arel = write_arel_refs(d, d / "refs.storylets.json")
    assert f"error: {arel}: story '" in error("validate", files["h.challenge.json"], "-r", arel)
    for refs_file in (d / "refs.storylets.json", files["h.jsonl"], files["h.csv"]):
        code, out, _ = cli("validate", files["h.challenge.json"], "-r", refs_file, "-f", "json", "-q")
        assert code == 0 and json.loads(out)["valid"] is True, refs_file


def test_build_pairs_is_the_same_in_every_container_and_hints_the_key(
    files: dict[str, Path], data: dict[str, Any]
) -> None:
    """``meta build-pairs`` writes byte-identical pairs from the challenge, TAPM, CSV and storylet containers. Its
    default key is story (documented); was: "no machine story shares a story key with the references; check
    --key" for a challenge file; now it says which key would match, spelled as --key takes it."""
    d = Path(data["dir"])
    refs_file = d / "refs.storylets.json"
    written = []
    for name in ("h.challenge.json", "h.tapm.json", "h.csv", "h.storylets.json"):
        out = d / f"pairs_{name}.csv"
        code, _, err = cli("meta", "build-pairs", "-r", refs_file, "--machine", f"tapm={files[name]}",
                           "-k", "tapm=sequence", "-o", out, "-q")  # fmt: skip
        assert code == 0, err
        written.append(out.read_bytes())
    assert len(set(written)) == 1 and written[0].count(b"proxy") >= 96
    line = error("meta", "build-pairs", "-r", refs_file, "--machine", f"tapm={files['h.challenge.json']}",
                 "-o", d / "pairs_default.csv")  # fmt: skip
    assert line.endswith("no machine story shares a story key with the references; with --key tapm=sequence, "
                         "40 of 40 machine stories would")  # fmt: skip


def test_a_file_name_without_a_format_reads_as_standard_input_does(
    files: dict[str, Path], refs: Path, data: dict[str, Any], baseline: dict[str, Any]
) -> None:
    """Was: the same JSONL or CSV text scored when piped into ``-`` (the format read from the content) but failed
    as ``stories`` or ``stories.txt`` ("invalid JSON at line 1, column 1: Expecting value"). A name that does not
    say the format is now read as ``-`` is; JSONL in a ``.json`` file says it is JSONL."""
    d = Path(data["dir"])
    for name, source in (("plain", "h.jsonl"), ("stories.txt", "h.csv"), ("tabs", "h.tsv"), ("doc", "h.tapm.json")):
        (d / name).write_bytes(files[source].read_bytes())
        assert score(d / name, "-r", refs, "-m", CHEAP) == baseline, name
    (d / "lines.json").write_bytes(files["h.jsonl"].read_bytes())
    line = error("score", d / "lines.json", "-m", "bleu-4", "-r", refs)
    assert "lines.json: invalid JSON at line 2, column 1: Extra data; it holds one JSON object per line, which is " \
        "JSONL: name it .jsonl" in line
