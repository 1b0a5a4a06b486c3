"""Probe round 10: the SCALING ENGINES (local and Ray) when things go wrong or get big.

Probed: shard merging against whole-set scoring for every cheap metric (chunk sizes 1, n-1, n, n+1, more chunks
than items; odd and duplicate ids, empty stories; excluded items, extras, statistics), the streaming path's
laziness and memory on 10,000 stories, empty and one-item runs, the Ray engine against the local one on a
2-worker cluster (item order, signatures, exclusions), a metric that cannot be built on a worker, and how a run
starts: cluster addresses (nothing listening, not an address, ``ray://`` without Ray Client, ``$RAY_ADDRESS``,
a cluster ``ray start`` left running), a Ray temp folder it cannot use (``TMPDIR``), SIGTERM and Ctrl-C while
the cluster starts. What was wrong:

- ``--address HOST:PORT`` where nothing listens: ``ray.init`` retried for minutes (over 150 s measured, killed
  then), printing C++ warnings and deaf to Ctrl-C and SIGTERM; now one sentence within seconds (a TCP connect
  with a 10 s timeout first);
- with ``$RAY_ADDRESS`` set (``ray job submit`` sets it) or a ``ray start`` cluster on the machine, no
  ``--address`` made Ray join that cluster and refuse the local cluster's CPU count: "could not reach the Ray
  cluster at a new local cluster (When connecting to an existing cluster, num_cpus ... must not be provided)";
  now ``$RAY_ADDRESS`` is used as Ray programs do (and named in messages), else a new private cluster starts;
- a ``TMPDIR`` whose path is too long for Ray's sockets: "unexpected OSError ... this is a bug in vistkit";
  now one sentence naming the folder and TMPDIR/RAY_TMPDIR;
- an address where something that is not Ray listens (a web server, a stale port): the same minutes-long
  retries; now refused when it does not answer an HTTP/2 preface as Ray's gRPC servers do;
- two Ray engines in one process: closing the one that started the cluster shut it down under the other (its
  next call started a stray new cluster, then failed with Ray's traceback); now the last one to close does;
- a second engine on that cluster counted the CPUs the first one's workers held: its workers waited 120 s
  (``VISTKIT_RAY_START_TIMEOUT``) to fail; now it counts the free ones, and none free is refused at once;
- a ``RAY_<setting>`` variable Ray cannot read (``RAY_gcs_server_request_timeout_seconds=abc``): `import ray`
  died of a segmentation fault, exit 139 and no message; now one sentence naming it;
- `merge_extra` kept only the keys of the first shard's ``Score.extra`` (a key a later shard added was lost);
- an address Ray cannot parse (``nonsense``, ``::1:1``, ``RAY_ADDRESS=garbage``) was "could not reach the Ray
  cluster ... start it with `ray start --head`"; now what is wrong with it and the forms Ray reads;
- ``ray://`` without Ray Client was reported as an unreachable cluster; now the missing package and its pip line;
- SIGTERM while the local cluster started: exit status 15 (Ray's handler) instead of 143, and the half-started
  cluster's dashboard and runtime-env agents stayed running, orphaned; now the signal is held until ``ray.init``
  returns, the cluster is shut down, and the exit status is 143 (Ctrl-C: 130).
"""

from __future__ import annotations

import math
import os
import re
import signal
import socket
import time
import weakref
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from ray_helpers import private_engine
from test_engine import sharded  # what the Ray engine does, in this process: shard, score, merge

from vistkit.data.story import Story, StorySet
from vistkit.engine import EngineError
from vistkit.engine.local import LocalEngine
from vistkit.errors import InputError, MissingDependencyError
from vistkit.metrics.base import Item, Score, align, get_metric

