"""Probe round 8: the machine and process ENVIRONMENT differs from the developer's.

- the JVM's locale: Meteor lower-cases with ``String.toLowerCase()`` and prints its statistics with
  ``String.format`` in the JVM's default locale, which the user's ``LC_ALL`` / ``LANG``, ``JAVA_TOOL_OPTIONS``,
  ``_JAVA_OPTIONS`` (which wins over the command line) or ``JDK_JAVA_OPTIONS`` set: a Turkish locale changed
  meteor-vist (0.21806 -> 0.21556 on three stories with "I"; ``LC_ALL=tr_TR.UTF-8`` as well) and both a Turkish
  and a German one (decimal comma) stopped meteor-coco and meteor-album ("the METEOR Java helper stopped
  unexpectedly": the helper re-parses Meteor's formatted statistics). Every Java process vistkit starts now pins
  en-US and UTF-8 on its command line and drops those options from the variables, so the numbers equal the
  default locale's exactly;
- standard streams that cannot encode story text (``PYTHONIOENCODING=ascii`` / ``latin-1``, ``LC_ALL=C`` without
  Python's UTF-8 mode): ``--per-item -`` stopped with "unexpected UnicodeEncodeError" after the header;
- the cache folder: ``HOME`` nonexistent or not writable (system users, containers), ``HOME`` unset for a uid
  without a passwd entry, ``XDG_CACHE_HOME`` a file: METEOR and the language models refused to run ("cannot use
  /nonexistent: permission denied"); now a private folder of the temporary folder is used with one warning, and
  a ``VISTKIT_CACHE`` that cannot be used is one sentence naming it;
- the current folder deleted under the process: the JVM "did not start" (blamed on memory), torch died with an
  Intel oneMKL FATAL ERROR, a relative --per-item was an "unexpected FileNotFoundError"; now one sentence, and
  the library's Java calls run in ``/`` when the current folder is gone.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import message_lines, shared_file
from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError

HAS_JAVA = shutil.which("java") is not None
needs_java = pytest.mark.skipif(not HAS_JAVA, reason="needs Java 8+")
VISTKIT = [sys.executable, "-m", "vistkit"]

#: stories where a Turkish JVM lower-cases differently ("I" -> dotless "ı") and numbers print with a comma
CAPS = [
    ("I went to the PARK with José. It was IMPORTANT and naïve 😀. 東京 is BIG.",
     "i went to the park with josé . it was important and naive . tokyo is big ."),
    ("The city lights were BRIGHT. I liked it, INDEED. Price was 3,5 EUR.",
     "the city lights were bright . i liked it indeed . the price was 3.5 euros ."),
    ("İstanbul İS İN TURKEY. DIŞ IŞIK.", "istanbul is in turkey . dis isik ."),
]  # fmt: skip


def _java_locale_envs() -> list[dict[str, str]]:
    return [
        {"JAVA_TOOL_OPTIONS": "-Duser.language=tr -Duser.country=TR"},
        {"_JAVA_OPTIONS": "-Duser.language=de -Duser.country=DE -Duser.language.format=de -Dfile.encoding=ISO-8859-1"},
    ]


@pytest.fixture(scope="module")
def story_sets() -> tuple[StorySet, StorySet]:
    """The first 12 stories of TAPM's XE with TAPM's AREL stories of the same photo sequences as references (real
    outputs, small files), and `CAPS` (three more albums)."""
    from vistkit.data.readers import read_stories

    xe = list(read_stories(shared_file("tapm-vist-outputs", "vist", "XE.json")))[:12]
    by_seq = {tuple(s.photo_ids): f"x{i}" for i, s in enumerate(xe)}
    arel_all = read_stories(shared_file("tapm-vist-outputs", "vist", "AREL.json"))
    arel = [r for r in arel_all if tuple(r.photo_ids) in by_seq]
    assert len(arel) >= 12
    hyps = [Story(s.story_id, s.text, photo_ids=s.photo_ids, album_id=f"x{i}", system="xe") for i, s in enumerate(xe)]
    refs = [Story(f"ref-{r.story_id}", r.text, photo_ids=r.photo_ids, album_id=by_seq[tuple(r.photo_ids)],
                  system="human") for r in arel]  # fmt: skip
    for i, (h, r) in enumerate(CAPS):
        hyps.append(Story(f"caps{i}", h, photo_ids=(f"c{i}",), album_id=f"c{i}", system="xe"))
        refs.append(Story(f"capsref{i}", r, photo_ids=(f"c{i}",), album_id=f"c{i}", system="human"))
    return StorySet(hyps), StorySet(refs)


def _meteor_numbers(hyps: StorySet, refs: StorySet) -> dict[str, tuple[float, list[float]]]:
    from vistkit.metrics.base import get_metric

    out = {}
    for name, key in (("meteor-vist", "sequence"), ("meteor-coco", "sequence"), ("meteor-album", "album")):
        s = get_metric(name).score(hyps, refs, key=key)
        out[name] = (s.corpus, [float(x) for x in s.item_scores])
    return out


@pytest.fixture
def fresh_jvm() -> Iterator[None]:
    """A METEOR JVM started under the test's environment, and a fresh one again after it."""
    from vistkit.models import java

    java.shutdown()
    yield
    java.shutdown()


