"""The Ray engine: shard stories over Ray actors that load each metric once, merge their statistics.

Why Ray core actors and not Ray Data ``map_batches``: the merge needs per-item statistics back in input order
and exactly (NumPy rows, not Arrow-converted columns), CIDEr-D needs a second pass with document frequencies
broadcast from the first, METEOR needs one long-lived helper JVM per worker, and a failed shard must be
retried or reported, never dropped. A small pool of stateful actors with a bounded window of in-flight shards
gives all of that directly (the streaming and backpressure Ray Data would add) without converting `Story`
objects to Arrow, and starts faster. Each actor builds a metric the first time it is asked for it and keeps
it (one model load, one JVM per worker); actors restart after a crash and their shard is re-run.

Memory stays bounded: the driver keeps at most ``2 x workers`` shards in flight or waiting to be merged, and
`RayEngine.score_stream` consumes an iterator of items lazily, keeping only per-item scores and summed
statistics (`vistkit.engine.merge.StreamTotals`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from vistkit import progress
from vistkit.data.story import StorySet
from vistkit.engine import (
    Engine,
    EngineError,
    RunWarnings,
    batched,
    check_batch_size,
    check_items,
    check_metric,
    check_metric_options,
    checked_items,
)
from vistkit.engine.merge import (
    FallbackTally,
    StreamTotals,
    cannot_stream,
    cider_df_part,
    cider_score_part,
    merge_scores,
    strategy,
)
from vistkit.errors import InputError, MissingDependencyError, VistkitError
from vistkit.metrics.base import Item, Metric, Score, get_metric_class

RAY_MISSING = "--engine ray needs Ray, which is not installed: pip install 'vistkit[ray]'"
#: how often a crashed worker is restarted and its shard re-run before the run fails
MAX_RETRIES = 3
#: the most worker actors one engine starts (each is a process; more would only queue on any real cluster)
MAX_WORKERS = 4096
#: seconds to wait for the workers to start (they wait for free CPUs / GPUs): $VISTKIT_RAY_START_TIMEOUT
START_TIMEOUT = 120.0


def start_timeout() -> float:
    """`START_TIMEOUT`, or ``$VISTKIT_RAY_START_TIMEOUT`` seconds (1 to 86,400; anything else is one sentence; it
    was read when the module was imported, and a value that was not a number crashed the import)."""
    from vistkit.limits import env_number

    return float(env_number("VISTKIT_RAY_START_TIMEOUT", START_TIMEOUT, low=1, high=86_400))


#: seconds `check_reachable` waits for a cluster's address to accept a connection
CONNECT_TIMEOUT = 10.0
#: seconds a server that accepted the connection gets to answer (Ray's gRPC servers send their HTTP/2 SETTINGS at
#: once, and its GCS answers the cluster-id request ``ray.init`` makes first in milliseconds)
ANSWER_TIMEOUT = 3.0
#: the most characters of an address a message shows
_SHOWN = 120


def _shown(address: str) -> str:
    """``address`` as a message shows it: at most `_SHOWN` characters."""
    return address if len(address) <= _SHOWN else address[:_SHOWN] + "..."


def cluster_address(address: str | None) -> tuple[str | None, str]:
    """What ``ray.init`` is given for ``--address`` (None: a new private local cluster) and how a message names it.

    No ``--address`` with ``$RAY_ADDRESS`` set (``ray job submit`` sets it) joins that cluster, as every Ray program
    does; without either, a new local cluster starts even where ``ray start`` left one running (Ray would join
    that one, and refused the local cluster's CPU count: "could not reach the Ray cluster at a new local
    cluster")."""
    env = os.environ.get("RAY_ADDRESS", "").strip()
    given = None if address is None else address.strip()
    if given in (None, "auto") and env and env != "local":
        return env, f"RAY_ADDRESS={_shown(env)}"
    if given in (None, "local"):
        return None, "a new local cluster"
    assert given is not None
    return given, _shown(given)


def _bad_address(where: str, why: str) -> InputError:
    return InputError(
        f"{where} is not a Ray cluster address ({why}); give HOST:PORT (IPv6: [HOST]:PORT), auto, or ray://HOST:PORT"
    )


def _host_port(hostport: str, where: str) -> tuple[str, int]:
    """HOST and PORT of ``HOST:PORT`` / ``[IPv6]:PORT`` as Ray reads them, else one `InputError`: an empty host
    or port was "could not reach the Ray cluster" (``:123`` after Ray's logged traceback), a port out of range
    made ``ray.init`` retry for minutes (``-1``) or was "connection refused" (``0``, ``99999``)."""
    if hostport.startswith("["):
        host, close, rest = hostport[1:].partition("]")
        if not close or (rest and not rest.startswith(":")):
            raise _bad_address(where, f"Invalid address format: {_shown(hostport)}")
        port = rest[1:]
        if not rest:
            raise _bad_address(where, "no port")
    else:
        if hostport.count(":") != 1:
            raise _bad_address(where, f"Invalid address format: {_shown(hostport)}")
        host, _, port = hostport.partition(":")
    if not host.strip():
        raise _bad_address(where, "no host")
    if not port:
        raise _bad_address(where, "no port")
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise _bad_address(where, f"port {port[:20]!r} is not a number from 1 to 65535")
    return host, int(port)


def check_reachable(target: str, where: str) -> None:
    """Refuse at once an address that cannot be a running Ray cluster's, where ``ray.init`` retried for minutes
    (printing its C++ warnings, deaf to Ctrl-C and SIGTERM) or took 20 s to say "Failed to connect": a malformed
    one (an `InputError`); nothing accepting a connection there (within `CONNECT_TIMEOUT` seconds); a server that
    is not Ray's, or a cluster that wants a token this process does not have (within `ANSWER_TIMEOUT`; each an
    `EngineError`). A ``ray://`` address without Ray Client installed is a `MissingDependencyError`."""
    import importlib.util
    import socket

    client = target.startswith("ray://")
    if client:
        if importlib.util.find_spec("grpc") is None:
            named = where if where.startswith("RAY_ADDRESS=") else f"--address {where}"
            raise MissingDependencyError(
                f"{named} connects through Ray Client, which is not installed: pip install 'ray[client]' (or run "
                "vistkit on the cluster with --address auto)"
            )
        hostport = target[len("ray://") :].split("/", 1)[0]
        if ":" not in hostport.rpartition("]")[2]:
            hostport += ":10001"  # Ray Client's default port
    else:
        try:  # Ray's own reading of the address (auto: the cluster `ray start` recorded; localhost: this node)
            from ray._private.services import canonicalize_bootstrap_address
        except ImportError:  # another Ray version: ray.init says what is wrong, however long it takes
            return
        if target != "auto":
            _host_port(target, where)  # before Ray, which logged a traceback for an empty host
        try:
            with _ray_logger_muted("ray._private.services"):
                hostport = canonicalize_bootstrap_address(target) or ""
        except (ConnectionError, ValueError) as exc:
            raise _cluster_error(exc, where) from None
    host, port = _host_port(hostport, where)
    shown = f"{_shown(host)}:{port}" if ":" not in host else f"[{_shown(host)}]:{port}"
    try:
        conn = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
    except (UnicodeError, ValueError):  # a label over 63 characters, an empty label (a..b), a NUL
        raise _bad_address(where, f"{_shown(host)!r} is not a host name") from None
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__).lower()
        raise EngineError(
            f"no Ray cluster answers at {where} ({shown}: {why}); start one with `ray start --head` there, "
            "or check the address (--address auto|HOST:PORT|ray://HOST:PORT)"
        ) from None
    with conn:
        if os.environ.get("RAY_USE_TLS", "").strip().lower() in ("1", "true", "yes"):
            return  # a TLS handshake comes first there: only Ray itself can tell
        conn.settimeout(min(CONNECT_TIMEOUT, ANSWER_TIMEOUT))
        refused = _not_grpc(conn)
    if refused is None and not client:
        refused = _ask_gcs(f"{host}:{port}" if ":" not in host else f"[{host}]:{port}", where, auto=target == "auto")
    if refused is not None:
        raise EngineError(
            f"what answers at {where} ({shown}) is not a Ray cluster ({refused}); give the address `ray start "
            "--head` printed (its GCS port, 6379 by default, or ray://HOST:10001 for Ray Client)"
        )