TEXTS = [
    "the cat sat on the mat . it purred .",
    "",
    "a dog . a dog . a dog .",
    "he went home and slept",
    "x",
    "the the the the",
    "we had fun at the park . it was great .",
    "birthday cake ! happy .",
]
#: odd ids: spaces, non-ASCII, a slash, a very long one
IDS = ["s 1", "é2", "a/b", "0", "-1", "x" * 200, "s7", "s8", "s9", "s10", "s11"]
#: rovist-nr (exclusions made inside a shard) is checked against the local engine on Ray in
#: tests/test_engine_ray.py and tests/test_probes_api_r6.py (its sentence splitter takes seconds to load)
CHEAP = ["bleu-1", "bleu-2", "bleu-3", "bleu-4", "rouge-l", "cider-d"]
METEOR = ["meteor-vist", "meteor-album", "meteor-coco"]


def stories() -> tuple[StorySet, StorySet]:
    hyps = StorySet([Story(k, TEXTS[i % len(TEXTS)]) for i, k in enumerate(IDS)])
    refs = StorySet([Story(k, TEXTS[(i + 3) % len(TEXTS)] + " the end .") for i, k in enumerate(IDS[:-1])])
    return hyps, refs


def same(a: Score, b: Score) -> None:
    """Ids, order, exclusions (with their order), extras and statistics equal; numbers within 1e-12."""
    assert a.item_ids == b.item_ids
    assert list(a.excluded.items()) == list(b.excluded.items())
    np.testing.assert_allclose(a.item_scores, b.item_scores, rtol=0, atol=1e-12)
    assert (math.isnan(a.corpus) and math.isnan(b.corpus)) or a.corpus == pytest.approx(b.corpus, abs=1e-12)
    assert (a.stats is None) == (b.stats is None)
    if a.stats is not None:
        np.testing.assert_allclose(a.stats, b.stats, rtol=0, atol=1e-9)
    assert a.extra.keys() == b.extra.keys()
    for key in a.extra:
        x, y = a.extra[key], b.extra[key]
        assert np.allclose(x, y) if isinstance(x, float) else x == y


def items_of(name: str) -> list[Item]:
    hyps, refs = stories()
    return align(hyps, refs if get_metric(name).needs_references else None, keying="story").items


# ------------------------------------------------------------------------------------------ merge layer
@pytest.mark.parametrize("name", CHEAP + METEOR)
def test_shards_merge_to_the_whole_set_score(name: str) -> None:
    """Sharded + merged == whole set for every cheap metric at chunk sizes 1, n-1, n, n+1, 3 (no bug found: a
    guard for the property the Ray engine relies on)."""
    items = items_of(name)
    whole = get_metric(name).score_items(items, signature="sig")
    n = len(items)
    for size in (1, n - 1, n, n + 1, 3):
        same(sharded(name, items, size), whole)


def test_duplicate_ids_keep_every_item_in_order() -> None:
    """Two items with the same id (an API caller's list) are both scored, in input order, when sharded."""
    items = items_of("bleu-4")
    dup = [items[0], items[2], items[0], items[2], items[0]]
    whole = get_metric("bleu-4").score_items(dup, signature="sig")
    for size in (1, 2, 4, 5, 6):
        merged = sharded("bleu-4", dup, size)
        assert merged.item_ids == [items[0].item_id, items[2].item_id] * 2 + [items[0].item_id]
        same(merged, whole)


