"""Round-11 probes of vistkit studio: two server processes racing on one assignment, an export that is one snapshot,
a system named as the gold decoy, two invites at once, --quota bounds, the demo's links file, and why an export
has nothing to write."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.studio_helpers import make_study, plan_items
from vistkit.cli import main
from vistkit.errors import InputError
from vistkit.studio import analysis, db, service
from vistkit.studio.plan import GOLD_SYSTEM, PlanItem, PlanStory, create_study


def _form(st: db.Study, who: service.Annotator, aid: int, **answer: str) -> dict[str, str]:
    return {"assignment": str(aid), "csrf": db.csrf_token(st.secret(), who.id, aid), **answer}


def _annotators(st: db.Study, tokens: list[str]) -> list[service.Annotator]:
    with st.read() as conn:
        found = [service.authenticate(conn, t) for t in tokens]
    assert all(a is not None for a in found)
    return [a for a in found if a is not None]


def test_a_stale_claim_taken_by_another_server_mid_submit_is_stored_once_on_its_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `serve` processes on one study (two engines here): A submits a claim that has gone stale while the other
    server hands it to B. The submission used to read the assignment outside the write lock, so B could take it
    between that read and A's insert: A's judgement then sat on B's assignment, and A could judge the unit again
    on another slot. Now the owner check and the insert are one locked transaction: either A's answer is stored on
    A's assignment (B waits and gets another slot), or A is told it is no longer theirs and nothing is stored."""
    made = make_study(
        tmp_path, task="likert", n_items=2, per_item=2, annotators=4, aspects=["coherent"], claim_timeout=0.2
    )
    server_1, server_2 = made.study, db.open_study(made.path)
    a, b, *_ = _annotators(server_1, made.tokens)
    aid = service.claim_next(server_1, a)
    assert aid is not None
    time.sleep(0.3)  # A's claim is stale: another annotator may be given it

    original = service.parse_answer
    b_claim: dict[str, int | None] = {}

    def slow_parse(*args: object, **kw: object) -> object:
        # inside A's submit transaction: the other server lets B open a task (it must wait for A's lock)
        t = threading.Thread(target=lambda: b_claim.setdefault("aid", service.claim_next(server_2, b)))
        t.start()
        t.join(timeout=0.5)
        threads.append(t)
        return original(*args, **kw)  # type: ignore[arg-type]

    threads: list[threading.Thread] = []
    monkeypatch.setattr(service, "parse_answer", slow_parse)
    result = service.submit(server_1, a, _form(server_1, a, aid, coherent="4"))
    monkeypatch.setattr(service, "parse_answer", original)
    for t in threads:
        t.join(timeout=30)
    assert result == {"saved": True, "duplicate": False}
    assert b_claim["aid"] is not None and b_claim["aid"] != aid  # B waited, then got another slot
    assert service.claim_next(server_1, a) != aid
    with server_1.read() as conn:
        j, asg = db.judgements, db.assignments
        rows = conn.execute(
            select(j.c.annotator_id, j.c.unit_id, asg.c.annotator_id.label("owner")).join(
                asg, asg.c.id == j.c.assignment_id
            )
        ).all()
    assert rows and all(r.annotator_id == r.owner for r in rows)  # every judgement on its own annotator's slot
    assert len({(r.annotator_id, r.unit_id) for r in rows}) == len(rows)  # no unit judged twice by one person
    server_2.close()


