"""The METEOR Java helper's JVM settings: ``VISTKIT_JAVA_OPTS`` read as a shell would, failures that name it with
the JVM's own reason, and JVM output (``-verbose:gc``, ``-Xlog``) that must not reach the protocol on stdout."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from vistkit.errors import InputError, MissingDependencyError

HAS_JAVA = shutil.which("java") is not None
needs_java = pytest.mark.skipif(not HAS_JAVA, reason="needs Java 8+")
pytestmark = [pytest.mark.java]

JVM_VARIABLES = ("VISTKIT_JAVA_OPTS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS")


@pytest.fixture
def clean_jvm_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """No JVM option variable from the caller's environment, and a fresh shared METEOR JVM before and after."""
    from vistkit.models import java

    for name in JVM_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    java.shutdown()
    yield monkeypatch
    java.shutdown()


@pytest.fixture(scope="module")
def default_pair_scores() -> list[float]:
    """meteor-vist's pair scores of `_pairs` under no JVM option variable."""
    if not HAS_JAVA:
        pytest.skip("needs Java 8+")
    from vistkit.models import java

    saved = {k: os.environ.pop(k) for k in JVM_VARIABLES if k in os.environ}
    java.shutdown()
    try:
        return java.meteor_server().pair_scores(java.MeteorConfig(task="hter"), *_pairs())
    finally:
        java.shutdown()
        os.environ.update(saved)


def _pairs(n: int = 300) -> tuple[list[str], list[str]]:
    rng = random.Random(7)
    words = "the a dog cat ran home park family day fun we they went had great time beach party".split()
    tests = [" ".join(rng.choice(words) for _ in range(40)) for _ in range(n)]
    refs = [" ".join(rng.choice(words) for _ in range(40)) for _ in range(n)]
    return tests, refs


# --------------------------------------------------------------------------------------------------- parsing
def test_a_quoted_value_in_vistkit_java_opts_stays_one_option(monkeypatch: pytest.MonkeyPatch) -> None:
    from vistkit.models.java import helper_jvm_options

    monkeypatch.setenv("VISTKIT_JAVA_OPTS", "-Xmx3G  -Dvistkit.note='two words' \"-Dother=a b\"")
    assert helper_jvm_options() == ["-Xmx3G", "-Dvistkit.note=two words", "-Dother=a b"]


def test_an_unclosed_quote_in_vistkit_java_opts_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    from vistkit.models.java import helper_jvm_options

    monkeypatch.setenv("VISTKIT_JAVA_OPTS", "-Xmx2G -Dnote='unclosed")
    with pytest.raises(InputError, match=r"VISTKIT_JAVA_OPTS=.*quote.*unset it"):
        helper_jvm_options()


@pytest.mark.parametrize("value", ["", "   ", "\t", "''"])
def test_a_blank_vistkit_java_opts_means_the_defaults(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    from vistkit.models.java import helper_jvm_options

    monkeypatch.delenv("VISTKIT_JAVA_OPTS", raising=False)
    default = helper_jvm_options()
    monkeypatch.setenv("VISTKIT_JAVA_OPTS", value)
    assert helper_jvm_options() == default  # not "no -Xmx at all" (the JVM's own, often too small, heap)
    assert "-Xmx2G" in default


# --------------------------------------------------------------------------------------------------- failures
@needs_java
@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("--bogus", "Unrecognized option: --bogus"),
        ("-Xmx1k", "Too small maximum heap"),
        ("-Xmx2G -XX:+NoSuchJvmFlag", "NoSuchJvmFlag"),
        ("-Xmx2G notAnOption", "notAnOption"),  # a word without a dash: taken for the main class
    ],
)
def test_vistkit_java_opts_that_stop_the_helper_are_named_with_the_jvms_reason(
    clean_jvm_env: pytest.MonkeyPatch, value: str, reason: str
) -> None:
    from vistkit.models.java import meteor_server

    clean_jvm_env.setenv("VISTKIT_JAVA_OPTS", value)
    with pytest.raises(MissingDependencyError) as err:
        meteor_server()
    text = str(err.value)
    assert f"VISTKIT_JAVA_OPTS={value!r}" in text or f"VISTKIT_JAVA_OPTS='{value}'" in text
    assert reason in text
    assert "answered something else" not in text


@needs_java
def test_a_heap_too_small_for_meteors_tables_names_the_setting_and_the_out_of_memory(
    clean_jvm_env: pytest.MonkeyPatch,
) -> None:
    from vistkit.models.java import MeteorConfig, meteor_server

    clean_jvm_env.setenv("VISTKIT_JAVA_OPTS", "-Xmx12M")
    with pytest.raises(MissingDependencyError) as err:
        meteor_server().pair_scores(MeteorConfig(task="hter"), ["a dog"], ["a dog ran"])
    text = str(err.value)
    assert "VISTKIT_JAVA_OPTS='-Xmx12M'" in text
    assert "OutOfMemoryError" in text