@pytest.mark.parametrize("name", ["bleu-4", "rouge-l", "meteor-coco"])
def test_stream_equals_whole_at_every_chunk_size(name: str) -> None:
    """`LocalEngine.score_stream`: the corpus and item scores of the whole set at chunk sizes 1, n-1, n, n+1;
    no items: NaN and a count of 0; one item: that item's score."""
    items = items_of(name)
    metric = get_metric(name)
    whole = metric.score_items(items, signature="sig")
    n = len(items)
    eng = LocalEngine()
    for size in (1, n - 1, n, n + 1):
        parts: list[Score] = []
        totals = eng.score_stream(metric, iter(items), signature="sig", batch_size=size, on_part=parts.append)
        assert totals.n_items == n and [i for p in parts for i in p.item_ids] == whole.item_ids
        np.testing.assert_allclose(np.concatenate(totals.scores), whole.item_scores, rtol=0, atol=1e-12)
        assert (math.isnan(whole.corpus) and math.isnan(totals.corpus())) or totals.corpus() == pytest.approx(
            whole.corpus, abs=1e-12
        )
    empty = eng.score_stream(metric, iter([]), signature="sig")
    assert empty.n_items == 0 and math.isnan(empty.corpus())
    one = eng.score_stream(metric, iter(items[:1]), signature="sig")
    alone = metric.score_items(items[:1], signature="sig")
    assert one.n_items == 1
    assert (math.isnan(alone.corpus) and math.isnan(one.corpus())) or one.corpus() == pytest.approx(alone.corpus)


def test_extras_only_some_shards_have_are_kept() -> None:
    """`merge_extra` read the keys of the first shard only: a count or list that a later shard added (a metric's
    per-item notes) was dropped; now every shard's keys are merged, counts added, lists joined in order."""
    from vistkit.engine.merge import merge_extra

    merged = merge_extra([{"n": 1}, {"n": 2, "notes": ["b"]}, {"notes": ["c"], "by_id": {"x": 1}}, {}])
    assert merged == {"n": 3, "notes": ["b", "c"], "by_id": {"x": 1}}
    assert merge_extra([{"P": 0.5, "item_P": [0.5]}, {"P": 1.0, "item_P": [1.0, 1.0]}])["P"] == pytest.approx(5 / 6)


def _counted(n: int, live: list[int]) -> Iterator[Item]:
    """``n`` tiny items made on demand; ``live[0]`` counts the ones not yet freed."""

    def freed() -> None:
        live[0] -= 1

    for i in range(n):
        item = Item(f"i{i}", Story(f"i{i}", "a b c ."), (Story(f"i{i}", "a b d ."),))
        live[0] += 1
        weakref.finalize(item, freed)
        yield item


def test_stream_of_10000_stories_holds_one_chunk() -> None:
    """10,000 stories through the local stream: read lazily, each chunk freed after it is scored (at most one
    chunk alive), corpus equal to the hand value (every item: 2 of its 3 words match, no brevity penalty)."""
    live, peak = [0], [0]

    def on_part(part: Score) -> None:
        peak[0] = max(peak[0], live[0])

    totals = LocalEngine().score_stream(
        get_metric("bleu-1"), _counted(10_000, live), signature="s", batch_size=1000, on_part=on_part
    )
    assert totals.n_items == 10_000 and peak[0] == 1000 and live[0] == 0
    assert totals.corpus() == pytest.approx(2 / 3, abs=1e-12)  # "." is dropped: 2 of 3 words match


# ------------------------------------------------------------------------------------ addresses, env
@pytest.fixture()
def no_ray_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