@contextlib.contextmanager
def _ray_logger_muted(name: str) -> Iterator[None]:
    """Ray's Python logger ``name`` says nothing meanwhile (unless ``VISTKIT_DEBUG`` is set)."""
    log = logging.getLogger(name)
    if progress.env_flag("VISTKIT_DEBUG") or log.disabled:
        yield
        return
    log.disabled = True
    try:
        yield
    finally:
        log.disabled = False


#: seconds the child process of `_ask_gcs` may take to import Ray before it asks (killed past that)
_IMPORT_TIMEOUT = 30

#: `_ask_gcs`'s child: Ray's own GCS client asks the cluster id; one JSON line says how that went. The token
#: set-up is ray.init's own (``auto`` sends ~/.ray/auth_token where RAY_AUTH_MODE is unset; token mode with no
#: token is an AuthenticationError: Ray's C++ client killed the process there). The kernel ends it (SIGALRM, no
#: handler) past its time: the client ignores its deadline while the server is not ready (one that answers
#: GOAWAY: 60 s).
_GCS_PROBE = """
import json, signal, sys
signal.signal(signal.SIGALRM, signal.SIG_DFL)
signal.alarm(int(sys.argv[3]))
from ray._raylet import InnerGcsClient
from ray.exceptions import AuthenticationError
try:
    from ray._private.authentication import authentication_token_setup as setup
    from ray._raylet import AuthenticationMode, get_authentication_mode
    if sys.argv[5] == "auto":
        setup.maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    setup.ensure_token_if_auth_enabled(None, create_token_if_missing=False)
    token = get_authentication_mode() == AuthenticationMode.TOKEN
except AuthenticationError as exc:
    print(json.dumps({"auth": str(exc), "token": True}))
    sys.exit()
except Exception as exc:
    print(json.dumps({"skip": str(exc)}))
    sys.exit()
print(json.dumps({"asking": True}), flush=True)
signal.alarm(int(sys.argv[4]))
try:
    InnerGcsClient.standalone(sys.argv[1], None, int(sys.argv[2]))
    print(json.dumps({"ok": True}))
except AuthenticationError as exc:
    print(json.dumps({"auth": str(exc), "token": token}))
except Exception as exc:
    print(json.dumps({"error": str(exc) or type(exc).__name__}))
"""


