"""Java for the metrics that need it (METEOR 1.5, the Stanford PTB tokenizer).

- `find_java` / `require_java`: locate ``java`` (``$JAVA_HOME/bin/java`` first, then ``PATH``) and check
  its version. Supported: Java 8 or newer (tested with OpenJDK 17). A missing or too old Java raises
  `MissingDependencyError` with one sentence saying how to fix it.
- `meteor_jar`, `paraphrase_table`, `ptb_jar`: the jars pycocoevalcap 1.2 ships (``meteor-1.5.jar`` with
  ``data/paraphrase-en.gz``, ``stanford-corenlp-3.4.1.jar``); we use those exact files so scores match.
- `meteor_server`: ONE warm JVM per process, shared by every METEOR variant and every system scored in the
  run. It runs a small helper class (``VistkitMeteor.java``, shipped as package data in
  ``vistkit/resources/java/`` with the classes below, compiled once with ``javac`` into the user cache directory,
  keyed by the sources' hash) that calls Meteor's own Java API (``MeteorConfiguration``/``MeteorScorer``), keeps
  one scorer per configuration (task, language, normalisation: the tables are loaded once per language), scores
  whole batches per round trip with a binary, length-prefixed protocol (so ``|||`` and newlines inside texts
  are harmless) and spreads a batch over threads (one ``MeteorScorer`` copy per thread sharing the read-only
  tables, which is what Meteor's copy constructor is for). Without ``javac`` (a bare JRE) it falls back to
  Meteor's own ``-stdio`` protocol, which gives the same numbers, only slower. The JVM is closed at exit.
  A second configuration of the same language (e.g. meteor-coco's default task after meteor-vist's hter)
  reuses the loaded tables instead of loading them again (``VistkitMeteor.reconfigure``).

Faster alignment, same alignment: ``resources/java/edu/cmu/meteor/aligner/`` holds our own ``SynonymMatcher``,
``ParaphraseMatcher`` and ``ParaphraseTransducer`` (same package and name, found before the jar's on the class
path), which add exactly the jar's matches in the jar's order with memoised synsets and a position index; the
helper also memoises Snowball stems (``VistkitMeteor.CachingStemmer``). ``ParaphraseTransducer`` reads the
paraphrase table exactly as the jar does but holds it in flat int arrays, and caches those on disk
(`table_cache_dir`, one file per table and jar, built once per user, checked by key and CRC-32, written
atomically): later processes map it in well under a second instead of parsing 61 MB of gzip for 7-28 s; each helper
start marks its install's table used and removes tables unused for 30 days (`tend_table_cache`).
Scores are bit-identical to the jar's (tests/test_meteor.py, bench/bench_meteor.py).

Costs (2-core machine shared with other jobs, OpenJDK 17): JVM start ~0.01 s, helper compile ~1-5 s once per
user, English table load 0.4-1 s per process from the compact cache (the jar: 7-28 s; the first process of a user
parses the table as the jar does and writes the cache, +1-3 s once), then ~0.8 ms CPU per (hypothesis,
reference) alignment (the jar: ~1.3 ms warm, ~2.5 ms on its first pass). Environment:
``VISTKIT_METEOR_THREADS`` (scoring threads), ``VISTKIT_JAVA_OPTS`` (the helper's JVM options, and the stdio
fallback's; split as a shell splits words; default -Xmx2G -XX:TieredStopAtLevel=1),
``VISTKIT_CACHE`` (where the compiled helper lives), ``VISTKIT_METEOR_TABLE_CACHE`` (the compact table's
directory, or 0 to parse the table in every process as the jar does), ``VISTKIT_JAVA_TIMEOUT`` (seconds a Java
process may stay silent where a working JVM answers at once, default 30; the helper's compile and the table load
may take 10 times it, 300 s by default; the PTB tokenizer it plus 1 s per 20 kB of text; every message that a wait
expired names it).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import importlib.util
import json
import os
import re
import select
import shlex
import shutil
import struct
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from vistkit import progress
from vistkit.data.output import at_termination
from vistkit.errors import InputError, MissingDependencyError

MIN_JAVA = 8
TESTED_JAVA = 17
JAVA_HINT = "METEOR needs Java 8+; install a JRE, e.g. apt-get install default-jre, or set JAVA_HOME"

# Meteor's stdio server reads lines (BufferedReader.readLine: \n, \r, \r\n) and splits on '|||'.
_LINE_BREAKS = re.compile(r"\r\n|[\r\n]")


# --------------------------------------------------------------------------------------------------- java
@dataclass(frozen=True)
class JavaInfo:
    """The Java executable found and what ``java -version`` said (major version, its text, whether it started)."""

    path: str
    version: int
    version_text: str
    started: bool = True  # False: `java -version` failed (the JVM could not start, e.g. too little memory)
    #: the JVM option variables it said it picked up ("Picked up JAVA_TOOL_OPTIONS: ..."), as NAME=VALUE
    picked_up: tuple[str, ...] = ()


_JAVA_CACHE: dict[tuple[str | None, str | None], JavaInfo] = {}
_JAVA_LOCK = threading.Lock()  # the prefetch thread and the caller ask at once: one `java -version` between them

#: seconds a Java process may stay silent where a working JVM answers at once (``java -version``, the METEOR
#: helper's hello, the jar's usage text): a ``java`` that hangs is refused in one sentence instead of waiting forever
JAVA_TIMEOUT = 30.0
#: seconds Meteor may take to load a language's tables (the jar parses 61 MB of gzip in 7-28 s; the cache: < 1 s)
#: unless ``VISTKIT_JAVA_TIMEOUT`` is set (`table_load_timeout`)
TABLE_LOAD_TIMEOUT = 300.0
#: the table load's wait in units of ``VISTKIT_JAVA_TIMEOUT`` when that is set (300 s = 10 x the default 30 s)
TABLE_LOAD_FACTOR = 10.0
#: seconds the helper's compile may take (a cold javac takes 1-5 s, minutes on a loaded machine), unless
#: ``VISTKIT_JAVA_TIMEOUT`` is set: then `JAVAC_FACTOR` times it (it was 4 times: raising the setting to 60 s cut
#: the compile's wait from 300 s to 240 s)
JAVAC_TIMEOUT = 300.0
JAVAC_FACTOR = 10.0


#: the JVM's default locale and charsets, pinned on every Java command vistkit runs: Meteor lower-cases with
#: ``String.toLowerCase()`` and prints its statistics with ``String.format``, both in the default locale, so a
#: Turkish locale (dotless i) changed scores and a German one (decimal comma) broke the protocol; the user's
#: ``LANG`` / ``LC_ALL`` or ``JAVA_TOOL_OPTIONS='-Duser.language=tr'`` must not change a number
JVM_LOCALE = (
    "-Duser.language=en", "-Duser.country=US", "-Duser.variant=", "-Duser.script=",
    "-Duser.language.format=en", "-Duser.country.format=US", "-Duser.variant.format=", "-Duser.script.format=",
    "-Duser.language.display=en", "-Duser.country.display=US", "-Duser.variant.display=", "-Duser.script.display=",
    "-Dfile.encoding=UTF-8", "-Dsun.stdout.encoding=UTF-8", "-Dsun.stderr.encoding=UTF-8",
    "-Dstdout.encoding=UTF-8", "-Dstderr.encoding=UTF-8",
)  # fmt: skip
#: the options of ``JAVA_TOOL_OPTIONS`` / ``_JAVA_OPTIONS`` / ``JDK_JAVA_OPTIONS`` that `java_env` drops (the
#: command line wins over the first and the last, but ``_JAVA_OPTIONS`` wins over the command line)
_LOCALE_OPTION = re.compile(
    r"-D(?:user\.(?:language|country|variant|script|region)(?:\.(?:format|display))?|file\.encoding"
    r"|sun\.jnu\.encoding|(?:sun\.)?std(?:out|err)\.encoding|native\.encoding)(?:=|$)"
)
JAVA_OPTION_VARIABLES = ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS")


def java_env(*, last: Sequence[str] = ()) -> dict[str, str]:
    """The environment of every Java process vistkit starts: the user's, less the locale and charset options
    (`_LOCALE_OPTION`) of the JVM option variables (other options, e.g. ``-Xmx1g``, stay); ``last``: options
    appended to a ``_JAVA_OPTIONS`` left set (the JVM reads it after the command line, so it would undo them)."""
    env = dict(os.environ)
    for var in JAVA_OPTION_VARIABLES:
        value = env.get(var)
        if value is None:
            continue
        words = value.split()
        kept = [w for w in words if not _LOCALE_OPTION.match(w)]
        if len(kept) == len(words):
            continue
        if kept:
            env[var] = " ".join(kept)
        else:
            del env[var]
    if last and env.get("_JAVA_OPTIONS", "").strip():
        env["_JAVA_OPTIONS"] = " ".join([env["_JAVA_OPTIONS"], *last])
    return env


def jvm_output_guard(java: JavaInfo) -> list[str]:
    """JVM options that keep the JVM's own output off stdout, where METEOR's helper answers in binary and the
    PTB tokenizer in lines: unified logging (``-verbose:gc``, ``-Xlog:gc``, ``-Xlog:safepoint``: stdout by
    default; warnings go to stderr instead) and the VM's other printing (``-XX:+PrintFlagsFinal``, start-up
    errors). A user's GC log once took the helper's hello, or a score's bytes mid-run; a log to a file is kept.
    Given after the user's options on the command line, and appended to ``_JAVA_OPTIONS`` (`java_env`)."""
    guard = ["-XX:+DisplayVMOutputToStderr"]
    if java.version >= 9:  # -Xlog is Java 9's; Java 8 refuses it (its GC log follows DisplayVMOutputToStderr)
        guard += ["-Xlog:all=off:stdout", "-Xlog:all=warning:stderr"]
    return guard


