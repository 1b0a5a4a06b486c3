"""Round-14 probes of vistkit studio (server side): odd options of the verbs that print links, a reused demo.

Every server listens on 127.0.0.1 on a free port and every wait is bounded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from studio_helpers import Made, make_study

from vistkit.cli import main
from vistkit.errors import InputError
from vistkit.studio import service


# ------------------------------------------------------------------------------ --base-url with a path
@pytest.mark.parametrize(
    "url", ["https://lab.example.org/studio", "http://127.0.0.1:8000/vist/", "https://lab.example.org/a/b/"]
)
def test_a_base_url_with_a_path_is_refused_before_links_are_made(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``--base-url https://lab.example.org/studio`` (the studio behind a proxy under a sub-path) was taken,
    and the links printed once named /studio/a/TOKEN, while every page the server writes points to /static/...,
    /a/TOKEN/submit and /a/TOKEN?saved=1 at the root of the host: behind such a proxy the pages had no style or
    script, no photos, and a submission went to an address the proxy does not pass on (the answer was lost).
    After: one sentence before anything is written (no annotator is created)."""
    from vistkit.studio import db
    from vistkit.studio.network import check_base_url

    with pytest.raises(InputError, match=r"--base-url .* path .*root"):
        check_base_url(url)
    made = make_study(tmp_path, annotators=0)
    made.study.engine.dispose()
    assert main(["studio", "invite", str(made.path), "--n", "2", "--base-url", url]) != 0
    err = capsys.readouterr().err
    assert "--base-url" in err and "Traceback" not in err
    st = db.open_study(made.path)
    from studio_helpers import count

    assert count(st, db.annotators) == 0  # nothing was written: the links would not have worked
    st.engine.dispose()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://lab.example.org/", "https://lab.example.org"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("https://lab.example.org//", "https://lab.example.org"),
    ],
)
def test_a_base_url_at_the_root_of_its_host_is_taken(url: str, expected: str) -> None:
    from vistkit.studio.network import check_base_url

    assert check_base_url(url) == expected


# ------------------------------------------------------------------------------ the demo folder, reused
def test_a_reused_demo_says_which_options_it_ignores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `studio demo --dir d --task likert --items 20 --annotators 9` on a folder holding a rank demo of 3
    items and 3 links served the rank demo without a word (the options were silently ignored). After: one warning
    names the options ignored and what the reused demo is, and how to get a new one."""
    folder = tmp_path / "demo"
    assert main(["studio", "demo", "--dir", str(folder), "--no-serve", "--items", "3", "--annotators", "2"]) == 0
    capsys.readouterr()
    args = ["studio", "demo", "--dir", str(folder), "--no-serve", "--task", "likert", "--items", "20"]
    assert main([*args, "--annotators", "9", "--per-item", "2"]) == 0
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert "--task likert" in err and "--items 20" in err and "--annotators 9" in err, err
    assert "--per-item 2" in err and "rank" in err and "rm -r" in err, err
    assert captured.out.count("/a/") == 2  # the demo as it was built


def test_a_reused_demo_asked_as_it_was_built_or_with_defaults_says_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Options left at their defaults, or equal to the demo's own, are not "ignored"."""
    folder = tmp_path / "demo"
    assert main(["studio", "demo", "--dir", str(folder), "--no-serve", "--items", "3", "--task", "pairwise"]) == 0
    capsys.readouterr()
    assert main(["studio", "demo", "--dir", str(folder), "--no-serve"]) == 0
    assert "ignored" not in capsys.readouterr().err
    assert main(["studio", "demo", "--dir", str(folder), "--no-serve", "--task", "pairwise", "--items", "3"]) == 0
    assert "ignored" not in capsys.readouterr().err