def _ask_gcs(hostport: str, where: str, *, auto: bool = False) -> str | None:
    """None when the server at ``hostport`` answers, within `ANSWER_TIMEOUT` seconds, the request ``ray.init``
    makes first (the cluster id), else why not: ``ray.init`` retried it for 20 s to minutes at an HTTP/2 server
    that is not Ray's, printing Ray's C++ warnings. A cluster that wants a token this process does not send (or
    refuses the one it sends) is one `EngineError` saying where the token goes. Ray's own GCS client asks, in a
    child process (a few hundred milliseconds to import Ray) whose output is dropped unless ``VISTKIT_DEBUG``
    is set; None where that cannot tell (another Ray version, no child process)."""
    import json
    import subprocess

    answer = math.ceil(ANSWER_TIMEOUT)
    argv = [sys.executable, "-c", _GCS_PROBE, hostport, str(answer * 1000), str(_IMPORT_TIMEOUT), str(answer + 1)]
    argv.append("auto" if auto else "given")
    debug = progress.env_flag("VISTKIT_DEBUG")
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=None if debug else subprocess.DEVNULL,
            timeout=_IMPORT_TIMEOUT + answer + 5,
            check=False,
        )
    except (subprocess.TimeoutExpired, OSError):  # its alarms failed; no child process here
        return None
    try:
        said = json.loads(done.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (IndexError, ValueError):
        return None  # Ray could not be imported there (in time), or another Ray: ray.init says what it says
    if not isinstance(said, dict) or said.get("ok") or "skip" in said:
        return None
    if said.get("asking"):  # and no answer: the kernel ended it (SIGALRM), or Ray's client ended the process
        if done.returncode == -14:  # the client still waited for the server to become ready
            return f"it did not answer Ray's first request within {answer} s"
        raise EngineError(
            f"Ray's client crashed when it asked the cluster at {where} for its id (exit status {done.returncode}), "
            "as ray.init would have in this process; run again with VISTKIT_DEBUG=1 to see Ray's message"
        )
    if "auth" in said:
        raise _auth_error(str(said["auth"]), where, token_sent=said.get("token"))
    text = " ".join(str(said.get("error", "")).split())[:160]
    if "deadline" in text.lower() or "timed out" in text.lower():
        return f"it did not answer Ray's first request within {answer} s"
    return f"its answer to Ray's first request: {text}"


#: where a joining driver reads the cluster's token, and how to get it
_TOKEN_HELP = (
    "RAY_AUTH_TOKEN (or in the file RAY_AUTH_TOKEN_PATH names, ~/.ray/auth_token by default); `ray get-auth-token` "
    "on the cluster's head node prints it"
)


def _auth_error(exc: BaseException | str, where: str, *, token_sent: bool | None = None) -> EngineError:
    """One sentence for token authentication (Ray >= 2.5x) that failed: the cluster refused this process, which
    sent no token (``RAY_AUTH_MODE=token`` unset here) or a wrong one (``token_sent``: whether it sent one, where
    known); or this process found no token, or could not read the one it was pointed at."""
    text = " ".join(str(exc).split())
    if "InvalidAuthToken" in text or "missing or incorrect" in text:  # the cluster's answer
        if token_sent is None:
            token_sent = os.environ.get("RAY_AUTH_MODE", "").strip().lower() == "token"
        if not token_sent:
            return EngineError(
                f"the Ray cluster at {where} requires token authentication and this process sent no token: set "
                f"RAY_AUTH_MODE=token and the cluster's token in {_TOKEN_HELP}"
            )
        return EngineError(
            f"the Ray cluster at {where} refused the token this process sent: give its own token in {_TOKEN_HELP}"
        )
    if where == "a new local cluster":
        first = text.split(". ")[0][:200]
        return EngineError(
            f"Ray could not set up token authentication for a new local cluster ({first}); fix or unset "
            "RAY_AUTH_MODE, RAY_AUTH_TOKEN and RAY_AUTH_TOKEN_PATH"
        )
    if "no authentication token was found" in text:
        return EngineError(
            f"RAY_AUTH_MODE=token is set but no token was found to join the Ray cluster at {where}: put its token in "
            f"{_TOKEN_HELP}"
        )
    first = text.split(". ")[0][:200]
    return EngineError(
        f"this process could not read its token to join the Ray cluster at {where} ({first}): put the cluster's "
        f"token in {_TOKEN_HELP}"
    )


#: an HTTP/2 client's connection preface and an empty SETTINGS frame (RFC 9113, sections 3.4 and 6.5)
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _not_grpc(conn: Any) -> str | None:
    """None when the server on ``conn`` speaks HTTP/2 as Ray's gRPC servers (GCS, Ray Client) do: it answers a
    client preface with a SETTINGS frame (type 4) within ``conn``'s timeout; else why not. ``ray.init`` retried
    for minutes against any other server (a web server, a stale port), deaf to Ctrl-C and SIGTERM."""
    try:
        conn.sendall(_HTTP2_PREFACE)
        head = b""
        while len(head) < 9:
            chunk = conn.recv(9 - len(head))
            if not chunk:
                return "it closed the connection without an HTTP/2 reply"
            head += chunk
    except TimeoutError:
        return f"no HTTP/2 reply within {conn.gettimeout() or CONNECT_TIMEOUT:g} s"
    except OSError as exc:
        return (exc.strerror or type(exc).__name__).lower()
    if head[3] != 4:
        return "its reply is not HTTP/2, which Ray's gRPC servers speak"
    return None


def _cluster_error(exc: BaseException, where: str) -> VistkitError:
    """One sentence for a ``ray.init`` that failed."""
    text = " ".join(str(exc).split())[:300]
    if "Invalid address" in text or "Invalid Ray address" in text:
        return InputError(
            f"{where} is not a Ray cluster address ({text[:160]}); give HOST:PORT (IPv6: [HOST]:PORT), auto, or "
            "ray://HOST:PORT"
        )
    if "ray[client]" in text:
        return MissingDependencyError(
            f"{where} connects through Ray Client, which is not installed: pip install 'ray[client]'"
        )
    if where == "a new local cluster" and isinstance(exc, OSError) and not isinstance(exc, ConnectionError):
        folder = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
        return EngineError(
            f"Ray could not start a local cluster in {os.path.join(folder, 'ray')} ({text}); point TMPDIR "
            "(or RAY_TMPDIR) at a short, writable local folder such as /tmp"
        )
    hint = ""
    if where != "a new local cluster" and "Failed to connect" in text and not os.environ.get("RAY_AUTH_MODE"):
        # Ray >= 2.5x gives new clusters token authentication, and a driver joining one sends its token only
        # under RAY_AUTH_MODE=token (it retried for 20 s, then said only "Failed to connect")
        hint = " (a cluster with token authentication also needs RAY_AUTH_MODE=token here)"
    return EngineError(
        f"could not reach the Ray cluster at {where} ({text}); start one with `ray start --head` (--address auto "
        f"joins the one on this machine), pass --address ray://HOST:PORT of a running one, or leave --address out "
        f"for a private local cluster{hint}"
    )


#: not empty while an engine stops its workers: the messages Ray prints about the calls they leave are dropped
_CLUSTER_MESSAGES_MUTED: list[bool] = []


def _route_cluster_messages_to_stderr(ray: Any) -> None:
    """Ray's driver prints the cluster's messages ("(raylet) A worker died or was killed ...", a dying raylet's
    46-line state dump) to standard output (``ray._private.worker.print_to_stdstream`` with ``is_err`` False),
    where they came before vistkit's results and broke ``-f json``; they go to standard error, and nowhere under
    ``-q`` / ``VISTKIT_QUIET=1``. (A Ray without that function prints as it does.)"""
    from vistkit.progress import warnings_silenced

    module: Any = getattr(getattr(ray, "_private", None), "worker", None)
    original = getattr(module, "print_to_stdstream", None)
    if module is None or original is None or getattr(original, "vistkit_routed", False):
        return

    def to_stderr(data: Any, *args: Any, **kwargs: Any) -> Any:
        if warnings_silenced() or _CLUSTER_MESSAGES_MUTED:
            return None
        if isinstance(data, dict):
            data = {**data, "is_err": True}
        return original(data, *args, **kwargs)

    to_stderr.vistkit_routed = True  # type: ignore[attr-defined]
    module.print_to_stdstream = to_stderr


def _start_cluster(ray: Any, opts: dict[str, Any], where: str) -> None:
    """``ray.init(**opts)``, its failures as one sentence. Starting a local cluster, a SIGTERM or Ctrl-C that
    arrives meanwhile is held until it returns, then acted on after ``ray.shutdown()``: Ray's own handler exited
    mid-start with status 15 and left the half-started cluster's agent processes running, orphaned. Joining a
    cluster (nothing starts here), they act at once, SIGTERM with status 143."""
    import signal

    local = opts.get("address") in (None, "local")
    if not local:
        check_reachable(opts["address"], where)
    # a token the cluster wants and this process lacks (`check_reachable` says so first, but not behind TLS):
    # Ray's AuthenticationError was "unexpected ... a bug in vistkit"
    auth = getattr(getattr(ray, "exceptions", None), "AuthenticationError", None)
    failures = (OSError, RuntimeError, ValueError, *((auth,) if isinstance(auth, type) else ()))
    try:
        with _signals_held(ray, hold=local) as received:
            try:
                ray.init(**opts)
            except failures as exc:  # ConnectionError is an OSError
                with contextlib.suppress(Exception):
                    ray.shutdown()
                if isinstance(auth, type) and isinstance(exc, auth):
                    raise _auth_error(str(exc), where) from None
                raise _cluster_error(exc, where) from None
    except (KeyboardInterrupt, SystemExit):
        with contextlib.suppress(Exception):
            ray.shutdown()
        raise
    if received:
        with contextlib.suppress(Exception):
            ray.shutdown()
        if signal.SIGINT in received:
            raise KeyboardInterrupt
        raise SystemExit(128 + received[0])


@contextlib.contextmanager
def _signals_held(ray: Any, *, hold: bool = True) -> Iterator[list[int]]:
    """Keep Ray from installing its SIGTERM handlers (main thread only) and, with ``hold``, record SIGTERM and
    SIGINT instead of acting on them (yields the list of the signals received; the same signal a second time
    acts at once); without, SIGTERM exits with status 143 at once."""
    import signal
    import threading

    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def held(signum: int, frame: Any) -> None:
        if signum in received:  # sent again: the user insists (a local start that hangs)
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + signum)
        received.append(signum)

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    utils = getattr(getattr(ray, "_private", None), "utils", None)
    ray_setter = getattr(utils, "set_sigterm_handler", None)
    signals = (signal.SIGTERM, signal.SIGINT) if hold else (signal.SIGTERM,)
    previous = {s: signal.signal(s, held if hold else stop) for s in signals}
    if ray_setter is not None:
        utils.set_sigterm_handler = lambda handler: None  # type: ignore[union-attr]
    try:
        yield received
    finally:
        if ray_setter is not None:
            utils.set_sigterm_handler = ray_setter  # type: ignore[union-attr]
        for s, handler in previous.items():
            signal.signal(s, handler)