def java_cwd() -> str | None:
    """The folder a Java process runs in: the current one, or ``/`` when it was deleted under the process (a JVM
    cannot start without a working directory: "Properties init: Could not determine current working directory")."""
    try:
        os.getcwd()
    except OSError:
        return os.path.abspath(os.sep)
    return None


def jvm_base_options() -> list[str]:
    """The options every JVM vistkit starts gets first: no crash log in the user's folder (`crash_log_option`)
    and the pinned locale (`JVM_LOCALE`)."""
    return [crash_log_option(), *JVM_LOCALE]


def crash_log_option() -> str:
    """A JVM that cannot start (too little memory) writes hs_err_pid*.log into the current folder, the user's:
    into the temporary folder instead (no usable temporary folder: the JVM's default)."""
    try:
        folder = tempfile.gettempdir()
    except OSError:
        return "-XX:ErrorFile=/dev/null" if os.name != "nt" else "-XX:ErrorFile=NUL"
    return f"-XX:ErrorFile={os.path.join(folder, 'vistkit-java-hs_err_pid%p.log')}"


#: the Java processes this process started that may still run (javac, the PTB tokenizer, METEOR's helper and
#: stdio servers), so that they end with it (`stop_children`); ``True``: started in a process group of its own
_CHILDREN: dict[subprocess.Popen[bytes], bool] = {}
_CHILDREN_LOCK = threading.Lock()
#: set by `stop_children`: the process is ending, and no new Java process is started (a background thread that
#: finds its javac killed would otherwise start Meteor's stdio server as a fallback)
_ENDING = threading.Event()