@pytest.mark.parametrize(
    ("address", "env", "expected"),
    [
        (None, None, (None, "a new local cluster")),
        ("local", None, (None, "a new local cluster")),
        (None, "10.0.0.5:6379", ("10.0.0.5:6379", "RAY_ADDRESS=10.0.0.5:6379")),
        ("auto", "10.0.0.5:6379", ("10.0.0.5:6379", "RAY_ADDRESS=10.0.0.5:6379")),
        ("auto", None, ("auto", "auto")),
        (" ray://h:10001 ", "10.0.0.5:6379", ("ray://h:10001", "ray://h:10001")),
        ("local", "10.0.0.5:6379", (None, "a new local cluster")),
        (None, "   ", (None, "a new local cluster")),
        (None, "local", (None, "a new local cluster")),
    ],
)
def test_which_cluster(address: str | None, env: str | None, expected: tuple[Any, str], monkeypatch: Any) -> None:
    """No --address with $RAY_ADDRESS joined that cluster but also passed the local CPU count (Ray refused: 'could
    not reach the Ray cluster at a new local cluster'); now $RAY_ADDRESS is the cluster, named in messages, and
    without it a new private cluster starts (``address="local"``), never one `ray start` left running."""
    from vistkit.engine.ray import cluster_address

    if env is None:
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("RAY_ADDRESS", env)
    assert cluster_address(address) == expected


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_nothing_listening_is_one_sentence_at_once(no_ray_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """--address 127.0.0.1:PORT with nothing there: ray.init retried for minutes (deaf to Ctrl-C); now one
    sentence in seconds, for --address and for $RAY_ADDRESS alike, and no cluster is left initialised."""
    pytest.importorskip("ray")
    import ray

    from vistkit.engine.ray import RayEngine

    port = _closed_port()
    start = time.monotonic()
    with pytest.raises(EngineError, match=rf"no Ray cluster answers at 127\.0\.0\.1:{port} \(.*:{port}: "):
        RayEngine(address=f"127.0.0.1:{port}", workers=1)
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    with pytest.raises(EngineError, match=rf"at RAY_ADDRESS=127\.0\.0\.1:{port} "):
        RayEngine(workers=1)
    assert time.monotonic() - start < 15
    assert not ray.is_initialized()


@pytest.mark.parametrize(
    ("address", "env", "named"),
    [("nonsense", None, "nonsense"), ("::1:1", None, "::1:1"), (None, "garbage", "RAY_ADDRESS=garbage")],
)
def test_an_address_ray_cannot_read(address: str | None, env: str | None, named: str, monkeypatch: Any) -> None:
    """An address Ray cannot parse said 'could not reach the Ray cluster ... start it with `ray start --head`';
    now what is wrong with it and the forms Ray reads (an InputError: exit 1 as every bad value)."""
    pytest.importorskip("ray")
    import ray

    from vistkit.engine.ray import RayEngine

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if env is not None:
        monkeypatch.setenv("RAY_ADDRESS", env)
    with pytest.raises(InputError, match=rf"^{re.escape(named)} is not a Ray cluster address \(Invalid address format"):
        RayEngine(address=address, workers=1)
    assert not ray.is_initialized()


def test_ray_client_address(no_ray_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """ray://... without Ray Client installed was 'could not reach the Ray cluster'; now the missing package and
    its pip line; with it installed, a port where nothing listens is refused at once."""
    import importlib.util

    from vistkit.engine import ray as engine_ray

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "grpc" else real(name, *a))
    with pytest.raises(MissingDependencyError, match=r"pip install 'ray\[client\]'"):
        engine_ray.check_reachable("ray://127.0.0.1:1", "ray://127.0.0.1:1")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "grpc" else real(name, *a))
    port = _closed_port()
    with pytest.raises(EngineError, match=rf"no Ray cluster answers at ray://127\.0\.0\.1:{port} "):
        engine_ray.check_reachable(f"ray://127.0.0.1:{port}", f"ray://127.0.0.1:{port}")
    error = engine_ray._cluster_error(ValueError("Ray Client requires pip package `ray[client]`."), "ray://h:1")
    assert isinstance(error, MissingDependencyError)


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", "its reply is not HTTP/2"),
        (b"", "it closed the connection without an HTTP/2 reply"),
        (None, "no HTTP/2 reply within 0.3 s"),
        (b"\x00\x00\x18\x04\x00\x00\x00\x00\x00", None),  # a gRPC server's SETTINGS frame
    ],
)
def test_a_server_that_is_not_ray(reply: bytes | None, why: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Something listening at the address that is not Ray (a web server, a stale port): ray.init retried for
    minutes there too; now the HTTP/2 preface Ray's gRPC servers answer with a SETTINGS frame tells within
    `CONNECT_TIMEOUT` (a real GCS passes: `test_real_cluster_passes_the_address_check`)."""
    from vistkit.engine import ray as engine_ray

    monkeypatch.setattr(engine_ray, "CONNECT_TIMEOUT", 0.3)
    client, server = socket.socketpair()
    with client, server:
        client.settimeout(0.3)
        if reply is not None:
            server.sendall(reply)
            if not reply:
                server.shutdown(socket.SHUT_WR)
        start = time.monotonic()
        got = engine_ray._not_grpc(client)
        assert time.monotonic() - start < 3
    assert got == why or (why is not None and got is not None and got.startswith(why))


def test_unusable_temp_folder_is_one_sentence(no_ray_env: None, monkeypatch: Any, tmp_path: Any) -> None:
    """A TMPDIR too long for Ray's socket paths was 'unexpected OSError ... a bug in vistkit'; now one sentence
    naming the folder and TMPDIR, and nothing stays initialised."""
    pytest.importorskip("ray")
    import ray

    from vistkit.engine.ray import RayEngine

    if ray.is_initialized():
        ray.shutdown()
    long = tmp_path / ("x" * 110)
    long.mkdir()
    monkeypatch.setenv("TMPDIR", str(long))
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    with pytest.raises(EngineError, match=r"Ray could not start a local cluster in .*xxx/ray \(.*\); point TMPDIR"):
        RayEngine(workers=1)
    assert not ray.is_initialized()


class _FakeRay:
    """A stand-in for the ray module: ``init`` does what the test says (send a signal, raise)."""

    def __init__(self, during_init: Any) -> None:
        self.during_init = during_init
        self.shutdowns = 0
        self.installed: list[Any] = []
        self._private = SimpleNamespace(utils=SimpleNamespace(set_sigterm_handler=self.installed.append))

    def init(self, **opts: Any) -> None:
        self._private.utils.set_sigterm_handler("ray's own handler")  # what Ray does first in ray.init
        self.during_init()

    def shutdown(self) -> None:
        self.shutdowns += 1


@pytest.mark.parametrize(("sig", "raised"), [(signal.SIGTERM, SystemExit), (signal.SIGINT, KeyboardInterrupt)])
def test_signal_while_the_cluster_starts(sig: int, raised: type[BaseException]) -> None:
    """SIGTERM while ray.init started the cluster hit Ray's handler (exit 15, the half-started cluster's agents
    left running); now the signal waits for ray.init, the cluster is shut down, and it exits 143 (Ctrl-C: 130),
    with Ray's handler never installed and this process's handlers given back."""
    from vistkit.engine.ray import _start_cluster

    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    fake = _FakeRay(lambda: os.kill(os.getpid(), sig))
    with pytest.raises(raised) as info:
        _start_cluster(fake, {"address": "local"}, "a new local cluster")
    if raised is SystemExit:
        assert info.value.code == 143  # type: ignore[attr-defined]
    assert fake.shutdowns == 1 and fake.installed == []
    assert fake._private.utils.set_sigterm_handler == fake.installed.append
    assert {s: signal.getsignal(s) for s in before} == before


@pytest.mark.parametrize(("sig", "raised"), [(signal.SIGTERM, SystemExit), (signal.SIGINT, KeyboardInterrupt)])
def test_the_same_signal_twice_while_the_cluster_starts_acts_at_once(sig: int, raised: type[BaseException]) -> None:
    """A local start that hangs is not deaf: the second SIGTERM (Ctrl-C) stops it at once, after ray.shutdown()."""
    from vistkit.engine.ray import _start_cluster

    went_on: list[bool] = []

    def twice() -> None:
        os.kill(os.getpid(), sig)
        os.kill(os.getpid(), sig)
        for _ in range(100):
            time.sleep(0.01)
        went_on.append(True)

    fake = _FakeRay(twice)
    with pytest.raises(raised) as info:
        _start_cluster(fake, {"address": "local"}, "a new local cluster")
    if raised is SystemExit:
        assert info.value.code == 143  # type: ignore[attr-defined]
    assert went_on == [] and fake.shutdowns == 1


@pytest.mark.parametrize(("sig", "raised"), [(signal.SIGTERM, SystemExit), (signal.SIGINT, KeyboardInterrupt)])
def test_signal_while_joining_a_cluster_acts_at_once(
    sig: int, raised: type[BaseException], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Joining a cluster starts nothing here, so a signal is not held (ray.init may retry for a while): SIGTERM
    exits with 143 at once (Ray's handler: 15), Ctrl-C interrupts, and ray.shutdown() clears the half-made
    connection."""
    from vistkit.engine import ray as engine_ray

    monkeypatch.setattr(engine_ray, "check_reachable", lambda target, where: None)
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    went_on: list[bool] = []

    def interrupted() -> None:
        os.kill(os.getpid(), sig)
        for _ in range(100):  # the handler runs between bytecodes: at once, not after ray.init
            time.sleep(0.01)
        went_on.append(True)

    fake = _FakeRay(interrupted)
    with pytest.raises(raised) as info:
        engine_ray._start_cluster(fake, {"address": "10.0.0.5:6379"}, "10.0.0.5:6379")
    if raised is SystemExit:
        assert info.value.code == 143  # type: ignore[attr-defined]
    assert went_on == [] and fake.shutdowns == 1 and fake.installed == []
    assert {s: signal.getsignal(s) for s in before} == before