@pytest.fixture(scope="module")
def default_numbers(story_sets: tuple[StorySet, StorySet]) -> dict[str, tuple[float, list[float]]]:
    if not HAS_JAVA:
        pytest.skip("needs Java 8+")
    from vistkit.models import java

    names = ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS")
    saved = {k: os.environ.pop(k) for k in names if k in os.environ}
    java.shutdown()
    try:
        return _meteor_numbers(*story_sets)
    finally:
        java.shutdown()
        os.environ.update(saved)


# --------------------------------------------------------------------------------------------------- JVM locale
def test_java_env_drops_only_locale_and_charset_options(monkeypatch: pytest.MonkeyPatch) -> None:
    from vistkit.models.java import java_env

    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xmx1g -Duser.language=tr -Duser.country=TR -Duser.region=TR")
    monkeypatch.setenv("_JAVA_OPTIONS", "-Duser.language.format=de -Dfile.encoding=latin1 -Dsun.jnu.encoding=C")
    monkeypatch.setenv("JDK_JAVA_OPTIONS", "-Dstdout.encoding=ascii -Duser.languageX=1 -Dfoo=user.language=tr")
    env = java_env()
    assert env["JAVA_TOOL_OPTIONS"] == "-Xmx1g"
    assert "_JAVA_OPTIONS" not in env  # nothing left
    assert env["JDK_JAVA_OPTIONS"] == "-Duser.languageX=1 -Dfoo=user.language=tr"  # not locale options: kept
    assert os.environ["JAVA_TOOL_OPTIONS"].startswith("-Xmx1g -Duser.language=tr")  # the process's own: untouched


