"""Round-13 probes of vistkit studio: work files left by an ``init`` killed with ``kill -9`` are cleaned up by a
later ``init`` or ``serve`` (never a live init's), and hostile requests, odd studies and interruptions.

Every server listens on 127.0.0.1 on a free port and every wait is bounded.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from studio_helpers import count, make_study, plan_items

from vistkit.studio import db, plan

pytest.importorskip("uvicorn", reason="the studio server needs uvicorn (studio extra)")
httpx = pytest.importorskip("httpx", reason="the studio tests need httpx (studio extra)")

needs_ofd = pytest.mark.skipif(
    not plan.work_locks_supported(), reason="work-file locks need Linux open file description locks"
)


# ------------------------------------------------------------------------------ work files of a killed init
def _killed_init(path: str) -> None:
    """An init killed with SIGKILL while it writes the study (the work file and its log are left behind)."""
    real = db.put_settings

    def die(conn: Any, values: dict[str, Any]) -> None:
        real(conn, values)
        os.kill(os.getpid(), signal.SIGKILL)

    db.put_settings = die  # type: ignore[assignment]
    plan.create_study(path, task="rank", items=plan_items(3), per_item=1)


def _kill_an_init(path: Path) -> list[str]:
    proc = multiprocessing.get_context("fork").Process(target=_killed_init, args=(str(path),))
    proc.start()
    proc.join(timeout=60)
    assert proc.exitcode == -signal.SIGKILL
    left = sorted(p.name for p in path.parent.iterdir() if ".init-" in p.name)
    assert left and any(n.endswith(".tmp") for n in left), left
    return left


@needs_ofd
def test_a_later_init_removes_the_work_files_of_an_init_killed_with_kill_9(tmp_path: Path) -> None:
    """Before: `kill -9` during init left ``s.db.init-XXXXXXXX.tmp`` (and its -wal, -shm) beside the study for
    good. After: the next init of that study name removes them (their init is gone) and builds the study."""
    path = tmp_path / "s.db"
    _kill_an_init(path)
    _kill_an_init(path)
    plan.create_study(path, task="rank", items=plan_items(3), per_item=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]
    st = db.open_study(path)
    assert count(st, db.units) == 3
    st.engine.dispose()


@needs_ofd
def test_serve_removes_the_work_files_of_a_killed_init_of_its_study(tmp_path: Path) -> None:
    """`serve s.db` removes what a killed init of s.db left before it listens, and leaves the work file of another
    study in the same folder whose init is still running."""
    from studio_helpers import serve_child

    from vistkit.studio import simulate

    made = make_study(tmp_path, n_items=2, per_item=1, annotators=1)
    made.study.close()
    for name in _kill_an_init(tmp_path / "x.db"):  # what a killed init of rank.db would leave
        os.rename(tmp_path / name, tmp_path / name.replace("x.db", "rank.db"))
    live, hold = plan._work_file(tmp_path / "other.db")  # another study's init, still running
    try:
        proc = serve_child(made.path, _free_port())
        simulate.kill(proc, signal.SIGTERM)  # a clean stop: the study's log is folded into it
        log = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["rank.db", live.name]), log
        assert "killed" in log
    finally:
        os.close(hold)
        live.unlink()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@needs_ofd
def test_the_work_file_of_a_live_init_is_never_removed(tmp_path: Path) -> None:
    """A work file whose init still runs (it holds a lock on it, even in this process through another open file)
    is left alone, old or new, empty or not; once its init is gone it is removed."""
    path = tmp_path / "s.db"
    work, hold = plan._work_file(path)
    try:
        work.write_bytes(b"x" * 4096)
        past = time.time() - 3600
        os.utime(work, (past, past))
        assert plan.remove_leftover_work_files(path) == []
        assert work.exists()
    finally:
        os.close(hold)  # the init is gone now
    assert plan.remove_leftover_work_files(path) == [work]
    assert not work.exists()


@needs_ofd
def test_only_files_named_like_the_studys_work_files_are_removed(tmp_path: Path) -> None:
    """Files that merely look alike (another name, a folder, a symlink, a fresh empty file whose init may be just
    starting) are never touched."""
    path = tmp_path / "s.db"
    keep = [
        tmp_path / "s.db.init-zzzzzzzz.tmp",  # not hex
        tmp_path / "s.db.init-0123456.tmp",  # 7 digits
        tmp_path / "xs.db.init-01234567.tmp",  # another study
        tmp_path / "s.db.init-01234567.tmp.bak",
    ]
    for p in keep:
        p.write_bytes(b"data")
    (tmp_path / "s.db.init-89abcdef.tmp").mkdir()
    target = tmp_path / "precious"
    target.write_bytes(b"data")
    (tmp_path / "s.db.init-0badf00d.tmp").symlink_to(target)
    fresh = tmp_path / "s.db.init-00000001.tmp"
    fresh.touch()  # empty and new: an init between creating its work file and locking it
    assert plan.remove_leftover_work_files(path) == []
    assert all(p.exists() for p in keep) and target.read_bytes() == b"data" and fresh.exists()
    past = time.time() - 3600
    os.utime(fresh, (past, past))
    assert plan.remove_leftover_work_files(path) == [fresh]


# ------------------------------------------------------------------------------ the demo folder, reused
def test_a_reused_demo_names_and_serves_its_own_study_whatever_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: links.json kept the study's path as given when the demo was built (``demo/study.db``, relative), and a
    later `studio demo --dir /abs/demo` from another folder served that relative path: "no study file
    demo/study.db", or another folder's study under this demo's links. After: the study is the one in --dir."""
    from vistkit.studio.demo import build_demo

    monkeypatch.chdir(tmp_path)
    build_demo("demo", annotators=1, items=2)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    info = build_demo(tmp_path / "demo", annotators=1, items=2)
    assert info["reused"] and Path(info["study"]) == tmp_path / "demo" / "study.db"