def test_failed_start_is_shut_down_and_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    """ray.init failing part way (an OSError from its sockets, a RuntimeError) is one sentence, after
    ray.shutdown() cleared what it had started; joining a cluster that failed names RAY_AUTH_MODE=token (Ray
    2.5x clusters use token authentication, and a joining driver without it only heard "Failed to connect")."""
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    from vistkit.engine.ray import _start_cluster

    def fail() -> None:
        raise OSError("validate_socket_filename failed: AF_UNIX path length cannot exceed 107 bytes")

    fake = _FakeRay(fail)
    with pytest.raises(EngineError, match=r"Ray could not start a local cluster in .*ray .*point TMPDIR"):
        _start_cluster(fake, {"address": "local"}, "a new local cluster")
    assert fake.shutdowns == 1

    def boom() -> None:
        raise RuntimeError("Failed to connect to Ray cluster\nat 1.2.3.4:5")

    fake = _FakeRay(boom)
    failed = r"^could not reach the Ray cluster at RAY_ADDRESS=x \(Failed to connect"
    with pytest.raises(EngineError, match=failed) as info:
        _start_cluster(fake, {}, "RAY_ADDRESS=x")
    assert fake.shutdowns == 1
    assert str(info.value).endswith("(a cluster with token authentication also needs RAY_AUTH_MODE=token here)")


