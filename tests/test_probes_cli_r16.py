"""Regressions found in session 16's probe round (readers, validation and the scoring CLI): each test failed on the
code before."""

from __future__ import annotations

from pathlib import Path

import pytest

from vistkit.data.readers import read_stories


# ------------------------------------------------- ids a spreadsheet or pandas wrote in scientific notation (CSV)
@pytest.mark.parametrize(
    ("content", "column", "shown"),
    [
        # Excel's "General" format saves a 17-digit Flickr album id with six digits: 72157594462307386 -> 7.21576E+16
        ("story_id,album_id,text\n1,7.21576E+16,we went .\n2,7.21576E+16,it was fun .\n", "album_id", "7.21576E+16"),
        # pandas writes a float column (an id column with a gap) with repr: 72157594462307386 -> 7.215759446230739e+16
        ("story_id,album_id,text\n1,7.215759446230739e+16,we went .\n2,,it was fun .\n", "album_id",
         "7.215759446230739e+16"),
        ("story_id,text\n4.5530E+04,we went .\n4.5531E+04,it was fun .\n", "story_id", "4.5530E+04"),
    ],
)
def test_csv_ids_in_scientific_notation_warn_that_their_digits_are_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, column: str, shown: str
) -> None:
    """A CSV saved from Excel writes a long id (VIST's 17-digit album ids) as '7.21576E+16', and pandas writes one
    from a float column as '7.215759446230739e+16': the ids match no reference ("no hypothesis shares a story key
    with the references ... check --key"), and no word said why, where '45530.0' gets a warning."""
    p = tmp_path / "s.csv"
    p.write_text(content, encoding="utf-8")
    read_stories(p)  # read as given
    err = capsys.readouterr().err
    assert err.count("warning:") == 1, err
    assert f"'{column}'" in err and shown in err and "scientific notation" in err and "line 2" in err, err


def test_csv_ids_that_only_sometimes_look_like_numbers_in_scientific_notation_do_not_warn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "s.csv"
    p.write_text("story_id,text\n1e5,we went .\nv2,it was fun .\n", encoding="utf-8")
    read_stories(p)
    assert "warning" not in capsys.readouterr().err


# ------------------------------------------------------------ --template: a story for each of its sequences
def _challenge(path: Path, sequences: list[list[str]], *, text: str = "we went out . it was fun .") -> Path:
    import json

    stories = [
        {"album_id": "9", "photo_sequence": seq, "story_text_normalized": text} for seq in sequences
    ]  # fmt: skip
    path.write_text(json.dumps({"team_name": "t", "output_stories": stories}), encoding="utf-8")
    return path


_SEQS = [["1", "2", "3", "4", "5"], ["6", "7", "8", "9", "10"], ["11", "12", "13", "14", "15"]]


@pytest.mark.parametrize("verb", ["score", "compare"])
@pytest.mark.parametrize("metrics", ["rovist-nr", "rovist-nr,sacrebleu"])
def test_a_template_sequence_without_a_story_is_refused_for_every_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: str, metrics: str
) -> None:
    """`--template` promises "score only its sequences, require a story for each", but only a metric with
    references checked the second half: with a reference-free metric (rovist-nr, coherence, story-ranker ...) a
    system missing template sequences was scored on the rest without a word (TAPM's structured/ours.json against
    the challenge template: n = 1936 of 1938)."""
    from cli_probe_helpers import error_line, run_cli

    template = _challenge(tmp_path / "template.json", _SEQS, text="")
    partial = _challenge(tmp_path / "partial.json", _SEQS[:2])
    refs = _challenge(tmp_path / "refs.json", _SEQS, text="we went home . it was great fun .")
    files = [partial] if verb == "score" else [_challenge(tmp_path / "full.json", _SEQS), partial]
    with_refs = ["-r", refs] if "sacrebleu" in metrics else []
    code, err = run_cli(capsys, verb, *files, "-m", metrics, *with_refs, "--template", template, "-q")
    assert code == 1, err
    line = error_line(err, "11-12-13-14-15")
    assert "missing" in line and "template" in line, line