_CLASS_ATTRS = (
    "name",
    "higher_is_better",
    "lower_bound",
    "upper_bound",
    "needs_references",
    "needs_images",
    "needs_human_story",
    "default_keying",
    "card",
    "item_scores_depend_on_corpus",
)


def _check_fits(workers: int, cpus: float, gpus: float, resources: dict[str, float], *, free: bool = False) -> None:
    """Refuse at once a worker count the local cluster cannot hold (Ray would wait `start_timeout` seconds);
    ``free``: ``resources`` are what other engines of this process left free of a cluster they share."""
    for what, each in (("CPU", cpus), ("GPU", gpus)):
        have = float(resources.get(what, 0.0))
        if each <= 0 or workers * each <= have + 1e-9:
            continue
        if free and have < each:
            raise InputError(
                f"the other Ray engines of this process hold every {what} of the local cluster; close them first "
                "(engine.close()), or score with one of them"
            )
        if have == 0:
            raise InputError(f"this machine's local Ray cluster has no {what}; leave out --num-gpus-per-worker")
        raise InputError(
            f"{workers} Ray workers need {workers * each:g} {what}s and this machine's local Ray cluster has "
            f"{have:g}{' free (other engines of this process hold the rest)' if free else ''}; ask for at most "
            f"{int(have / each + 1e-9)} with --workers"  # (1 // 0.1 is 9.0)
        )


def _default_workers(resources: dict[str, float], *, cpus: float, gpus: float) -> int:
    """The worker count without ``--workers``: as many as the cluster's CPUs and GPUs hold, each worker needing
    ``cpus`` CPUs and ``gpus`` GPUs (at least 1, at most `MAX_WORKERS`). Counting the GPU shares only, 0.25 of a
    GPU on a machine of 2 CPUs was 4 workers, refused ("ask for at most 2 with --workers", though none was
    asked), and a share of 0.0001 10,000 workers."""
    fits = [float(resources.get("CPU", 1.0)) / cpus]
    if gpus > 0:
        fits.append(float(resources.get("GPU", 0.0)) / gpus)
    count = min(fits)
    return max(1, min(MAX_WORKERS, int(count + 1e-9) if math.isfinite(count) else MAX_WORKERS))


def _exit_quietly_on_sigterm() -> Any:
    """SIGTERM ends the run like Ctrl-C (workers shut down, no output half-written) instead of Ray's own
    handler, which prints a stack dump; only where Python may set handlers (the main thread). Returns the
    handler it replaced (`RayEngine.close` puts it back), or None."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum: int, frame: Any) -> None:
        _SIGNALLED.append(signum)
        raise SystemExit(128 + signum)

    return signal.signal(signal.SIGTERM, stop)


#: the signals `_exit_quietly_on_sigterm`'s handler received: Ray turns the SystemExit it raises inside
#: ``ray.wait`` / ``ray.get`` into its own ``SystemExit(1)``; `_ray_call` gives the signal's exit code back
_SIGNALLED: list[int] = []


def _ray_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` (a blocking Ray call), exiting with 128 + the signal when SIGTERM stopped it."""
    try:
        return fn(*args, **kwargs)
    except SystemExit:
        if _SIGNALLED:
            raise SystemExit(128 + _SIGNALLED[-1]) from None
        raise


class _DropAbandonedErrors(logging.Filter):
    """Ray logs the traceback of every failed task whose result nobody fetched ("Unhandled error ...") when its
    reference is freed: after one shard fails, the shards still in flight are abandoned and the run stops with
    one sentence (`RayEngine._get`), so their tracebacks are noise. Installed while a RayEngine is open."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Unhandled error")


_DROP_ABANDONED = _DropAbandonedErrors()
_RAY_WORKER_LOGGER = "ray._private.worker"


def _number(value: object, name: str, *, low: float, strict: bool) -> float:
    """A finite real number ``>= low`` (``> low`` when ``strict``) for a Ray option, else one `InputError`."""
    import numbers

    from vistkit.metrics.base import shown_whole

    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and abs(int(value)) >= 10**300:
        # float() of it overflows, and Python will not print one of more than 4,300 digits
        op = ">" if strict else ">="
        raise InputError(f"{name} must be a finite number {op} {low:g}, not {shown_whole(int(value))}")
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(float(value))
    if not ok or float(value) < low or (strict and float(value) == low):  # type: ignore[arg-type]
        shown = f"{float(value):g}" if ok else f"{value!r:.60}"  # type: ignore[arg-type]
        raise InputError(f"{name} must be a number {'>' if strict else '>='} {low:g}, not {shown}")
    return float(value)  # type: ignore[arg-type]


def _check_share(value: float, name: str, *, gpu: bool) -> None:
    """One `InputError` for a worker's share of CPUs or GPUs that Ray cannot give: under 0.0001 (its smallest unit),
    or more than one GPU but not a whole number. Ray refused it with a ValueError when the first metric started the
    workers, after the cluster had started."""
    if value == 0:
        return
    tiny = int(value * 10_000) == 0  # as Ray checks it
    if tiny or (gpu and value > 1 and not value.is_integer()):
        if gpu:
            raise InputError(
                f"{name} must be 0, a share of one GPU from 0.0001 to 1, or a whole number of GPUs (Ray gives no "
                f"finer share, and more than one GPU only whole), not {value:g}"
            )
        raise InputError(f"{name} must be 0.0001 or more (Ray gives no finer share of a CPU), not {value:g}")


def check_workers(workers: object) -> int | None:
    """``--workers``: None (one per CPU or GPU of the cluster) or a whole number from 1 to `MAX_WORKERS`."""
    import numbers

    if workers is None:
        return None
    if isinstance(workers, bool) or not (
        isinstance(workers, numbers.Integral) or (isinstance(workers, float) and workers.is_integer())
    ):
        raise InputError(f"--workers must be a whole number of worker processes, not {workers!r:.60}")
    if not 1 <= int(workers) <= MAX_WORKERS:  # type: ignore[call-overload]
        from vistkit.metrics.base import shown_whole

        raise InputError(f"--workers must be from 1 to {MAX_WORKERS:,} (got {shown_whole(int(workers))})")  # type: ignore[call-overload]
    return int(workers)  # type: ignore[call-overload]


def _import_ray() -> Any:
    if "ray" not in sys.modules:
        _check_ray_settings()
    try:
        import ray
    except ImportError:
        raise MissingDependencyError(RAY_MISSING) from None
    return ray


#: Ray's own settings (``RayConfig``), read from ``RAY_<name>`` variables when ray is imported
_RAY_SETTING = re.compile(r"RAY_[a-z][a-z0-9_]*")


def _check_ray_settings() -> None:
    """One `InputError` naming the ``RAY_<setting>`` variables Ray cannot read: a value of the wrong type
    (``RAY_gcs_server_request_timeout_seconds=abc``) killed the process with a segmentation fault, no message,
    when ray was imported. Only when such variables are set: ray is imported in a child process first (~1 s)."""
    import subprocess

    names = sorted(k for k in os.environ if _RAY_SETTING.fullmatch(k))
    if not names:
        return

    def crashes(env: dict[str, str]) -> bool:
        try:
            done = subprocess.run(
                [sys.executable, "-c", "import ray._raylet"], env=env, capture_output=True, timeout=120, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return False  # cannot tell: the import here says what it says
        return done.returncode != 0

    if not crashes(dict(os.environ)):
        return
    others = {k: v for k, v in os.environ.items() if k not in names}
    if crashes(others):
        return  # not these settings (Ray itself missing or broken): the import here says so
    bad = (len(names) > 1 and [n for n in names[:8] if crashes({**others, n: os.environ[n]})]) or names
    shown = ", ".join(f"{n}={os.environ[n]!r:.40}" for n in bad)
    raise InputError(
        f"Ray cannot start with {'this setting' if len(bad) == 1 else 'these settings'} from the environment "
        f"({shown}; importing ray crashed): fix or unset {'it' if len(bad) == 1 else 'them'}"
    )


#: settings that name a folder of this machine and change no score: not given to a cluster's workers
_MACHINE_LOCAL = frozenset({"VISTKIT_CACHE", "VISTKIT_METEOR_TABLE_CACHE"})


def _worker_env() -> dict[str, Any]:
    """The actor option that gives the workers this process's ``VISTKIT_*`` settings (limits, Java and cache
    settings): the workers of a cluster this process joins run in the environment of the shell that ran ``ray
    start``, so without it they scored with other limits than the local engine, under the same signature. The
    cache folders (`_MACHINE_LOCAL`) stay each machine's own: they change no number, and a path of this machine may
    not exist on another."""
    env = {k: v for k, v in os.environ.items() if k.startswith("VISTKIT_") and k not in _MACHINE_LOCAL}
    return {"runtime_env": {"env_vars": env}} if env else {}


def _spec_key(name: str, options: dict[str, Any]) -> str:
    return name + "|" + repr(sorted(options.items()))


class _Said:
    """A worker call's value and the warnings it said (``warning: ...`` lines without the prefix): a worker's standard
    error does not reach the driver (``log_to_driver`` is off, and a joined cluster's workers log on their own
    machines), so the driver says them (`RayEngine._get`)."""

    def __init__(self, value: Any, warnings: list[str]) -> None:
        self.value = value
        self.warnings = warnings


#: the attribute of a worker call's error that holds the warnings the call said before it failed
_SAID_BEFORE = "vistkit_warnings_said"


def _saying(fn: Callable[..., Any], *args: Any) -> _Said:
    """``fn(*args)`` with the warnings it says on standard error collected (`vistkit.errors.warn` writes them there),
    its other chatter (progress lines) dropped. A call that fails keeps them on its error (`said_before`): they
    were lost with the call's value, and the local engine says them before the error."""
    import io

    buffer = io.StringIO()
    prefix = "warning: "

    def said() -> list[str]:
        return [line[len(prefix) :] for line in buffer.getvalue().splitlines() if line.startswith(prefix)]

    try:
        with contextlib.redirect_stderr(buffer):
            value = fn(*args)
    except Exception as exc:
        with contextlib.suppress(Exception):  # an error that takes no attributes: its warnings are lost
            setattr(exc, _SAID_BEFORE, said())
        raise
    return _Said(value, said())