def _start(cmd: Sequence[str], *, group: bool = False, **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen`` of a Java command, recorded in `_CHILDREN` (``group``: in a session of its own)."""
    with _CHILDREN_LOCK:
        if _ENDING.is_set():
            raise MissingDependencyError("vistkit is stopping; no Java process is started any more")
        for done in [p for p in _CHILDREN if p.poll() is not None]:
            del _CHILDREN[done]
        proc = subprocess.Popen(list(cmd), start_new_session=group, **kwargs)
        _CHILDREN[proc] = group
    return proc


def stop_children() -> None:
    """Kill every Java process this process started that still runs, and start none any more: the process is
    ending (SIGTERM or SIGHUP in the CLI, `vistkit.data.output.at_termination`; and at exit). Those started by a
    background thread (METEOR's prefetch: javac, the helper building its tables) outlived vistkit for seconds."""
    _ENDING.set()
    with _CHILDREN_LOCK:
        children = list(_CHILDREN.items())
    for proc, group in children:
        if proc.poll() is not None:
            continue
        with contextlib.suppress(OSError):
            if group and os.name != "nt":
                os.killpg(proc.pid, 9)
            else:
                proc.kill()
    for proc, _ in children:
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)
            _read_last_words(proc)  # closes its stderr file (left open: a ResourceWarning at exit)


def _run_java(
    cmd: Sequence[str], *, timeout: float, data: bytes | None = None, cwd: str | None = None, last: Sequence[str] = ()
) -> subprocess.CompletedProcess[bytes]:
    """``subprocess.run`` of a short Java command in a process group of its own: on a timeout, Ctrl-C or any
    error the whole group is killed, so a ``java`` wrapper script that hangs leaves no child behind."""
    posix = os.name != "nt"
    proc = _start(
        list(cmd),
        group=posix,
        stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd or java_cwd(),
        env=java_env(last=last),
    )
    try:
        out, err = proc.communicate(data, timeout=timeout)
    except BaseException:
        if posix:
            try:
                os.killpg(proc.pid, 9)
            except OSError:
                proc.kill()
        else:
            proc.kill()
        proc.communicate()
        raise
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


def java_timeout() -> float:
    """`JAVA_TIMEOUT`, or ``$VISTKIT_JAVA_TIMEOUT`` seconds (0.1 to 10^6; anything else is an error)."""
    from vistkit.limits import env_number

    return float(env_number("VISTKIT_JAVA_TIMEOUT", JAVA_TIMEOUT, low=0.1, high=1e6))


def table_load_timeout() -> float:
    """Seconds METEOR's tables may take to load: `TABLE_LOAD_TIMEOUT`, or `TABLE_LOAD_FACTOR` times
    ``$VISTKIT_JAVA_TIMEOUT`` when that is set (a user on a slow disk raises it; one who lowers it to fail fast on a
    hung JVM is not kept waiting 300 s)."""
    if os.environ.get("VISTKIT_JAVA_TIMEOUT", "").strip():
        return TABLE_LOAD_FACTOR * java_timeout()
    return TABLE_LOAD_TIMEOUT


def javac_timeout() -> float:
    """Seconds the helper's compile may take: `JAVAC_TIMEOUT`, or `JAVAC_FACTOR` times ``$VISTKIT_JAVA_TIMEOUT``
    when that is set (a javac that hung waited 300 s whatever it said)."""
    if os.environ.get("VISTKIT_JAVA_TIMEOUT", "").strip():
        return JAVAC_FACTOR * java_timeout()
    return JAVAC_TIMEOUT


def timeout_advice(factor: float = 1.0) -> str:
    """How to wait longer for a Java wait that expired, naming ``VISTKIT_JAVA_TIMEOUT`` (its value when set) and
    ``factor``, the multiple of it that this wait was allowed."""
    raw = os.environ.get("VISTKIT_JAVA_TIMEOUT", "").strip()
    times = f"; this wait is {factor:g} times it" if factor != 1 else ""
    if raw:
        return f"raise VISTKIT_JAVA_TIMEOUT (now {raw} s{times}) to wait longer"
    return f"set VISTKIT_JAVA_TIMEOUT=SECONDS (default {JAVA_TIMEOUT:g}{times}) to wait longer"


def _java_candidates() -> list[str]:
    out: list[str] = []
    home = os.environ.get("JAVA_HOME")
    if home:
        exe = Path(home) / "bin" / ("java.exe" if os.name == "nt" else "java")
        if exe.is_file() and os.access(exe, os.X_OK):
            out.append(_absolute(str(exe)))
    found = shutil.which("java")
    if found:  # absolute: a relative JAVA_HOME or PATH entry meant nothing in the jar's folder, where METEOR runs
        out.append(_absolute(found))
    return out


_WARNED_HOME: set[str] = set()


def _broken_java_home() -> str | None:
    """``$JAVA_HOME`` when it is set but holds no runnable ``bin/java`` (a removed JDK, a typo), else None."""
    home = os.environ.get("JAVA_HOME")
    if not home:
        return None
    exe = Path(home) / "bin" / ("java.exe" if os.name == "nt" else "java")
    return None if exe.is_file() and os.access(exe, os.X_OK) else home


def parse_java_version(text: str) -> int:
    """The major version from ``java -version`` output (``1.8.0_392`` -> 8, ``17.0.15`` -> 17)."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not m:
        m = re.search(r"(?:openjdk|java) (\d+)(?:\.(\d+))?", text)
    if not m:
        return 0
    major = int(m.group(1))
    if major == 1 and m.group(2):
        return int(m.group(2))
    return major


#: errors starting a process that are the machine's limits (open files, processes, memory), not a missing Java
_RESOURCE_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM)

#: the line a JVM prints on stderr for each option variable it reads
_PICKED_UP = re.compile(r"(?:NOTE: )?Picked up (JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS): ?(.*)$")


def find_java() -> JavaInfo | None:
    """The Java to use (``$JAVA_HOME/bin/java``, else ``java`` on ``PATH``), or ``None``."""
    key = (os.environ.get("JAVA_HOME"), os.environ.get("PATH"))
    with _JAVA_LOCK:
        if key in _JAVA_CACHE:
            return _JAVA_CACHE[key]
        for exe in _java_candidates():
            timeout = java_timeout()
            try:
                proc = _run_java([exe, *jvm_base_options(), "-version"], timeout=timeout)
            except subprocess.TimeoutExpired:  # found, but hangs: say so (not "no java found")
                info = JavaInfo(exe, 0, f"`java -version` did not answer within {timeout:g} s", started=False)
                _JAVA_CACHE[key] = info
                return info
            except OSError as exc:
                if exc.errno in _RESOURCE_ERRNOS:  # the machine's limits, not "no java": said as such by the CLI
                    raise
                continue
            except subprocess.SubprocessError:
                continue
            text = (proc.stderr + proc.stdout).decode("utf-8", "replace")
            lines = [" ".join(line.split()) for line in text.strip().splitlines()]
            picked = [m for line in lines if (m := _PICKED_UP.match(line))]  # the JVM's notes, not its answer
            lines = [line for line in lines if not _PICKED_UP.match(line)]
            first = lines[0] if proc.returncode == 0 and lines else ": ".join(lines[:2])  # a failure: its reason
            info = JavaInfo(
                exe,
                parse_java_version("\n".join(lines)),
                first[:300],
                started=proc.returncode == 0,
                picked_up=tuple(f"{m.group(1)}={m.group(2).strip()}" for m in picked),
            )
            _JAVA_CACHE[key] = info
            return info
        return None


def require_java(purpose: str = "METEOR") -> JavaInfo:
    """`find_java`, raising `MissingDependencyError` when Java is absent or older than 8."""
    hint = JAVA_HINT.replace("METEOR", purpose, 1)
    info = find_java()
    broken_home = _broken_java_home()
    if info is None:
        where = f"JAVA_HOME={broken_home} has no bin/java, and none is on PATH" if broken_home else (
            "no java found on PATH or in JAVA_HOME"
        )
        raise MissingDependencyError(f"{hint} ({where}).")
    if broken_home and info.path not in _WARNED_HOME:  # the user named a Java: say that another one runs
        _WARNED_HOME.add(info.path)
        from vistkit.errors import warn

        warn(f"JAVA_HOME={broken_home} has no bin/java; {purpose} uses {info.path} from PATH instead")
    if not info.started and info.version == 0 and "did not answer" in info.version_text:
        raise MissingDependencyError(
            f"{purpose} needs Java, and {info.path} hangs ({info.version_text}); fix or remove that java, or point "
            "JAVA_HOME at a working one (VISTKIT_JAVA_TIMEOUT=SECONDS waits longer)"
        )
    if not info.started and info.version == 0 and info.picked_up:
        names = " / ".join(p.split("=", 1)[0] for p in info.picked_up)
        raise MissingDependencyError(
            f"{purpose} needs Java, and {info.path} did not start with the JVM options of the environment "
            f"({'; '.join(info.picked_up)}): {info.version_text!r}; fix or unset {names}"
        )
    if not info.started and info.version == 0:
        raise MissingDependencyError(
            f"{purpose} needs Java, and {info.path} is installed but did not start ({info.version_text!r}); the "
            "usual cause is a memory limit (ulimit -v, a container) too small for the JVM: raise it, or cap the "
            "JVM's memory with JAVA_TOOL_OPTIONS='-Xmx1g -XX:ReservedCodeCacheSize=64m'"
        )
    if info.version < MIN_JAVA:
        raise MissingDependencyError(f"{hint} (found {info.version_text!r} at {info.path}).")
    return info


def find_javac(java: JavaInfo) -> str | None:
    """``javac`` next to ``java`` (resolving symlinks), else on ``PATH``."""
    real = Path(os.path.realpath(java.path)).parent / "javac"
    if real.is_file() and os.access(real, os.X_OK):
        return str(real)
    sibling = Path(java.path).parent / "javac"
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return str(sibling)
    return shutil.which("javac")


# --------------------------------------------------------------------------------------------------- jars
def _pycocoevalcap_dir() -> Path:
    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            "the METEOR and PTB tokenizer jars come with pycocoevalcap 1.2; install it: "
            "pip install pycocoevalcap==1.2"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def meteor_jar() -> Path:
    """``meteor-1.5.jar`` as shipped by pycocoevalcap 1.2 (with ``data/paraphrase-en.gz`` beside it)."""
    p = _pycocoevalcap_dir() / "meteor" / "meteor-1.5.jar"
    if not p.is_file():
        raise MissingDependencyError(f"{p} is missing; reinstall it: pip install pycocoevalcap==1.2")
    return p


def paraphrase_table() -> Path:
    """The English paraphrase table Meteor loads for ``-l en`` (found next to the jar)."""
    p = meteor_jar().parent / "data" / "paraphrase-en.gz"
    if not p.is_file():
        raise MissingDependencyError(f"{p} is missing; reinstall it: pip install pycocoevalcap==1.2")
    return p


def ptb_jar() -> Path:
    """``stanford-corenlp-3.4.1.jar`` as shipped by pycocoevalcap 1.2 (its PTBTokenizer)."""
    p = _pycocoevalcap_dir() / "tokenizer" / "stanford-corenlp-3.4.1.jar"
    if not p.is_file():
        raise MissingDependencyError(f"{p} is missing; reinstall it: pip install pycocoevalcap==1.2")
    return p


def cache_dir() -> Path:
    """Per-user cache (``$VISTKIT_CACHE``, else ``$XDG_CACHE_HOME/vistkit``, else ``~/.cache/vistkit``; a private
    temporary folder when that cannot be written: `vistkit.models.runtime.default_cache_dir`)."""
    from vistkit.models.runtime import default_cache_dir

    return default_cache_dir()


# --------------------------------------------------------------------------------------------------- helper
# The helper speaks a binary protocol on stdin/stdout (big-endian, strings = int32 byte length + UTF-8):
#   'C' task lang norm(str)                   -> int32 config id, int32 load ms, int32 loaded (0: tables
#                                                shared), str paraphrase table source ("mapped": compact
#                                                cache, "built": parsed and cached, "parsed", "shared"),
#                                                4 doubles (alpha beta gamma delta), int32 k + k doubles
#                                                (module weights)
# Sources: src/vistkit/resources/java/ (VistkitMeteor.java and our edu/cmu/meteor/aligner classes).
#   'P' cfg n (test ref)*n                    -> n doubles: getMeteorStats(test, ref).score per pair
#   'M' cfg n (line)*n                        -> per line: int32 k + k doubles (the MeteorStats text as
#                                                numbers), double score; then the pooled score. Each line is
#                                                handled like a stdio "SCORE ||| r1 ||| ... ||| hyp" line
#                                                (split on '|||', trim); its stats are re-parsed like "EVAL".
#   'V'                                       -> int32 0x56495354 ("VIST"), at once: the hello that proves a
#                                                working JVM runs the helper (a `java` that hangs is caught)
#   'Q'                                       -> exit
HELPER_CLASS = "VistkitMeteor"
JAVA_SOURCES = "resources/java"  # package data: the helper and our edu/cmu/meteor/aligner classes


def java_sources() -> dict[str, str]:
    """The helper's Java sources shipped with vistkit: relative path (``/``-separated) -> text.

    ``VistkitMeteor.java`` (the helper: Meteor's API, batched, multithreaded, memoised stems) and, in
    ``edu/cmu/meteor/aligner/``, our ``SynonymMatcher``, ``ParaphraseMatcher`` and ``ParaphraseTransducer``:
    same package and names as the jar's classes, found first on the helper's class path, same matches in the same
    order (faster lookups; the paraphrase table held in flat arrays and cached on disk). See each file's comment.
    """
    from importlib.resources import files

    root = files("vistkit").joinpath(JAVA_SOURCES)
    out: dict[str, str] = {}

    def walk(node: Any, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            rel = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, rel + "/")
            elif child.name.endswith(".java"):
                out[rel] = child.read_text(encoding="utf-8")

    walk(root, "")
    if f"{HELPER_CLASS}.java" not in out:
        raise MissingDependencyError(
            f"vistkit's Java sources are missing ({root}); reinstall vistkit: pip install --force-reinstall vistkit"
        )
    return out


def table_cache_dir() -> Path | None:
    """Where the helper caches Meteor's paraphrase table in compact form (None: ``VISTKIT_METEOR_TABLE_CACHE=0``).

    ``$VISTKIT_METEOR_TABLE_CACHE`` when set to a directory, else ``cache_dir()/meteor-tables``. The cache is one
    file per table and jar (~200 MB for English), built once per user by the first helper that loads the table
    (~+1-3 s once) and mapped read-only by every later process; see ``ParaphraseTransducer.java``.
    """
    env = os.environ.get("VISTKIT_METEOR_TABLE_CACHE")
    if env is not None and env.strip().lower() in {"0", "off", "no", "false", ""}:
        return None
    if env:  # absolute: the helper runs in the jar's folder, where a relative path put the table in site-packages
        return Path(_absolute(os.path.expanduser(env)))
    return Path(_absolute(str(cache_dir() / "meteor-tables")))


def _absolute(path: str) -> str:
    """``path`` made absolute against the current folder (as it is when that folder was deleted): paths handed to
    a Java process, which runs in another folder (the jar's), must not be relative."""
    try:
        return os.path.abspath(path)
    except OSError:
        return path


#: days a compact paraphrase table may go unused before a helper start removes it: each pycocoevalcap install (a
#: venv, a reinstall: another path or mtime, so another key) builds its own ~114 MB file, and none was ever removed
TABLE_CACHE_DAYS = 30
_TABLE_FILE = re.compile(r"paraphrase-[0-9a-f]{16}\.(?:bin|lock|bin\.tmp\d+)")


def table_cache_key(java: JavaInfo) -> str:
    """The 16 hex digits naming this install's compact table (``ParaphraseTransducer.key``: the table's real path,
    size and mtime in ms, the jar's size and mtime; Java before 10 reads mtimes to the second)."""

    def millis(st: os.stat_result) -> int:
        ms = st.st_mtime_ns // 1_000_000
        return ms if java.version >= 10 else ms // 1000 * 1000

    table, jar = paraphrase_table(), meteor_jar()
    st_t, st_j = table.stat(), jar.stat()
    ident = (
        f"vistkit-paraphrase|1|{os.path.realpath(table)}|{st_t.st_size}|{millis(st_t)}|{st_j.st_size}|{millis(st_j)}"
    )
    return hashlib.sha256(ident.encode("utf-8")).hexdigest()[:16]


def tend_table_cache(java: JavaInfo) -> None:
    """Mark this install's compact table used (its mtime) and remove the cache's tables, locks and leftover
    temporary files unused for `TABLE_CACHE_DAYS` (another install's table in use is touched by its own helpers).
    Best effort: a cache that cannot be read or changed is left as it is."""
    folder = table_cache_dir()
    if folder is None or not folder.is_dir():
        return
    try:
        current = f"paraphrase-{table_cache_key(java)}"
    except (OSError, MissingDependencyError):
        current = None
    limit = time.time() - TABLE_CACHE_DAYS * 86400
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if not _TABLE_FILE.fullmatch(name):
            continue
        path = folder / name
        with contextlib.suppress(OSError):
            if current is not None and name in (f"{current}.bin", f"{current}.lock"):
                os.utime(path)
            elif path.is_file() and not path.is_symlink() and path.stat().st_mtime < limit:
                path.unlink()


CLASS_MANIFEST = "vistkit-classes.json"  # the compiled classes' SHA-256, written with them


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _classes_intact(folder: Path) -> bool:
    """Whether a cached helper build is complete and unchanged (every class file the manifest lists, with its
    hash); a build from before the manifest existed counts as damaged and is rebuilt once."""
    try:
        manifest = json.loads((folder / CLASS_MANIFEST).read_text(encoding="utf-8"))
        return (
            isinstance(manifest, dict)
            and f"{HELPER_CLASS}.class" in manifest
            and all(_sha256(folder / rel) == digest for rel, digest in manifest.items())
        )
    except (OSError, ValueError):
        return False


_BUILD_PID = re.compile(r"\.tmp(\d+)(?:\.[0-9a-f]+)?$")


def _build_lock(path: Path, *, create: bool) -> int | None:
    """An open descriptor holding an exclusive ``flock`` on ``path`` (a build's lock file), or None when another
    process holds it; raises OSError when the file is absent (``create`` False) or locks are not supported."""
    import fcntl

    fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _remove_dead_builds(target: Path) -> None:
    """Remove the ``meteor-helper-*.tmp<PID>.<TOKEN>`` folders beside ``target`` whose build has ended (a compile
    killed with SIGKILL left them; of any helper version): a build holds a lock on its ``.lock`` file while it runs,
    which tells across machines (a cache in a home folder shared by cluster nodes) and PID namespaces (containers
    sharing a cache), where the process id did not: another node's running build was deleted as "dead", and its
    own run then fell back to Meteor's slower stdio server. A folder without a lock file (an older vistkit's, or
    where locks are not supported) goes when no process of its id runs here."""
    if not target.parent.is_dir():
        return
    for stale in target.parent.glob("meteor-helper-*.tmp*"):
        name = stale.name
        lock = stale if name.endswith(".lock") else stale.with_name(name + ".lock")
        folder = stale.with_name(name[: -len(".lock")]) if name.endswith(".lock") else stale
        if name.endswith(".lock") and os.path.lexists(folder):
            continue  # seen with its folder
        if os.path.lexists(lock):
            try:
                fd = _build_lock(lock, create=False)
            except (OSError, ImportError):  # gone meanwhile, or no locks here: the process id tells, as before
                fd = -1
            if fd is None:  # the build runs (here or elsewhere)
                continue
            if fd >= 0:
                try:
                    shutil.rmtree(folder, ignore_errors=True)
                    with contextlib.suppress(OSError):
                        os.unlink(lock)
                finally:
                    os.close(fd)
                continue
        m = _BUILD_PID.search(folder.name)
        if m is None:
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.unlink(lock)
        except OSError:  # alive under another user, or not ours to ask: left alone
            pass


#: the unusable cache folders already warned about (one warning per folder and process)
_WARNED_HOMES: set[Path] = set()


def _helper_home(home: Path) -> Path | None:
    """The folder to build the helper in: ``home`` (the cache's ``java`` folder, created) when it can be written,
    else (a cache shared read-only, a file or a link loop there) ``java`` in a private folder of the temporary
    folder, with one warning; None when neither can (Meteor's stdio fallback, the same numbers, slower)."""
    from vistkit.errors import warn
    from vistkit.models.runtime import _private_temp_cache, folder_problem

    why = folder_problem(home)
    if not why:
        return home
    fallback = _private_temp_cache()
    spare = fallback / "java" if fallback is not None else None
    if spare is not None and folder_problem(spare):
        spare = None
    if home not in _WARNED_HOMES:
        _WARNED_HOMES.add(home)
        where = f"building it in {spare} for now" if spare is not None else "using Meteor's slower stdio server"
        warn(
            f"vistkit's cache folder {home} cannot hold METEOR's compiled helper ({why}); {where} (make {home} a "
            "writable folder, or set VISTKIT_CACHE to one, to keep it)"
        )
    return spare


def _helper_classpath(java: JavaInfo) -> str | None:
    """Compile the helper once into the cache; returns the directory holding the class, or None (no javac)."""
    jar = meteor_jar()
    sources = java_sources()
    blob = "".join(f"{name}\0{text}\0" for name, text in sorted(sources.items()))
    digest = hashlib.sha256((blob + str(jar) + str(java.version)).encode()).hexdigest()[:16]
    target = cache_dir() / "java" / f"meteor-helper-{digest}"
    if _classes_intact(target):  # also in a cache shared read-only
        return str(target)
    home = _helper_home(target.parent)
    if home is None:
        return None
    target = home / target.name
    if _classes_intact(target):
        return str(target)
    if target.is_dir() and not target.is_symlink():  # damaged (a truncated or edited .class, a missing file):
        shutil.rmtree(target, ignore_errors=True)  # rebuilt, not reported
    elif os.path.lexists(target):  # a file or a link where the folder goes: rmtree left it, and every run then
        with contextlib.suppress(OSError):  # compiled and failed ("the METEOR Java helper stopped unexpectedly")
            target.unlink()
    javac = find_javac(java)
    if javac is None:
        return None
    _remove_dead_builds(target)
    # a name no other build shares (processes of one id on two machines or in two containers wrote into one folder),
    # and its lock held while the build runs (`_remove_dead_builds`)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}.{os.urandom(4).hex()}")
    lock = tmp.with_name(tmp.name + ".lock")
    try:
        lock_fd = _build_lock(lock, create=True)
    except (OSError, ImportError):  # no locks here (or no fcntl): the process id in the name tells
        lock_fd = None
        with contextlib.suppress(OSError):
            os.unlink(lock)
    try:
        return _build_helper(java, javac, jar, sources, target, tmp)
    finally:
        if lock_fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(lock)
            os.close(lock_fd)


def _build_helper(
    java: JavaInfo, javac: str, jar: Path, sources: dict[str, str], target: Path, tmp: Path
) -> str | None:
    """Compile the helper's ``sources`` into ``tmp`` and move it to ``target``; that folder, or None (failed)."""
    src_dir = tmp / "src"
    files: list[str] = []
    try:
        for name, text in sources.items():
            path = src_dir.joinpath(*name.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            files.append(str(path))
    except OSError:  # a full disk, the folder changed meanwhile: Meteor's stdio fallback (the same numbers)
        shutil.rmtree(tmp, ignore_errors=True)
        return None
    release = ["--release", "8"] if java.version >= 9 else []
    # bounded by `javac_timeout`; in a process group of its own, so a wrapper leaves no child
    timeout = javac_timeout()
    try:
        proc = _run_java(
            [javac, *(f"-J{o}" for o in jvm_base_options()), *release, "-nowarn", "-encoding", "UTF-8", "-cp",
             str(jar), "-d", str(tmp), *files],
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:  # a javac that hangs: Meteor's stdio fallback, said (every run compiles again)
        from vistkit.errors import warn

        warn(
            f"METEOR's helper did not compile within {timeout:g} s ({javac} was stopped), so METEOR runs on Meteor's "
            f"own stdio server (the same numbers, slower); {timeout_advice(JAVAC_FACTOR)} for the compile"
        )
        proc = None
    except OSError:  # a javac that cannot run: Meteor's stdio fallback
        proc = None
    if proc is None or proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        return None
    shutil.rmtree(src_dir, ignore_errors=True)
    try:
        manifest = {str(p.relative_to(tmp)): _sha256(p) for p in sorted(tmp.rglob("*.class"))}
        (tmp / CLASS_MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return None
    try:
        os.replace(tmp, target)
    except OSError:  # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)
        if not _classes_intact(target):  # or the name is still taken by something else: the stdio fallback
            return None
    return str(target)


#: the most scoring threads ``VISTKIT_METEOR_THREADS`` may ask for (each holds its own aligner state)
MAX_METEOR_THREADS = 256


def default_threads() -> int:
    """Scoring threads of the helper: ``$VISTKIT_METEOR_THREADS`` (1 to `MAX_METEOR_THREADS`; anything else is an
    error), else the CPU count (2 to 8)."""
    from vistkit.limits import env_number

    fallback = max(2, min(8, os.cpu_count() or 1))
    return int(env_number("VISTKIT_METEOR_THREADS", fallback, low=1, high=MAX_METEOR_THREADS, integer=True))




def helper_jvm_options() -> list[str]:
    """JVM options of the helper: ``$VISTKIT_JAVA_OPTS`` when set, else our defaults.

    ``-Xmx2G`` as pycocoevalcap (Meteor's English tables take ~1.3 GB of heap). ``-XX:TieredStopAtLevel=1``
    (client compiler only): a scoring run is a few seconds of code that is hot at once, and the optimising
    compiler spent most of the first pass compiling and competing for the cores; measured on the full
    meteor-vist set (4,846 pairs, one thread, 2 busy cores, our matchers): first pass 7.9 s -> 4.4-4.7 s, warm
    passes 3.0-3.4 s -> 4.0-4.2 s. A process scores one to a few sets, so the first pass is what counts. The
    parallel/serial collectors and a fixed young generation changed nothing measurable. Scores do not depend
    on these options (the JIT does not change Java's double arithmetic).
    """
    return _user_jvm_options() or list(DEFAULT_HELPER_JVM_OPTIONS)


JAVA_OPTS_ENV = "VISTKIT_JAVA_OPTS"
DEFAULT_HELPER_JVM_OPTIONS = ("-Xmx2G", "-XX:TieredStopAtLevel=1")


def _user_jvm_options() -> list[str]:
    """``$VISTKIT_JAVA_OPTS`` split as a shell splits words (quotes keep a value with spaces one option); empty
    when unset or blank (blank: the defaults, not a JVM without ``-Xmx``). Unbalanced quotes are an `InputError`."""
    raw = os.environ.get(JAVA_OPTS_ENV)
    if raw is None or not raw.strip():
        return []
    try:
        return [word for word in shlex.split(raw) if word]  # '' would be taken for the main class
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise InputError(
            f"{JAVA_OPTS_ENV}={raw!r} cannot be split into JVM options ({str(exc).lower()}); close the quote as in a "
            f"shell, or unset it to use the defaults ({' '.join(DEFAULT_HELPER_JVM_OPTIONS)})"
        ) from None


def stdio_jvm_options() -> list[str]:
    """JVM options of Meteor's stdio server (the fallback without ``javac``): ``$VISTKIT_JAVA_OPTS`` too when set
    (it was ignored there), else pycocoevalcap's ``-Xmx2G``."""
    return _user_jvm_options() or ["-Xmx2G"]


def jvm_settings() -> list[str]:
    """The JVM option settings a METEOR JVM runs under, as ``NAME='VALUE'``: ``VISTKIT_JAVA_OPTS`` and the JVM's
    own variables as `java_env` passes them (those set and not blank), for the messages that a JVM failed."""
    out = []
    raw = os.environ.get(JAVA_OPTS_ENV)
    if raw is not None and raw.strip():
        out.append(f"{JAVA_OPTS_ENV}={raw!r}")
    env = java_env()
    out += [f"{var}={env[var]!r}" for var in JAVA_OPTION_VARIABLES if env.get(var, "").strip()]
    return out


def _jvm_advice(words: str, default: str) -> str:
    """What to do after a METEOR JVM failed (``words``: its reason): ``default`` when no JVM option setting is in
    force, else the settings named, with a larger heap advised when it ran out of memory."""
    settings = jvm_settings()
    if not settings:
        return default
    names = " / ".join(s.split("=", 1)[0] for s in settings)
    if "OutOfMemoryError" in words or "heap" in words.lower():
        fix = f"give it a larger heap there (-Xmx2G: METEOR's English tables take about 1.3 GB), or unset {names}"
    else:
        fix = f"fix or unset {names}"
    return f"it ran with {'; '.join(settings)}: {fix}"


@dataclass(frozen=True)
class MeteorConfig:
    """What a Meteor scorer is built from (the rest are the language/task defaults of Meteor 1.5)."""

    task: str = ""  # "" = Meteor's default task; "hter" for the VIST challenge
    language: str = "en"
    norm: bool = False  # -norm: tokenise/normalise punctuation and lower-case (NORMALIZE_KEEP_PUNCT)

    @property
    def norm_name(self) -> str:
        """The name of the ``norm`` setting: ``norm`` or ``none``."""
        return "norm" if self.norm else "none"


@dataclass(frozen=True)
class ConfigInfo:
    """A loaded Meteor configuration: its id, load time, parameters (alpha, beta, gamma, delta, module weights)
    and how its tables were obtained."""

    cid: int
    load_seconds: float
    alpha: float
    beta: float
    gamma: float
    delta: float
    module_weights: tuple[float, ...]
    loaded_tables: bool = True  # False: shared the tables of an earlier configuration (no load)
    table_source: str = ""  # paraphrase table: "mapped" (compact cache), "built", "parsed", "shared"


@dataclass
class MultiResult:
    """Per-item Meteor sufficient statistics (rows), per-item scores and the pooled (EVAL) score."""

    stats: list[list[float]]
    scores: list[float]
    corpus: float


class _Silent(Exception):
    """The child said nothing before the deadline."""


class _Closed(Exception):
    """The child closed its output (it exited)."""


class _Pipe:
    """A child's stdout read through its file descriptor, each read with an optional deadline (``select``; on
    Windows reads block), so a ``java`` that hangs is noticed instead of waited for forever."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.buf = bytearray()

    def _fill(self, deadline: float | None) -> None:
        if deadline is not None and os.name != "nt":
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise _Silent
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            raise _Closed
        self.buf += chunk

    def read(self, n: int, timeout: float | None = None) -> bytes:
        deadline = None if timeout is None else time.monotonic() + timeout
        while len(self.buf) < n:
            self._fill(deadline)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def readline(self, timeout: float | None = None) -> bytes:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (end := self.buf.find(b"\n")) < 0:
            self._fill(deadline)
        out = bytes(self.buf[: end + 1])
        del self.buf[: end + 1]
        return out


#: the helper's answer to its hello ('V'): "VIST" as a big-endian int
HELPER_HELLO = 0x56495354
#: the most bytes one string of the helper's answers may hold (a larger length is not the helper speaking)
_MAX_ANSWER_STRING = 1 << 20


#: the stderr of METEOR's JVMs (an unlinked temporary file each), read for their reason when they stop
_ERR_FILES: weakref.WeakKeyDictionary[subprocess.Popen[bytes], IO[bytes]] = weakref.WeakKeyDictionary()
_LAST_WORDS: weakref.WeakKeyDictionary[subprocess.Popen[bytes], str] = weakref.WeakKeyDictionary()
#: stderr lines that are no reason: stack frames, the launcher's generic lines, the JVM's notes and log lines
_JVM_NOISE = re.compile(
    # (?<!\s): a whitespace run is tried once where it starts (linear when searched, not only when matched)
    r"(?<!\s)\s+at |(?<!\s)\s*\.\.\. \d+ more|Error: Could not create the Java Virtual Machine"
    r"|Error: A fatal exception has|(?:NOTE: )?Picked up |\[\d+[.,]\d+s\]"
)


def _start_logged(cmd: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """`_start` with stderr kept in a temporary file (not a pipe: a chatty JVM cannot block on it), whose head and
    tail give the reason when the JVM stops (`_last_words`); no temporary file: stderr is dropped as before."""
    try:
        sink: IO[bytes] | None = tempfile.TemporaryFile(prefix="vistkit-java-")
    except OSError:
        sink = None
    try:
        proc = _start(cmd, stderr=sink if sink is not None else subprocess.DEVNULL, **kwargs)
    except BaseException:
        if sink is not None:
            sink.close()
        raise
    if sink is not None:
        _ERR_FILES[proc] = sink
    return proc


def _read_last_words(proc: subprocess.Popen[bytes]) -> None:
    """Read (once) a stopped JVM's stderr file into `_LAST_WORDS` and close it."""
    sink = _ERR_FILES.pop(proc, None)
    if sink is None:
        return
    try:
        size = sink.seek(0, os.SEEK_END)
        sink.seek(0)
        text = sink.read(4096)
        if size > 8192:
            sink.seek(size - 4096)
            text += b"\n" + sink.read(4096)
        elif size > 4096:
            text += sink.read()
    except (OSError, ValueError):
        text = b""
    finally:
        with contextlib.suppress(OSError):
            sink.close()
    raw = text.decode("utf-8", "replace").splitlines()
    lines = [" ".join(line.split()) for line in raw if line.strip() and not _JVM_NOISE.match(line)]
    errors = [line for line in lines if re.search(r"Error|Exception|Unrecognized|Invalid|Could not|Too small", line)]
    _LAST_WORDS[proc] = re.sub(r"[^\x20-\x7e]+", "?", "; ".join((errors or lines)[:2]))[:300]


def _last_words(proc: subprocess.Popen[bytes] | None) -> str:
    """The reason a stopped JVM gave on stderr (``java.lang.OutOfMemoryError: Java heap space``, ``Unrecognized
    option: --bogus``), or ''."""
    if proc is None or proc.poll() is None:
        return ""
    _read_last_words(proc)
    return _LAST_WORDS.get(proc, "")


def _stopped(proc: subprocess.Popen[bytes] | None, what: str = "the METEOR Java helper") -> MissingDependencyError:
    code = proc.poll() if proc is not None else None
    words = _last_words(proc)
    detail = "; ".join(x for x in (f"exit code {code}" if code is not None else "", words) if x)
    how = f" ({detail})" if detail else ""
    advice = _jvm_advice(words, "check that Java works (java -version) and that 2 GB of memory are free")
    return MissingDependencyError(f"{what} stopped unexpectedly{how}; {advice}")


def _kill(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.kill()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    _close_pipes(proc)


def _close_pipes(proc: subprocess.Popen[bytes] | None) -> None:
    """Close our ends of a stopped child's pipes: left open, each was a ResourceWarning at exit ("Exception
    ignored ... unclosed file", a traceback under ``PYTHONWARNINGS=error`` or ``python -X dev``)."""
    if proc is None or proc.poll() is None:
        return
    _read_last_words(proc)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError, ValueError):
                pipe.close()


class MeteorServer:
    """A warm JVM running the helper (``VistkitMeteor.java``) (or Meteor's stdio server as a fallback). Thread-safe."""

    def __init__(self, *, threads: int | None = None) -> None:
        java = require_java()
        self.java = java
        self.threads = threads or default_threads()
        self._lock = threading.Lock()
        self._configs: dict[MeteorConfig, ConfigInfo] = {}
        self._stdio: dict[MeteorConfig, StdioMeteor] = {}
        #: the error that stopped the helper, told again to a caller that held this server meanwhile (the
        #: prefetch thread met it first: the scoring call then said "stopped unexpectedly" with no reason)
        self._failure: MissingDependencyError | None = None
        t0 = time.perf_counter()
        helper = _helper_classpath(java)
        self.compile_seconds = time.perf_counter() - t0
        self.uses_helper = helper is not None
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_seconds = 0.0
        if helper is not None:
            cp = os.pathsep.join([_absolute(helper), str(meteor_jar())])  # the JVM runs in the jar's folder
            tables = table_cache_dir()
            props = [f"-Dvistkit.paraphrase.cache={tables}"] if tables is not None else []
            tend_table_cache(java)
            t0 = time.perf_counter()
            guard = jvm_output_guard(java)
            self.proc = _start_logged(
                [java.path, *helper_jvm_options(), *jvm_base_options(), *guard, *props, "-cp", cp, HELPER_CLASS,
                 str(self.threads)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=str(meteor_jar().parent),
                env=java_env(last=guard),
            )
            self._pipe = _Pipe(self.proc)
            with self._exchange():
                self._hello()
            self.start_seconds = time.perf_counter() - t0

    def _hello(self) -> None:
        """The helper answers 'V' at once: a ``java`` that hangs or is not Java is refused in one sentence."""
        self._send(b"V")
        if self._int(timeout=java_timeout(), doing="start METEOR's helper") != HELPER_HELLO:
            proc, self.proc = self.proc, None
            _kill(proc)
            words = _last_words(proc)
            advice = _jvm_advice(words, "check that it is a working Java (java -version), or point JAVA_HOME at one")
            raise MissingDependencyError(
                f"{self.java.path} did not run METEOR's helper (it answered something else"
                f"{': ' + words if words else ''}); {advice}"
            )

    # -- protocol --------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _exchange(self, cfg: MeteorConfig | None = None) -> Iterator[None]:
        """One request and its whole answer. An exception in between (Ctrl-C in a notebook, a signal handler's, a
        MemoryError) leaves the rest of the answer in the pipe, where the next call would read it as its own (a
        wrong number or a hang): the helper (or ``cfg``'s stdio server) is stopped instead, and the next call
        starts a fresh one (`meteor_server`)."""
        try:
            yield
        except BaseException as exc:
            if isinstance(exc, MissingDependencyError) and self._failure is None:
                self._failure = exc
            if cfg is not None and cfg in self._stdio:
                _kill(self._stdio.pop(cfg).proc)
                self._configs.pop(cfg, None)
            proc, self.proc = self.proc, None
            _kill(proc)
            raise

    def _send(self, data: bytes) -> None:
        if self.proc is None or self.proc.stdin is None:  # stopped after an earlier failure
            raise MissingDependencyError(str(self._failure)) if self._failure is not None else _stopped(None)
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            proc, self.proc = self.proc, None
            _kill(proc)
            raise _stopped(proc) from exc

    def _read(self, n: int, *, timeout: float | None = None, doing: str = "answer", factor: float = 1.0) -> bytes:
        """``n`` bytes of the helper's answer; a helper that exits, or stays silent past ``timeout`` seconds, is
        stopped and reported in one sentence (the server is then unusable; `meteor_server` starts a new one)."""
        assert self.proc is not None
        try:
            return self._pipe.read(n, timeout)
        except _Closed:
            proc, self.proc = self.proc, None
            _kill(proc)
            raise _stopped(proc) from None
        except _Silent:
            proc, self.proc = self.proc, None
            _kill(proc)
            settings = jvm_settings()
            under = f" (it ran with {'; '.join(settings)})" if settings else ""
            raise MissingDependencyError(
                f"{self.java.path} did not {doing} within {timeout:g} s and was stopped{under}; check that Java works "
                f"(java -version) and is not starved of memory or CPU, or {timeout_advice(factor)}"
            ) from None

    def _int(self, *, timeout: float | None = None, doing: str = "answer", factor: float = 1.0) -> int:
        return int(struct.unpack(">i", self._read(4, timeout=timeout, doing=doing, factor=factor))[0])

    def _doubles(self, n: int) -> list[float]:
        return list(struct.unpack(f">{n}d", self._read(8 * n))) if n else []

    @staticmethod
    def _str(text: str) -> bytes:
        b = text.encode("utf-8", errors="surrogatepass")
        return struct.pack(">i", len(b)) + b

    # -- api ---------------------------------------------------------------------------------------------
    def config(self, cfg: MeteorConfig) -> ConfigInfo:
        """Load (once) the scorer for ``cfg``; returns its id, load time and parameters."""
        with self._lock:
            return self._config_locked(cfg)

    def _config_locked(self, cfg: MeteorConfig) -> ConfigInfo:
        if cfg in self._configs:
            return self._configs[cfg]
        if not self.uses_helper:
            t0 = time.perf_counter()
            self._stdio[cfg] = StdioMeteor(cfg, java=self.java)
            info = ConfigInfo(-1, time.perf_counter() - t0, math_nan, math_nan, math_nan, math_nan, ())
        else:
            with self._exchange():
                info = self._load_config(cfg)
        self._configs[cfg] = info
        return info

    def _load_config(self, cfg: MeteorConfig) -> ConfigInfo:
        """The helper's 'C' request: load ``cfg``'s tables; its id, load time and parameters."""
        self._send(b"C" + self._str(cfg.task) + self._str(cfg.language) + self._str(cfg.norm_name))
        cid = self._int(timeout=table_load_timeout(), doing="load METEOR's tables", factor=TABLE_LOAD_FACTOR)
        ms = self._int()
        loaded = self._int()
        size = self._int()
        if not 0 <= size <= _MAX_ANSWER_STRING:  # `_exchange` stops the helper on the way out
            raise MissingDependencyError(
                f"{self.java.path} answered METEOR's helper protocol with nonsense (a {size:,}-byte name); "
                "check that it is a working Java (java -version)"
            )
        table = self._read(size).decode("utf-8", "replace")
        a, b, g, d = self._doubles(4)
        k = self._int()
        return ConfigInfo(cid, ms / 1000.0, a, b, g, d, tuple(self._doubles(k)), bool(loaded), table)

    def pair_scores(self, cfg: MeteorConfig, tests: Sequence[str], refs: Sequence[str]) -> list[float]:
        """``MeteorScorer.getMeteorStats(test, ref).score`` for each pair (Meteor's API, no text changes)."""
        if len(tests) != len(refs):
            raise ValueError("tests and refs differ in length")
        # identical pairs are scored once (a pair's score depends on the pair only)
        index: dict[tuple[str, str], int] = {}
        where = [index.setdefault((t, r), len(index)) for t, r in zip(tests, refs, strict=True)]
        unique = list(index)
        with self._lock:
            info = self._config_locked(cfg)
            if not tests:
                return []
            with self._exchange(cfg):
                if not self.uses_helper:
                    got = self._stdio[cfg].pair_scores([t for t, _ in unique], [r for _, r in unique])
                else:
                    parts = [b"P", struct.pack(">ii", info.cid, len(unique))]
                    for t, r in unique:
                        parts.append(self._str(t))
                        parts.append(self._str(r))
                    self._send(b"".join(parts))
                    got = self._doubles(len(unique))
        return [got[k] for k in where]

    def score_lines(self, cfg: MeteorConfig, lines: Sequence[str]) -> MultiResult:
        """Stdio semantics: each ``SCORE ||| ref1 ||| ... ||| hyp`` line -> stats; then one pooled EVAL."""
        with self._lock:
            info = self._config_locked(cfg)
            with self._exchange(cfg):
                if not self.uses_helper:
                    return self._stdio[cfg].score_lines(lines)
                parts = [b"M", struct.pack(">ii", info.cid, len(lines))]
                parts += [self._str(line) for line in lines]
                self._send(b"".join(parts))
                stats: list[list[float]] = []
                scores: list[float] = []
                for j in range(len(lines)):
                    k = self._int()
                    stats.append(self._doubles(k))
                    scores.append(self._doubles(1)[0])
                    if j % 256 == 255:
                        progress.fraction(j + 1, len(lines))  # the metric's task (vistkit.progress)
                corpus = self._doubles(1)[0]
                return MultiResult(stats, scores, corpus)

    def close(self) -> None:
        """Stop the JVM (politely when idle; killed when a request, e.g. a table load, is still running)."""
        idle = self._lock.acquire(timeout=0.5)
        try:
            for s in self._stdio.values():
                s.close()
            self._stdio.clear()
            proc, self.proc = self.proc, None
            if proc is not None and proc.poll() is None:
                try:
                    if not idle:
                        raise OSError("busy")
                    assert proc.stdin is not None
                    proc.stdin.write(b"Q")
                    proc.stdin.close()
                    proc.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    proc.kill()
                    proc.wait()
            _close_pipes(proc)
        finally:
            if idle:
                self._lock.release()


math_nan = float("nan")


#: what Meteor's stdio line changes but its API keeps: '|||' (the field separator) and the characters <= U+0020
#: that String.trim() strips off a field's ends but Meteor's tokeniser (StringTokenizer: space, \t \n \r \f)
#: keeps inside a word
_STDIO_UNSAFE = re.compile(r"\|\|\||[\x00-\x08\x0b\x0e-\x1f]")


def _stdio_safe(test: str, ref: str) -> tuple[str, str]:
    """``test`` and ``ref`` with each `_STDIO_UNSAFE` string replaced by a private-use character found in neither
    (one per distinct string): a word then matches exactly the words it matched before (no table, stem rule or
    function-word list holds either form), and the stdio line keeps every word intact."""
    found = sorted(set(_STDIO_UNSAFE.findall(test)) | set(_STDIO_UNSAFE.findall(ref)))
    if not found:
        return test, ref
    used = set(test) | set(ref)
    free = (chr(c) for c in range(0xE000, 0xF900) if chr(c) not in used)
    table = {u: next(free) for u in found}
    return (_STDIO_UNSAFE.sub(lambda m: table[m.group(0)], test), _STDIO_UNSAFE.sub(lambda m: table[m.group(0)], ref))


class StdioMeteor:
    """Meteor's own ``-stdio`` server (``java -jar meteor-1.5.jar - - -stdio ...``), one process per config.

    The reference protocol: used as a fallback when ``javac`` is absent, and by tests/benchmarks as the ground
    truth. Texts go in one line each, so newlines are replaced by spaces (Meteor tokenises on whitespace
    anyway); in `score_lines` (the wrappers' protocol) ``|||`` splits a line as in pycocoevalcap, while
    `pair_scores` (the API's pairs, meteor-vist) first swaps ``|||`` and trimmable control characters for
    stand-ins (`_stdio_safe`), so its numbers are the API's.
    """

    def __init__(self, cfg: MeteorConfig, *, java: JavaInfo | None = None) -> None:
        java = java or require_java()
        _check_runs_meteor_jar(java)
        guard = jvm_output_guard(java)
        cmd = [java.path, *stdio_jvm_options(), *jvm_base_options(), *guard, "-jar", str(meteor_jar()), "-", "-",
               "-stdio", "-l", cfg.language]  # fmt: skip
        if cfg.task:
            cmd += ["-t", cfg.task]
        if cfg.norm:
            cmd.append("-norm")
        self.cfg = cfg
        self.java = java
        self.proc = _start_logged(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=str(meteor_jar().parent),
            env=java_env(last=guard),
        )
        self._pipe = _Pipe(self.proc)
        self._answered = False  # the first answer waits for the tables to load (`table_load_timeout`)

    def _write(self, text: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(text.encode("utf-8", errors="surrogatepass"))
            self.proc.stdin.flush()
        except OSError as exc:
            _kill(self.proc)
            raise _stopped(self.proc, "the METEOR jar") from exc

    def _line(self) -> str:
        """One answer line (the first one may wait for the table load; a hang or an exit is one sentence)."""
        timeout = None if self._answered else table_load_timeout()
        try:
            raw = self._pipe.readline(timeout)
        except _Closed:
            _kill(self.proc)
            raise _stopped(self.proc, "the METEOR jar") from None
        except _Silent:
            _kill(self.proc)
            advice = _jvm_advice("", "check that Java works (java -version) and has 2 GB of memory")
            raise MissingDependencyError(
                f"{self.java.path} did not load METEOR's tables within {timeout:g} s and was stopped; {advice}, or "
                f"{timeout_advice(TABLE_LOAD_FACTOR)}"
            ) from None
        self._answered = True
        return raw.decode("utf-8", "replace").strip()

    def _number(self, text: str) -> float:
        try:
            return float(text)
        except ValueError:
            _kill(self.proc)
            raise MissingDependencyError(
                f"the METEOR jar run by {self.java.path} answered {text[:80]!r} where Meteor prints a score; check "
                "that it is a working Java (java -version)"
            ) from None

    def _ask(self, line: str) -> str:
        self._write(line + "\n")
        out = self._line()
        if not out:
            _kill(self.proc)
            raise _stopped(self.proc, "the METEOR jar")
        return out

    @staticmethod
    def one_line(text: str) -> str:
        """``text`` on one line: line breaks replaced by spaces."""
        return _LINE_BREAKS.sub(" ", text)

    def score_stats(self, hyp: str, refs: Sequence[str]) -> str:
        """One ``SCORE`` round trip: the stats text of the best reference."""
        hyp = self.one_line(hyp).replace("|||", "").replace("  ", " ")
        return self._ask(" ||| ".join(("SCORE", " ||| ".join(self.one_line(r) for r in refs), hyp)))

    def pair_scores(self, tests: Sequence[str], refs: Sequence[str]) -> list[float]:
        """Per pair: SCORE then EVAL (two round trips), the per-pair jar protocol.

        The scores are ``getMeteorStats(test, ref).score`` of the texts as given (meteor-vist's API semantics):
        what the stdio line would change (a ``|||`` split or removed, a control character trimmed off a text's
        end) is first replaced by `_stdio_safe`, which Meteor aligns exactly as the original.
        """
        out = []
        for t, r in zip(tests, refs, strict=True):
            t, r = _stdio_safe(t, r)
            stats = self.score_stats(t, [r])
            out.append(self._number(self._ask(f"EVAL ||| {stats}")))
            self._drain_one()
        return out

    def _drain_one(self) -> None:
        # EVAL prints one score per stats block and then the pooled score: read the second line too.
        self._line()

    def score_lines(self, lines: Sequence[str]) -> MultiResult:
        """Each line sent (`one_line`), its answer being its stats, then one ``EVAL`` over them all: the stats,
        per-line scores and the pooled score."""
        stats_text = [self._ask(self.one_line(line)) for line in lines]
        self._write("EVAL ||| " + " ||| ".join(stats_text) + "\n")
        scores = [self._number(self._line()) for _ in lines]
        corpus = self._number(self._line())
        return MultiResult([[self._number(x) for x in s.split()] for s in stats_text], scores, corpus)

    def close(self) -> None:
        """Close the server's input and wait for it to end (killed when it does not within 5 s)."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        _close_pipes(self.proc)


def _check_runs_meteor_jar(java: JavaInfo) -> None:
    """``java -jar meteor-1.5.jar`` prints Meteor's usage at once: a ``java`` that hangs or is not Java is refused
    in one sentence before Meteor's stdio server would wait minutes for its tables."""
    with _JAVA_LOCK:  # the prefetch thread asked first: its answer, not a second wait
        if java.path in _JAR_RUNS:
            if _JAR_RUNS[java.path]:
                raise MissingDependencyError(_JAR_RUNS[java.path])
            return
        try:
            _run_meteor_jar_usage(java)
        except MissingDependencyError as exc:
            _JAR_RUNS[java.path] = str(exc)
            raise
        _JAR_RUNS[java.path] = ""


_JAR_RUNS: dict[str, str] = {}  # java path -> "" (runs the jar) or the sentence saying why not


def _run_meteor_jar_usage(java: JavaInfo) -> None:
    timeout = java_timeout()
    try:
        proc = _run_java(
            [java.path, *jvm_base_options(), "-jar", str(meteor_jar())], timeout=timeout, cwd=str(meteor_jar().parent)
        )
    except subprocess.TimeoutExpired:
        raise MissingDependencyError(
            f"{java.path} did not run METEOR's jar within {timeout:g} s (it printed nothing); check that Java works "
            f"(java -version), or {timeout_advice()}"
        ) from None
    except OSError as exc:
        raise MissingDependencyError(f"{java.path} could not run METEOR's jar ({exc.strerror or exc})") from None
    text = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    if "Meteor" not in text:
        first = re.sub(r"[^\x20-\x7e]+", "?", " ".join(text.split()))[:120]
        raise MissingDependencyError(
            f"{java.path} did not run METEOR's jar (it printed {first!r}); check that it is a working Java "
            "(java -version), or point JAVA_HOME at one"
        )


_SERVER: MeteorServer | None = None
_SERVER_LOCK = threading.Lock()
#: a ``java`` that hung while starting the helper, by (JAVA_HOME, PATH): the prefetch thread already waited for
#: it, so the caller gets the same sentence at once instead of waiting again
_HUNG: dict[tuple[str | None, str | None], str] = {}


def prefetch(cfg: MeteorConfig) -> None:
    """Start the shared JVM and load ``cfg``'s tables in the background (errors surface on first real use)."""

    def run() -> None:
        try:
            meteor_server().config(cfg)
        except Exception:  # the scoring call reports the same problem with its message
            pass

    threading.Thread(target=run, name="vistkit-meteor-prefetch", daemon=True).start()


def meteor_server() -> MeteorServer:
    """The process-wide warm METEOR JVM (started on first use, closed at exit)."""
    global _SERVER
    with _SERVER_LOCK:
        server = _SERVER
        if server is None or (server.uses_helper and (server.proc is None or server.proc.poll() is not None)):
            key = (os.environ.get("JAVA_HOME"), os.environ.get("PATH"))
            if key in _HUNG:
                raise MissingDependencyError(_HUNG[key])
            _SERVER = None
            try:
                server = _SERVER = MeteorServer()
            except MissingDependencyError as exc:
                if "within" in str(exc):  # a hang (a timeout), not a missing Java that may be installed meanwhile
                    _HUNG[key] = str(exc)
                raise
        return server


def shutdown() -> None:
    """Close the shared JVM (also registered with atexit)."""
    global _SERVER
    with _SERVER_LOCK:
        if _SERVER is not None:
            _SERVER.close()
            _SERVER = None


def _at_exit() -> None:
    """At exit: close the shared JVM politely when it is idle (a background thread still starting it is not waited
    for), then stop every Java process still running (`stop_children`)."""
    global _SERVER
    idle = _SERVER_LOCK.acquire(timeout=0.5)
    try:
        if idle and _SERVER is not None:
            _SERVER.close()
            _SERVER = None
    finally:
        if idle:
            _SERVER_LOCK.release()
    stop_children()


atexit.register(_at_exit)
at_termination(stop_children)  # SIGTERM/SIGHUP in the CLI end the process without running atexit


# --------------------------------------------------------------------------------------------------- PTB
#: the line `run_ptb_tokenizer` adds after the texts, and what the tokenizer makes of it
PTB_CHECK_LINE = "VistkitPTB Check, done."
PTB_CHECK_TOKENS = "vistkitptb check , done ."
PTB_CLASS_AND_FLAGS = ("edu.stanford.nlp.process.PTBTokenizer", "-preserveLines", "-lowerCase")


def run_ptb_tokenizer(lines: Sequence[str]) -> list[str]:
    """Run Stanford's PTBTokenizer (``-preserveLines -lowerCase``) on ``lines`` (no line breaks inside) in one
    JVM call; returns one output line per input line."""
    java = require_java("the PTB tokenizer (coco metrics)")
    if not lines:
        return []
    # a last line with a known answer: a `java` that is not the tokenizer, or a text the jar split in two, cannot
    # pass for tokens (an empty last text would give no line at all; followed by this line it gives one)
    data = "\n".join([*lines, PTB_CHECK_LINE]).encode("utf-8", errors="surrogatepass")
    # the tokenizer reads ~1 MB/s and more: a JVM start plus 20 kB/s is ample, and a `java` that hangs is stopped
    timeout = java_timeout() + len(data) / 20_000
    guard = jvm_output_guard(java)
    try:
        proc = _run_java(
            [java.path, *jvm_base_options(), *guard, "-cp", str(ptb_jar()), *PTB_CLASS_AND_FLAGS],
            timeout=timeout,
            data=data,
            last=guard,
        )
    except subprocess.TimeoutExpired:
        raise MissingDependencyError(
            f"the Stanford PTB tokenizer ({java.path}) did not finish {len(lines):,} texts within "
            f"{f'{timeout:,.0f}' if timeout >= 10 else f'{timeout:.2g}'} s "
            f"and was stopped; check that Java works (java -version), or {timeout_advice()} (it waits that plus 1 s "
            "per 20 kB of text)"
        ) from None
    if proc.returncode != 0:
        why = " ".join(proc.stderr.decode("utf-8", "replace").split())[-300:] or f"exit code {proc.returncode}"
        raise MissingDependencyError(f"the Stanford PTB tokenizer ({java.path}) failed: {why}")
    try:
        out = proc.stdout.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        raise MissingDependencyError(
            f"the Stanford PTB tokenizer ({java.path}) wrote text that is not UTF-8; check that it is a working Java "
            "(java -version)"
        ) from None
    if out and out[-1] == "":
        out.pop()
    if len(out) != len(lines) + 1 or out[-1].strip() != PTB_CHECK_TOKENS:
        raise MissingDependencyError(
            f"the Stanford PTB tokenizer ({java.path}) returned {len(out) - 1:,} lines for {len(lines):,} texts, "
            "so no text can be matched to its tokens; check that it is a working Java (java -version)"
        )
    return out[:-1]