def test_a_submit_whose_assignment_changed_hands_stores_nothing(tmp_path: Path) -> None:
    """The last line of defence: the submission's final update names its owner, so an assignment given to
    someone else after the owner check rolls the whole answer back (409), judgement included."""
    made = make_study(tmp_path, task="likert", n_items=2, per_item=1, annotators=2, aspects=["coherent"])
    st = made.study
    a, b = _annotators(st, made.tokens)
    aid = service.claim_next(st, a)
    assert aid is not None
    original = service.parse_answer

    def hand_over(*args: object, **kw: object) -> object:  # as a second server whose write slipped in
        with st.engine.begin() as conn:
            conn.execute(db.assignments.update().where(db.assignments.c.id == aid).values(annotator_id=b.id))
        return original(*args, **kw)  # type: ignore[arg-type]

    # the test writes on another connection inside the submit's transaction, which SQLite's lock would block:
    # skip the lock here so that the final update's own check is what is tested
    service_lock = service._lock_annotator
    service._lock_annotator = lambda conn, who: None  # type: ignore[assignment]
    service.parse_answer = hand_over  # type: ignore[assignment]
    try:
        with pytest.raises(service.StudioError) as err:
            service.submit(st, a, _form(st, a, aid, coherent="3"))
    finally:
        service.parse_answer = original  # type: ignore[assignment]
        service._lock_annotator = service_lock  # type: ignore[assignment]
    assert err.value.status == 409
    with st.read() as conn:
        assert conn.execute(select(db.judgements.c.id)).first() is None


def test_an_export_is_one_snapshot_while_a_server_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`export --drop-failed-gold` reads who failed gold and then the judgements. With Python's sqlite3 each
    SELECT saw the latest commit, so an annotator whose failed gold check and answers were committed in between
    was exported and not listed as dropped. The read is now one transaction: what is exported and what is dropped
    come from the same moment."""
    made = make_study(tmp_path, n_items=3, per_item=1, annotators=0, gold=1)
    server = db.open_study(made.path)
    (_, token), = service.invite(server, n=1)
    (x,) = _annotators(server, [token])

    def x_judges_everything_ranking_the_shuffled_story_first() -> None:
        while (aid := service.claim_next(server, x)) is not None:
            task = service.load_task(server, x, aid)
            with server.read() as conn:
                roles = dict(conn.execute(select(db.stories.c.id, db.stories.c.gold_role)).all())
            order = sorted(range(len(task.stories)), key=lambda i: roles[task.stories[i]["id"]] != "shuffled")
            service.submit(server, x, _form(server, x, aid, ranking=",".join(str(i + 1) for i in order)))

    original = analysis._failed_gold_in

    def then_the_server_writes(st: db.Study, conn: object) -> set[str]:
        found = original(st, conn)  # type: ignore[arg-type]
        x_judges_everything_ranking_the_shuffled_story_first()
        return found

    monkeypatch.setattr(analysis, "_failed_gold_in", then_the_server_writes)
    with pytest.raises(InputError, match="no judgements to export yet"):  # the snapshot had none
        analysis.export(made.study, tmp_path / "r.csv", fmt="rankings", drop_failed_gold=True)
    monkeypatch.setattr(analysis, "_failed_gold_in", original)
    # now X's answers are there: X failed gold, so everything is left out, and the message says why
    with pytest.raises(InputError, match=r"all left out, 3 of annotators who failed the gold checks"):
        analysis.export(made.study, tmp_path / "r.csv", fmt="rankings", drop_failed_gold=True)
    prov = analysis.export(made.study, tmp_path / "r.jsonl", fmt="jsonl", drop_failed_gold=True, include_gold=True)
    assert prov["judgements"] == 0 and prov["dropped_annotators"] == [x.name]
    server.close()


def test_an_export_left_empty_by_its_options_says_so(tmp_path: Path) -> None:
    """A study whose only judgement is of a gold item, exported without --include-gold: "the study has no
    judgements to export yet" was wrong (status counted one); the message now says what was left out and why."""
    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1, gold=1)
    (who,) = _annotators(made.study, made.tokens)
    asg, units, items = db.assignments, db.units, db.items
    with made.study.write() as conn:  # the gold item's assignment, given to the one annotator
        aid = conn.execute(
            select(asg.c.id)
            .join(units, units.c.id == asg.c.unit_id)
            .join(items, items.c.id == units.c.item_id)
            .where(items.c.key.like("gold:%"))
        ).scalar_one()
        conn.execute(asg.update().where(asg.c.id == aid).values(annotator_id=who.id, claimed_at=db.now()))
    task = service.load_task(made.study, who, aid)
    ranking = ",".join(str(i + 1) for i in range(len(task.stories)))
    assert service.submit(made.study, who, _form(made.study, who, aid, ranking=ranking))["saved"]
    for fmt in ("rankings", "pairs"):
        with pytest.raises(InputError, match=r"the study's 1 judgements were all left out, 1 of gold items"):
            analysis.export(made.study, tmp_path / f"x.{fmt}.csv", fmt=fmt)
        assert not (tmp_path / f"x.{fmt}.csv").exists()
    assert analysis.export(made.study, tmp_path / "x.csv", fmt="rankings", include_gold=True)["judgements"] == 1