def said_before(exc: BaseException | None) -> list[str]:
    """The warnings a worker call said before it failed with ``exc`` (see `_saying`)."""
    found = getattr(exc, _SAID_BEFORE, None)
    return [m for m in found if isinstance(m, str)] if isinstance(found, list) else []


class _Worker:
    """One Ray actor: builds each metric once (lazily) and scores shards with it. Calls that may warn return a `_Said`
    (the warnings reach the driver's standard error)."""

    def __init__(self) -> None:
        self._metrics: dict[str, Metric] = {}
        self._broadcast: dict[str, Any] = {}

    def pid(self) -> int:
        return os.getpid()

    def peak_rss(self) -> int:
        """This worker process's peak resident memory in bytes (Linux ``ru_maxrss`` is in KiB)."""
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024

    def _metric(self, name: str, options: dict[str, Any]) -> Metric:
        key = _spec_key(name, options)
        if key not in self._metrics:
            self._metrics[key] = get_metric_class(name)(**options)
        return self._metrics[key]

    def signature_fields(self, name: str, options: dict[str, Any]) -> _Said:
        return _saying(lambda: self._metric(name, options).signature_fields())

    def prepare(self, name: str, options: dict[str, Any], hypotheses: StorySet) -> _Said:
        return _saying(lambda: self._metric(name, options).prepare_hypotheses(hypotheses))

    def score(
        self, name: str, options: dict[str, Any], items: list[Item], signature: str, shard: bool = False
    ) -> _Said:
        """One call's score; ``shard``: the items are one shard (or streamed batch) of a run, whose run-wide warnings
        the driver says once (`RayEngine.score_items`, `RayEngine.score_stream`)."""

        def scored() -> Score:
            metric = self._metric(name, options)
            if not shard or not hasattr(metric, "shard_of_a_run"):
                return metric.score_items(items, signature=signature)
            metric.shard_of_a_run = True
            try:
                return metric.score_items(items, signature=signature)
            finally:
                metric.shard_of_a_run = False

        return _saying(scored)

    def fallback_message(self, name: str, options: dict[str, Any], fell: list[str], used: int) -> str | None:
        """The run-wide warning of a photo metric whose shards scored the photos ``fell`` without regions."""
        message = getattr(self._metric(name, options), "fallback_message", None)
        return message(fell, used) if callable(message) and fell else None

    def cider_df(self, items: list[Item]) -> tuple[Counter[str], int]:
        return cider_df_part(items)

    def cider_score(
        self, name: str, options: dict[str, Any], items: list[Item], box: list[Any], n_docs: int, signature: str
    ) -> _Said:
        import ray

        ref = box[0]  # boxed so that Ray passes the reference and this actor fetches the table once
        key = ref.hex()
        if key not in self._broadcast:
            self._broadcast = {key: ray.get(ref)}
        df = self._broadcast[key]
        return _saying(
            lambda: cider_score_part(self._metric(name, options), items, df=df, n_docs=n_docs, signature=signature)
        )

    def shutdown(self) -> None:
        from vistkit.models.java import shutdown

        shutdown()


class RemoteMetric(Metric):
    """A `Metric` whose `score_items` runs on the Ray workers (alignment and signatures stay shared code).

    `RayEngine.metric` returns an instance of a subclass per metric class that copies its declared class
    attributes (bounds, needs, default keying), so ``type(m).lower_bound`` reads as for the local object.
    """

    metric_class: type[Metric]

    def __init__(self, engine: RayEngine, name: str, options: dict[str, Any]) -> None:
        cls = get_metric_class(name)
        self.metric_class = cls
        self.engine = engine
        self.options = dict(options)
        self._fields: dict[str, object] | None = None

    def signature_fields(self) -> dict[str, object]:
        """The metric's signature fields, asked once of a worker (where its options live)."""
        if self._fields is None:
            self._fields = self.engine.call_one("signature_fields", self.name, self.options)
        return dict(self._fields)

    def prepare_hypotheses(self, hypotheses: StorySet) -> StorySet:
        """The hypotheses as the metric on a worker prepares them (unchanged when the metric class does not override
        `Metric.prepare_hypotheses`)."""
        if self.metric_class.prepare_hypotheses is Metric.prepare_hypotheses:
            return hypotheses
        # e.g. grounding metrics fill in photo ids from their --photos map (options live on the workers)
        return self.engine.prepare(self, hypotheses)

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        """Score the items on the engine's workers."""
        return self.engine.score_items(self, list(items), signature=signature)

    def __repr__(self) -> str:
        """The metric, where it runs and its options (long values cut)."""
        from vistkit.metrics.base import _short_repr

        shown = "".join(f", {k}={_short_repr(v)}" for k, v in self.options.items())
        return f"<{self.name} on a Ray engine{shown}>"

    def __reduce__(self) -> Any:
        raise EngineError(
            f"a Ray engine's {self.name} cannot be pickled (it holds the engine's workers); pickle "
            f"vistkit.get_metric({self.name!r}, **options) instead, or use the engine in one process"
        )


