"""Round-15 probes of vistkit studio (server side): invite links and admin links that were never shown (ghost
annotators, a lost admin link), and their siblings.

Every server listens on 127.0.0.1 on a free port and every wait is bounded.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest
from studio_helpers import count, make_study

from vistkit.cli import main
from vistkit.studio import db, service


def _names(path: Path) -> list[str]:
    st = db.open_study(path)
    with st.read() as conn:
        names = [r[0] for r in conn.execute(db.annotators.select().with_only_columns(db.annotators.c.name))]
    st.engine.dispose()
    return names


def _admin_works(path: Path, token: str) -> bool:
    st = db.open_study(path)
    ok = service.is_admin(st, token)
    st.engine.dispose()
    return ok


# ------------------------------------------------------------------------------ invite: ghosts
def test_an_invite_interrupted_while_printing_keeps_no_annotator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: Ctrl-C (or SIGTERM) while `studio invite` printed its links left the new annotators stored, links
    shown to nobody ("ghosts" in `status`, their names used up); only an OSError withdrew them. After: they are
    withdrawn whatever stopped the output."""
    from vistkit.commands import studio as studio_cmd

    made = make_study(tmp_path, annotators=1)
    made.study.engine.dispose()

    def interrupted(text: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(studio_cmd, "echo", interrupted)
    assert main(["studio", "invite", str(made.path), "--n", "3"]) == 130
    monkeypatch.undo()
    assert _names(made.path) == ["annotator-001"]


def test_annotators_whose_links_were_never_written_are_listed_and_can_be_withdrawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: an invite killed (kill -9, a power cut) after storing its annotators, or whose clean-up failed too
    (the disk full, the study locked by a server), left annotators nobody has a link for: `status` listed them
    like any annotator who has not started, and nothing could remove them. After: `status` names them (text and
    JSON ``unsent_invites``), and `invite --withdraw unsent` (or the names) removes them; one that has claimed a
    task, or a name that is not an annotator, is refused in one sentence."""
    import json

    from vistkit.commands import studio as studio_cmd

    made = make_study(tmp_path, annotators=1)
    made.study.engine.dispose()

    def full(text: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def cannot(*args: object, **kwargs: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(studio_cmd, "echo", full)
    monkeypatch.setattr(service, "withdraw_invites", cannot)
    assert main(["studio", "invite", str(made.path), "--n", "2"]) != 0
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--withdraw" in err, err
    assert _names(made.path) == ["annotator-001", "annotator-002", "annotator-003"]

    assert main(["studio", "status", str(made.path), "-f", "json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["unsent_invites"] == ["annotator-002", "annotator-003"]
    assert main(["studio", "status", str(made.path)]) == 0
    out = capsys.readouterr()
    assert "annotator-002" in out.err and "--withdraw unsent" in out.err

    # a name that is not an annotator, and one that has claimed a task, are refused; nothing is removed
    assert main(["studio", "invite", str(made.path), "--withdraw", "annotator-009"]) != 0
    assert "annotator-009" in capsys.readouterr().err
    st = db.open_study(made.path)
    (first,) = [a for a in _annotators(st) if a.name == "annotator-001"]
    assert service.claim_next(st, first) is not None
    st.engine.dispose()
    assert main(["studio", "invite", str(made.path), "--withdraw", "annotator-001,annotator-002"]) != 0
    err = capsys.readouterr().err
    assert "annotator-001" in err and "claimed" in err and "Traceback" not in err
    assert len(_names(made.path)) == 3

    # made a moment ago: the invite run may still be writing them, so they are kept (and said so)
    assert main(["studio", "invite", str(made.path), "--withdraw", "unsent"]) == 0
    assert "in a minute" in " ".join(capsys.readouterr().err.split())
    assert len(_names(made.path)) == 3
    monkeypatch.setattr(service, "UNSENT_SETTLE_S", 0.0)
    assert main(["studio", "invite", str(made.path), "--withdraw", "unsent"]) == 0
    assert "annotator-002" in capsys.readouterr().out
    assert _names(made.path) == ["annotator-001"]
    assert main(["studio", "status", str(made.path), "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["unsent_invites"] == []


def _annotators(st: db.Study) -> list[service.Annotator]:
    with st.read() as conn:
        rows = conn.execute(
            db.annotators.select().with_only_columns(db.annotators.c.id, db.annotators.c.name, db.annotators.c.quota)
        ).all()
    return [service.Annotator(r.id, r.name, r.quota) for r in rows]


def test_an_invite_killed_before_its_links_were_written_is_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kill -9 between storing the annotators and printing their links (stood in for by `invite(unsent=True)`
    without the confirmation the verb makes once the links are written): `status` names them."""
    import json

    made = make_study(tmp_path, annotators=1)
    service.invite(made.study, n=2, prefix="pilot", unsent=True)
    made.study.engine.dispose()
    assert main(["studio", "status", str(made.path), "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["unsent_invites"] == ["pilot-002", "pilot-003"]
    assert main(["studio", "invite", str(made.path), "--n", "1"]) == 0  # a later, finished run is not listed
    capsys.readouterr()
    assert main(["studio", "status", str(made.path), "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["unsent_invites"] == ["pilot-002", "pilot-003"]


# ------------------------------------------------------------------------------ invite --admin
@pytest.mark.parametrize("stop", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
def test_an_admin_link_that_cannot_be_written_leaves_the_old_one_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], stop: BaseException
) -> None:
    """Before: `studio invite --admin > /dev/full` (or Ctrl-C) replaced the admin token, then failed to print the
    new link: the old link stopped working and the new one was shown to nobody, so the owner was locked out of
    the admin page. After: the new token is stored only once its link is written; a failure keeps the old one,
    and the error says so."""
    from vistkit.commands import studio as studio_cmd

    made = make_study(tmp_path, annotators=1)
    made.study.engine.dispose()

    def fail(text: str) -> None:
        raise stop

    monkeypatch.setattr(studio_cmd, "echo", fail)
    assert main(["studio", "invite", str(made.path), "--admin"]) != 0
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if isinstance(stop, OSError):
        assert "old admin link still works" in err, err
    assert _admin_works(made.path, made.admin)
    assert count(db.open_study(made.path), db.annotators) == 1


def test_a_new_admin_link_that_cannot_be_stored_says_the_printed_one_does_not_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The link is written first; when storing its token then fails (the disk full, the study locked), the error
    says that the link above does not work and the old one still does."""
    made = make_study(tmp_path, annotators=1)
    made.study.engine.dispose()

    def cannot(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(service, "set_admin_token", cannot)
    assert main(["studio", "invite", str(made.path), "--admin"]) != 0
    monkeypatch.undo()
    out = capsys.readouterr()
    assert "/admin/" in out.out
    assert "does not work" in out.err and "old admin link still works" in out.err, out.err
    assert _admin_works(made.path, made.admin)


def test_a_new_admin_link_works_and_the_old_one_stops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    made = make_study(tmp_path, annotators=1)
    made.study.engine.dispose()
    assert main(["studio", "invite", str(made.path), "--admin", "-f", "csv"]) == 0
    link = capsys.readouterr().out.strip().splitlines()[-1].split(",")[-1]
    token = link.rsplit("/", 1)[-1]
    assert _admin_works(made.path, token) and not _admin_works(made.path, made.admin)


# ------------------------------------------------------------------------------ init: the admin link not written
def test_an_init_whose_admin_link_cannot_be_written_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `studio init s.db ... > /dev/full` made the study, then said only "cannot write the output: the disk
    is full": its admin link (shown once, only its hash stored) was lost, and running init again said "s.db exists
    already". After: the error says the study was made and that `invite --admin` gives a new admin link."""
    import json

    from vistkit.commands import studio as studio_cmd

    stories = tmp_path / "human.json"
    stories.write_text(json.dumps([{"story_id": "1", "text": "we went out . it was fun ."}]), encoding="utf-8")
    other = tmp_path / "m.json"
    other.write_text(json.dumps([{"story_id": "1", "text": "a day out . it was sad ."}]), encoding="utf-8")
    study = tmp_path / "s.db"

    def full(text: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(studio_cmd, "echo", full)
    args = ["studio", "init", str(study), "--task", "rank", "-s", f"human={stories}", "-s", f"m={other}", "-q"]
    assert main(args) != 0
    monkeypatch.undo()
    err = " ".join(capsys.readouterr().err.split())
    assert "was made" in err and f"vistkit studio invite {study} --admin" in err, err
    assert main(["studio", "invite", str(study), "--admin"]) == 0
    assert "/admin/" in capsys.readouterr().out


def test_an_invite_after_annotators_were_withdrawn_from_the_middle_gets_free_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: new names were numbered from the count of annotators, so once one in the middle was gone (two invite
    runs at once whose first one could not write its links and withdrew them; a removed annotator) the next
    `invite` took a name still in use and stopped with "unexpected IntegrityError". After: names in use are
    skipped."""
    made = make_study(tmp_path, annotators=4)
    assert service.withdraw_invites(made.study, ["annotator-002"]) == 1
    made.study.engine.dispose()
    assert main(["studio", "invite", str(made.path), "--n", "2"]) == 0, capsys.readouterr().err
    assert _names(made.path) == [f"annotator-00{i}" for i in (1, 3, 4, 5, 6)]


# ------------------------------------------------------------------------------ --drop-failed-gold that checks nobody
def _judge(st: db.Study, who: service.Annotator, *, stop_at_gold: bool = False, fail_gold: bool = False) -> int:
    """Submit ``who``'s tasks (rank: display order, the shuffled copy first on gold units when ``fail_gold``);
    with ``stop_at_gold`` stop at the first gold unit claimed. Returns how many were submitted."""
    import json as _json

    from sqlalchemy import select

    done = 0
    while (aid := service.claim_next(st, who)) is not None:
        with st.read() as conn:
            row = conn.execute(select(db.assignments).where(db.assignments.c.id == aid)).one()
            order = _json.loads(row.story_order)
            roles = dict(conn.execute(select(db.stories.c.id, db.stories.c.gold_role)).all())
        gold = any(roles[s] for s in order)
        if gold and stop_at_gold:
            break
        positions = list(range(1, len(order) + 1))
        if gold and fail_gold:
            positions.sort(key=lambda p: roles[order[p - 1]] != "shuffled")
        form = {"assignment": str(aid), "csrf": db.csrf_token(st.secret(), who.id, aid)}
        service.submit(st, who, {**form, "ranking": ",".join(map(str, positions))})
        done += 1
    return done


def test_drop_failed_gold_says_whom_it_could_not_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `export --drop-failed-gold` (and `report --drop-failed-gold`) kept, without a word, every annotator
    who had judged no gold item (all of them in a study made without --gold), so an export meant to be filtered
    by attention checks was not. After: a warning says the study has no gold items, or names the annotators
    that no gold item checked, and the provenance lists them (``gold_unchecked``)."""
    import json

    from sqlalchemy import update

    made = make_study(tmp_path, n_items=3, per_item=1, annotators=2, gold=1, gold_pass=1.0)
    a, b = _annotators(made.study)
    assert _judge(made.study, b, stop_at_gold=True) >= 1
    with made.study.write() as conn:  # b's open gold task goes back (as after its claim timeout)
        conn.execute(update(db.assignments).where(db.assignments.c.submitted_at.is_(None)).values(annotator_id=None))
    assert _judge(made.study, a, fail_gold=True) >= 1
    made.study.engine.dispose()
    out = tmp_path / "r.csv"
    assert main(["studio", "export", str(made.path), "-f", "rankings", "-o", str(out), "--drop-failed-gold"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "annotator-002" in err and "no gold item" in err, err
    prov = json.loads(Path(f"{out}.provenance.json").read_text(encoding="utf-8"))
    assert prov["dropped_annotators"] == ["annotator-001"] and prov["gold_unchecked"] == ["annotator-002"]

    (tmp_path / "plain").mkdir()
    plain = make_study(tmp_path / "plain", n_items=2, per_item=1, annotators=1)
    (only,) = _annotators(plain.study)
    _judge(plain.study, only)
    plain.study.engine.dispose()
    out2 = tmp_path / "p.csv"
    assert main(["studio", "export", str(plain.path), "-f", "pairs", "-o", str(out2), "--drop-failed-gold"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "no gold items" in err and "--gold" in err, err


def test_links_withdrawn_while_they_were_written_are_said_not_to_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An `invite` writing its links into a slow pipe while the owner runs `--withdraw unsent` (after the minute
    it waits) ends with an error saying which printed links do not work, not with exit 0."""
    from vistkit.commands import studio as studio_cmd

    made = make_study(tmp_path, annotators=1)
    made.study.engine.dispose()
    printed = studio_cmd.echo

    def slow(text: str) -> None:
        printed(text)
        st = db.open_study(made.path)
        service.withdraw_annotators(st, ["unsent"], settle_s=0.0)
        st.engine.dispose()

    monkeypatch.setattr(studio_cmd, "echo", slow)
    assert main(["studio", "invite", str(made.path), "--n", "2"]) != 0
    err = " ".join(capsys.readouterr().err.split())
    assert "annotator-002" in err and "do not work" in err, err


# ------------------------------------------------------------------------------ --base-url siblings
@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("https://owner:s3cret@lab.example.org", "user name or password"),
        ("https://owner@lab.example.org", "user name or password"),
        ("http://127.0.0.1:0", "port"),
    ],
)
def test_a_base_url_with_credentials_or_port_0_is_refused_before_links_are_made(
    tmp_path: Path, url: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``--base-url https://owner:s3cret@lab.example.org`` (the proxy's login) was put in front of every
    printed link, so each annotator got the organiser's password; ``http://127.0.0.1:0`` made links to a port no
    server can listen on. After: one sentence before anything is written."""
    from vistkit.errors import InputError
    from vistkit.studio.network import check_base_url

    with pytest.raises(InputError, match=said):
        check_base_url(url)
    made = make_study(tmp_path, annotators=0)
    made.study.engine.dispose()
    assert main(["studio", "invite", str(made.path), "--n", "1", "--base-url", url]) != 0
    out = capsys.readouterr()
    assert "s3cret" not in out.out and "Traceback" not in out.err and said in out.err
    assert _names(made.path) == []


@pytest.mark.parametrize("raw", ['"annotator-001"', '[1, null, "annotator-001"]'])
def test_an_unsent_list_changed_by_hand_names_nobody_it_should_not(
    tmp_path: Path, raw: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The unsent list is a hint: one edited by hand does not make the study "damaged" for every verb."""
    import json

    made = make_study(tmp_path, annotators=1)
    with made.study.write() as conn:
        conn.execute(db.settings.insert().values(key=service.UNSENT, value=raw))
    made.study.engine.dispose()
    assert main(["studio", "status", str(made.path), "-f", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)["unsent_invites"]
    assert listed == (["annotator-001"] if raw.startswith("[") else [])
    assert main(["studio", "invite", str(made.path), "--n", "1"]) == 0


@pytest.mark.parametrize("mode", [["--admin"], ["--withdraw", "unsent"]])
def test_invite_options_that_admin_or_withdraw_do_not_use_are_said_to_be_ignored(
    tmp_path: Path, mode: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `studio invite --admin --n 5 --quota 10` printed one admin link and made no annotator, without a
    word about --n and --quota. After: a warning names the options that were ignored."""
    made = make_study(tmp_path, annotators=1)
    made.study.engine.dispose()
    assert main(["studio", "invite", str(made.path), *mode, "--n", "5", "--quota", "10"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "--n and --quota are ignored" in err, err
    assert _names(made.path) == ["annotator-001"]