@needs_java
@pytest.mark.parametrize("env", _java_locale_envs(), ids=lambda e: next(iter(e)))
def test_meteor_numbers_do_not_depend_on_the_jvm_options_locale(
    env: dict[str, str],
    story_sets: tuple[StorySet, StorySet],
    default_numbers: dict[str, tuple[float, list[float]]],
    fresh_jvm: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    got = _meteor_numbers(*story_sets)
    assert got == default_numbers  # exactly: same code, same machine
    assert default_numbers["meteor-vist"][1][-3:] != [1.0, 1.0, 1.0]  # the caps stories are real work


@pytest.fixture(scope="module")
def turkish_locale(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``LC_ALL=tr_TR.UTF-8`` through ``LOCPATH`` (compiled with localedef into a temporary folder when the
    machine has none installed)."""
    out = subprocess.run(["locale", "-a"], capture_output=True, text=True, check=False).stdout.split()
    if any(x.lower().replace("-", "") == "tr_tr.utf8" for x in out):
        return {"LC_ALL": "tr_TR.UTF-8"}
    if shutil.which("localedef") is None or not Path("/usr/share/i18n/locales/tr_TR").is_file():
        pytest.skip("no tr_TR locale and no localedef with its source to make one")
    where = tmp_path_factory.mktemp("locales")
    subprocess.run(["localedef", "-i", "tr_TR", "-f", "UTF-8", str(where / "tr_TR.UTF-8")], check=False,
                   capture_output=True, timeout=120)  # fmt: skip
    if not (where / "tr_TR.UTF-8").is_dir():
        pytest.skip("localedef could not make tr_TR.UTF-8")
    return {"LOCPATH": str(where), "LC_ALL": "tr_TR.UTF-8"}


@needs_java
def test_meteor_numbers_do_not_depend_on_a_turkish_process_locale(
    turkish_locale: dict[str, str],
    story_sets: tuple[StorySet, StorySet],
    default_numbers: dict[str, tuple[float, list[float]]],
    fresh_jvm: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for k, v in turkish_locale.items():
        monkeypatch.setenv(k, v)
    # the JVM does take the locale from there (the reason for pinning it)
    probe = subprocess.run(["java", "-XshowSettings:properties", "-version"], capture_output=True, text=True,
                           timeout=60, check=False)  # fmt: skip
    assert "user.language = tr" in probe.stderr
    assert _meteor_numbers(*story_sets) == default_numbers


@needs_java
def test_ptb_tokens_do_not_depend_on_the_jvm_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    from vistkit.models.java import run_ptb_tokenizer

    lines = [h for h, _ in CAPS]
    default = run_ptb_tokenizer(lines)
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Duser.language=tr -Duser.country=TR")
    monkeypatch.setenv("_JAVA_OPTIONS", "-Duser.language=tr -Dfile.encoding=US-ASCII")
    assert run_ptb_tokenizer(lines) == default
    assert default[0].startswith("i went to the park with josé .")


@needs_java
def test_every_java_command_pins_the_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stdio fallback (no javac) and the jar's usage check get the pinned locale and cleaned variables too
    (their real runs parse the 61 MB table: the command lines are checked instead)."""
    from vistkit.models import java

    monkeypatch.setenv("_JAVA_OPTIONS", "-Duser.language=tr")
    seen: list[tuple[list[str], dict[str, str]]] = []

    class Stop(Exception):
        pass

    def popen(cmd: list[str], **kwargs: object) -> None:
        seen.append((list(cmd), dict(kwargs["env"])))  # type: ignore[call-overload]
        raise Stop

    info = java.require_java()  # before Popen is replaced
    monkeypatch.setattr(java.subprocess, "Popen", popen)
    monkeypatch.setattr(java, "_check_runs_meteor_jar", lambda j: None)
    with pytest.raises(Stop):
        java.StdioMeteor(java.MeteorConfig(task="hter"), java=info)
    with pytest.raises(Stop):
        java._run_meteor_jar_usage(info)
    assert "-stdio" in seen[0][0] and seen[1][0][-2:] == ["-jar", str(java.meteor_jar())]
    assert len(seen) == 2
    for cmd, env in seen:
        assert "-Duser.language=en" in cmd and "-Duser.country=US" in cmd and "-Dfile.encoding=UTF-8" in cmd
        assert "_JAVA_OPTIONS" not in env


# --------------------------------------------------------------------------------------------------- streams
@pytest.fixture(scope="module")
def unicode_stories(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    import json

    d = tmp_path_factory.mktemp("unicode")
    rows = [("José😀東京", "José went to 東京 😀 . it was naïve ."), ("naïve", "we went to the park . it was nice .")]
    hyps, refs = d / "h.jsonl", d / "r.jsonl"
    hyps.write_text("".join(json.dumps({"story_id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in rows),
                    encoding="utf-8")  # fmt: skip
    refs.write_text("".join(json.dumps({"story_id": i, "text": t.upper()}, ensure_ascii=False) + "\n"
                            for i, t in rows), encoding="utf-8")  # fmt: skip
    return hyps, refs


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONIO", "PYTHONUTF8"))}
    env.pop("LANG", None)
    env.update(extra)
    return env


@pytest.mark.parametrize(
    ("extra", "fmt"),
    [
        ({"PYTHONIOENCODING": "ascii"}, "csv"),
        ({"LC_ALL": "POSIX", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", "LANG": ""}, "text"),
    ],
    ids=["ascii-csv", "POSIX-text"],
)
def test_non_ascii_ids_print_as_utf8_whatever_the_locale(
    unicode_stories: tuple[Path, Path], extra: dict[str, str], fmt: str
) -> None:
    hyps, refs = unicode_stories
    args = [*VISTKIT, "score", str(hyps), "--references", str(refs), "-m", "sacrebleu", "--per-item", "-", "-f", fmt]
    proc = subprocess.run(args, env=_clean_env(**extra), capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    out = proc.stdout.decode("utf-8")  # UTF-8, as every file vistkit writes
    assert out.startswith("id,sacrebleu,sacrebleu signature\n")
    assert "\nJosé😀東京," in out and "\nnaïve," in out


def test_a_latin1_stdout_gets_escapes_not_a_traceback(unicode_stories: tuple[Path, Path]) -> None:
    hyps, refs = unicode_stories
    args = [*VISTKIT, "score", str(hyps), "--references", str(refs), "-m", "sacrebleu", "--per-item", "-"]
    proc = subprocess.run(args, env=_clean_env(PYTHONIOENCODING="latin-1"), capture_output=True, timeout=120,
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode("latin-1")
    assert "\nJosé\\U0001f600\\u6771\\u4eac," in out and "\nnaïve," in out  # what latin-1 holds, kept
    # the results table (on stderr: stdout holds the items) is drawn in ASCII, not as \u250f escapes
    err = proc.stderr.decode("latin-1")
    assert "\\u25" not in err and "| sacrebleu |" in err and "+---" in err
    assert b"Traceback" not in proc.stderr and b"Error" not in proc.stderr


def test_stream_fix_is_undone_for_in_process_callers() -> None:
    import io

    from vistkit import cli

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", errors="strict")
    saved = sys.stdout
    sys.stdout = stream
    try:
        undo = cli._encodable_standard_streams()
        print("José😀")
        undo()
    finally:
        sys.stdout = saved
    stream.flush()
    assert raw.getvalue() == "José😀\n".encode()
    assert (stream.encoding, stream.errors) == ("ascii", "strict")


# --------------------------------------------------------------------------------------------------- cache folder
@pytest.fixture
def cache_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No cache settings, a private temporary folder, and no folder chosen yet."""
    from vistkit.models import runtime

    for k in ("VISTKIT_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(k, raising=False)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setattr(runtime, "_CACHE_DIRS", {})
    return tmp


def test_an_unusable_vistkit_cache_is_one_sentence(cache_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vistkit.models.runtime import default_cache_dir

    a_file = cache_env / "file"
    a_file.write_text("x")
    for value, why in ((a_file, "it is a file"), (a_file / "sub", "a part of the path is a file")):
        monkeypatch.setenv("VISTKIT_CACHE", str(value))
        with pytest.raises(InputError, match=f"VISTKIT_CACHE={value} cannot hold vistkit's cache \\({why}"):
            default_cache_dir()


@pytest.mark.parametrize("case", ["home-missing", "home-a-file", "xdg-a-file", "no-home"])
def test_an_unusable_default_cache_falls_back_to_a_private_temporary_folder(
    case: str, cache_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vistkit.models import runtime
    from vistkit.models.runtime import default_cache_dir

    a_file = tmp_path / "file"
    a_file.write_text("x")
    home = tmp_path / "nonexistent"
    if case == "home-missing":
        monkeypatch.setenv("HOME", str(home))
    elif case == "home-a-file":
        monkeypatch.setenv("HOME", str(a_file))
    elif case == "xdg-a-file":
        monkeypatch.setenv("XDG_CACHE_HOME", str(a_file))
    else:
        monkeypatch.delenv("HOME")
        monkeypatch.setattr(runtime.Path, "home", classmethod(lambda cls: (_ for _ in ()).throw(RuntimeError("no"))))
    monkeypatch.delenv("VISTKIT_QUIET", raising=False)
    got = default_cache_dir()
    assert got == cache_env / f"vistkit-cache-{os.getuid()}"
    assert got.is_dir() and stat.S_IMODE(got.stat().st_mode) == 0o700
    assert default_cache_dir() == got  # decided once
    assert not home.exists()  # a missing home folder is not created
    err = capsys.readouterr().err
    assert err.count("warning: vistkit's cache folder") == 1 and "VISTKIT_CACHE" in err
    assert f"caching in {got}" in err


def test_a_shared_temporary_cache_folder_is_not_trusted(cache_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``vistkit-cache-UID`` writable by others (or not this user's) could hold planted Java classes: a fresh
    private folder is used instead."""
    from vistkit.models.runtime import default_cache_dir

    planted = cache_env / f"vistkit-cache-{os.getuid()}"
    planted.mkdir()
    planted.chmod(0o777)
    monkeypatch.setenv("HOME", str(cache_env / "nowhere"))
    monkeypatch.setenv("VISTKIT_QUIET", "1")
    got = default_cache_dir()
    assert got != planted and got.parent == cache_env and got.name.startswith("vistkit-cache-")
    assert stat.S_IMODE(got.stat().st_mode) == 0o700


def test_java_and_lm_caches_share_the_fallback(cache_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vistkit.models.java import cache_dir, table_cache_dir
    from vistkit.models.lm import lm_cache_root

    monkeypatch.setenv("HOME", str(cache_env / "nowhere"))
    monkeypatch.setenv("VISTKIT_QUIET", "1")
    monkeypatch.delenv("VISTKIT_METEOR_TABLE_CACHE", raising=False)
    fallback = cache_env / f"vistkit-cache-{os.getuid()}"
    assert cache_dir() == fallback
    assert table_cache_dir() == fallback / "meteor-tables"
    assert lm_cache_root() == fallback / "lm"


@needs_java
def test_cli_meteor_with_a_home_that_cannot_hold_the_cache_and_a_turkish_jvm(tmp_path: Path) -> None:
    """End to end: HOME is a file (the helper is compiled into the fallback; the compact table stays the
    user's) and JAVA_TOOL_OPTIONS asks for Turkish: the default locale's number, and the one warning is the only
    line on stderr (the JVM's "Picked up JAVA_TOOL_OPTIONS" neither breaks the protocol nor shows)."""
    import json

    from vistkit.models.java import table_cache_dir

    tables = table_cache_dir()
    hyps, refs = tmp_path / "h.jsonl", tmp_path / "r.jsonl"
    hyps.write_text("".join(json.dumps({"story_id": f"s{i}", "text": h}) + "\n" for i, (h, _) in enumerate(CAPS)),
                    encoding="utf-8")  # fmt: skip
    refs.write_text("".join(json.dumps({"story_id": f"s{i}", "text": r}) + "\n" for i, (_, r) in enumerate(CAPS)),
                    encoding="utf-8")  # fmt: skip
    home = tmp_path / "home"
    home.write_text("not a folder")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    drop = ("VISTKIT_CACHE", "XDG_CACHE_HOME", "VISTKIT_QUIET", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(HOME=str(home), TMPDIR=str(tmp), JAVA_TOOL_OPTIONS="-Duser.language=tr -Duser.country=TR -Xmx1500m")
    if tables is not None:
        env["VISTKIT_METEOR_TABLE_CACHE"] = str(tables)
    args = [*VISTKIT, "score", str(hyps), "--references", str(refs), "-m", "meteor-vist", "-f", "csv"]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    # the default locale's number, from this process (0.2155563165657299 against 0.2180621133971845 before:
    # Turkish lower-cases "I" to a dotless i)
    from vistkit.metrics.base import get_metric

    expected = get_metric("meteor-vist").score(
        {f"s{i}": h for i, (h, _) in enumerate(CAPS)}, {f"s{i}": [r] for i, (_, r) in enumerate(CAPS)}
    )
    assert f"\nmeteor-vist,{expected.corpus!r},0-1,3,story," in proc.stdout
    lines = message_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("warning: vistkit's cache folder"), lines
    assert any((tmp / f"vistkit-cache-{os.getuid()}" / "java").iterdir())


# --------------------------------------------------------------------------------------------------- current folder
def _in_a_deleted_folder(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``vistkit ARGS`` (in process: `main`) run from a current folder deleted under it."""
    gone = tmp_path / "gone"
    gone.mkdir(exist_ok=True)
    script = (
        "import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); from vistkit.cli import main; "
        "sys.exit(main(sys.argv[2:]))"
    )
    return subprocess.run([sys.executable, "-c", script, str(gone), *args], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


def test_a_deleted_current_folder_is_one_sentence(tmp_path: Path) -> None:
    proc = _in_a_deleted_folder(tmp_path, "score", "h.jsonl", "--references", "r.jsonl", "--per-item", "out.csv")
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "error: the current folder no longer exists (it was deleted or moved while the shell was in it); cd to an "
        "existing folder and run vistkit again"
    )


def test_help_works_in_a_deleted_current_folder(tmp_path: Path) -> None:
    """Help and the version read no file: they answer in a deleted folder (every command was refused there)."""
    for args, expected in ((["score", "--help"], "Usage: vistkit score"), (["--version"], "vistkit ")):
        proc = _in_a_deleted_folder(tmp_path, *args)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(expected)


@needs_java
def test_java_runs_when_the_current_folder_is_deleted(tmp_path: Path) -> None:
    """The library (no CLI in front): the PTB tokenizer and the METEOR helper's compile run in ``/``."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = (
        "import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
        "from vistkit.models import java; java._JAVA_CACHE.clear(); "
        "print(java.run_ptb_tokenizer(['I LIKED IT, INDEED.']), java.find_java().started, java.java_cwd())"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(gone)], capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['i liked it , indeed .'] True /"


# --------------------------------------------------------------------------------------------------- threads
def test_an_invalid_omp_thread_count_is_one_warning_not_libgomp_noise() -> None:
    """``OMP_NUM_THREADS=abc`` / ``0``: libgomp printed "Invalid value for environment variable OMP_NUM_THREADS"
    (with blank lines) each time torch loaded; the CLI drops it first, with one warning."""
    script = (
        "from vistkit.cli import _drop_invalid_thread_counts as d; d(); import torch; print(torch.get_num_threads())"
    )
    for value in ("abc", "0"):
        env = {**os.environ, "OMP_NUM_THREADS": value}
        env.pop("VISTKIT_QUIET", None)
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120,
                              check=False)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert int(proc.stdout) >= 1
        assert [ln for ln in proc.stderr.splitlines() if ln.strip()] == [
            f"warning: OMP_NUM_THREADS={value!r} is not a positive whole number of threads; ignored (the default is "
            "used)"
        ]


def test_valid_thread_counts_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    from vistkit import cli

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    for value in ("1", "4,2", " 8 "):
        monkeypatch.setenv("OMP_NUM_THREADS", value)
        cli._drop_invalid_thread_counts()
        assert os.environ["OMP_NUM_THREADS"] == value


# --------------------------------------------------------------------------------------------------- JVM options
@needs_java
@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("JAVA_TOOL_OPTIONS", "-XX:BogusOption", "Unrecognized VM option 'BogusOption'"),
        ("_JAVA_OPTIONS", "-Xmx1k", "Too small maximum heap"),
    ],
)
def test_jvm_options_that_stop_java_are_named_not_blamed_on_memory(
    name: str, value: str, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: "installed but did not start ('Picked up JAVA_TOOL_OPTIONS: ...'); the usual cause is a memory
    limit ..." - the JVM's own note taken for its reason, and the advice wrong."""
    from vistkit.errors import MissingDependencyError
    from vistkit.models import java

    monkeypatch.setattr(java, "_JAVA_CACHE", {})
    monkeypatch.setenv(name, value)
    with pytest.raises(MissingDependencyError) as got:
        java.require_java()
    msg = str(got.value)
    assert f"did not start with the JVM options of the environment ({name}={value})" in msg
    assert reason in msg and msg.endswith(f"fix or unset {name}")
    assert "Picked up" not in msg and "memory limit" not in msg


@needs_java
def test_a_picked_up_note_is_not_the_version_text(monkeypatch: pytest.MonkeyPatch) -> None:
    from vistkit.models import java

    monkeypatch.setattr(java, "_JAVA_CACHE", {})
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xmx1g")
    info = java.require_java()
    assert info.started and info.version >= 8
    assert "Picked up" not in info.version_text and "version" in info.version_text
    assert info.picked_up == ("JAVA_TOOL_OPTIONS=-Xmx1g",)


def test_matplotlib_uses_the_cache_fallback_quietly(tmp_path: Path) -> None:
    """HOME a file: matplotlib printed "mkdir -p failed for path .../.config/matplotlib" and "Matplotlib created a
    temporary cache directory ..." on every report; now vistkit's one cache warning is all."""
    home = tmp_path / "home"
    home.write_text("not a folder")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("VISTKIT_CACHE", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "MPLCONFIGDIR", "VISTKIT_QUIET")}
    env.update(HOME=str(home), TMPDIR=str(tmp))  # fmt: skip
    script = ("from vistkit.report.plots import _matplotlib; _matplotlib(); import matplotlib; "
              "print(matplotlib.get_configdir())")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(tmp / f"vistkit-cache-{os.getuid()}" / "matplotlib")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning: vistkit's cache folder"), lines


@needs_java
def test_a_java_home_without_java_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """JAVA_HOME pointing at nothing: silently another Java ran, and without one on PATH the sentence said only
    "no java found on PATH or in JAVA_HOME"."""
    from vistkit.errors import MissingDependencyError
    from vistkit.models import java

    monkeypatch.setattr(java, "_JAVA_CACHE", {})
    monkeypatch.setattr(java, "_WARNED_HOME", set())
    monkeypatch.delenv("VISTKIT_QUIET", raising=False)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk-gone"))
    capsys.readouterr()
    info = java.require_java()
    java.require_java("the PTB tokenizer")
    assert info.path == shutil.which("java")
    assert capsys.readouterr().err == (
        f"warning: JAVA_HOME={tmp_path / 'jdk-gone'} has no bin/java; METEOR uses {info.path} from PATH instead\n"
    )
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MissingDependencyError, match=r"\(JAVA_HOME=.*jdk-gone has no bin/java, and none is on PATH\)"):
        java.require_java()


# --------------------------------------------------------------------------------------------------- closed stdout
def test_a_closed_stdout_is_an_error_not_lost_results(unicode_stories: tuple[Path, Path]) -> None:
    """``vistkit score ... >&-``: the results went nowhere and the exit code was 0."""
    import shlex

    hyps, refs = unicode_stories
    cmd = shlex.join([*VISTKIT, "score", str(hyps), "--references", str(refs), "-m", "sacrebleu", "-f", "csv"])
    proc = subprocess.run(["sh", "-c", f"exec {cmd} >&-"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "error: standard output is closed (>&-), so the results would be lost; redirect it to a file or to "
        "/dev/null instead"
    )


def test_an_existing_vistkit_cache_is_taken_as_it_is(cache_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only VISTKIT_CACHE prepared once (compiled helper, converted LM) is the user's choice: kept."""
    from vistkit.models.runtime import default_cache_dir

    shared = cache_env / "shared-cache"
    shared.mkdir()
    shared.chmod(0o555)
    try:
        monkeypatch.setenv("VISTKIT_CACHE", str(shared))
        assert default_cache_dir() == shared
    finally:
        shared.chmod(0o755)


# --------------------------------------------------------------------------------------------------- umask
@pytest.mark.parametrize("mask", [0o777, 0o277, 0o077, 0o022])
def test_outputs_follow_the_umask_like_a_plain_open(mask: int, tmp_path: Path) -> None:
    """The atomic writer's temporary file came from mkstemp, whose 0600 goes through the umask: under umask 777
    (or 277) it was mode 000 (0400) and could not be opened again to be filled ("cannot use .items.csv.x.tmp:
    permission denied" for any user but root). It is filled at 0600 now and ends with a plain open's mode."""
    from vistkit.data.output import open_output, output_path

    plain = tmp_path / "plain.txt"
    old = os.umask(mask)
    try:
        with open(plain, "w", encoding="utf-8") as fh:
            fh.write("x")
        with output_path(tmp_path / "out.bin") as tmp:
            assert stat.S_IMODE(tmp.stat().st_mode) == 0o600  # fillable by its owner whatever the umask
            tmp.write_bytes(b"x")
        with open_output(tmp_path / "out.csv", force=True) as fh:
            fh.write("a,b\n")
    finally:
        os.umask(old)
    want = stat.S_IMODE(plain.stat().st_mode)
    assert want == 0o666 & ~mask
    assert stat.S_IMODE((tmp_path / "out.bin").stat().st_mode) == want
    assert stat.S_IMODE((tmp_path / "out.csv").stat().st_mode) == want
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin", "out.csv", "plain.txt"]  # no temporary left


def test_the_fallback_cache_is_private_and_usable_under_umask_777(
    cache_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vistkit.models.runtime import default_cache_dir

    monkeypatch.setenv("HOME", str(cache_env / "nowhere"))
    monkeypatch.setenv("VISTKIT_QUIET", "1")
    old = os.umask(0o777)
    try:
        got = default_cache_dir()
    finally:
        os.umask(old)
    assert got == cache_env / f"vistkit-cache-{os.getuid()}"
    assert stat.S_IMODE(got.stat().st_mode) == 0o700  # was 000 (mkdir's 0700 through the umask)


# --------------------------------------------------------------------------------------------------- warnings
@needs_java
def test_a_closed_meteor_jvm_leaves_no_open_pipe(fresh_jvm: None) -> None:
    """``PYTHONWARNINGS=error`` / ``python -X dev``: every METEOR run ended with "Exception ignored ... unclosed
    file <_io.BufferedReader name=5>" and a traceback from ``shutdown``, the helper's stdout left open."""
    from vistkit.models import java

    server = java.meteor_server()
    assert server.pair_scores(java.MeteorConfig(task="hter"), ["we went to the park"], ["we went to a park"])[0] > 0
    proc = server.proc
    assert proc is not None and proc.stdout is not None and proc.stdin is not None
    java.shutdown()
    assert proc.poll() is not None and proc.stdout.closed and proc.stdin.closed


# --------------------------------------------------------------------------------------------------- limits
def _limited(kind: int, value: int) -> object:
    import resource

    def set_limit() -> None:
        resource.setrlimit(kind, (value, resource.getrlimit(kind)[1]))

    return set_limit


@needs_java
def test_too_few_open_files_is_one_sentence_not_no_java_or_a_bug(tmp_path: Path) -> None:
    """``ulimit -n 8``: "METEOR needs Java 8+ ... (no java found ...)" (the failed start taken for a missing java);
    ``ulimit -n 12``: "unexpected OSError: [Errno 24] Too many open files - this is a bug"."""
    import resource

    hyps = tmp_path / "h.json"
    hyps.write_text('{"a": "we went to the park ."}', encoding="utf-8")
    args = [*VISTKIT, "score", str(hyps), "--references", str(hyps), "-m", "meteor-vist", "-f", "csv"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False,
                          preexec_fn=_limited(resource.RLIMIT_NOFILE, 8))  # type: ignore[arg-type]  # fmt: skip
    assert proc.returncode == 1
    assert message_lines(proc.stderr) == [
        "error: too many open files for this process (its limit, ulimit -n, is 8); raise it (e.g. ulimit -n 4096) "
        "and run vistkit again"
    ]


def test_a_file_size_limit_is_not_called_a_full_disk(tmp_path: Path) -> None:
    """``ulimit -f``: "the disk is full (or over its quota)"."""
    import resource

    hyps = tmp_path / "h.jsonl"
    hyps.write_text("".join(f'{{"story_id": "s{i}", "text": "we went to the park {i} ."}}\n' for i in range(300)),
                    encoding="utf-8")  # fmt: skip
    refs = tmp_path / "r.jsonl"  # other texts: stories scored against themselves are warned about
    refs.write_text("".join(f'{{"story_id": "s{i}", "text": "we went to the beach {i} ."}}\n' for i in range(300)),
                    encoding="utf-8")  # fmt: skip
    out = tmp_path / "items.csv"
    args = [*VISTKIT, "score", str(hyps), "--references", str(refs), "-m", "sacrebleu", "--per-item", str(out)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False,
                          preexec_fn=_limited(resource.RLIMIT_FSIZE, 2048))  # type: ignore[arg-type]  # fmt: skip
    assert proc.returncode == 1
    assert message_lines(proc.stderr) == [
        f"error: cannot write {out}: it grew past the largest file this process may write (ulimit -f) or its file "
        "system holds; raise the limit, or write the output to another disk"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.jsonl", "r.jsonl"]  # no half file, no temporary left