def test_an_engine_never_shuts_down_a_cluster_it_did_not_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bookkeeping of the shared cluster: an engine whose cluster the caller shut down by hand (ray.shutdown();
    ray.init()) closes without touching the caller's new cluster, and the last engine of a cluster an engine
    started shuts that one down, once."""
    from vistkit.engine import ray as engine_ray

    class Fake:
        def __init__(self) -> None:
            self.address, self.shutdowns = "A", 0

        def is_initialized(self) -> bool:
            return self.address is not None

        def get_runtime_context(self) -> Any:
            return SimpleNamespace(gcs_address=self.address)

        def shutdown(self) -> None:
            self.shutdowns += 1

    cluster = engine_ray._Cluster()
    monkeypatch.setattr(engine_ray, "_CLUSTER", cluster)
    fake = Fake()
    cluster.started, cluster.id, cluster.users = True, "A", 2  # two engines on cluster A, which one started
    engine_ray._release_cluster(fake, "A")
    assert fake.shutdowns == 0 and cluster.users == 1
    engine_ray._release_cluster(fake, "A")
    assert fake.shutdowns == 1 and (cluster.started, cluster.id, cluster.users) == (False, None, 0)
    engine_ray._release_cluster(fake, "A")  # closed twice: nothing more
    assert fake.shutdowns == 1
    fake.address = "B"  # the caller's own cluster now; an engine joined it
    cluster.id, cluster.users = "B", 1
    engine_ray._release_cluster(fake, "A")  # the engine of the cluster shut down by hand
    assert fake.shutdowns == 1 and cluster.users == 1
    engine_ray._release_cluster(fake, "B")
    assert fake.shutdowns == 1 and cluster.users == 0  # never the caller's cluster


def test_a_ray_setting_ray_cannot_read_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """``RAY_gcs_server_request_timeout_seconds=abc``: `import ray` died of a segmentation fault (exit 139, no
    message); now the setting is named in one sentence."""
    pytest.importorskip("ray")
    from vistkit.engine.ray import _check_ray_settings

    monkeypatch.setenv("RAY_gcs_server_request_timeout_seconds", "abc")
    with pytest.raises(InputError, match=r"^Ray cannot start with this setting from the environment "
                       r"\(RAY_gcs_server_request_timeout_seconds='abc'; importing ray crashed\): fix or unset it$"):
        _check_ray_settings()


def test_a_broken_ray_is_not_blamed_on_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """When ray cannot be imported even without the RAY_<setting> variables (not installed, broken), the check
    stays silent and the import says what is wrong (the missing extra), instead of blaming the settings."""
    import subprocess

    from vistkit.engine.ray import _check_ray_settings

    calls: list[dict[str, str]] = []

    def always_fails(cmd: Any, *, env: dict[str, str], **kw: Any) -> Any:
        calls.append(env)
        return SimpleNamespace(returncode=1)

    monkeypatch.setattr(subprocess, "run", always_fails)
    monkeypatch.setenv("RAY_num_heartbeats_timeout", "5")
    _check_ray_settings()
    assert len(calls) == 2 and "RAY_num_heartbeats_timeout" not in calls[1]


def test_cli_unreachable_cluster_writes_nothing(no_ray_env: None, tmp_path: Any, capsys: Any) -> None:
    """`vistkit score --engine ray --address HOST:PORT` with nothing there: exit 1, one line on stderr, nothing
    on stdout, no --per-item file."""
    pytest.importorskip("ray")
    from vistkit.cli import main

    hyps = tmp_path / "h.json"
    hyps.write_text('{"a": "the cat sat . it ran ."}', encoding="utf-8")
    out = tmp_path / "items.csv"
    port = _closed_port()
    args = ["score", str(hyps), "-m", "rovist-nr", "--engine", "ray", "--address", f"127.0.0.1:{port}"]
    assert main([*args, "--per-item", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and not out.exists()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: no Ray cluster answers at 127.0.0.1:")


# ------------------------------------------------------------------------------------------ on a cluster
@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    """One 2-worker engine on a private local cluster for the module (Ray takes seconds to start);
    3 logical CPUs: the two workers and, in the last test, a second engine's one."""
    with private_engine(num_cpus=3, store_mb=150) as eng:
        yield eng


