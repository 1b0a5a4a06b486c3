"""vistkit studio: the study plan, every route and bad input (in-process), storage, agreement, migrations."""

from __future__ import annotations

import html
import json
import os
import re
import threading
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from studio_helpers import HUMAN, MACHINE_1, count, make_study, plan_items, rank_by, read_page

from vistkit.cli import main
from vistkit.studio import analysis, db, service
from vistkit.studio.plan import create_study

TestClient = pytest.importorskip("starlette.testclient").TestClient


def client_for(made):  # type: ignore[no-untyped-def]
    from vistkit.studio.app import create_app

    return TestClient(create_app(made.study))


# --------------------------------------------------------------------------------------------------- plan / init
def test_init_cli_builds_the_assignment_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """init from story files: one unit per shared key, k slots each, every slot a recorded permutation."""
    files = {}
    for name, texts in (("human", HUMAN), ("m1", MACHINE_1)):
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps({f"id{i}": t for i, t in enumerate(texts)}))
        files[name] = p
    # a third system lacks one key: that item is dropped (only keys every system has are used)
    (tmp_path / "m2.json").write_text(json.dumps({"id0": "x .", "id1": "y .", "id2": "z ."}))
    study = tmp_path / "s.db"
    code = main(
        [
            "studio",
            "init",
            str(study),
            "--task",
            "rank",
            "--stories",
            f"human={files['human']}",
            "--stories",
            f"m1={files['m1']}",
            "--stories",
            f"m2={tmp_path / 'm2.json'}",
            "--per-item",
            "5",
            "--gold",
            "1",
            "--seed",
            "3",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "/admin/" in out
    st = db.open_study(study)
    assert st.setting("task") == "rank" and st.setting("per_item") == 5
    assert count(st, db.items) == 4 and count(st, db.units) == 4  # 3 shared items + 1 gold
    assert count(st, db.assignments) == 20
    from sqlalchemy import select

    with st.read() as conn:
        units = {r.id: json.loads(r.story_ids) for r in conn.execute(select(db.units)).all()}
        rows = conn.execute(select(db.assignments)).all()
        roles = Counter(r.gold_role for r in conn.execute(select(db.stories)).all())
    assert roles["original"] == 1 and roles["shuffled"] == 1
    orders = [json.loads(r.story_order) for r in rows]
    for r, order in zip(rows, orders, strict=True):
        assert sorted(order) == sorted(units[r.unit_id])
    assert len({tuple(o) for o in orders}) > 3  # orders are randomised per assignment
    # the admin token is not stored, only its hash
    token = out.split("/admin/")[1].split()[0]
    assert token.encode() not in study.read_bytes()
    assert st.setting("admin_token_hash") == db.token_hash(token)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--task", "vote"], "--task must be one of"),
        (["--task", "rank", "--aspects", "funny"], "unknown aspect"),
        (["--task", "rank", "--per-item", "0"], "--per-item must be from 1 to 1,000 annotators per unit, not 0"),
        (["--task", "rank", "--per-item", "1000000000000"], "--per-item must be from 1 to 1,000"),
        (["--task", "rank", "--claim-timeout", "inf"], "--claim-timeout must be a number of seconds above 0"),
        (["--task", "rank", "--photo-url", "http://x/y.jpg"], "must contain {id}"),
    ],
)
def test_init_bad_options_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    p = tmp_path / "h.json"
    p.write_text(json.dumps({"a": "one . two .", "b": "three . four ."}))
    q = tmp_path / "m.json"
    q.write_text(json.dumps({"a": "x .", "b": "y ."}))
    code = main(["studio", "init", str(tmp_path / "s.db"), "--stories", f"human={p}", "--stories", f"m={q}", *args])
    err = capsys.readouterr().err
    assert code == 1 and message in err and "Traceback" not in err


def test_init_refuses_to_overwrite(tmp_path: Path) -> None:
    made = make_study(tmp_path)
    with pytest.raises(Exception, match="exists already"):
        create_study(made.path, task="rank", items=plan_items())


# --------------------------------------------------------------------------------------------------- annotating
def test_each_unit_gets_k_annotators_and_nobody_gets_a_unit_twice(tmp_path: Path) -> None:
    made = make_study(tmp_path, n_items=3, per_item=2, annotators=3)
    c = client_for(made)
    seen: dict[str, list[str]] = {}
    for tok in made.tokens:
        for _ in range(10):  # bounded: at most 3 units per annotator
            page = read_page(c, tok)
            if page.assignment is None:
                assert "Thank you" in page.html
                break
            seen.setdefault(tok, []).append(page.texts[0] if False else page.assignment)
            r = c.post(
                f"/a/{tok}/submit",
                data={"assignment": page.assignment, "csrf": page.csrf, "ranking": "1,2,3"},
                follow_redirects=False,
            )
            assert r.status_code == 303
    data = analysis.load(made.study)
    per_unit = Counter(j.unit_id for j in data.judgements)
    assert len(per_unit) == 3 and set(per_unit.values()) == {2}  # k = 2 each, 6 judgements in all
    pairs = Counter((j.annotator, j.unit_id) for j in data.judgements)
    assert max(pairs.values()) == 1
    # the page shows progress; the third annotator finds nothing left after the 6 judgements
    assert count(made.study, db.judgements) == 6


def test_progress_is_shown_and_counts_up(tmp_path: Path) -> None:
    made = make_study(tmp_path, n_items=3, per_item=1, annotators=1)
    c = client_for(made)
    tok = made.tokens[0]
    page = read_page(c, tok)
    assert page.progress == "Task 1 of 3"
    c.post(f"/a/{tok}/submit", data={"assignment": page.assignment, "csrf": page.csrf, "ranking": "3,2,1"})
    page2 = read_page(c, tok)
    assert page2.progress == "Task 2 of 3" and page2.assignment != page.assignment
    assert c.get(f"/a/{tok}/progress").json() == {"annotator": made.names[0], "done": 1, "total": 3}


def test_quota_limits_an_invite(tmp_path: Path) -> None:
    made = make_study(tmp_path, n_items=3, per_item=1, annotators=0)
    [(_, tok)] = service.invite(made.study, n=1, quota=1)
    c = client_for(made)
    page = read_page(c, tok)
    assert page.progress == "Task 1 of 1"
    c.post(f"/a/{tok}/submit", data={"assignment": page.assignment, "csrf": page.csrf, "ranking": "1,2,3"})
    assert "Thank you" in read_page(c, tok).html