def test_a_system_named_as_the_gold_decoy_is_refused(tmp_path: Path) -> None:
    """A system named `gold-shuffled` and --gold gave gold items two stories of that name: ranks of 2 for 3
    stories, a pairs export that failed and a rankings export that `meta` refused."""
    items = [
        PlanItem(key=it.key, photo_ids=it.photo_ids, stories=[*it.stories[:2], PlanStory(GOLD_SYSTEM, it.key, "x .")])
        for it in plan_items(3, systems=2)
    ]
    with pytest.raises(InputError, match=f"a system is named '{GOLD_SYSTEM}'.*rename that system"):
        create_study(tmp_path / "s.db", task="rank", items=items, per_item=1, gold=1)
    assert not (tmp_path / "s.db").exists()
    create_study(tmp_path / "ok.db", task="rank", items=items, per_item=1, gold=0)  # no gold: the name is free


def test_two_invites_at_once_give_distinct_names(tmp_path: Path) -> None:
    """Two `studio invite` runs at once counted the same annotators and named their new ones alike: one run
    failed with "unexpected IntegrityError ... this is a bug". The count is now taken under the study's lock."""
    made = make_study(tmp_path, annotators=0)
    studies = [db.open_study(made.path) for _ in range(2)]
    out: list[list[tuple[str, str]]] = []
    errors: list[BaseException] = []

    def run(st: db.Study) -> None:
        try:
            out.append(service.invite(st, n=300))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(st,)) for st in studies]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and len(out) == 2
    names = [n for batch in out for n, _ in batch]
    assert len(set(names)) == 600
    for st in studies:
        st.close()


@pytest.mark.parametrize("quota", ["0", "-1", "10000001", str(2**63)])
def test_invite_quota_out_of_range_is_one_sentence(
    tmp_path: Path, quota: str, capsys: pytest.CaptureFixture[str]
) -> None:
    made = make_study(tmp_path, annotators=0)
    made.study.close()
    assert main(["studio", "invite", str(made.path), "--quota", quota, "-q"]) != 0
    err = capsys.readouterr().err
    assert "--quota must be from 1 to 10,000,000 tasks" in err and "bug" not in err
    with pytest.raises(InputError, match="--quota"):
        service.invite(db.open_study(made.path), n=1, quota=int(quota))


def test_the_demo_links_file_is_private(tmp_path: Path) -> None:
    """links.json holds the admin and annotator tokens: 0600, like the study file (it was 0644)."""
    from vistkit.studio.demo import build_demo

    folder = tmp_path / "demo"
    build_demo(folder, annotators=2, items=2)
    assert (os.stat(folder / "links.json").st_mode & 0o777) == 0o600
    assert json.loads((folder / "links.json").read_text(encoding="utf-8"))["admin_path"].startswith("/admin/")
    os.chmod(folder / "links.json", 0o644)  # a folder made by an older vistkit: reused, and made private
    build_demo(folder, annotators=2, items=2)
    assert (os.stat(folder / "links.json").st_mode & 0o777) == 0o600
