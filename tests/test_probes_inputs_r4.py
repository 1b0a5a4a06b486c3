"""Bad-input probes, round 4: paths that are not regular files, and degenerate large files.

Classes: a FIFO with no writer (`vistkit validate FIFO` waited forever), devices (``/dev/zero`` was read up to the
input limit, ``/dev/null`` read as an empty file), sockets, folders given as files and files given as folders,
links to nothing and link loops, unreadable files; every reader opens through one helper (`open_input`) that
refuses them in one sentence before reading. Data piped in (``-``, ``/dev/stdin``, ``/dev/fd/N``) still reads.
Degenerate files at the size limit (blank lines, spaces, one endless line, ``[[[[``, ``[0,0,...``) are refused
in seconds: 256 MiB of blank lines took 76 s.

Every test here is bounded: a FIFO gets a writer after a few seconds (so a reader that waits on it ends), and the
command-line checks run in a subprocess with a timeout.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import vistkit
from vistkit.data.images import ImageStore, load_photo_map, read_regions
from vistkit.data.readers import load_json, open_input, read_csv, read_stories, read_template
from vistkit.data.validate import validate_submission
from vistkit.errors import InputError
from vistkit.meta.human import read_likert, read_pairs, read_rankings
from vistkit.scores.distance import read_per_item_scores

READERS: dict[str, Callable[[Any], Any]] = {
    "stories": read_stories,
    "validate": validate_submission,
    "json": load_json,
    "csv": read_csv,
    "template": read_template,
    "regions": read_regions,
    "photo map": load_photo_map,
    "pairs": read_pairs,
    "rankings": read_rankings,
    "likert": read_likert,
    "scores": read_per_item_scores,
}
JSONL = "".join(json.dumps({"story_id": str(i), "text": f"story {i} ."}) + "\n" for i in range(3))


def one_sentence(message: str, path: str | Path) -> None:
    assert "\n" not in message and str(path) in message, message


def refused(read: Callable[[Any], Any], path: str | Path) -> str:
    with pytest.raises(InputError) as info:
        read(path)
    message = str(info.value)
    one_sentence(message, path)
    return message


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO with no writer; after 5 s one opens and closes it, so that a reader that waits on it ends."""
    p = tmp_path / "stories.json"
    os.mkfifo(p)
    done = threading.Event()

    def rescue() -> None:
        if not done.wait(5):
            try:  # a reader waiting in open() or read() gets end of file once this writer closes
                os.close(os.open(p, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # ENXIO: no reader
                pass

    thread = threading.Thread(target=rescue, daemon=True)
    thread.start()
    yield p
    done.set()
    thread.join()


def run_cli(*args: str | Path, stdin: bytes | None = None, env: dict[str, str] | None = None) -> tuple[int, str]:
    """``vistkit ARGS`` in a subprocess (20 s at most): its exit code and standard error."""
    environ = {**os.environ, "PYTHONPATH": str(Path(vistkit.__file__).resolve().parents[1]), **(env or {})}
    environ.pop("VISTKIT_DEBUG", None)
    run = subprocess.run(
        [sys.executable, "-m", "vistkit", *map(str, args)],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        env=environ,
        timeout=20,
    )
    return run.returncode, run.stderr.decode("utf-8", "replace")


# ------------------------------------------------------------------------------------------------ FIFOs
@pytest.mark.parametrize("name", list(READERS))
def test_every_reader_refuses_a_fifo_without_waiting(fifo: Path, name: str) -> None:
    start = time.monotonic()
    message = refused(READERS[name], fifo)
    assert "named pipe (FIFO)" in message and time.monotonic() - start < 4


def test_the_command_line_refuses_a_fifo_without_waiting(fifo: Path) -> None:
    """`vistkit validate FIFO` and `vistkit score FIFO -r FIFO` blocked forever (rc 124 under `timeout`)."""
    for args in (("validate", fifo), ("score", fifo, "-m", "bleu-4", "-r", fifo)):
        code, err = run_cli(*args)
        assert code == 1 and err.startswith("error: ") and "named pipe (FIFO)" in err, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_study_that_is_a_fifo_or_a_folder_is_refused(fifo: Path, tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    from vistkit.studio.db import open_study

    for path, what in ((fifo, "named pipe"), (tmp_path, "is a folder")):
        with pytest.raises(InputError, match=what) as info:
            open_study(path)
        one_sentence(str(info.value), path)


def test_a_path_swapped_for_a_fifo_after_its_check_is_refused(fifo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check is made again on what was opened (``fstat``): a FIFO that the first look saw as a file is
    still refused, and opening it did not wait."""
    real_stat = os.stat
    regular = os.stat_result((stat.S_IFREG | 0o644, 0, 0, 1, 0, 0, 10, 0, 0, 0))
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: regular if Path(p) == fifo else real_stat(p, *a, **k))
    with pytest.raises(InputError, match="named pipe"):
        open_input(fifo)


# ------------------------------------------------------------------------------------------------ devices, sockets
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
@pytest.mark.parametrize("name", list(READERS))
def test_every_reader_refuses_a_device_before_reading_it(device: str, name: str) -> None:
    """/dev/zero was read up to the input limit (256 MiB) and /dev/null read as an empty file."""
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    assert "character device" in refused(READERS[name], device)


def test_a_socket_is_refused() -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:  # a socket's path must be short
        path = Path(folder) / "s.json"
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(path))
            for read in (read_stories, validate_submission, read_csv):
                assert "a socket" in refused(read, path)


# ------------------------------------------------------------------------------------------------ folders, links
def test_a_folder_where_a_file_is_expected_and_a_file_where_a_folder_is(tmp_path: Path) -> None:
    for read in READERS.values():
        assert "is a folder" in refused(read, tmp_path)
    stories = tmp_path / "s.jsonl"
    stories.write_text(JSONL)
    with pytest.raises(InputError, match="is a file, not a photo folder") as info:
        ImageStore(stories)
    one_sentence(str(info.value), stories)
    with pytest.raises(InputError, match="no such photo folder"):
        ImageStore(tmp_path / "nope")


def test_links_to_nothing_and_link_loops_are_named(tmp_path: Path) -> None:
    dangling = tmp_path / "d.json"
    dangling.symlink_to(tmp_path / "gone.json")
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    for read in READERS.values():
        assert "which does not exist" in refused(read, dangling)
        assert "symbolic link loop" in refused(read, loop)
    with pytest.raises(InputError, match="symbolic link loop"):
        ImageStore(loop)


def test_a_link_to_a_device_is_refused_as_the_device(tmp_path: Path) -> None:
    link = tmp_path / "stories.json"
    link.symlink_to("/dev/zero")
    assert "character device" in refused(read_stories, link)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="permissions do not apply to root")
def test_an_unreadable_file_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text(JSONL)
    p.chmod(0)
    for read in (read_stories, validate_submission, read_csv):
        assert "permission denied" in refused(read, p)


# ------------------------------------------------------------------------------------------------ piped data
def _pipe_of(data: bytes) -> str:
    read_end, write_end = os.pipe()

    def write() -> None:
        try:
            with os.fdopen(write_end, "wb") as fh:
                fh.write(data)
        except BrokenPipeError:
            pass

    threading.Thread(target=write, daemon=True).start()
    return f"/dev/fd/{read_end}"


def test_data_piped_in_through_dev_fd_still_reads_and_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    """``<(zcat x.gz)`` gives /dev/fd/63, an unnamed pipe: read (capped at the input limit), not refused."""
    assert [s.story_id for s in read_stories(_pipe_of(JSONL.encode()), format="jsonl")] == ["0", "1", "2"]
    monkeypatch.setenv("VISTKIT_MAX_INPUT_MB", "1")
    with pytest.raises(InputError, match="holds more than 1 MiB"):
        read_stories(_pipe_of(b'{"1": "' + b"a" * (2 << 20) + b'"}'))
    with pytest.raises(InputError, match="holds more than 1 MiB"):  # `vistkit validate` reads on its own
        validate_submission(_pipe_of(b'{"output_stories": []}' + b" " * (2 << 20)))


@pytest.mark.parametrize("path", ["-", "/dev/stdin", "/proc/self/fd/0"])
def test_stdin_reads_as_dash_or_as_a_path(tmp_path: Path, path: str) -> None:
    if path != "-" and not os.path.exists(path):
        pytest.skip(f"no {path}")
    refs = tmp_path / "r.jsonl"
    refs.write_text(JSONL)
    code, err = run_cli("score", path, "-m", "bleu-4", "-r", refs, "-f", "json", stdin=JSONL.encode())
    assert code == 0, err


def test_dev_stdin_redirected_from_a_file_reads_in_the_format_of_its_content(tmp_path: Path) -> None:
    """``vistkit score /dev/stdin < s.jsonl``: the name has no suffix, so the format comes from the content."""
    stories = tmp_path / "s.jsonl"
    stories.write_text(JSONL)
    environ = {**os.environ, "PYTHONPATH": str(Path(vistkit.__file__).resolve().parents[1])}
    with open(stories, "rb") as fh:
        run = subprocess.run(
            [sys.executable, "-m", "vistkit", "score", "/dev/stdin", "-m", "bleu-4", "-r", str(stories)],
            stdin=fh,
            capture_output=True,
            env=environ,
            timeout=20,
        )
    assert run.returncode == 0, run.stderr


def test_stdin_as_a_path_is_capped_like_dash(tmp_path: Path) -> None:
    code, err = run_cli("validate", "/dev/stdin", stdin=b" " * (2 << 20), env={"VISTKIT_MAX_INPUT_MB": "1"})
    assert code == 1 and "holds more than 1 MiB" in err and "Traceback" not in err, err


# ------------------------------------------------------------------------------------------------ large files
def _fill(p: Path, size: int, unit: bytes, head: bytes = b"", tail: bytes = b"") -> Path:
    block = unit * ((1 << 20) // len(unit))
    with open(p, "wb") as fh:
        fh.write(head)
        left = size - len(head) - len(tail)
        while left > 0:
            fh.write(block[:left])
            left -= len(block)
        fh.write(tail)
    return p


@pytest.mark.parametrize(
    ("name", "unit", "head", "tail", "why"),
    [
        ("blank.jsonl", b"\n", b"", b"", "blank lines in a row"),
        ("crlf.jsonl", b"\r\n", b"", b"", "blank lines in a row"),
        ("blank.csv", b"\n", b"story_id,text\n", b"", "blank lines in a row"),
        ("spaces.csv", b" \n", b"story_id,text\n", b"", "blank lines in a row"),
        ("blank.json", b"\n", b"", b"", "only blank lines or spaces"),
        ("spaces.json", b" ", b"", b"", "only blank lines or spaces"),
        ("late.json", b" ", b"", b'{"1": "a"}', "starts with more than 4 MiB of blank lines"),
        ("line.jsonl", b"a", b"", b"", "longer than"),
        ("line.csv", b"a", b"story_id,text\n1,", b"\n", "longer than"),
        ("field.csv", b"a", b'story_id,text\n1,"', b'"\n', "longer than"),
        ("nested.json", b"[", b"", b"", "more than 1,000,000 JSON values"),
        ("zeros.json", b"0,", b"[", b"0]", "more than 1,000,000 JSON values"),
    ],
)
def test_a_degenerate_file_at_the_size_limit_is_refused_in_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, unit: bytes, head: bytes, tail: bytes, why: str
) -> None:
    """16 MiB at a 16 MiB limit (as 256 MiB at the default one): each refused in one sentence, in seconds."""
    monkeypatch.setenv("VISTKIT_MAX_INPUT_MB", "16")
    monkeypatch.setenv("VISTKIT_MAX_JSON_VALUES", "1000000")
    p = _fill(tmp_path / name, 16 << 20, unit, head, tail)
    start = time.monotonic()
    for read in (read_stories, validate_submission) if name.endswith(".json") else (read_stories,):
        assert why in refused(read, p)
    assert time.monotonic() - start < 5


def test_a_few_blank_lines_and_a_long_story_still_read(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text("\n\n" + JSONL.replace("\n", "\n\n\n") + json.dumps({"story_id": "x", "text": "a " * 50_000}) + "\n")
    assert len(read_stories(p)) == 4
    c = tmp_path / "s.csv"
    c.write_text("story_id,text\n\n\n1,a\n\n2,b\n")
    assert len(read_stories(c)) == 2
    j = tmp_path / "s.json"
    j.write_text("\n" * 1000 + json.dumps({"1": "a", "2": "b"}) + "\n" * 1000)
    assert len(read_stories(j)) == 2


def test_a_json_file_that_cannot_be_json_is_read_no_further(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """256 MiB of letters named .json was read whole (840 MB) to fail at line 1, column 1: the first character
    decides, so the reading stops after one block, with the same message."""
    monkeypatch.setenv("VISTKIT_MAX_INPUT_MB", "64")
    p = _fill(tmp_path / "letters.json", 64 << 20, b"a")
    start = time.monotonic()
    assert "invalid JSON at line 1, column 1" in refused(read_stories, p)
    report = validate_submission(p)
    assert [f.check for f in report.findings] == ["json-syntax"] and "line 1, column 1" in report.findings[0].detail
    assert time.monotonic() - start < 2
    q = tmp_path / "bom.json"
    q.write_bytes(b"\xef\xbb\xbf" + json.dumps({"1": "a"}).encode())
    assert len(read_stories(q)) == 1 and validate_submission(q).findings


def test_a_dhm_score_file_that_is_a_fifo_is_named_not_called_missing(fifo: Path, tmp_path: Path) -> None:
    """`read_dhm_scores` reported a FIFO at <prefix>_G.json as missing (it filtered with is_file)."""
    from vistkit.scores.distance import read_dhm_scores

    prefix = tmp_path / "run"
    os.symlink(fifo, f"{prefix}_G.json")
    for dim in "CR":
        Path(f"{prefix}_{dim}.csv").write_text("story_id,score\n1,0.5\n", encoding="utf-8")
    message = refused(read_dhm_scores, prefix)
    assert "named pipe (FIFO)" in message and "missing" not in message


def test_a_clip_model_path_that_is_a_fifo_is_named_as_such(fifo: Path) -> None:
    pytest.importorskip("transformers")
    from vistkit.metrics.clipscore import load_clip

    assert "named pipe (FIFO)" in refused(lambda p: load_clip(p), fifo)  # by resolve_model, before any loader


def test_a_model_path_that_is_a_device_or_fifo_is_refused_before_any_loader(fifo: Path) -> None:
    """`-O bertscore.model=/dev/zero` reached Hugging Face's "Repo id must be in the form ..." message."""
    from vistkit.models import resolve_model

    assert "character device" in refused(resolve_model, "/dev/zero")
    assert "named pipe (FIFO)" in refused(resolve_model, fifo)


def test_bertscore_on_a_folder_that_is_not_a_model_says_so(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from vistkit.metrics.bertscore import BertScore

    (tmp_path / "notes.txt").write_text("not a model", encoding="utf-8")
    message = refused(lambda p: BertScore(model=str(p)), tmp_path)
    assert "has no config.json, so it is not a Hugging Face model folder" in message