#: what a worker call is doing, for `RayEngine._get`'s sentence
_DOING = {
    "signature_fields": "building the metric",
    "prepare": "preparing the stories",
    "score": "scoring",
}


def _one_line(cause: BaseException | None, exc: BaseException) -> str:
    """A worker's error as one line: its type and the first line of its message (never Ray's traceback)."""
    if cause is None:
        return (str(exc).strip().splitlines() or [type(exc).__name__])[-1][:300]
    first = (str(cause).strip().splitlines() or [""])[0][:300]
    return f"{type(cause).__name__}: {first}" if first else type(cause).__name__


class RayEngine(Engine):
    """Score on a Ray cluster: ``address=None`` starts a private local one (all CPUs of this machine)."""

    name = "ray"

    def __init__(
        self,
        *,
        address: str | None = None,
        workers: int | None = None,
        num_gpus_per_worker: float = 0.0,
        num_cpus_per_worker: float = 1.0,
        batch_size: int | None = None,
        max_retries: int = MAX_RETRIES,
        init_options: dict[str, Any] | None = None,
    ) -> None:
        self._closed = True  # until the cluster is up: close() has nothing to do
        self._actors: list[Any] = []
        #: worker calls sent and not yet fetched: what a Ctrl-C, a SIGTERM or a failed shard left running
        self._in_flight: set[Any] = set()
        #: the stories `prepare` was last given and the warnings said for them (said once for the same stories)
        self._prepared: tuple[StorySet, RunWarnings] | None = None
        workers = check_workers(workers)
        num_gpus_per_worker = _number(num_gpus_per_worker, "--num-gpus-per-worker", low=0.0, strict=False)
        num_cpus_per_worker = _number(num_cpus_per_worker, "num_cpus_per_worker", low=0.0, strict=True)
        _check_share(num_gpus_per_worker, "--num-gpus-per-worker", gpu=True)
        _check_share(num_cpus_per_worker, "num_cpus_per_worker", gpu=False)
        if batch_size is not None:
            batch_size = check_batch_size(batch_size)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or not 0 <= max_retries <= 1000:
            raise InputError(f"max_retries must be a whole number from 0 to 1,000, not {max_retries!r:.60}")
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise InputError(
                f"--address must be auto, HOST:PORT or ray://HOST:PORT (or left out for a new local cluster), not "
                f"{address!r:.60}"
            )
        if init_options is not None and not isinstance(init_options, dict):
            raise InputError(f"init_options must be a dict of ray.init options, not {type(init_options).__name__}")
        self._start_timeout = start_timeout()
        ray = _import_ray()
        self.ray = ray
        starts = not ray.is_initialized()
        if _CLUSTER.users and (starts or _cluster_id(ray) != _CLUSTER.id):
            _CLUSTER.forget()  # the caller shut the open engines' cluster down by hand (ray.shutdown())
        target, where = cluster_address(address)
        local = target is None
        if starts:
            opts: dict[str, Any] = {
                "include_dashboard": False,
                "logging_level": logging.ERROR,
                "log_to_driver": False,
            }
            if local:  # "local": a new private cluster, never one `ray start` left running on this machine
                opts.update(address="local", num_cpus=os.cpu_count() or 1, object_store_memory=512 * 1024**2)
            else:
                opts["address"] = target
            opts.update(init_options or {})
            _start_cluster(ray, opts, where)
            _route_cluster_messages_to_stderr(ray)
            _CLUSTER.started = True
            if _CLUSTER.sigterm is None:  # else this module's handler is still in place (ray.shutdown() by hand)
                _CLUSTER.sigterm = _exit_quietly_on_sigterm()
        #: the cluster was started by an engine of this process (this one or one still open): the last engine
        #: to close shuts it down (the first used to, under the others, which then failed with Ray's traceback)
        self._owns_ray = _CLUSTER.started
        if not _CLUSTER.users:
            _CLUSTER.id = _cluster_id(ray)
        self._cluster = _CLUSTER.id
        _CLUSTER.users += 1
        logging.getLogger(_RAY_WORKER_LOGGER).addFilter(_DROP_ABANDONED)
        own_local = local and _CLUSTER.started  # a local cluster of this process: it does not grow
        shared = own_local and not starts  # and other engines of this process may hold some of it
        # a second engine counted CPUs the first one's workers held: its workers waited `start_timeout` seconds
        resources = ray.available_resources() if shared else ray.cluster_resources()
        if workers is None:
            workers = _default_workers(resources, cpus=num_cpus_per_worker, gpus=num_gpus_per_worker)
        if own_local:  # a local cluster does not grow: say now what cannot start
            try:
                _check_fits(workers, num_cpus_per_worker, num_gpus_per_worker, resources, free=shared)
            except InputError:
                _release_cluster(ray, self._cluster)
                raise
        self.n_workers = workers
        self.batch_size = batch_size
        self.max_retries = max_retries
        self._cpus = num_cpus_per_worker
        self._gpus = num_gpus_per_worker
        self._closed = False

    # -- workers -----------------------------------------------------------------------------------------
    @property
    def actors(self) -> list[Any]:
        """The worker actors (started on first use)."""
        if self._closed:
            raise EngineError("this Ray engine was closed; make a new one")
        if not self.ray.is_initialized():  # Ray would start a new cluster here, where these actors do not exist
            raise EngineError("the Ray cluster of this engine was shut down (ray.shutdown()); make a new engine")
        if not self._actors:
            cls = self.ray.remote(_Worker).options(
                num_cpus=self._cpus,
                num_gpus=self._gpus,
                max_restarts=self.max_retries,
                max_task_retries=self.max_retries,
                **_worker_env(),
            )
            self._actors = [cls.remote() for _ in range(self.n_workers)]
            started = [a.pid.remote() for a in self._actors]
            self._in_flight.update(started)  # a Ctrl-C meanwhile: close() kills, not asks, workers not yet up
            ready, waiting = _ray_call(
                self.ray.wait, started, num_returns=len(self._actors), timeout=self._start_timeout
            )
            self._in_flight.difference_update(started)
            if waiting:
                for a in self._actors:
                    self.ray.kill(a)
                self._actors = []
                raise EngineError(
                    f"only {len(ready)} of {self.n_workers} Ray workers started within {self._start_timeout:g} s (each "
                    f"needs {self._cpus:g} CPU and {self._gpus:g} GPU free on the cluster); ask for fewer with "
                    "--workers or --num-gpus-per-worker"
                )
        return self._actors

    def worker_pids(self) -> list[int]:
        """Process ids of the worker actors (tests kill one to check recovery)."""
        return [int(p) for p in self.ray.get([a.pid.remote() for a in self.actors])]

    def worker_peak_rss(self) -> list[int]:
        """Peak resident memory of each worker process, in bytes (benchmarks)."""
        return [int(p) for p in self.ray.get([a.peak_rss.remote() for a in self.actors])]

    def metric(self, name: str, options: dict[str, Any] | None = None) -> Metric:
        """A metric scored on the workers; a pairwise `Ranker` stays in this process (its per-pair protocol is
        not sharded)."""
        from vistkit.metrics.base import Ranker

        cls = get_metric_class(name)
        opts = check_metric_options(name, options)
        if issubclass(cls, Ranker):
            return cls(**opts)
        return _remote_class(cls)(self, name, opts)

    def call_one(self, method: str, *args: Any, said: RunWarnings | None = None) -> Any:
        """Run one call on the first worker and return its value (errors as `_get` reports them; its warnings said,
        once for ``said``)."""
        ref = getattr(self.actors[0], method).remote(*args)
        self._in_flight.add(ref)
        return self._get(ref, what=_DOING.get(method, f"running {method}"), said=said)

    def prepare(self, metric: RemoteMetric, hypotheses: StorySet) -> StorySet:
        """``hypotheses`` as ``metric`` prepares them on a worker. Its warnings (a photo map that misses stories) are
        said once for the same stories, as in this process (`vistkit.data.images.attach_photos`): a worker gets a
        copy of them for each metric (``score -m clipscore,groovist --photos``), and would say them once per metric."""
        if self._prepared is None or self._prepared[0] is not hypotheses:
            self._prepared = (hypotheses, RunWarnings())
        said = self._prepared[1]
        return self.call_one("prepare", metric.name, metric.options, hypotheses, said=said)  # type: ignore[no-any-return]

    def _get(self, ref: Any, *, what: str, said: RunWarnings | None = None, defer: bool = False) -> Any:
        """The value of a worker call; the warnings it said are said here (those of a call that failed before its
        error), each once for ``said`` (one run's shards). ``defer``: the caller says them (`_ordered`, in input
        order): a `_Said` is returned as it is, and the error of a failed call keeps them (`said_before`)."""
        ray = self.ray
        said = RunWarnings() if said is None else said
        try:
            value = _ray_call(ray.get, ref)
            self._in_flight.discard(ref)
            return value if defer else _said_by(value, said)
        except ray.exceptions.RayTaskError as exc:
            self._in_flight.discard(ref)
            cause = getattr(exc, "cause", None)
            before = said_before(cause)
            error = cause if isinstance(cause, VistkitError) else None
            if error is None:
                error = EngineError(f"a Ray worker failed while {what}: {_one_line(cause, exc)}")
                setattr(error, _SAID_BEFORE, before)
            if not defer:
                for message in before:
                    said.say(message)
            raise error from None
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.ObjectLostError):
            raise EngineError(
                f"a Ray worker died while {what} and was restarted {self.max_retries} time(s) without success; "
                "no partial result was kept: rerun (check the workers' memory) or use --engine local"
            ) from None

    def _ordered(self, calls: Iterable[tuple[str, tuple[Any, ...], str]]) -> Iterator[Any]:
        """Run ``(method, args, what)`` calls over the workers, at most ``2 x workers`` in flight or waiting,
        and yield their results in call order (bounded memory, input order kept)."""
        ray = self.ray
        actors = self.actors
        window = 2 * len(actors)
        pending: dict[Any, int] = {}
        done: dict[int, Any] = {}
        said = RunWarnings()  # the warnings said: a warning every shard says is said once
        whats: dict[int, str] = {}
        load = [0] * len(actors)
        owner: dict[Any, int] = {}
        calls_it = iter(calls)
        submitted = 0
        next_out = 0
        exhausted = False
        while True:
            while not exhausted and len(pending) + len(done) < window:
                try:
                    method, args, what = next(calls_it)
                except StopIteration:
                    exhausted = True
                    break
                a = min(range(len(actors)), key=load.__getitem__)
                ref = getattr(actors[a], method).remote(*args)
                self._in_flight.add(ref)
                pending[ref] = submitted
                whats[submitted] = what
                owner[ref] = a
                load[a] += 1
                submitted += 1
            if next_out in done:
                whats.pop(next_out, None)
                value = _said_by(done.pop(next_out), said)
                yield value
                next_out += 1
                continue
            if not pending:
                if exhausted:
                    said.finish()
                    return
                continue
            ready, _ = _ray_call(ray.wait, list(pending), num_returns=1)
            for ref in ready:
                idx = pending.pop(ref)
                load[owner.pop(ref)] -= 1
                # a failure stops the run with one sentence; the shards still in flight are abandoned (not
                # cancelled: a cancelled actor task leaves the actor waiting for it), their errors unlogged
                # (`_DropAbandonedErrors`). Warnings are said in input order, as the local engine says them (they
                # came in the order the shards finished): a failed shard's after those of the shards before it
                try:
                    done[idx] = self._get(ref, what=whats[idx], said=said, defer=True)
                except VistkitError as exc:
                    for k in sorted(k for k in done if k < idx):
                        _said_by(done[k], said)
                    for message in said_before(exc):
                        said.say(message)
                    raise

    # -- scoring -----------------------------------------------------------------------------------------
    def _shard_size(self, n: int) -> int:
        if self.batch_size is not None:
            return self.batch_size
        return max(16, min(2048, math.ceil(n / (4 * self.n_workers))))

    def score_items(self, metric: RemoteMetric, items: list[Item], *, signature: str) -> Score:
        """Score aligned items on the workers and merge the shards (see `vistkit.engine.merge`)."""
        how = strategy(metric.name, metric.options)
        name, opts = metric.name, metric.options
        if how == "whole" or len(items) <= 1:
            return self.call_one("score", name, opts, items, signature)
        shards = list(batched(items, self._shard_size(len(items))))

        def what(shard: list[Item]) -> str:
            return f"scoring {len(shard)} stories ({shard[0].item_id} ...) with {name}"

        calls: Iterator[tuple[str, tuple[Any, ...], str]]
        if how == "cider":
            df: Counter[str] = Counter()
            n_docs = 0
            for part_df, n in self._ordered(("cider_df", (s,), what(s)) for s in shards):
                df.update(part_df)
                n_docs += n
            box = [self.ray.put(dict(df))]
            del df
            calls = (("cider_score", (name, opts, s, box, n_docs, signature), what(s)) for s in shards)
        else:
            calls = (("score", (name, opts, s, signature, True), what(s)) for s in shards)
        parts = []
        tally = _tally(metric)
        for shard, part in zip(shards, self._ordered(calls), strict=True):
            _check_part(part, shard, name)
            parts.append(part)
            if tally is not None:
                tally.add(shard, part)
            progress.advance(len(shard))  # the task `Metric.score` opened
        merged = merge_scores(parts, signature=signature)
        self._say_fallback(metric, tally)
        return merged

    def _say_fallback(self, metric: RemoteMetric, tally: FallbackTally | None) -> None:
        """A photo metric's shards (or streamed batches) scored photos without a regions row
        (``whole_photo_fallback``): one warning for the run, with its counts, as the local engine says it (each
        shard said its own)."""
        fallback = tally.fallback() if tally is not None else None
        if fallback is None:
            return
        message = self.call_one("fallback_message", metric.name, metric.options, *fallback)
        if message:
            from vistkit.errors import warn

            warn(message)

    def score_stream(
        self,
        metric: Metric,
        items: Iterable[Item],
        *,
        signature: str,
        batch_size: int = 1024,
        on_part: Callable[[Score], None] | None = None,
    ) -> StreamTotals:
        """Score an iterator of items lazily (bounded memory): see `LocalEngine.score_stream`."""
        from vistkit.metrics.base import metric_options

        check_metric(metric)
        batch_size = check_batch_size(batch_size)
        items = check_items(items)
        if on_part is not None and not callable(on_part):
            raise InputError(f"on_part must be a function of a Score, not {type(on_part).__name__}")
        if strategy(metric) != "items":  # first: a ranker the engine handed out is a local object
            raise cannot_stream(metric)
        if not isinstance(metric, RemoteMetric):
            if metric_options(type(metric)):  # its options cannot be read back from the object
                raise InputError(
                    f"the Ray engine scores {metric.name} with the options it was made with: pass "
                    f"engine.metric({metric.name!r}, OPTIONS) rather than a metric built in this process"
                )
            metric = self.metric(metric.name)
        assert isinstance(metric, RemoteMetric)
        name, opts = metric.name, metric.options
        shards: list[list[Item]] = []  # the shards in flight, for the completeness check (bounded window)

        tally = _tally(metric)

        def calls() -> Iterator[tuple[str, tuple[Any, ...], str]]:
            for shard in batched(items, batch_size):
                shards.append(checked_items(shard))
                # each batch a shard of the run: a photo metric's regions warning is said once, at the end
                args = (name, opts, shard, signature, tally is not None)
                yield "score", args, f"scoring {len(shard)} stories with {name}"

        totals = StreamTotals()
        for part in self._ordered(calls()):
            shard = shards.pop(0)
            _check_part(part, shard, name)
            if tally is not None:
                tally.add(shard, part)
            totals.add(part)
            if on_part is not None:
                on_part(part)
        self._say_fallback(metric, tally)
        return totals

    # -- shutdown ----------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the workers (their METEOR JVMs with them) and the local cluster this engine started."""
        if self._closed:
            return
        self._closed = True
        self._prepared = None
        ray = self.ray
        if self._actors and not (ray.is_initialized() and _cluster_id(ray) == self._cluster):
            self._actors = []  # shut down by hand: the workers are gone (a call to them auto-started a new cluster)
            self._in_flight.clear()
        if self._actors:
            if not self._busy():  # else a shutdown call would wait (up to 30 s) behind the shards left running
                try:
                    ray.get([a.shutdown.remote() for a in self._actors], timeout=30)
                except Exception:  # a dead worker has nothing left to close
                    pass
            # killing a worker with calls queued makes Ray print "(raylet) Task _Worker.score failed. There are 3
            # retries remaining ..." for each (a killed worker's METEOR JVM reads the end of its input and exits)
            _CLUSTER_MESSAGES_MUTED.append(True)
            try:
                for a in self._actors:
                    with contextlib.suppress(Exception):  # a handle of a cluster already shut down
                        ray.kill(a)
                self._actors = []
                self._in_flight.clear()
                _release_cluster(ray, self._cluster)
            finally:
                _CLUSTER_MESSAGES_MUTED.pop()
            return
        _release_cluster(ray, self._cluster)

    def _busy(self) -> bool:
        """Whether a worker call this engine sent is still running (an interrupted or failed run left it)."""
        if not self._in_flight or not self.ray.is_initialized():  # (ray.wait would start a new cluster)
            return False
        with contextlib.suppress(Exception):  # a cluster already gone: nothing runs there
            _, running = self.ray.wait(list(self._in_flight), num_returns=len(self._in_flight), timeout=0)
            return bool(running)
        return False