def test_build_demo_warns_for_what_its_caller_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The Python API: a reused demo asked with other arguments is a warning naming them (None: not asked)."""
    from vistkit.studio.demo import build_demo

    build_demo(tmp_path / "demo", items=2, annotators=1)
    capsys.readouterr()
    info = build_demo(tmp_path / "demo", items=4, annotators=1)
    err = " ".join(capsys.readouterr().err.split())
    assert info["reused"] and info["items"] == 2
    assert "--items 4" in err and "--annotators" not in err, err


# ------------------------------------------------------------------------------ photos the study cannot show
def _png(path: Path) -> None:
    from vistkit.studio.demo import _png as png

    path.write_bytes(png(4, 3, (10, 20, 30)))


@pytest.mark.parametrize("have", [0, 7])
def test_init_says_when_the_photo_folder_lacks_the_studys_photos(
    tmp_path: Path, have: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``init --photos images/`` whose photos are in subfolders (VIST's images/test/...), or named by
    other ids, made a study without a word, and every task showed "Photo 1 (not available)". After: one warning
    names how many of the study's photos have no file in the folder, the first one missing and the names
    looked for."""
    from studio_helpers import plan_items

    from vistkit.studio.plan import create_study

    folder = tmp_path / "images"
    (folder / "test").mkdir(parents=True)
    items = plan_items(3)
    ids = [p for it in items for p in it.photo_ids]
    for pid in ids:
        _png(folder / "test" / f"{pid}.jpg")  # one folder too deep
    for pid in ids[:have]:
        _png(folder / f"{pid}.png")
    create_study(tmp_path / "s.db", task="rank", items=items, per_item=1, photos_dir=folder)
    err = " ".join(capsys.readouterr().err.split())
    missing = len(ids) - have
    assert f"{missing} of the study's {len(ids)} photos" in err, err
    assert str(folder) in err and repr(ids[have]) in err and ".jpg" in err, err


def test_init_with_every_photo_in_its_folder_says_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from studio_helpers import plan_items

    from vistkit.studio.plan import create_study

    folder = tmp_path / "images"
    folder.mkdir()
    items = plan_items(2)
    for pid in (p for it in items for p in it.photo_ids):
        _png(folder / f"{pid}.JPG")
    create_study(tmp_path / "s.db", task="rank", items=items, per_item=1, photos_dir=folder)
    assert "photo" not in capsys.readouterr().err