def test_a_template_every_sequence_of_which_has_a_story_still_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli_probe_helpers import run_cli

    template = _challenge(tmp_path / "template.json", _SEQS[:2], text="")
    full = _challenge(tmp_path / "full.json", _SEQS)  # a story beyond the template is left out, as before
    code, err = run_cli(capsys, "score", full, "-m", "rovist-nr", "--template", template, "-f", "json")
    assert code == 0, err


# ---------------------------------------------------- distance from per-item CSVs: one column for two dimensions
def _per_item(path: Path, rows: dict[str, tuple[float, float]]) -> Path:
    lines = ["id,rovist-nr,coherence"] + [f"{k},{r},{c}" for k, (r, c) in rows.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "columns",
    [
        ["--g-metric", "coherence", "--c-metric", "rovist-nr"],  # C named as R's default column
        ["--g-metric", "coherence", "--c-metric", "coherence"],  # one column named twice
    ],
)
def test_distance_from_tables_warns_when_one_column_is_read_for_two_dimensions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], columns: list[str]
) -> None:
    """From stories, one metric scoring two dimensions is warned about ("dHM counts one metric twice"); from
    per-item CSVs the same mistake (--c-metric rovist-nr beside R's default column rovist-nr) gave dC = dR and a
    dHM that counts that column twice, without a word."""
    from cli_probe_helpers import run_cli

    human = _per_item(tmp_path / "h.csv", {"1": (0.9, 0.5), "2": (0.8, 0.6)})
    model = _per_item(tmp_path / "m.csv", {"1": (0.7, 0.4), "2": (0.6, 0.9)})
    code, err = run_cli(capsys, "distance", "--human", human, "--model", model, *columns)
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "twice" in warnings[0] and "--c-metric" in warnings[0], err


def test_distance_from_tables_with_a_column_per_dimension_draws_no_such_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli_probe_helpers import run_cli

    human = _per_item(tmp_path / "h.csv", {"1": (0.9, 0.5), "2": (0.8, 0.6)})
    model = _per_item(tmp_path / "m.csv", {"1": (0.7, 0.4), "2": (0.6, 0.9)})
    (tmp_path / "h.csv").write_text("id,rovist-nr,coherence,G\n1,0.9,0.5,0.1\n2,0.8,0.6,0.2\n", encoding="utf-8")
    (tmp_path / "m.csv").write_text("id,rovist-nr,coherence,G\n1,0.7,0.4,0.3\n2,0.6,0.9,0.2\n", encoding="utf-8")
    code, err = run_cli(capsys, "distance", "--human", human, "--model", model)
    assert code == 0 and "twice" not in err, err