class _Cluster:
    """The Ray cluster engines of this process share: whether one of them started it (``ray.init``) and which
    it is, how many are open, and the SIGTERM handler the starting one replaced."""

    def __init__(self) -> None:
        self.started = False
        self.id: str | None = None
        self.users = 0
        self.sigterm: Any = None

    def forget(self) -> None:
        """Forget a cluster that is gone (its engines fail with one sentence): give back the SIGTERM handler."""
        import signal

        if self.sigterm is not None:
            with contextlib.suppress(ValueError):  # not the main thread
                signal.signal(signal.SIGTERM, self.sigterm)
        self.__init__()  # type: ignore[misc]


def _cluster_id(ray: Any) -> str | None:
    """The address of the cluster this process is connected to (each cluster has its own)."""
    try:
        return str(ray.get_runtime_context().gcs_address)
    except Exception:  # an older Ray without it: the bookkeeping trusts that it is the same cluster
        return None


_CLUSTER = _Cluster()


def _release_cluster(ray: Any, cluster: str | None) -> None:
    """One engine fewer on ``cluster``; the last one shuts down the cluster an engine started (never one the
    caller started) and gives back the SIGTERM handler and Ray's log filter."""
    if cluster != _CLUSTER.id or not _CLUSTER.users:  # a cluster the caller shut down by hand (forgotten)
        return
    _CLUSTER.users -= 1
    if _CLUSTER.users:
        return
    logging.getLogger(_RAY_WORKER_LOGGER).removeFilter(_DROP_ABANDONED)
    if _CLUSTER.started and ray.is_initialized() and _cluster_id(ray) == _CLUSTER.id:
        ray.shutdown()
    _CLUSTER.forget()