@pytest.mark.ray
@pytest.mark.slow
def test_ray_equals_local_at_every_shard_size(engine: Any) -> None:
    """Ray == local (ids in order, the story without a reference excluded with its reason, signatures, numbers
    within 1e-12) for BLEU-4, CIDEr-D (two passes) and ROUGE-L at shard sizes 1, n-1, n, n+1, with odd ids
    (exclusions made inside a shard: RoViST-NR in tests/test_engine_ray.py)."""
    hyps, refs = stories()
    n = len(hyps)
    for name in ("bleu-4", "cider-d", "rouge-l"):
        r = refs if get_metric(name).needs_references else None
        local = get_metric(name).score(hyps, r, key="story")
        remote = engine.metric(name)
        for size in (1, n - 1, n, n + 1):
            engine.batch_size = size
            got = remote.score(hyps, r, key="story")
            assert got.signature == local.signature and got.keying == local.keying
            same(got, local)
    engine.batch_size = None


@pytest.mark.ray
@pytest.mark.slow
def test_ray_stream_edges_and_bounded_window(engine: Any) -> None:
    """The Ray stream: no items (NaN, 0), one item, and 3,000 stories read lazily with at most the in-flight
    window (2 x workers shards) plus one alive in this process."""
    metric = engine.metric("bleu-1")
    empty = engine.score_stream(metric, iter([]), signature="s")
    assert empty.n_items == 0 and math.isnan(empty.corpus())
    items = items_of("bleu-1")
    one = engine.score_stream(metric, iter(items[:1]), signature="s")
    alone = get_metric("bleu-1").score_items(items[:1], signature="s")
    assert one.n_items == 1 and one.corpus() == pytest.approx(alone.corpus, abs=1e-12)
    live, peak = [0], [0]

    def on_part(part: Score) -> None:
        peak[0] = max(peak[0], live[0])

    totals = engine.score_stream(metric, _counted(3000, live), signature="s", batch_size=100, on_part=on_part)
    local = LocalEngine().score_stream(get_metric("bleu-1"), _counted(3000, [0]), signature="s", batch_size=100)
    assert totals.n_items == 3000 and totals.corpus() == pytest.approx(local.corpus(), abs=1e-12)
    assert peak[0] <= (2 * 2 + 1) * 100 and live[0] == 0


