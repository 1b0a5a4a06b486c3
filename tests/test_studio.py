"""vistkit studio: the study plan, every route and bad input (in-process), storage, agreement, migrations."""

from __future__ import annotations

import json
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