_REMOTE_CLASSES: dict[type[Metric], type[RemoteMetric]] = {}


def _remote_class(cls: type[Metric]) -> type[RemoteMetric]:
    if cls not in _REMOTE_CLASSES:
        attrs: dict[str, Any] = {a: getattr(cls, a) for a in _CLASS_ATTRS if hasattr(cls, a)}
        attrs["__module__"] = __name__  # else ``abc`` (the metaclass made it), in reprs and tracebacks
        _REMOTE_CLASSES[cls] = type(f"Remote{cls.__name__}", (RemoteMetric,), attrs)
    return _REMOTE_CLASSES[cls]


def _said_by(value: Any, said: RunWarnings) -> Any:
    """A worker call's value, the warnings of a `_Said` said (each once for ``said``)."""
    if not isinstance(value, _Said):
        return value
    for message in value.warnings:
        said.say(message)
    return value.value


def _tally(metric: RemoteMetric) -> FallbackTally | None:
    """A run's `FallbackTally` for a photo metric given a regions table (only they score photos without regions)."""
    from vistkit.metrics._grounding import PhotoMetric

    if not issubclass(metric.metric_class, PhotoMetric) or metric.options.get("regions") is None:
        return None
    return FallbackTally(metric.options.get("photos"))


def _check_part(part: Score, shard: Sequence[Item], name: str) -> None:
    ids = [it.item_id for it in shard]
    if list(part.item_ids) != ids or len(part.item_scores) != len(ids):
        raise EngineError(
            f"a Ray worker returned {len(part.item_ids)} results for {len(ids)} stories of {name}; "
            "the run was stopped rather than drop stories: rerun, or use --engine local"
        )