@needs_java
def test_a_heap_too_small_set_by_java_tool_options_is_named(clean_jvm_env: pytest.MonkeyPatch) -> None:
    from vistkit.models.java import MeteorConfig, meteor_server

    clean_jvm_env.setenv("VISTKIT_JAVA_OPTS", "-XX:TieredStopAtLevel=1")  # no -Xmx of ours: theirs counts
    clean_jvm_env.setenv("JAVA_TOOL_OPTIONS", "-Xmx12M")
    with pytest.raises(MissingDependencyError) as err:
        meteor_server().pair_scores(MeteorConfig(task="hter"), ["a dog"], ["a dog ran"])
    text = str(err.value)
    assert "JAVA_TOOL_OPTIONS" in text and "-Xmx12M" in text
    assert "OutOfMemoryError" in text


# --------------------------------------------------------------------------------------------------- stdout
@needs_java
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("VISTKIT_JAVA_OPTS", "-Xmx2G -verbose:gc"),
        ("VISTKIT_JAVA_OPTS", "-Xmx2G -Xlog:safepoint"),  # prints only while scoring, after the hello
        ("VISTKIT_JAVA_OPTS", "-Xmx2G -XX:+PrintFlagsFinal"),
        ("JAVA_TOOL_OPTIONS", "-Xlog:gc*"),
        ("_JAVA_OPTIONS", "-Xlog:safepoint -verbose:gc"),  # read after the command line
        ("JDK_JAVA_OPTIONS", "-Xlog:gc+cpu"),
    ],
)
def test_jvm_logging_to_stdout_does_not_reach_the_helpers_answers(
    clean_jvm_env: pytest.MonkeyPatch, default_pair_scores: list[float], name: str, value: str
) -> None:
    from vistkit.models.java import MeteorConfig, meteor_server

    clean_jvm_env.setenv(name, value)
    assert meteor_server().pair_scores(MeteorConfig(task="hter"), *_pairs()) == default_pair_scores


@needs_java
@pytest.mark.parametrize(("name", "value"), [("_JAVA_OPTIONS", "-verbose:gc"), ("JAVA_TOOL_OPTIONS", "-Xlog:gc*")])
def test_jvm_logging_to_stdout_does_not_reach_the_ptb_tokens(
    clean_jvm_env: pytest.MonkeyPatch, name: str, value: str
) -> None:
    from vistkit.models.java import run_ptb_tokenizer

    lines = [f"Line {i}: the Dog's ball, isn't it?" for i in range(3000)]
    expected = run_ptb_tokenizer(lines)
    clean_jvm_env.setenv(name, value)
    assert run_ptb_tokenizer(lines) == expected


# --------------------------------------------------------------------------------------------------- up front
@needs_java
@pytest.mark.parametrize("metric", ["meteor-vist", "meteor-album", "meteor-coco"])
@pytest.mark.parametrize(
    ("name", "value"),
    [("VISTKIT_JAVA_OPTS", "-Xmx2G -Dnote='unclosed"), ("VISTKIT_METEOR_THREADS", "0"), ("VISTKIT_JAVA_TIMEOUT", "x")],
)
def test_a_bad_java_setting_is_refused_before_any_metric_scores(
    clean_jvm_env: pytest.MonkeyPatch, metric: str, name: str, value: str
) -> None:
    """The CLI asks every metric's `check_tools` before the first scores: a METEOR setting that cannot work was
    found only when METEOR's turn came, after the metrics before it had run."""
    from vistkit.metrics.base import get_metric_class

    clean_jvm_env.setenv(name, value)
    with pytest.raises(InputError, match=name):
        get_metric_class(metric).check_tools()