def test_serve_says_when_the_photo_folder_of_the_study_is_gone(tmp_path: Path) -> None:
    """Before: a study copied to another machine (or whose photo folder was moved) was served with every photo
    "not available" and nothing in the server's log: init stores the folder's absolute path. After: the server
    says so once when it starts, naming the folder."""
    import signal

    from studio_helpers import plan_items

    from vistkit.studio import simulate
    from vistkit.studio.plan import create_study

    folder = tmp_path / "images"
    folder.mkdir()
    items = plan_items(2)
    for pid in (p for it in items for p in it.photo_ids):
        _png(folder / f"{pid}.jpg")
    create_study(tmp_path / "s.db", task="rank", items=items, per_item=1, photos_dir=folder)
    folder.rename(tmp_path / "moved")
    port = simulate.free_port()
    proc = simulate.start_server(tmp_path / "s.db", port)
    try:
        simulate.kill(proc, signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    err = " ".join((proc.stderr.read() if proc.stderr else b"").decode().split())
    assert f"photo folder {folder}" in err and "not available" in err, err


def test_init_with_photos_for_stories_without_photo_ids_says_no_photo_is_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``--photos DIR`` with story files that carry no photo ids (a plain ``{id: story}`` JSON, the dHM
    files) made a study whose pages show no photo at all, without a word (the warning about a study without
    photos is only for a study without --photos and --photo-url). After: one warning."""
    from studio_helpers import plan_items

    from vistkit.studio.plan import create_study

    folder = tmp_path / "images"
    folder.mkdir()
    _png(folder / "p00.jpg")
    create_study(tmp_path / "s.db", task="rank", items=plan_items(2, photos=False), per_item=1, photos_dir=folder)
    err = " ".join(capsys.readouterr().err.split())
    assert "no photo ids" in err and "--photos" in err, err


# ------------------------------------------------------------------------------ many stories in one task
def test_stories_past_the_26th_get_labels_of_their_own(tmp_path: Path) -> None:
    """Before: a rank study of 28 systems labelled its stories A..Z and then A and B again ("Move story A up" for
    two stories; the same label twice on one page). After: AA, AB, ... as spreadsheet columns."""
    from studio_helpers import HUMAN

    from vistkit.studio import db, service
    from vistkit.studio.plan import PlanItem, PlanStory, create_study

    stories = [PlanStory(f"sys{n}", "s0", f"{HUMAN[0]} {n}") for n in range(28)]
    create_study(tmp_path / "s.db", task="rank", items=[PlanItem("s0", (), stories)], per_item=1)
    st = db.open_study(tmp_path / "s.db")
    ((_, token),) = service.invite(st, n=1)
    with st.read() as conn:
        who = service.authenticate(conn, token)
    assert who is not None
    task = service.load_task(st, who, service.claim_next(st, who) or 0)
    labels = [s["label"] for s in task.stories]
    assert labels[:3] == ["A", "B", "C"] and labels[25:] == ["Z", "AA", "AB"]
    assert len(set(labels)) == 28
    st.engine.dispose()


# ------------------------------------------------------------------------------ claims past --claim-timeout
def _who(made: Made, n: int) -> service.Annotator:
    with made.study.read() as conn:
        who = service.authenticate(conn, made.tokens[n])
    assert who is not None
    return who


def test_a_task_open_past_the_claim_timeout_stays_its_annotators_while_free_tasks_remain(tmp_path: Path) -> None:
    """Before: claims were handed out by slot, stale ones among them, so the next annotator to open a page was
    given a task someone had open for longer than --claim-timeout (a lunch break; `--claim-timeout 1` meant as an
    hour) even while untouched tasks remained, and the first annotator's answer was then refused ("no longer
    assigned to you"). After: a stale claim is given to someone else only when no free task is left."""
    import time

    from vistkit.studio import db

    made = make_study(tmp_path, n_items=3, per_item=2, annotators=2, claim_timeout=0.2)
    a, b = _who(made, 0), _who(made, 1)
    aid = service.claim_next(made.study, a)
    assert aid is not None
    time.sleep(0.3)
    bid = service.claim_next(made.study, b)
    assert bid is not None and bid != aid
    task = service.load_task(made.study, a, aid)
    form = {
        "assignment": str(aid),
        "csrf": db.csrf_token(made.study.secret(), a.id, aid),
        "ranking": ",".join(str(n) for n in range(1, len(task.stories) + 1)),
    }
    assert service.submit(made.study, a, form) == {"saved": True, "duplicate": False}


def test_a_stale_claim_is_still_given_when_no_free_task_is_left(tmp_path: Path) -> None:
    import time

    made = make_study(tmp_path, n_items=1, per_item=1, annotators=2, claim_timeout=0.2)
    a, b = _who(made, 0), _who(made, 1)
    aid = service.claim_next(made.study, a)
    assert aid is not None and service.claim_next(made.study, b) is None
    time.sleep(0.3)
    assert service.claim_next(made.study, b) == aid


@pytest.mark.parametrize(("seconds", "warned"), [("1", True), ("30", True), ("60", False), ("3600", False)])
def test_a_claim_timeout_under_a_minute_is_a_warning(
    tmp_path: Path, seconds: str, warned: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--claim-timeout 1` (meant as an hour; it is one second) made every open task someone else's a second
    later once the free ones ran out, and the first annotator's answer was refused. Now init says it is seconds."""
    demo = Path(__file__).resolve().parents[1] / "src" / "vistkit" / "resources" / "demo"
    stories = ["-s", f"human={demo}/human_stories.json", "-s", f"llava={demo}/llava_stories.json"]
    args = ["studio", "init", str(tmp_path / "s.db"), "--task", "rank", *stories, "--max-items", "2"]
    assert main([*args, "--claim-timeout", seconds]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert (f"--claim-timeout {seconds} is in seconds" in err) == warned, err


# ------------------------------------------------------------------------------ invite links that were never shown
def test_invite_links_that_cannot_be_written_are_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `studio invite s.db --n 3 > /dev/full` (a full disk, a closed pipe) said "cannot write the output"
    after the three annotators were stored: their links were shown to nobody (only hashes are kept), yet `status`
    listed them and their names were used up. After: the annotators whose links could not be written are removed
    again, and the error is the same."""
    import errno

    from studio_helpers import count

    from vistkit.commands import studio as studio_cmd
    from vistkit.studio import db

    made = make_study(tmp_path, annotators=1)
    made.study.engine.dispose()

    def full(text: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(studio_cmd, "echo", full)
    assert main(["studio", "invite", str(made.path), "--n", "3"]) != 0
    monkeypatch.undo()
    st = db.open_study(made.path)
    assert count(st, db.annotators) == 1
    st.engine.dispose()
    assert main(["studio", "invite", str(made.path), "--n", "1"]) == 0  # the next name is the next number
    st = db.open_study(made.path)
    with st.read() as conn:
        names = [r[0] for r in conn.execute(db.annotators.select().with_only_columns(db.annotators.c.name))]
    st.engine.dispose()
    assert names == ["annotator-001", "annotator-002"]
