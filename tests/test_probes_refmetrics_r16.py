"""Probe round 16: the reference-based metrics and their Java.

What was wrong:

- METEOR's table load (the helper's and Meteor's stdio fallback's) waited a fixed 300 s whatever
  ``VISTKIT_JAVA_TIMEOUT`` said: a user on a slow disk who raised it still failed after 300 s (told to raise the
  setting that did not count), and one who lowered it to fail fast on a hung JVM still waited 300 s. Every Java
  wait now follows the setting (the table load 10 times it: 300 s by default, as before), and each message that a
  wait expired names ``VISTKIT_JAVA_TIMEOUT``. The helper's compile waited 4 times the setting when it was set (300 s
  when not: raising it to 60 s cut the wait to 240 s) and, stopped, fell back to the slower stdio server in
  silence; it now waits 10 times it and says so. The PTB tokenizer said "within 0 s" under a setting below 1 s.
- bertscore: a baseline file with a value of 1 or more (a 0-100 scale, a wrong column) divided by zero (a story
  equal to its reference scored -1.0) or turned the scale upside down, in silence; it is refused, as ``baseline=``
  values already were.
- METEOR's helper build in a cache shared by machines (a home folder on cluster nodes) or containers: another
  node's running build was deleted as "dead" (its process id is not running here), and two builds under one
  process id (containers: often 1) compiled into one folder. Builds now hold a lock while they run and have folders
  of their own.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from vistkit.errors import MissingDependencyError

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs Java (PTB tokeniser, METEOR)")


# ------------------------------------------------------------------------------------------------ fake javas
#: a stand-in for METEOR's helper speaking its binary protocol; a table load ('C') answers after $FAKE_LOAD_S
_FAKE_HELPER = r'''
import os, struct, sys, time
inp, out = sys.stdin.buffer, sys.stdout.buffer
def rd(n):
    b = inp.read(n)
    if len(b) < n:
        sys.exit(0)
    return b
def rstr():
    (n,) = struct.unpack(">i", rd(4))
    return rd(n).decode()
while True:
    op = rd(1)
    if op == b"Q":
        break
    if op == b"V":
        out.write(struct.pack(">i", 0x56495354))
    elif op == b"C":
        rstr(); rstr(); rstr()
        time.sleep(float(os.environ.get("FAKE_LOAD_S", "0")))
        name = b"mapped"
        out.write(struct.pack(">iiii", 0, 1, 1, len(name)) + name)
        out.write(struct.pack(">4d", 0.4, 1.5, 0.35, 0.55) + struct.pack(">i", 4) + struct.pack(">4d", 1, .2, .6, .8))
    elif op == b"P":
        cfg, n = struct.unpack(">ii", rd(8))
        for _ in range(2 * n):
            rstr()
        out.write(struct.pack(f">{n}d", *([0.5] * n)))
    out.flush()
'''

#: a stand-in for Meteor's jar: its usage text, and a -stdio server whose first answer comes after $FAKE_LOAD_S
_FAKE_JAR = r'''
import os, sys, time
if "-stdio" not in sys.argv:
    print("Meteor version 1.5 usage")
    sys.exit(0)
first = True
for line in sys.stdin:
    if first:
        time.sleep(float(os.environ.get("FAKE_LOAD_S", "0")))
        first = False
    if line.startswith("EVAL"):
        print("0.5"); print("0.5")
    else:
        print(" ".join(["1"] * 23))
    sys.stdout.flush()
'''


@pytest.fixture
def fake_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A clean java module state, a private cache and a ``java`` (as JAVA_HOME) running ``script`` with Python."""
    import vistkit.models.java as vj

    monkeypatch.delenv("VISTKIT_JAVA_TIMEOUT", raising=False)
    monkeypatch.setenv("VISTKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("VISTKIT_METEOR_TABLE_CACHE", "0")
    for name in ("_JAVA_CACHE", "_JAR_RUNS", "_HUNG"):
        monkeypatch.setattr(vj, name, {})
    monkeypatch.setattr(vj, "_SERVER", None)
    monkeypatch.setattr(vj, "meteor_jar", lambda: tmp_path / "meteor-1.5.jar")

    def use(script: str, *, helper: bool) -> None:
        (tmp_path / "fake.py").write_text(script)
        exe = tmp_path / "jdk" / "bin" / "java"
        exe.parent.mkdir(parents=True, exist_ok=True)
        exe.write_text(
            "#!/bin/sh\n"
            'for a in "$@"; do if [ "$a" = "-version" ]; then echo \'openjdk version "17.0.1" 2021\' >&2; exit 0; '
            "fi; done\n"
            f'exec {sys.executable} {tmp_path / "fake.py"} "$@"\n'
        )
        exe.chmod(0o755)
        monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
        helper_dir = tmp_path / "helper"
        helper_dir.mkdir(exist_ok=True)
        monkeypatch.setattr(vj, "_helper_classpath", lambda java: str(helper_dir) if helper else None)

    yield use
    vj.shutdown()


def _load(vj) -> tuple[BaseException | None, float]:
    t0 = time.monotonic()
    try:
        # the stdio fallback waits for its tables at its first answer, the helper at its config
        vj.meteor_server().pair_scores(vj.MeteorConfig(task="hter"), ["a b"], ["a c"])
    except BaseException as exc:
        return exc, time.monotonic() - t0
    return None, time.monotonic() - t0


@pytest.mark.parametrize("helper", [True, False], ids=["helper", "stdio"])
def test_a_raised_java_timeout_lets_a_slow_table_load_finish(
    fake_java, monkeypatch: pytest.MonkeyPatch, helper: bool
) -> None:
    """The table load waited `TABLE_LOAD_TIMEOUT` whatever VISTKIT_JAVA_TIMEOUT said (here 1 s stands for 300 s)."""
    import vistkit.models.java as vj

    fake_java(_FAKE_HELPER if helper else _FAKE_JAR, helper=helper)
    monkeypatch.setattr(vj, "TABLE_LOAD_TIMEOUT", 1.0)
    monkeypatch.setattr(vj, "JAVA_TIMEOUT", 0.1)
    monkeypatch.setenv("FAKE_LOAD_S", "2.5")
    monkeypatch.setenv("VISTKIT_JAVA_TIMEOUT", "5")
    exc, _ = _load(vj)
    assert exc is None, exc
    assert vj.meteor_server().pair_scores(vj.MeteorConfig(task="hter"), ["a b"], ["a c"]) == [0.5]


@pytest.mark.parametrize("helper", [True, False], ids=["helper", "stdio"])
def test_a_lowered_java_timeout_stops_a_hung_table_load_soon_and_names_the_setting(
    fake_java, monkeypatch: pytest.MonkeyPatch, helper: bool
) -> None:
    import vistkit.models.java as vj

    fake_java(_FAKE_HELPER if helper else _FAKE_JAR, helper=helper)
    monkeypatch.setattr(vj, "TABLE_LOAD_TIMEOUT", 30.0)  # stands for the 300 s default
    monkeypatch.setenv("FAKE_LOAD_S", "1000")
    monkeypatch.setenv("VISTKIT_JAVA_TIMEOUT", "0.2")
    exc, took = _load(vj)
    assert isinstance(exc, MissingDependencyError) and took < 15, (exc, took)
    assert "did not load METEOR's tables within 2 s" in str(exc), exc
    assert "VISTKIT_JAVA_TIMEOUT" in str(exc), exc


def test_the_slow_java_waits_are_300_s_unless_told_otherwise_and_grow_with_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Raising VISTKIT_JAVA_TIMEOUT to 60 s cut the compile's wait from 300 s to 240 s (4 times it)."""
    import vistkit.models.java as vj

    monkeypatch.delenv("VISTKIT_JAVA_TIMEOUT", raising=False)
    assert vj.table_load_timeout() == vj.javac_timeout() == 300.0
    monkeypatch.setenv("VISTKIT_JAVA_TIMEOUT", "60")
    assert vj.table_load_timeout() == vj.javac_timeout() == 600.0
    monkeypatch.setenv("VISTKIT_JAVA_TIMEOUT", "1")
    assert vj.table_load_timeout() == vj.javac_timeout() == 10.0


# ------------------------------------------------------------------------------------------------ bertscore
@pytest.mark.parametrize("row", ["1.0,1.0,1.0", "0.8,0.8,1.2", "0.8,1,0.8", "80.1,81.2,80.6"])
def test_a_baseline_file_with_a_value_of_one_or_more_is_refused(row: str, tmp_path: Path) -> None:
    """Rescaling divides by 1 - b: a file baseline of 1 scored a story equal to its reference -1.0 (a division by
    zero), one above 1 turned the scale upside down (worse stories scored higher), in silence; `baseline=` values
    were already refused so."""
    from vistkit.errors import InputError
    from vistkit.metrics.base import get_metric

    layer = get_metric("bertscore").layer
    csv = tmp_path / "baseline.csv"
    csv.write_text(f"LAYER,P,R,F\n{layer},{row}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2 .*below 1"):
        get_metric("bertscore", baseline_path=str(csv))
    with pytest.raises(InputError, match="below 1"):
        get_metric("bertscore", baseline=row)


def test_a_javac_stopped_by_the_java_timeout_says_which_setting_to_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A compile stopped at 4 x VISTKIT_JAVA_TIMEOUT fell back to Meteor's slower stdio server in silence, and so on
    every run (each one compiling again until stopped)."""
    import vistkit.models.java as vj

    if shutil.which("java") is None:
        pytest.skip("no Java")
    monkeypatch.setenv("VISTKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("VISTKIT_JAVA_TIMEOUT", "0.25")
    monkeypatch.delenv("VISTKIT_QUIET", raising=False)
    fake = tmp_path / "javac"
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setattr(vj, "find_javac", lambda info: str(fake))
    monkeypatch.setenv("VISTKIT_JAVA_TIMEOUT", "10")
    info = vj.require_java("the test")
    monkeypatch.setenv("VISTKIT_JAVA_TIMEOUT", "0.25")
    assert vj._helper_classpath(info) is None  # Meteor's stdio fallback
    err = capsys.readouterr().err
    assert "did not compile within 2.5 s" in err and "VISTKIT_JAVA_TIMEOUT" in err, err
    assert "stdio" in err and "same" in err, err


# ------------------------------------------------------------------------------------------------ shared cache
def _fake_javac(tmp_path: Path, *, seconds: float = 0) -> Path:
    """A ``javac`` that writes ``VistkitMeteor.class`` into its ``-d`` folder (after ``seconds``)."""
    fake = tmp_path / "javac"
    fake.write_text(
        "#!/bin/sh\n"
        f"sleep {seconds}\n"
        'while [ $# -gt 0 ]; do if [ "$1" = "-d" ]; then out="$2"; fi; shift; done\n'
        'printf "class" > "$out/VistkitMeteor.class"\n'
    )
    fake.chmod(0o755)
    return fake


@pytest.fixture
def helper_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import vistkit.models.java as vj

    monkeypatch.setenv("VISTKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("VISTKIT_JAVA_TIMEOUT", raising=False)
    monkeypatch.setattr(vj, "meteor_jar", lambda: tmp_path / "meteor-1.5.jar")
    info = vj.JavaInfo(str(tmp_path / "java"), 17, "openjdk 17")
    return info


def test_a_build_running_on_another_machine_is_not_removed_as_dead(
    helper_build, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cluster nodes sharing a home folder (or containers sharing a cache): a build's process id means nothing on
    another machine, and its running build was deleted as "dead" (that run then fell back to the slow stdio
    server); a build that ended is still cleaned up."""
    import vistkit.models.java as vj

    monkeypatch.setattr(vj, "find_javac", lambda info: str(_fake_javac(tmp_path)))
    home = tmp_path / "cache" / "java"
    home.mkdir(parents=True)
    # another node's build in progress, under a process id that no process has here (the kernel's maximum is lower)
    elsewhere = home / "meteor-helper-0123456789abcdef.tmp4194999"
    elsewhere.mkdir()
    (elsewhere / "VistkitMeteor.class").write_bytes(b"half")
    import fcntl

    fd = os.open(elsewhere.with_name(elsewhere.name + ".lock"), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held while that build runs
    try:
        assert vj._helper_classpath(helper_build) is not None
        assert (elsewhere / "VistkitMeteor.class").read_bytes() == b"half"
    finally:
        os.close(fd)  # that build ends (killed): its folder goes at the next start
    vj._remove_dead_builds(home / "meteor-helper-x")
    assert not elsewhere.exists() and not elsewhere.with_name(elsewhere.name + ".lock").exists()
    assert sorted(p.name for p in home.iterdir()) == [Path(vj._helper_classpath(helper_build) or "").name]


def test_two_builds_of_one_process_id_never_share_a_folder(
    helper_build, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two containers sharing a cache run vistkit under the same process id (often 1): both built in
    ``meteor-helper-X.tmp<PID>``, each compiling over the other's files, and the first to finish moved the other's
    half-written classes into place."""
    import vistkit.models.java as vj

    monkeypatch.setattr(vj, "find_javac", lambda info: str(_fake_javac(tmp_path)))
    built = Path(vj._helper_classpath(helper_build) or "")
    shutil.rmtree(built)
    other = built.with_name(built.name + f".tmp{os.getpid()}")  # the other container's build, in the old naming
    other.mkdir()
    (other / "theirs.class").write_bytes(b"theirs")
    assert vj._helper_classpath(helper_build) == str(built)
    assert (other / "theirs.class").read_bytes() == b"theirs"
    assert not (built / "theirs.class").exists()


@pytest.mark.parametrize("what", ["ptb", "jar"])
def test_a_java_wait_that_expires_names_the_setting_and_its_value(
    fake_java, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    """The PTB tokenizer said "within 0 s" under VISTKIT_JAVA_TIMEOUT=0.3, and told a user who had set it to set it."""
    import vistkit.models.java as vj

    fake_java("import time\ntime.sleep(60)\n", helper=False)
    monkeypatch.setenv("VISTKIT_JAVA_TIMEOUT", "0.3")
    t0 = time.monotonic()
    with pytest.raises(MissingDependencyError) as err:
        if what == "ptb":
            vj.run_ptb_tokenizer(["a b ."])
        else:
            vj._run_meteor_jar_usage(vj.require_java())
    assert time.monotonic() - t0 < 15
    assert "raise VISTKIT_JAVA_TIMEOUT (now 0.3 s)" in str(err.value), err.value
    assert "within 0 s" not in str(err.value), err.value