@pytest.mark.parametrize(
    "content",
    [b"", b"{}", b"[1, 2]", b"\xff\xfe", b'{"paths": [["a"]], "admin_path": 3}', b'{"study": "x"'],
    ids=["empty", "no keys", "a list", "not UTF-8", "mistyped", "cut short"],
)
def test_a_damaged_links_file_of_a_demo_is_one_sentence(tmp_path: Path, content: bytes) -> None:
    """Before: a demo folder whose links.json was emptied, cut short or edited crashed `studio demo` with "unexpected
    KeyError: 'paths' - this is a bug in vistkit". After: one sentence that says to remove the folder."""
    from vistkit.errors import InputError
    from vistkit.studio.demo import build_demo

    build_demo(tmp_path / "demo", annotators=1, items=2)
    (tmp_path / "demo" / "links.json").write_bytes(content)
    with pytest.raises(InputError, match=r"links\.json .*remove the folder"):
        build_demo(tmp_path / "demo", annotators=1, items=2)


# ------------------------------------------------------------------------------ exports
@pytest.mark.parametrize(
    ("task", "fmt", "offered"),
    [
        ("pairwise", "rankings", "pairs, jsonl or tasks"),
        ("likert", "rankings", "likert, jsonl or tasks"),
        ("likert", "pairs", "likert, jsonl or tasks"),
        ("rank", "likert", "rankings, pairs, jsonl or tasks"),
        ("pairwise", "likert", "pairs, jsonl or tasks"),
    ],
)
def test_an_export_format_the_study_lacks_names_the_formats_it_has(
    tmp_path: Path, task: str, fmt: str, offered: str
) -> None:
    """Before: a pairwise study asked for --format rankings was told "use pairs, likert or jsonl" (likert is refused
    for it too), a Likert study "use pairs, likert or jsonl" (pairs refused), a pairwise one asked for likert
    "use rankings, pairs, ..." (rankings refused). After: the formats this study has."""
    from vistkit.errors import InputError
    from vistkit.studio import analysis

    made = make_study(tmp_path, task=task, n_items=2, per_item=1, annotators=1)
    with pytest.raises(InputError) as caught:
        analysis.export(made.study, tmp_path / "out.csv", fmt=fmt)
    assert str(caught.value).endswith(f"this {task} study has {offered}"), str(caught.value)
    made.study.engine.dispose()


@needs_ofd
def test_a_second_name_of_the_study_left_by_an_init_killed_while_publishing_is_removed(tmp_path: Path) -> None:
    """An init killed between giving the study its name (a hard link) and removing its work name leaves a second
    name of the finished study: a later init of that name (refused: the study exists) removes that name only."""
    from vistkit.errors import InputError

    made = make_study(tmp_path, n_items=2, per_item=1, annotators=1)
    made.study.close()
    os.link(made.path, tmp_path / "rank.db.init-0123abcd.tmp")
    with pytest.raises(InputError, match="exists already"):
        plan.create_study(made.path, task="rank", items=plan_items(2), per_item=1)
    assert sorted(p.name for p in tmp_path.iterdir() if ".init-" in p.name) == []
    assert made.path.stat().st_nlink == 1 and count(db.open_study(made.path), db.units) == 2


# ------------------------------------------------------------------------------ init on a full disk
def _init_under_limit(path: str, limit: int, out: Any) -> None:
    import resource

    from vistkit.cli import main

    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    args = ["studio", "init", path, "--task", "rank", "-s", f"human={_DEMO}/human_stories.json"]
    try:
        out.put(main([*args, "-s", f"llava={_DEMO}/llava_stories.json", "--per-item", "50"]))
    except SystemExit as exc:
        out.put(exc.code)


_DEMO = Path(__file__).resolve().parents[1] / "src" / "vistkit" / "resources" / "demo"


@pytest.mark.parametrize("limit", [20_000, 60_000, 200_000])
def test_an_init_that_runs_out_of_room_names_the_study_not_its_work_file(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], limit: int
) -> None:
    """Before: an init on a full disk (a file-size limit here) said "cannot write study s.db.init-fa706523.tmp:
    disk I/O error", a file the user never named (and that is gone). After: the sentence names s.db; nothing is
    left behind."""
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    proc = ctx.Process(target=_init_under_limit, args=(str(tmp_path / "s.db"), limit, out))
    proc.start()
    code = out.get(timeout=120)
    proc.join(timeout=60)
    err = capfd.readouterr().err
    assert code != 0 and f"cannot write study {tmp_path / 's.db'}:" in err and ".init-" not in err, err
    assert list(tmp_path.iterdir()) == []