# ------------------------------------------- FILE:FIELD (a storylet field) wherever a story file is given
def _pr_vist(path: Path) -> Path:
    """Two stories of three storylets as PR-VIST writes them: the human sentence under text, the model's whole story
    repeated under predicted_story."""
    import json

    records = []
    for sid in ("1", "2"):
        story = f"the model wrote story {sid} . it went on and on . then it stopped ."
        for order in range(3):
            records.append({
                "story_id": sid, "album_id": "9", "photo_flickr_id": f"{sid}{order}",
                "worker_arranged_photo_order": order,
                "text": f"human sentence {order} of story {sid} .", "original_text": f"Human sentence {order}.",
                "predicted_story": story,
            })  # fmt: skip
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def _other_system(path: Path) -> Path:
    import json

    rows = [{"story_id": sid, "text": f"another system's story {sid} . it is short ."} for sid in ("1", "2")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """``vistkit ARGS`` in process: (exit code, stdout, stderr)."""
    from vistkit.cli import main

    capsys.readouterr()
    code = main([str(a) for a in args])
    got = capsys.readouterr()
    return code, got.out, got.err


def test_compare_reads_a_storylet_field_of_one_system_file_named_as_file_colon_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PR-VIST's stories are a field of its storylet file (predicted_story); --hyp-field applies to every system,
    and every other format refuses it ("leave the field out"), while the error's own advice, FILE:FIELD, was read as
    an archive member ("PR_VIST.json.zip has no member 'predicted_story'"): PR-VIST could be compared with no other
    system."""
    import json

    pr, other = _pr_vist(tmp_path / "pr.json"), _other_system(tmp_path / "other.jsonl")
    code, out, err = _run(capsys, "compare", f"{pr}:predicted_story", other, "-m", "rovist-nr", "-k", "story",
                          "-f", "json", "-q")  # fmt: skip
    assert code == 0, err
    compared = json.loads(out)
    code, alone, err = _run(capsys, "score", pr, "--hyp-field", "predicted_story", "-m", "rovist-nr", "-k", "story",
                            "-b", "-q")  # fmt: skip
    assert code == 0, err
    assert compared["systems"] == ["pr", "other"], compared["systems"]
    assert f"{compared['results']['pr']['rovist-nr']['score']:.4f}" == alone.strip()


@pytest.mark.parametrize("verb", ["score", "compare", "distance", "references"])
def test_a_storylet_field_can_be_named_as_file_colon_field_in_every_verb(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: str
) -> None:
    """`meta` and `studio` read ``FILE:FIELD``; `score`, `compare` and `distance --human-stories/--model-stories`
    (and every ``--references``) took the field for an archive member."""
    pr, other = _pr_vist(tmp_path / "pr.json"), _other_system(tmp_path / "other.jsonl")
    args = {
        "score": ["score", f"{pr}:predicted_story", "-m", "rovist-nr", "-k", "story", "-b"],
        "compare": ["compare", f"{pr}:predicted_story", other, "-m", "rovist-nr", "-k", "story"],
        "distance": ["distance", "--human-stories", pr, "--model-stories", f"{pr}:predicted_story", "--dimensions",
                     "R", "-f", "json"],
        "references": ["score", other, "-r", f"{pr}:original_text", "-m", "sacrebleu", "-k", "story", "-b"],
    }[verb]  # fmt: skip
    code, out, err = _run(capsys, *args, "-q")
    assert code == 0, err
    if verb == "distance":  # the model's stories, not the human ones again (dR would be 0 by construction)
        import json

        assert json.loads(out)["dR"] > 0, out
    if verb == "references":  # the untokenised human sentences, not the tokenised text
        code, tokenised, err = _run(capsys, "score", other, "-r", pr, "-m", "sacrebleu", "-k", "story", "-b", "-q")
        assert code == 0 and tokenised != out, (tokenised, out)


def test_file_colon_field_and_another_hyp_field_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli_probe_helpers import error_line

    pr = _pr_vist(tmp_path / "pr.json")
    code, _, err = _run(capsys, "score", f"{pr}:predicted_story", "--hyp-field", "original_text", "-m", "rovist-nr",
                        "-k", "story")  # fmt: skip
    assert code == 1, err
    error_line(err, "predicted_story", "original_text")


def test_a_system_and_a_field_of_the_same_file_are_named_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PR-VIST's stories against the human ones of the same file: each system is named by its file and field."""
    import json

    pr = _pr_vist(tmp_path / "pr.json")
    code, out, err = _run(capsys, "compare", f"{pr}:predicted_story", pr, "-m", "rovist-nr", "-k", "story", "-f",
                          "json", "-q")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["systems"] == ["pr:predicted_story", "pr"]


def test_compare_given_one_folder_says_to_give_the_files_in_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`vistkit compare outputs/ -m ...` (a folder of system files) said "compare needs at least two system files",
    as if only one file had been given."""
    from cli_probe_helpers import error_line

    folder = tmp_path / "outputs"
    folder.mkdir()
    _other_system(folder / "a.jsonl")
    _other_system(folder / "b.jsonl")
    code, _, err = _run(capsys, "compare", folder, "-m", "rovist-nr")
    assert code == 1, err
    error_line(err, "is a folder", f"{folder}/*")


# ---------------------------------------------------- stories scored against themselves as their references
@pytest.mark.parametrize("copy", [False, True])
def test_stories_given_as_their_own_references_are_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], copy: bool
) -> None:
    """`vistkit score refs.jsonl -r refs.jsonl -m bleu-4` (the same path typed twice, or a copy of the references
    as the system's file) printed a perfect 100 / 1.0 as the system's score without a word; `distance` warns about
    the same mistake ("dHM is 0 by construction"). (`compare` keeps such a system silent: an upper-bound row.)"""
    refs = _other_system(tmp_path / "refs.jsonl")
    hyps = tmp_path / "copy.jsonl"
    hyps.write_bytes(refs.read_bytes())
    code, _, err = _run(capsys, "score", hyps if copy else refs, "-r", refs, "-m", "sacrebleu")
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "own references" in warnings[0] and "--reference-absent" in warnings[0], err


def _pr_like_other(path: Path) -> Path:
    import json

    rows = [{"story_id": sid, "text": f"a model's story {sid} . it is not the reference ."} for sid in ("1", "2")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_system_that_is_not_the_references_draws_no_such_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refs = _other_system(tmp_path / "refs.jsonl")
    model = _pr_like_other(tmp_path / "model.jsonl")
    code, _, err = _run(capsys, "score", model, "-r", refs, "-m", "sacrebleu")
    assert code == 0 and "warning" not in err, err


def test_validate_reads_references_given_as_file_colon_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The references of `validate` are read for their photo sequences; ``FILE:FIELD``, as `score -r` now reads it,
    was "has no member" there."""
    import json

    pr = _pr_vist(tmp_path / "pr.json")
    seqs = [["10", "11", "12"], ["20", "21", "22"]]
    stories = [{"album_id": "9", "photo_sequence": s, "story_text_normalized": "we went . it was fun ."} for s in seqs]
    sub = tmp_path / "sub.json"
    sub.write_text(json.dumps({"team_name": "t", "output_stories": stories}), encoding="utf-8")
    code, out, err = _run(capsys, "validate", sub, "-r", f"{pr}:original_text")
    assert code == 0 and "All required stories are submitted" in out, (out, err)


# ------------------------------------------------------------------- a format forced on a file of another
def test_tapm_forced_on_keys_without_photos_is_refused(tmp_path: Path) -> None:
    """`--hyp-format tapm` on a {story_id: text} file read each story id as an album with no photos (dHM's
    gt_test.json scored without a word, and --key album then matched story ids as albums)."""
    import json

    from vistkit.errors import InputError

    p = tmp_path / "gt_test.json"
    p.write_text(json.dumps({"45530": "we went . it was fun .", "45531": "the dog ran . it was fast ."}))
    with pytest.raises(InputError, match=r"'45530'.*ALBUM_PHOTO1_.*story-dict"):
        read_stories(p, format="tapm")


@pytest.mark.parametrize("separators", [(", ", ": "), (",", ":")])
def test_a_jsonl_file_read_as_csv_is_named_as_jsonl(tmp_path: Path, separators: tuple[str, str]) -> None:
    """`--hyp-format csv` on a JSONL file said it was "plain text, one story per line ... write JSONL" (or, written
    compactly, "text follows a closing quote ... quote the whole cell")."""
    import json

    from vistkit.errors import InputError

    p = tmp_path / "s.jsonl"
    rows = [{"story_id": "1", "text": "we went . it was fun ."}, {"story_id": "2", "text": "the dog ran ."}]
    p.write_text("".join(json.dumps(r, separators=separators) + "\n" for r in rows))
    with pytest.raises(InputError, match=r"JSON object.*JSONL.*not CSV") as info:
        read_stories(p, format="csv")
    assert "plain text" not in str(info.value)