def test_submission_stores_the_ranking_of_the_displayed_stories(tmp_path: Path) -> None:
    """The ranking refers to display positions; the stored ranks follow the story, whatever the order shown."""
    made = make_study(tmp_path, n_items=1, per_item=2, annotators=2)
    c = client_for(made)
    for tok in made.tokens:
        page = read_page(c, tok)
        ranking = rank_by(
            page.texts, [MACHINE_1[0], HUMAN[0], *[t for t in page.texts if t not in (MACHINE_1[0], HUMAN[0])]]
        )
        c.post(f"/a/{tok}/submit", data={"assignment": page.assignment, "csrf": page.csrf, "ranking": ranking})
    data = analysis.load(made.study)
    for j in data.judgements:
        by_sys = {data.stories[int(s)]["system"]: r for s, r in j.answer["ranks"].items()}
        assert by_sys == {"m1": 1, "human": 2, "m2": 3}


# --------------------------------------------------------------------------------------------------- bad input
def test_every_bad_input_gets_a_clear_4xx_and_stores_nothing(tmp_path: Path) -> None:
    made = make_study(tmp_path, n_items=2, per_item=2, annotators=2)
    c = client_for(made)
    tok, other = made.tokens
    page = read_page(c, tok)
    mine = {"assignment": page.assignment, "csrf": page.csrf}
    other_page = read_page(c, other)
    cases = [
        ("get", "/a/not-a-token", None, 404, "invite link is not valid"),
        ("post", "/a/not-a-token/submit", {**mine, "ranking": "1,2,3"}, 404, "invite link is not valid"),
        # another annotator's task, even with that task's CSRF token
        (
            "post",
            f"/a/{tok}/submit",
            {"assignment": other_page.assignment, "csrf": other_page.csrf, "ranking": "1,2,3"},
            403,
            "security token",
        ),
        ("post", f"/a/{tok}/submit", {**mine, "csrf": "0" * 64, "ranking": "1,2,3"}, 403, "security token"),
        ("post", f"/a/{tok}/submit", {"assignment": page.assignment, "ranking": "1,2,3"}, 403, "security token"),
        ("post", f"/a/{tok}/submit", {**mine, "ranking": "1,1,2"}, 422, "no ties"),
        ("post", f"/a/{tok}/submit", {**mine, "ranking": "1,2"}, 422, "exactly once"),
        ("post", f"/a/{tok}/submit", {**mine, "ranking": "1,2,4"}, 422, "exactly once"),
        ("post", f"/a/{tok}/submit", {**mine, "ranking": "a,b,c"}, 422, "positions"),
        ("post", f"/a/{tok}/submit", {**mine}, 422, "positions"),
        ("post", f"/a/{tok}/submit", {"csrf": page.csrf, "ranking": "1,2,3"}, 422, "task number"),
        ("post", f"/a/{tok}/submit", {**mine, "assignment": "99999", "ranking": "1,2,3"}, 403, "security token"),
    ]
    for method, url, data, status, text in cases:
        r = (
            c.get(url, headers={"accept": "application/json"})
            if method == "get"
            else c.post(url, data=data, headers={"accept": "application/json"})
        )
        assert r.status_code == status, (url, data, r.text)
        assert text in r.json()["error"]
        assert count(made.study, db.judgements) == 0
    # an assignment id that exists but is not this annotator's, with a CSRF token minted for it
    forged = db.csrf_token(
        made.study.secret(), service.authenticate(made.study.engine.connect(), tok).id, int(other_page.assignment)
    )
    r = c.post(f"/a/{tok}/submit", data={"assignment": other_page.assignment, "csrf": forged, "ranking": "1,2,3"})
    assert r.status_code == 409 and "not (or no longer) assigned to you" in r.text
    # HTML errors are pages, not tracebacks
    r = c.post(f"/a/{tok}/submit", data={**mine, "ranking": "9"})
    assert r.status_code == 422 and "Not saved" in r.text and "Traceback" not in r.text
    assert count(made.study, db.judgements) == 0