# --------------------------------------------------------------------------------------------------- paths
@needs_java
def test_a_relative_vistkit_cache_still_runs_the_compiled_helper(
    clean_jvm_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The helper JVM runs in the jar's folder: a relative cache path was looked up there ("Could not find or
    load main class VistkitMeteor"), so every METEOR run failed."""
    from vistkit.models.java import MeteorConfig, meteor_server, table_cache_dir

    tables = table_cache_dir()  # the user's compact table: only the helper is compiled anew (not a 20 s table)
    if tables is not None:
        clean_jvm_env.setenv("VISTKIT_METEOR_TABLE_CACHE", str(tables))
    clean_jvm_env.chdir(tmp_path)
    clean_jvm_env.setenv("VISTKIT_CACHE", "relcache")
    server = meteor_server()
    assert server.uses_helper
    assert server.pair_scores(MeteorConfig(task="hter"), ["a dog ran"], ["a dog ran"]) == [pytest.approx(1.0, 1e-3)]
    assert (tmp_path / "relcache" / "java").is_dir()


@pytest.mark.parametrize("value", ["tables", "./sub/../tables", "~/tables"])
def test_a_relative_table_cache_is_taken_from_the_current_folder_not_the_jars(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str
) -> None:
    """The helper JVM runs in pycocoevalcap's folder: a relative VISTKIT_METEOR_TABLE_CACHE put the ~114 MB table
    inside site-packages (and the cleanup of old tables looked in the current folder); '~' was a folder name."""
    from vistkit.models.java import table_cache_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("VISTKIT_METEOR_TABLE_CACHE", value)
    got = table_cache_dir()
    assert got is not None and got.is_absolute()
    assert got == tmp_path / "tables"


@needs_java
def test_the_stdio_fallback_takes_vistkit_java_opts_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without javac (a bare JRE) Meteor's own stdio server ran with a fixed -Xmx2G, whatever VISTKIT_JAVA_OPTS
    said (a container that allows 1 GB could not lower it, nor a large run raise it); the JVM's output is kept
    off its stdout there too."""
    from vistkit.models import java

    for name in JVM_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VISTKIT_JAVA_OPTS", "-Xmx1500m -Dvistkit.note='a b'")
    seen: list[list[str]] = []

    class Stop(Exception):
        pass

    def popen(cmd: list[str], **kwargs: object) -> None:
        seen.append(list(cmd))
        raise Stop

    info = java.require_java()  # before Popen is replaced
    monkeypatch.setattr(java.subprocess, "Popen", popen)
    monkeypatch.setattr(java, "_check_runs_meteor_jar", lambda j: None)
    with pytest.raises(Stop):
        java.StdioMeteor(java.MeteorConfig(task="hter"), java=info)
    cmd = seen[0]
    assert "-Xmx1500m" in cmd and "-Dvistkit.note=a b" in cmd and "-Xmx2G" not in cmd
    assert cmd.index("-Xmx1500m") < cmd.index("-jar")
    assert "-XX:+DisplayVMOutputToStderr" in cmd


@needs_java
@pytest.mark.parametrize("where", ["JAVA_HOME", "PATH"])
def test_a_java_found_through_a_relative_path_still_runs_meteor_and_the_tokenizer(
    clean_jvm_env: pytest.MonkeyPatch, tmp_path: Path, where: str
) -> None:
    """``JAVA_HOME=jdk`` or ``PATH=jdk/bin:...`` (relative to the current folder): the java was found there, then
    started from the jar's folder ("cannot use jdk/bin/java: no such file or folder"; a FileNotFoundError from
    the API)."""
    from vistkit.models import java

    real = Path(shutil.which("java") or "java").resolve()
    (tmp_path / "jdk" / "bin").mkdir(parents=True)
    (tmp_path / "jdk" / "bin" / "java").symlink_to(real)
    if (real.parent / "javac").exists():
        (tmp_path / "jdk" / "bin" / "javac").symlink_to(real.parent / "javac")
    clean_jvm_env.chdir(tmp_path)
    clean_jvm_env.setattr(java, "_JAVA_CACHE", {})
    clean_jvm_env.setattr(java, "_JAR_RUNS", {})
    if where == "JAVA_HOME":
        clean_jvm_env.setenv("JAVA_HOME", "jdk")
    else:
        clean_jvm_env.delenv("JAVA_HOME", raising=False)
        clean_jvm_env.setenv("PATH", "jdk/bin" + os.pathsep + os.environ.get("PATH", ""))
    info = java.require_java()
    assert Path(info.path).is_absolute()
    assert java.meteor_server().pair_scores(java.MeteorConfig(task="hter"), ["a dog"], ["a dog"]) == [
        pytest.approx(1.0, 1e-3)
    ]
    assert java.run_ptb_tokenizer(["A dog."]) == ["a dog ."]


@needs_java
def test_a_caller_that_waited_for_the_helper_gets_the_reason_it_stopped(clean_jvm_env: pytest.MonkeyPatch) -> None:
    """The CLI's prefetch thread met the failure first; the scoring call, holding the same server, then said only
    "the METEOR Java helper stopped unexpectedly" (no exit code, no reason, and the advice to fix the options)."""
    from vistkit.models.java import MeteorConfig, meteor_server

    clean_jvm_env.setenv("VISTKIT_JAVA_OPTS", "-Xmx12M")
    server = meteor_server()
    with pytest.raises(MissingDependencyError, match="OutOfMemoryError") as first:
        server.config(MeteorConfig(task="hter"))  # the prefetch thread
    with pytest.raises(MissingDependencyError) as second:  # the caller, which held the same server meanwhile
        server.pair_scores(MeteorConfig(task="hter"), ["a dog"], ["a dog"])
    assert str(second.value) == str(first.value)
