"""Studies changed or cut short outside vistkit: a damaged-but-readable study (a table dropped, a row or a setting
edited by hand, a wrong version mark) is one sentence naming what is wrong, in every verb and in the server; what
an interrupted `init` leaves is named as such; `init` says which stories it left out (and when their ids differ
only in Unicode normalisation)."""

from __future__ import annotations

import html
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from studio_helpers import Made, make_study

from vistkit.cli import main
from vistkit.studio import db, service

TestClient = pytest.importorskip("starlette.testclient").TestClient


def judged_study(tmp_path: Path) -> Made:
    """A rank study (2 items, 1 annotator) with both its judgements stored, closed (the .db file alone)."""
    made = make_study(tmp_path, n_items=2, per_item=1, annotators=1)
    with made.study.read() as conn:
        who = service.authenticate(conn, made.tokens[0])
    assert who is not None
    for _ in range(2):
        aid = service.claim_next(made.study, who)
        assert aid is not None
        form = {"assignment": str(aid), "csrf": db.csrf_token(made.study.secret(), who.id, aid), "ranking": "1,2,3"}
        assert service.submit(made.study, who, form)["saved"]
    made.study.close()
    return made


def damage(path: Path, sql: str) -> None:
    con = sqlite3.connect(path)
    con.executescript(sql)
    con.close()


DAMAGE = [
    ("DROP TABLE judgements", "it has no judgements table"),
    ("ALTER TABLE judgements DROP COLUMN seconds", "its judgements table has no seconds column"),
    ("UPDATE judgements SET answer = '{bad json' WHERE id = 1", "judgement 1: its answer is '{bad json', not valid"),
    ("UPDATE judgements SET answer = '{\"ranks\": {}}' WHERE id = 2", "judgement 2: its answer does not rank the unit"),
    (
        "UPDATE assignments SET story_order = '[1, 99]' WHERE id = (SELECT assignment_id FROM judgements WHERE id = 1)",
        "judgement 1: its story order '[1, 99]' is not an order of the unit",
    ),
    ("UPDATE settings SET value = '\"x\"' WHERE key = 'per_item'", "its setting 'per_item' is \"x\", not a whole"),
    ("UPDATE settings SET value = '\"bogus\"' WHERE key = 'task'", "its setting 'task' is \"bogus\", not one of rank"),
    ("DELETE FROM settings WHERE key = 'secret'", "its setting 'secret' is missing"),
    ("UPDATE settings SET value = '{' WHERE key = 'title'", "its setting 'title' is '{', not valid JSON"),
    ("UPDATE settings SET value = '\"abc\"' WHERE key = 'schema_version'", "its schema version is '\"abc\"', not a"),
    ("UPDATE settings SET value = 'null' WHERE key = 'schema_version'", "its schema version is 'null', not a whole"),
]


@pytest.mark.parametrize(("sql", "what"), DAMAGE, ids=[d[0][:40] for d in DAMAGE])
def test_a_study_damaged_by_hand_is_one_sentence_for_every_verb(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, sql: str, what: str
) -> None:
    """status, export (every format that reads judgements), invite and serve: exit 1 and one line "study S is
    damaged (WHAT); restore it from a backup" (never "unexpected ... a bug in vistkit"); serve refuses before it
    listens and export writes nothing."""
    import uvicorn

    made = judged_study(tmp_path)
    bad = tmp_path / "x.db"
    shutil.copy(made.path, bad)
    damage(bad, sql)
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("serve started on a damaged study"))
    out = tmp_path / "out.csv"
    for args in (
        ["status", str(bad)],
        ["export", str(bad), "-f", "rankings", "-o", str(out)],
        ["export", str(bad), "-f", "jsonl", "-o", str(out)],
        ["export", str(bad), "-f", "pairs", "-o", str(out)],
        ["serve", str(bad), "--port", "1"],
    ):
        if "judgement" in what and args[0] == "serve":
            continue  # a bad row is met where it is read (the server answers 503 there: see below)
        assert main(["studio", *args]) == 1, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"error: study {bad} is damaged ("), (args, err)
        assert what in err and err.rstrip().endswith("; restore it from a backup"), (args, err)
        assert not out.exists() and not Path(f"{out}.provenance.json").exists()