def test_oversized_body_is_refused_with_413(tmp_path: Path) -> None:
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    c = client_for(made)
    tok = made.tokens[0]
    page = read_page(c, tok)
    big = {"assignment": page.assignment, "csrf": page.csrf, "ranking": "1,2,3", "pad": "x" * 20000}
    r = c.post(f"/a/{tok}/submit", data=big, headers={"accept": "application/json"})
    assert r.status_code == 413 and "larger than" in r.json()["error"]

    def chunks():  # type: ignore[no-untyped-def]
        for _ in range(40):  # no Content-Length: the streamed body is cut off at the limit
            yield b"x" * 1024

    r = c.post(
        f"/a/{tok}/submit",
        content=chunks(),
        headers={"accept": "application/json", "content-type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 413
    assert count(made.study, db.judgements) == 0


def test_duplicate_submission_is_stored_once(tmp_path: Path) -> None:
    made = make_study(tmp_path, n_items=2, per_item=1, annotators=1)
    c = client_for(made)
    tok = made.tokens[0]
    page = read_page(c, tok)
    form = {"assignment": page.assignment, "csrf": page.csrf, "ranking": "2,1,3"}
    h = {"accept": "application/json"}
    assert c.post(f"/a/{tok}/submit", data=form, headers=h).json() == {"saved": True, "duplicate": False}
    assert c.post(f"/a/{tok}/submit", data=form, headers=h).json() == {"saved": True, "duplicate": True}
    r = c.post(f"/a/{tok}/submit", data={**form, "ranking": "1,2,3"}, headers=h)
    assert r.status_code == 409 and "another answer" in r.json()["error"]
    assert count(made.study, db.judgements) == 1


def test_concurrent_retries_of_one_submission_store_one_row(tmp_path: Path) -> None:
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    c = client_for(made)
    tok = made.tokens[0]
    page = read_page(c, tok)
    form = {"assignment": page.assignment, "csrf": page.csrf, "ranking": "3,1,2"}
    who = service.authenticate(made.study.engine.connect(), tok)
    results: list[dict] = []

    def go() -> None:
        results.append(service.submit(made.study, who, form))

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(results) == 8 and sum(not r["duplicate"] for r in results) == 1
    assert count(made.study, db.judgements) == 1


def test_pairwise_and_likert_forms_validate(tmp_path: Path) -> None:
    pw = make_study(tmp_path, task="pairwise", n_items=1, systems=2, per_item=1, annotators=1, allow_same=False)
    c = client_for(pw)
    tok = pw.tokens[0]
    page = read_page(c, tok)
    h = {"accept": "application/json"}
    assert 'value="same"' not in page.html
    r = c.post(f"/a/{tok}/submit", data={"assignment": page.assignment, "csrf": page.csrf, "choice": "same"}, headers=h)
    assert r.status_code == 422 and "A or B" in r.json()["error"]
    assert (
        c.post(
            f"/a/{tok}/submit", data={"assignment": page.assignment, "csrf": page.csrf, "choice": "B"}, headers=h
        ).status_code
        == 200
    )
    lk = make_study(
        tmp_path, task="likert", n_items=1, systems=2, per_item=1, annotators=1, aspects=["focused", "coherent"]
    )
    c = client_for(lk)
    tok = lk.tokens[0]
    page = read_page(c, tok)
    assert "This story is focused." in page.html and "Strongly Disagree" in page.html
    base = {"assignment": page.assignment, "csrf": page.csrf}
    r = c.post(f"/a/{tok}/submit", data={**base, "focused": "6", "coherent": "3"}, headers=h)
    assert r.status_code == 422 and "This story is focused." in r.json()["error"]
    r = c.post(f"/a/{tok}/submit", data={**base, "focused": "4"}, headers=h)
    assert r.status_code == 422 and "coherent" in r.json()["error"]
    assert count(lk.study, db.judgements) == 0
    assert c.post(f"/a/{tok}/submit", data={**base, "focused": "4", "coherent": "5"}, headers=h).status_code == 200


def test_json_body_is_accepted(tmp_path: Path) -> None:
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    c = client_for(made)
    tok = made.tokens[0]
    page = read_page(c, tok)
    r = c.post(
        f"/a/{tok}/submit",
        json={"assignment": page.assignment, "csrf": page.csrf, "ranking": "1,2,3"},
        headers={"accept": "application/json"},
    )
    assert r.status_code == 200
    r = c.post(
        f"/a/{tok}/submit",
        content=b"[1, 2]",
        headers={"accept": "application/json", "content-type": "application/json"},
    )
    assert r.status_code == 400


# --------------------------------------------------------------------------------------------------- security
def test_admin_routes_refuse_annotator_and_random_tokens(tmp_path: Path) -> None:
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    c = client_for(made)
    for bad in (made.tokens[0], "x", db.new_token(), db.token_hash(made.admin)):
        assert c.get(f"/admin/{bad}").status_code == 403
        assert c.get(f"/admin/{bad}/summary.json").status_code == 403
    assert c.get(f"/admin/{made.admin}").status_code == 200
    assert c.get(f"/admin/{made.admin}/summary.json").json()["task"] == "rank"
    # the admin token is not an invite link either
    assert c.get(f"/a/{made.admin}").status_code == 404


def test_tokens_are_random_hashed_and_compared_in_constant_time(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=20)
    assert len(set(made.tokens)) == 20 and min(len(t) for t in made.tokens) >= 43  # 32 random bytes
    raw = made.path.read_bytes() + (Path(f"{made.path}-wal").read_bytes() if Path(f"{made.path}-wal").exists() else b"")
    assert not any(t.encode() in raw for t in made.tokens)
    calls: list[int] = []
    import hmac

    real = hmac.compare_digest
    monkeypatch.setattr(db.hmac, "compare_digest", lambda a, b: calls.append(1) or real(a, b))
    with made.study.read() as conn:
        assert service.authenticate(conn, made.tokens[0]) is not None
    assert service.is_admin(made.study, made.admin)
    assert len(calls) == 2


def test_story_text_and_names_are_escaped(tmp_path: Path) -> None:
    from vistkit.studio.plan import PlanItem, PlanStory

    path = tmp_path / "x.db"
    evil = '<script>alert("x")</script> & <b>bold</b>'
    s = create_study(
        path,
        task="rank",
        per_item=1,
        items=[
            PlanItem(
                "k<1>", ("p1",), [PlanStory("human", "a", evil), PlanStory("<img src=x onerror=alert(1)>", "a", "ok .")]
            )
        ],
    )
    st = db.open_study(path)
    [(_, tok)] = service.invite(st, n=1)
    from vistkit.studio.app import create_app

    c = TestClient(create_app(st))
    page = read_page(c, tok)
    assert "<script>alert" not in page.html and "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page.html
    assert evil in page.texts
    c.post(f"/a/{tok}/submit", data={"assignment": page.assignment, "csrf": page.csrf, "ranking": "1,2"})
    admin = c.get(f"/admin/{s['admin_token']}").text
    assert "<img src=x" not in admin and "&lt;img src=x onerror=alert(1)&gt;" in admin
    assert "k&lt;1&gt;" in admin
    r = c.get(f"/a/{tok}")
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["referrer-policy"] == "no-referrer"


def test_photos_are_served_only_from_the_photo_folder(tmp_path: Path) -> None:
    photos = tmp_path / "photos"
    photos.mkdir()
    (photos / "p00.png").write_bytes(b"\x89PNG fake")
    (tmp_path / "secret.png").write_bytes(b"secret")
    (photos / "link.png").symlink_to(tmp_path / "secret.png")
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1, photos_dir=photos)
    c = client_for(made)
    tok = made.tokens[0]
    assert c.get(f"/a/{tok}/photos/p00.png").content == b"\x89PNG fake"
    assert c.get(f"/a/{made.admin}/photos/p00.png").content == b"\x89PNG fake"
    for no_token in ("/photos/p00.png", "/a/not-a-token/photos/p00.png", "/a//photos/p00.png"):
        assert c.get(no_token).status_code == 404, no_token  # only holders of a study link see photos
    page = read_page(c, tok)
    assert f'src="/a/{tok}/photos/p00.png"' in page.html
    for bad in (
        "../secret.png",
        "..%2Fsecret.png",
        "%2e%2e/secret.png",
        "link.png",
        "/etc/passwd",
        "..%5csecret.png",
        "p00.png/..",
        "sub/../../secret.png",
        "rank.db",
        ".hidden.png",
    ):
        r = c.get(f"/a/{tok}/photos/{bad}")
        assert r.status_code == 404, bad
        assert b"secret" not in r.content


# --------------------------------------------------------------------------------------------------- storage
def test_sqlite_runs_in_wal_mode_and_syncs_judgements(tmp_path: Path) -> None:
    """WAL journal; judgement transactions commit with synchronous=FULL, claims with NORMAL (WAL: survives a
    killed process)."""
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    with made.study.read() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    with made.study.write() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
    with made.study.write(durable=False) as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL


def test_migrations_bring_a_version_1_study_up_to_date(tmp_path: Path) -> None:
    from sqlalchemy import insert, inspect, select

    path = tmp_path / "old.db"
    engine = db.make_engine(path)
    assert db.migrate(engine, target=1) == 1
    with engine.begin() as conn:
        assert "quota" not in {c["name"] for c in inspect(conn).get_columns("annotators")}
        conn.execute(
            insert(db._tables(db.MetaData(), 1)["annotators"]).values(name="old", token_hash="ab" * 32, created_at=1.0)
        )
    engine.dispose()
    st = db.open_study(path)
    with st.read() as conn:
        assert db.schema_version(conn) == db.SCHEMA_VERSION == 2
        row = conn.execute(select(db.annotators)).one()
    assert row.name == "old" and row.quota is None
    with st.write() as conn:
        db.put_settings(conn, {"schema_version": 99})
    with pytest.raises(Exception, match="newer than this vistkit"):
        db.open_study(path)


def test_open_study_errors_are_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["studio", "status", str(tmp_path / "missing.db")]) == 1
    assert "no study file" in capsys.readouterr().err
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database at all" * 100)
    assert main(["studio", "status", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "cannot open study" in err and "Traceback" not in err


# --------------------------------------------------------------------------------------------------- agreement
def test_krippendorff_alpha_matches_krippendorffs_worked_example() -> None:
    """Krippendorff (2011), 'Computing Krippendorff's alpha-reliability', 4 observers x 12 units with missing
    values: nominal .743, ordinal .815, interval .849."""
    nan = None
    data = {
        "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        "C": [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    }
    triples = [(c, u, float(v)) for c, vals in data.items() for u, v in enumerate(vals) if v is not None]
    assert analysis.krippendorff_alpha(triples, level="nominal") == pytest.approx(0.743, abs=5e-4)
    assert analysis.krippendorff_alpha(triples, level="ordinal") == pytest.approx(0.815, abs=5e-4)
    assert analysis.krippendorff_alpha(triples, level="interval") == pytest.approx(0.849, abs=5e-4)
    assert analysis.krippendorff_alpha([("a", 1, 1.0), ("b", 2, 2.0)]) is None  # no unit judged twice


def test_study_agreement_and_results(tmp_path: Path) -> None:
    """Two annotators who rank every item identically: alpha 1; live results are mean ranks per system."""
    made = make_study(tmp_path, n_items=3, per_item=2, annotators=2)
    c = client_for(made)
    for tok in made.tokens:
        for _ in range(3):
            page = read_page(c, tok)
            prefer = sorted(page.texts, key=lambda t: (t not in HUMAN, t not in MACHINE_1))
            c.post(
                f"/a/{tok}/submit",
                data={"assignment": page.assignment, "csrf": page.csrf, "ranking": rank_by(page.texts, prefer)},
            )
    s = analysis.summary(analysis.load(made.study))
    assert s["alpha"]["rank"] == pytest.approx(1.0)
    assert {r["system"]: r["mean rank"] for r in s["results"]} == {"human": 1.0, "m1": 2.0, "m2": 3.0}
    assert s["judgements"] == 6 == s["target"] and s["complete_units"] == 3
    assert all(a["median_seconds"] is not None for a in s["annotators"])


@pytest.mark.skipif(
    not __import__("os").environ.get("VISTKIT_STUDIO_PG_URL"),
    reason="set VISTKIT_STUDIO_PG_URL=postgresql+psycopg://... (an empty database) to test a PostgreSQL study",
)
def test_a_study_on_postgresql(tmp_path: Path) -> None:
    """The same study on PostgreSQL: init, claim, submit, duplicate, export round trip, migrations."""
    import os

    from sqlalchemy import create_engine, text

    url = os.environ["VISTKIT_STUDIO_PG_URL"]
    engine = create_engine(url)
    with engine.begin() as conn:  # start from an empty database
        conn.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    engine.dispose()
    s = create_study(url, task="rank", items=plan_items(2), per_item=2)
    st = db.open_study(url)
    with st.read() as conn:
        assert db.schema_version(conn) == db.SCHEMA_VERSION
    tokens = [t for _, t in service.invite(st, n=2)]
    from vistkit.studio.app import create_app

    c = TestClient(create_app(st))
    for tok in tokens:
        for _ in range(3):
            page = read_page(c, tok)
            if page.assignment is None:
                break
            form = {"assignment": page.assignment, "csrf": page.csrf, "ranking": "1,2,3"}
            assert c.post(f"/a/{tok}/submit", data=form, headers={"accept": "application/json"}).json()["saved"]
            assert c.post(f"/a/{tok}/submit", data=form, headers={"accept": "application/json"}).json()["duplicate"]
    assert count(st, db.judgements) == 4
    assert c.get(f"/admin/{s['admin_token']}/summary.json").json()["complete_units"] == 2
    out = tmp_path / "r.csv"
    analysis.export(st, out, fmt="rankings")
    from vistkit.meta.human import read_rankings

    assert len(read_rankings(out)) == 2
    st.engine.dispose()


def test_admin_link_rotation_reaches_a_running_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    c = client_for(made)
    assert c.get(f"/admin/{made.admin}").status_code == 200
    assert main(["studio", "invite", str(made.path), "--admin", "--format", "csv"]) == 0  # another process's view
    new = capsys.readouterr().out.strip().splitlines()[-1].rsplit("/", 1)[1]
    assert c.get(f"/admin/{made.admin}").status_code == 403
    assert c.get(f"/admin/{new}").status_code == 200


def test_two_servers_on_one_study_store_a_judgement_once(tmp_path: Path) -> None:
    """Two `Study` objects (two engines, two write locks: like two server processes) race on one submission."""
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    other = db.open_study(made.path)
    page = read_page(client_for(made), made.tokens[0])
    form = {"assignment": page.assignment, "csrf": page.csrf, "ranking": "2,3,1"}
    with made.study.read() as conn:
        who = service.authenticate(conn, made.tokens[0])
    assert who is not None
    results: list[dict] = []
    barrier = threading.Barrier(6)

    def go(st: db.Study) -> None:
        barrier.wait(timeout=10)
        results.append(service.submit(st, who, form))

    threads = [threading.Thread(target=go, args=(s,)) for s in [made.study, other] * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(results) == 6 and all(r["saved"] for r in results)
    assert sum(not r["duplicate"] for r in results) == 1
    assert count(made.study, db.judgements) == 1


@settings(max_examples=200, deadline=None)
@given(st_order=st.permutations(list(range(101, 106))), data=st.data())
def test_a_ranking_maps_display_positions_to_stories_and_back(st_order: list[int], data: st.DataObject) -> None:
    """Property: any permutation of the shown positions is accepted and stored as ranks that give the same
    positions back; anything that is not a permutation of 1..N is refused with 422."""
    n = len(st_order)
    positions = data.draw(st.permutations(list(range(1, n + 1))))
    answer = service.parse_answer("rank", {"ranking": ",".join(map(str, positions))}, st_order, [], True)
    ranks = {int(k): v for k, v in answer["ranks"].items()}
    assert sorted(ranks.values()) == list(range(1, n + 1))
    assert [st_order.index(s) + 1 for s in sorted(ranks, key=ranks.__getitem__)] == positions
    bad = data.draw(
        st.lists(st.integers(-2, n + 2), max_size=n + 2).filter(lambda x: sorted(x) != list(range(1, n + 1)))
    )
    with pytest.raises(service.StudioError) as exc:
        service.parse_answer("rank", {"ranking": ",".join(map(str, bad))}, st_order, [], True)
    assert exc.value.status == 422


def test_a_study_too_large_to_plan_is_refused_before_any_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """units x per_item above the bound (10 million; 12 here) is one sentence, and no file is left."""
    from vistkit.studio import plan

    monkeypatch.setattr(plan, "MAX_SLOTS", 12)
    p = tmp_path / "h.json"
    p.write_text(json.dumps({"a": "one . two .", "b": "three . four .", "c": "five . six ."}))
    q = tmp_path / "m.json"
    q.write_text(json.dumps({"a": "x .", "b": "y .", "c": "z ."}))
    args = ["studio", "init", str(tmp_path / "s.db"), "-s", f"h={p}", "-s", f"m={q}", "--task", "pairwise"]
    assert main([*args, "--per-item", "4"]) == 0  # 3 units x 4 = 12 slots
    code = main([*args[:2], str(tmp_path / "t.db"), *args[3:], "--per-item", "5"])
    err = capsys.readouterr().err
    assert code == 1 and "this study would plan 15 assignments (5 per unit); at most 12" in err
    assert not (tmp_path / "t.db").exists()
    code = main(["studio", "demo", "--dir", str(tmp_path / "d"), "--no-serve", "--annotators", "1000000000000"])
    assert code == 1 and "--annotators must be from 1 to 10,000" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------- races, quota
def _open_claims(st: db.Study, annotator_id: int) -> list[int]:
    from sqlalchemy import select

    a = db.assignments
    with st.read() as conn:
        rows = conn.execute(select(a.c.id).where(a.c.annotator_id == annotator_id, a.c.submitted_at.is_(None)))
        return [int(r.id) for r in rows]


@pytest.mark.parametrize("quota", [1, None])
def test_parallel_page_loads_claim_one_task_and_respect_the_quota(tmp_path: Path, quota: int | None) -> None:
    """One link opened 16 times at once, through two `Study` objects (two engines and write locks, like two
    server processes): every load gets the same single claim; with --quota 1 the link then gets nothing more."""
    made = make_study(tmp_path, n_items=6, per_item=2, annotators=0)
    [(_, tok)] = service.invite(made.study, n=1, quota=quota)
    other = db.open_study(made.path)
    with made.study.read() as conn:
        who = service.authenticate(conn, tok)
    assert who is not None
    barrier = threading.Barrier(16)
    got: list[int | None] = []

    def load(st: db.Study) -> None:
        barrier.wait(timeout=10)
        got.append(service.claim_next(st, who))

    threads = [threading.Thread(target=load, args=(s,)) for s in [made.study, other] * 8]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(got) == 16 and len(set(got)) == 1 and got[0] is not None
    assert _open_claims(made.study, who.id) == [got[0]]
    # the same through the web app, 8 page loads in parallel threads: one task, and the quota holds on submit
    c = client_for(made)
    pages: list[str | None] = []
    loaders = [threading.Thread(target=lambda: pages.append(read_page(c, tok).assignment)) for _ in range(8)]
    for t in loaders:
        t.start()
    for t in loaders:
        t.join(timeout=30)
    assert pages == [str(got[0])] * 8
    page = read_page(c, tok)
    h = {"accept": "application/json"}
    form = {"assignment": page.assignment, "csrf": page.csrf, "ranking": "1,2,3"}
    assert c.post(f"/a/{tok}/submit", data=form, headers=h).json() == {"saved": True, "duplicate": False}
    after = read_page(c, tok)
    if quota == 1:
        assert after.assignment is None and "1 of 1 done" in after.html
        assert c.get(f"/a/{tok}/progress").json() == {"annotator": "annotator-001", "done": 1, "total": 1}
    else:
        assert after.assignment is not None and after.assignment != page.assignment
    other.engine.dispose()


def test_a_submission_beyond_the_quota_is_refused_and_extra_claims_are_freed(tmp_path: Path) -> None:
    """Claims an older vistkit let a quota-1 link hoard: the second submission is refused (409, nothing stored)
    and the next page load frees the leftover claim for other annotators."""
    from sqlalchemy import update

    made = make_study(tmp_path, n_items=3, per_item=1, annotators=0)
    [(_, tok)] = service.invite(made.study, n=1, quota=1)
    with made.study.read() as conn:
        who = service.authenticate(conn, tok)
    assert who is not None
    a = db.assignments
    with made.study.write() as conn:  # two open claims at once, as the race used to make
        conn.execute(update(a).where(a.c.id.in_([1, 2])).values(annotator_id=who.id, claimed_at=db.now()))
    c = client_for(made)
    h = {"accept": "application/json"}
    for aid in (1, 2):
        form = {"assignment": str(aid), "csrf": db.csrf_token(made.study.secret(), who.id, aid), "ranking": "1,2,3"}
        r = c.post(f"/a/{tok}/submit", data=form, headers=h)
        if aid == 1:
            assert r.json() == {"saved": True, "duplicate": False}
        else:
            assert r.status_code == 409 and "done all 1 of its tasks" in r.json()["error"]
    assert count(made.study, db.judgements) == 1
    assert read_page(c, tok).assignment is None
    assert _open_claims(made.study, who.id) == []  # assignment 2 is free again


# --------------------------------------------------------------------------------------------------- bodies
def test_nested_json_and_other_encodings_get_one_sentence(tmp_path: Path) -> None:
    """JSON nested 5000 deep (RecursionError in the parser) is a 400; multipart or text/plain bodies are a 415
    naming the accepted encodings (not "the form has no task number"); nothing is stored."""
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    c = client_for(made)
    tok = made.tokens[0]
    page = read_page(c, tok)
    h = {"accept": "application/json"}
    deep = b"[" * 5000 + b"]" * 5000
    r = c.post(f"/a/{tok}/submit", content=deep, headers={**h, "content-type": "application/json"})
    assert r.status_code == 400 and r.json() == {"error": "the request body is not a valid form"}
    deep_obj = b'{"a":' * 2500 + b"1" + b"}" * 2500  # 15 KB, under the 16 KiB limit
    r = c.post(f"/a/{tok}/submit", content=deep_obj, headers={**h, "content-type": "application/json; charset=utf-8"})
    assert r.status_code == 400
    form = {"assignment": page.assignment, "csrf": page.csrf, "ranking": "1,2,3"}
    r = c.post(f"/a/{tok}/submit", files={"x": ("x.txt", b"1")}, data=form, headers=h)
    assert r.status_code == 415
    assert "urlencoded (application/x-www-form-urlencoded) or as JSON (application/json)" in r.json()["error"]
    r = c.post(f"/a/{tok}/submit", content=b"assignment=1", headers={**h, "content-type": "text/plain"})
    assert r.status_code == 415 and "not text/plain" in r.json()["error"]
    r = c.post(f"/a/{tok}/submit", files={"x": ("x.txt", b"1")}, data=form)  # a browser: a page, not a traceback
    assert r.status_code == 415 and "Not saved" in r.text and "Traceback" not in r.text
    assert count(made.study, db.judgements) == 0
    # urlencoded with a charset parameter still counts as urlencoded
    r = c.post(
        f"/a/{tok}/submit",
        content="&".join(f"{k}={v}" for k, v in form.items()).encode(),
        headers={**h, "content-type": "application/x-www-form-urlencoded; charset=UTF-8"},
    )
    assert r.json() == {"saved": True, "duplicate": False}


def test_bad_utf8_escapes_are_400_and_other_charsets_415_as_documented(tmp_path: Path) -> None:
    """docs/studio.md: 400 for a body that is not a form of its encoding (bad UTF-8, also in a percent-escape,
    which used to be read as U+FFFD and answered 422), 415 for another encoding (a charset other than UTF-8,
    which used to be decoded as UTF-8 anyway); nothing is stored. UTF-8 spelled any way is accepted."""
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    c = client_for(made)
    tok = made.tokens[0]
    page = read_page(c, tok)
    h = {"accept": "application/json"}
    form = {"assignment": page.assignment, "csrf": page.csrf, "ranking": "1,2,3"}
    urlencoded = "&".join(f"{k}={v}" for k, v in form.items())
    for body in (urlencoded + "&note=%ff%fe", urlencoded.replace("ranking=", "ranking=%c3%28")):
        r = c.post(f"/a/{tok}/submit", content=body.encode(), headers=h)
        assert r.status_code == 400 and r.json() == {"error": "the request body is not a valid form"}, body
    as_json = json.dumps(form)
    for ctype, body in (
        ("application/json; charset=utf-16", as_json.encode("utf-16")),
        ("application/json; charset=utf-16", as_json.encode()),  # even when the bytes happen to be ASCII
        ("application/x-www-form-urlencoded; charset=latin-1", urlencoded.encode("latin-1")),
    ):
        r = c.post(f"/a/{tok}/submit", content=body, headers={**h, "content-type": ctype})
        assert r.status_code == 415 and "send the form in UTF-8" in r.json()["error"], ctype
    assert count(made.study, db.judgements) == 0
    utf8 = {**h, "content-type": 'application/json; Charset="UTF8"'}
    r = c.post(f"/a/{tok}/submit", content=as_json.encode(), headers=utf8)
    assert r.json() == {"saved": True, "duplicate": False}


# --------------------------------------------------------------------------------------------------- storage faults
def _fault(engine, *, said: str, when: tuple[str, ...] = ("INSERT", "UPDATE")):  # type: ignore[no-untyped-def]
    """Make the statements of ``engine`` that start with ``when`` fail as SQLite does (``said``); returns the undo."""
    import sqlite3

    from sqlalchemy import event

    def fail(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith(when):
            raise sqlite3.OperationalError(said)

    event.listen(engine, "before_cursor_execute", fail)
    return lambda: event.remove(engine, "before_cursor_execute", fail)


def _read_only(engine):  # type: ignore[no-untyped-def]
    """New connections of ``engine`` refuse writes as SQLite does on a read-only file (``PRAGMA query_only``: this
    test may run as root, whom file permissions do not stop); returns the undo."""
    from sqlalchemy import event

    def pragma(dbapi_conn, _record):  # type: ignore[no-untyped-def]
        dbapi_conn.execute("PRAGMA query_only = 1")

    event.listen(engine, "connect", pragma)
    engine.dispose()

    def undo() -> None:
        event.remove(engine, "connect", pragma)
        engine.dispose()

    return undo


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("database or disk is full", "the server's disk is full"),
        ("disk I/O error", "the server's disk could not write it"),
        ("read-only", "the study is read-only on the server"),
    ],
)
def test_a_study_that_cannot_be_written_gives_503_with_one_sentence_and_stores_nothing(
    tmp_path: Path, fault: str, reason: str
) -> None:
    from sqlalchemy import select

    made = make_study(tmp_path, n_items=2, per_item=1, annotators=2)
    c = client_for(made)
    tok, other = made.tokens
    page = read_page(c, tok)
    form = {"assignment": page.assignment, "csrf": page.csrf, "ranking": "1,2,3"}
    undo = _read_only(made.study.engine) if fault == "read-only" else _fault(made.study.engine, said=fault)
    h = {"accept": "application/json"}
    r = c.post(f"/a/{tok}/submit", data=form, headers=h)
    assert r.status_code == 503 and r.headers["retry-after"] == "60"
    assert r.json() == {
        "error": f"the study could not be saved ({reason}); your answer was not stored, try again in a few minutes"
    }
    r = c.post(f"/a/{tok}/submit", data=form)  # a browser gets the same sentence on a page
    text = html.unescape(r.text)
    assert r.status_code == 503 and "Not saved" in text and reason in text and "Traceback" not in text
    r = c.get(f"/a/{other}")  # a page that must claim a task
    text = html.unescape(r.text)
    assert r.status_code == 503 and "could not be read or updated" in text and "Traceback" not in text
    assert count(made.study, db.judgements) == 0
    a = db.assignments
    with made.study.read() as conn:  # nothing half: the assignment is not marked submitted either
        assert conn.execute(select(a.c.id).where(a.c.submitted_at.is_not(None))).first() is None
    undo()  # the disk has room again: the same answer is stored, once
    assert c.post(f"/a/{tok}/submit", data=form, headers=h).json() == {"saved": True, "duplicate": False}
    assert count(made.study, db.judgements) == 1


def test_a_log_inode_reused_by_the_new_shm_is_not_a_replaced_log(tmp_path: Path) -> None:
    """When every connection closed, SQLite removed the -wal and -shm files; the next connection made new ones, and
    the new -shm could get the old -wal's inode (freed a moment before). That inode, held open by this process as
    the new -shm, read as "the old -wal is still in use": a 503 "-wal file replaced" (a flaky test). Only an old
    log inode that is not one of the study's files now counts."""
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    study = made.study
    with study.write() as conn:  # both side files exist and are held open by the pool's connection
        conn.exec_driver_sql("SELECT 1")
    shm = db._identity(study._side("-shm"))
    assert shm is not None
    study._sides["-wal"] = shm  # as if the old log's inode were the new -shm's
    study.check_file()  # no StudyFileChanged
    assert study._sides["-wal"] == db._identity(study._side("-wal"))
    study._sides["-wal"] = (shm[0], shm[1] + 10**9)  # an old log inode held by nobody: SQLite re-created it
    study.check_file()
    study.close()


def test_an_unexpected_server_error_is_one_sentence_without_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)

    def boom(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("secret detail")

    monkeypatch.setattr(service, "load_task", boom)
    from vistkit.studio.app import create_app

    c = TestClient(create_app(made.study), raise_server_exceptions=False)
    r = c.get(f"/a/{made.tokens[0]}", headers={"accept": "application/json"})
    assert r.status_code == 500 and "unexpected error" in r.json()["error"] and "secret" not in r.text


def _damaged_copy(made, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    """A copy of the study whose judgements table page is overwritten: a valid header, a damaged table."""
    import sqlite3

    made.study.close()
    bad = tmp_path / "damaged.db"
    src, dst = sqlite3.connect(made.path), sqlite3.connect(bad)
    src.backup(dst)
    root = dst.execute("SELECT rootpage FROM sqlite_master WHERE name = 'judgements'").fetchone()[0]
    size = dst.execute("PRAGMA page_size").fetchone()[0]
    src.close()
    dst.close()
    with open(bad, "r+b") as fh:
        fh.seek((root - 1) * size)
        fh.write(b"\xff" * 100)
    return bad


def test_a_damaged_study_is_one_sentence_for_every_verb(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A study whose header is fine but a table page is not: status, export and serve name the study and say to
    restore it (serve refuses before it listens); the server answers 503 where it meets the damage."""
    made = make_study(tmp_path, n_items=2, per_item=1, annotators=1)
    bad = _damaged_copy(made, tmp_path)
    sentence = f"error: cannot read study {bad}: database disk image is malformed (restore it from a backup)"
    out = tmp_path / "out.csv"
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("serve started on a damaged study"))
    for args in (
        ["status", str(bad)],
        ["export", str(bad), "-f", "rankings", "-o", str(out)],
        ["serve", str(bad), "--port", "1"],
    ):
        assert main(["studio", *args]) == 1, args
        err = capsys.readouterr().err
        assert err.strip() == sentence, args
    assert not out.exists() and not Path(f"{out}.provenance.json").exists()
    from vistkit.studio.app import create_app

    c = TestClient(create_app(db.open_study(bad)))
    r = c.get(f"/admin/{made.admin}/summary.json")
    assert r.status_code == 503 and "the study file is damaged" in r.json()["error"]


def test_cli_verbs_on_a_study_that_cannot_be_written_are_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """invite on a read-only study, serve on one (refused before it listens), init on a full disk (no file left)."""
    import uvicorn
    from sqlalchemy import event

    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    made.study.close()
    make_engine = db.make_engine

    def read_only_engine(study):  # type: ignore[no-untyped-def]
        engine = make_engine(study)
        event.listen(engine, "connect", lambda conn, _rec: conn.execute("PRAGMA query_only = 1"))
        return engine

    monkeypatch.setattr(db, "make_engine", read_only_engine)
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("serve started on a read-only study"))
    assert main(["studio", "invite", str(made.path), "--n", "2"]) == 1
    cap = capsys.readouterr()
    assert cap.err.strip() == (
        f"error: cannot write study {made.path}: attempt to write a readonly database (give the user running "
        "vistkit write access to the file and its folder); nothing was stored"
    )
    assert "/a/" not in cap.out
    assert main(["studio", "serve", str(made.path), "--port", "1"]) == 1
    err = capsys.readouterr().err
    assert f"study {made.path} cannot be written (attempt to write a readonly database)" in err
    assert main(["studio", "status", str(made.path)]) == 0  # reading is fine
    capsys.readouterr()

    def full_disk_engine(study):  # type: ignore[no-untyped-def]
        import sqlite3

        engine = make_engine(study)

        def fail(conn, cursor, statement, *rest):  # type: ignore[no-untyped-def]
            if statement.startswith("INSERT INTO assignments"):
                raise sqlite3.OperationalError("database or disk is full")

        event.listen(engine, "before_cursor_execute", fail)
        return engine

    monkeypatch.setattr(db, "make_engine", full_disk_engine)
    h, m = tmp_path / "h.json", tmp_path / "m.json"
    h.write_text(json.dumps({"a": "one . two .", "b": "three . four ."}))
    m.write_text(json.dumps({"a": "x .", "b": "y ."}))
    new = tmp_path / "new.db"
    assert main(["studio", "init", str(new), "--task", "rank", "-s", f"h={h}", "-s", f"m={m}"]) == 1
    err = capsys.readouterr().err
    assert f"cannot write study {new}: database or disk is full (free some disk space and try again)" in err
    assert sorted(p.name for p in tmp_path.glob("new.db*")) == []  # no half-made study


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files: the query_only tests above stand in")
def test_serve_refuses_a_read_only_study_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The real thing where file permissions apply (not as root): a study file of mode 0400."""
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    made.study.close()
    made.path.chmod(0o400)
    assert main(["studio", "serve", str(made.path), "--port", "1"]) == 1
    err = capsys.readouterr().err
    assert f"study {made.path} cannot be written (attempt to write a readonly database)" in err


# --------------------------------------------------------------------------------------------------- init inputs
def test_sqlite_urls_name_the_study_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--db sqlite:///PATH (relative or absolute) is the file PATH, for init and the other verbs; sqlite:// (in
    memory) is refused in one sentence."""
    monkeypatch.chdir(tmp_path)
    h, m = tmp_path / "h.json", tmp_path / "m.json"
    h.write_text(json.dumps({"a": "one . two .", "b": "three . four ."}))
    m.write_text(json.dumps({"a": "x .", "b": "y ."}))
    path = tmp_path / "u.db"
    url = f"sqlite:///{path}"  # sqlite:////tmp/...: an absolute path
    code = main(["studio", "init", "ignored.db", "--db", url, "--task", "rank", "-s", f"h={h}", "-s", f"m={m}"])
    assert code == 0 and path.is_file() and not (tmp_path / "ignored.db").exists()
    capsys.readouterr()
    assert main(["studio", "status", "x", "--db", url, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["units"] == 2
    assert main(["studio", "invite", "x", "--db", "sqlite:///u.db"]) == 0  # relative to the working folder
    assert "/a/" in capsys.readouterr().out
    assert main(["studio", "status", "x", "--db", "sqlite://"]) == 1
    assert "names no database file" in capsys.readouterr().err
    assert main(["studio", "status", "x", "--db", f"sqlite:///{tmp_path / 'none.db'}"]) == 1
    assert f"no study file {tmp_path / 'none.db'}" in capsys.readouterr().err


def test_blank_stories_are_refused_naming_system_and_item(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blank, h = tmp_path / "blank.json", tmp_path / "h.json"
    blank.write_text(json.dumps({"a": "one . two .", "b": " \t\n "}))
    h.write_text(json.dumps({"a": "three . four .", "b": "five . six ."}))
    for task in ("rank", "likert"):
        code = main(["studio", "init", str(tmp_path / "s.db"), "--task", task, "-s", f"human={h}", "-s", f"m1={blank}"])
        assert code == 1
        assert capsys.readouterr().err.strip() == (
            "error: --stories m1: the story of item 'b' is empty; fill it in or leave the item out"
        )
        assert not (tmp_path / "s.db").exists()
    items = plan_items(1)
    items[0].stories[1].text = ""
    with pytest.raises(Exception, match="--stories m1: the story of item 's0' is empty"):
        create_study(tmp_path / "t.db", task="pairwise", items=items)


@pytest.mark.parametrize("bad", ["img_0a", "x-0", "p.0", "", "ph\u00f6to", "a b"])
def test_photo_ids_that_img_seq_would_change_are_refused_at_init(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    """The exports join photo ids with '-' and `vistkit meta` reads back runs of ASCII letters and digits: an id
    that would not come back the same is refused, naming the system and the item."""
    from vistkit.meta.human import parse_img_seq

    for k, name in enumerate(["human", "m1"]):
        recs = [{"story_id": "s0", "photo_ids": ["ok1", bad, "ok2"], "text": f"{name} story . more ."}]
        (tmp_path / f"sys{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    args = ["studio", "init", str(tmp_path / "rt.db"), "--task", "rank"]
    code = main([*args, "-s", f"human={tmp_path / 'sys0.jsonl'}", "-s", f"m1={tmp_path / 'sys1.jsonl'}"])
    err = capsys.readouterr().err
    assert code == 1 and not (tmp_path / "rt.db").exists()
    assert err.count("\n") == 1 and "photo id" in err and "Traceback" not in err  # ("-" or "": the reader refuses)
    if bad not in ("", "x-0"):
        assert f"--stories human: item 's0' has the photo id {bad!r}" in err
        assert "photo ids may hold only ASCII letters and digits" in err
    items = plan_items(1)  # the library refuses them too, whoever built the items
    items[0].photo_ids = ("ok1", bad, "ok2")
    with pytest.raises(Exception, match=f"item 's0' has the photo id {re.escape(repr(bad))}"):
        create_study(tmp_path / "lib.db", task="rank", items=items)
    assert not (tmp_path / "lib.db").exists()
    assert parse_img_seq("-".join(["ok1", bad, "ok2"])) != ("ok1", bad, "ok2")  # the reason, checked
    assert parse_img_seq("-".join(["ok1", "X9", "ok2"])) == ("ok1", "X9", "ok2")