@pytest.mark.ray
@pytest.mark.slow
def test_real_cluster_passes_the_address_check(engine: Any) -> None:
    """The running cluster's own GCS address passes `check_reachable` (TCP and the HTTP/2 reply)."""
    import ray

    from vistkit.engine.ray import check_reachable

    check_reachable(ray.get_runtime_context().gcs_address, "the test cluster")


@pytest.mark.ray
@pytest.mark.slow
def test_metric_that_cannot_be_built_on_a_worker(engine: Any) -> None:
    """A metric whose options fail where it is built, on a worker: the worker's one sentence (no Ray traceback),
    and the engine scores the next metric as before (no bug found)."""
    hyps, _ = stories()
    with pytest.raises(InputError, match=r"^sentences must be 'split' or 'source', not 'lines'$") as info:
        engine.metric("rovist-nr-jaccard", {"sentences": "lines"}).score(hyps, key="story")
    text = str(info.value)
    assert "Traceback" not in text and "\n" not in text and len(text) < 600
    assert engine.metric("rouge-l").score(hyps, stories()[1], key="story").n == len(hyps) - 1


@pytest.mark.ray
@pytest.mark.slow
def test_two_engines_share_the_cluster_until_the_last_closes(engine: Any) -> None:
    """Two engines in one process: closing the one that started the cluster shut Ray down under the other, whose
    next call started a new cluster by itself, failed with 'Can't find actor ...' and whose close() raised Ray's
    traceback; now the cluster stays until the last engine closes. Runs last: it closes the module's engine."""
    import ray

    from vistkit.engine.ray import RayEngine

    hyps, refs = stories()
    local = get_metric("rouge-l").score(hyps, refs, key="story")
    assert len(engine.worker_pids()) == 2
    second = RayEngine(workers=1)
    pid = second.worker_pids()
    # every CPU of the cluster held: a third engine was given the cluster's CPU count and its workers waited
    # VISTKIT_RAY_START_TIMEOUT (120 s) to fail; now refused at once
    start = time.monotonic()
    with pytest.raises(InputError, match=r"^the other Ray engines of this process hold every CPU"):
        RayEngine()
    assert time.monotonic() - start < 5
    engine.close()  # the engine that started the cluster
    assert ray.is_initialized() and second.worker_pids() == pid
    same(second.metric("rouge-l").score(hyps, refs, key="story"), local)
    second.close()
    assert not ray.is_initialized()
    with pytest.raises(EngineError, match="closed"):
        second.worker_pids()