def test_the_server_meets_a_damaged_row_with_503_and_one_log_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row damaged while the server runs: the page that reads it is a 503 with one sentence (no traceback),
    and the server's log gets the organiser's sentence naming the row."""
    from vistkit.studio.app import create_app

    made = make_study(tmp_path, n_items=2, per_item=1, annotators=1)
    c = TestClient(create_app(made.study))
    assert c.get(f"/a/{made.tokens[0]}").status_code == 200  # claims a task
    damage(made.path, "UPDATE assignments SET story_order = 'oops' WHERE annotator_id IS NOT NULL")
    capsys.readouterr()
    r = c.get(f"/a/{made.tokens[0]}")
    text = html.unescape(r.text)
    assert r.status_code == 503 and "the study file is damaged" in text and "Traceback" not in text
    err = capsys.readouterr().err
    assert err.startswith(f"warning: study {made.study.name} is damaged (assignment ") and "Traceback" not in err
    damage(
        made.path,
        "INSERT INTO judgements SELECT 9, id, 1, unit_id, '{bad', NULL, NULL, 1.0 FROM assignments "
        "WHERE annotator_id IS NULL LIMIT 1",
    )
    r = c.get(f"/admin/{made.admin}/summary.json")
    assert r.status_code == 503 and "the study file is damaged" in r.json()["error"]
    assert "judgement 9: its answer is '{bad'" in capsys.readouterr().err


def test_a_study_marked_version_1_that_has_the_version_2_columns_opens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A version mark set back (the quota column is there already) no longer fails with "duplicate column name":
    the migration sees the column and only moves the mark."""
    made = judged_study(tmp_path)
    damage(made.path, "UPDATE settings SET value = '1' WHERE key = 'schema_version'")
    assert main(["studio", "status", str(made.path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["judgements"] == 2
    st = db.open_study(made.path)
    with st.read() as conn:
        assert db.schema_version(conn) == db.SCHEMA_VERSION
    st.close()


# --------------------------------------------------------------------------------------------------- interrupted init
def _story_files(tmp_path: Path) -> list[str]:
    human, machine = tmp_path / "h.json", tmp_path / "m.json"
    human.write_text(json.dumps({"a": "one . two .", "b": "three . four ."}))
    machine.write_text(json.dumps({"a": "x .", "b": "y ."}))
    return ["--task", "rank", "-s", f"human={human}", "-s", f"m={machine}"]


@pytest.mark.parametrize("left", ["tables", "empty"])
def test_what_an_interrupted_init_left_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], left: str
) -> None:
    """A kill -9 during init leaves the study file with its tables and no study, with its -wal file (or, earlier,
    an empty file): status says it holds no study from an interrupted init, and init refuses the name saying so and
    how to remove the leftover (init never overwrites, so it has no --force); once removed, init works."""
    path = tmp_path / "s.db"
    if left == "tables":  # what init has committed before it writes the study in one transaction
        st = db.open_study(path, create=True)
        with st.write() as conn:  # a write the log still holds (SQLite keeps the -wal file while it is open)
            db.put_settings(conn, {"note": 1})
        st.engine.dispose()
        Path(f"{path}-wal").touch()
        assert main(["studio", "status", str(path)]) == 1
        assert "holds no study (an interrupted `vistkit studio init` leaves such a file)" in capsys.readouterr().err
    else:
        path.touch()
    assert main(["studio", "init", str(path), *_story_files(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"error: {path} holds no finished study (an interrupted `vistkit studio init` leaves such a file)" in err
    wal = f" {path}-wal {path}-shm" if left == "tables" else ""  # status opened it: SQLite made its -shm
    assert f"; delete it (rm {path}{wal}) and run init again, or choose a new file name" in err
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        p.unlink(missing_ok=True)
    assert main(["studio", "init", str(path), *_story_files(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["studio", "status", str(path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["units"] == 2


def test_a_study_or_another_programs_database_is_not_called_unfinished(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = judged_study(tmp_path)
    before = made.path.read_bytes()
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    other_before = other.read_bytes()
    for path in (made.path, other):
        assert main(["studio", "init", str(path), *_story_files(tmp_path)]) == 1
        assert "exists already; choose a new file name (a study is never overwritten)" in capsys.readouterr().err
    assert made.path.read_bytes() == before and other.read_bytes() == other_before


# --------------------------------------------------------------------------------------------------- left-out stories
def test_init_matches_ids_that_differ_only_in_unicode_normalisation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """17 shared ids and 3 that differ only in Unicode normalisation (NFC 'café0' vs NFD 'cafe\u03010'): the
    readers match ids in NFC, so the study has all 20 items and nothing is left out (before, the 3 were left out
    with a warning)."""
    import unicodedata

    human, machine = tmp_path / "R.jsonl", tmp_path / "A.jsonl"
    rows_h = [{"story_id": f"s{i}", "text": f"human {i} . it went well ."} for i in range(17)]
    rows_a = [{"story_id": f"s{i}", "text": f"machine {i} ."} for i in range(17)]
    rows_h += [{"story_id": f"caf\u00e9{i}", "text": f"human cafe {i} . nice ."} for i in range(3)]
    rows_a += [{"story_id": f"cafe\u0301{i}", "text": f"machine cafe {i} ."} for i in range(3)]
    human.write_text("".join(json.dumps(r) + "\n" for r in rows_h), encoding="utf-8")
    machine.write_text("".join(json.dumps(r) + "\n" for r in rows_a), encoding="utf-8")
    path = tmp_path / "nf3.db"
    code = main(["studio", "init", str(path), "--task", "rank", "-s", f"human={human}", "-s", f"A={machine}",
                 "--photo-url", "https://example.org/{id}.jpg"])  # (a study without photos is warned about)
    err = capsys.readouterr().err
    assert code == 0
    assert not [x for x in err.splitlines() if x.startswith("warning:")]
    st = db.open_study(path)
    from sqlalchemy import select

    with st.read() as conn:
        keys = {r.key for r in conn.execute(select(db.items.c.key))}
    st.close()
    assert keys == {f"s{i}" for i in range(17)} | {unicodedata.normalize("NFC", f"caf\u00e9{i}") for i in range(3)}


def test_init_is_silent_when_every_system_has_every_story(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    photos = ["--photo-url", "https://example.org/{id}.jpg"]  # (a study without photos is warned about)
    assert main(["studio", "init", str(tmp_path / "s.db"), *_story_files(tmp_path), *photos]) == 0
    assert "warning" not in capsys.readouterr().err
