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
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from vistkit import progress
from vistkit.data.story import StorySet
from vistkit.engine import Engine, EngineError, batched
from vistkit.engine.merge import (
    StreamTotals,
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
#: seconds to wait for the workers to start (they wait for free CPUs / GPUs): $VISTKIT_RAY_START_TIMEOUT
START_TIMEOUT = float(os.environ.get("VISTKIT_RAY_START_TIMEOUT", "120"))
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


def _check_fits(workers: int, cpus: float, gpus: float, resources: dict[str, float]) -> None:
    """Refuse at once a worker count the local cluster cannot hold (Ray would wait `START_TIMEOUT` seconds)."""
    for what, each in (("CPU", cpus), ("GPU", gpus)):
        have = float(resources.get(what, 0.0))
        if each <= 0 or workers * each <= have + 1e-9:
            continue
        if have == 0:
            raise InputError(f"this machine's local Ray cluster has no {what}; leave out --num-gpus-per-worker")
        raise InputError(
            f"{workers} Ray workers need {workers * each:g} {what}s and this machine's local Ray cluster has "
            f"{have:g}; ask for at most {int(have // each)} with --workers"
        )


def _exit_quietly_on_sigterm() -> Any:
    """SIGTERM ends the run like Ctrl-C (workers shut down, no output half-written) instead of Ray's own
    handler, which prints a stack dump; only where Python may set handlers (the main thread). Returns the
    handler it replaced (`RayEngine.close` puts it back), or None."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    return signal.signal(signal.SIGTERM, stop)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MissingDependencyError(RAY_MISSING) from None
    return ray


def _spec_key(name: str, options: dict[str, Any]) -> str:
    return name + "|" + repr(sorted(options.items()))


class _Worker:
    """One Ray actor: builds each metric once (lazily) and scores shards with it."""

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

    def signature_fields(self, name: str, options: dict[str, Any]) -> dict[str, object]:
        return self._metric(name, options).signature_fields()

    def prepare(self, name: str, options: dict[str, Any], hypotheses: StorySet) -> StorySet:
        return self._metric(name, options).prepare_hypotheses(hypotheses)

    def score(self, name: str, options: dict[str, Any], items: list[Item], signature: str) -> Score:
        return self._metric(name, options).score_items(items, signature=signature)

    def cider_df(self, items: list[Item]) -> tuple[Counter[str], int]:
        return cider_df_part(items)

    def cider_score(
        self, name: str, options: dict[str, Any], items: list[Item], box: list[Any], n_docs: int, signature: str
    ) -> Score:
        import ray

        ref = box[0]  # boxed so that Ray passes the reference and this actor fetches the table once
        key = ref.hex()
        if key not in self._broadcast:
            self._broadcast = {key: ray.get(ref)}
        df = self._broadcast[key]
        return cider_score_part(self._metric(name, options), items, df=df, n_docs=n_docs, signature=signature)

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
        if self._fields is None:
            self._fields = self.engine.call_one("signature_fields", self.name, self.options)
        return dict(self._fields)

    def prepare_hypotheses(self, hypotheses: StorySet) -> StorySet:
        if self.metric_class.prepare_hypotheses is Metric.prepare_hypotheses:
            return hypotheses
        # e.g. grounding metrics fill in photo ids from their --photos map (options live on the workers)
        return self.engine.call_one("prepare", self.name, self.options, hypotheses)  # type: ignore[no-any-return]

    def score_items(self, items: Sequence[Item], *, signature: str) -> Score:
        return self.engine.score_items(self, list(items), signature=signature)


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
        ray = _import_ray()
        self.ray = ray
        if workers is not None and workers < 1:
            raise InputError("--workers must be at least 1")
        if not math.isfinite(num_gpus_per_worker) or num_gpus_per_worker < 0:
            raise InputError(f"--num-gpus-per-worker must be a number >= 0, not {num_gpus_per_worker}")
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            opts: dict[str, Any] = {
                "include_dashboard": False,
                "logging_level": logging.ERROR,
                "log_to_driver": False,
            }
            if address is None:
                opts.update(num_cpus=os.cpu_count() or 1, object_store_memory=512 * 1024**2)
            else:
                opts["address"] = address
            opts.update(init_options or {})
            try:
                ray.init(**opts)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise EngineError(
                    f"could not reach the Ray cluster at {address or 'a new local cluster'} ({exc}); start it "
                    "with `ray start --head` or pass --address auto|ray://HOST:PORT"
                ) from None
        self._sigterm = _exit_quietly_on_sigterm() if self._owns_ray else None
        resources = ray.cluster_resources()
        if workers is None:
            if num_gpus_per_worker > 0:
                workers = int(resources.get("GPU", 0) // num_gpus_per_worker)
            else:
                workers = int(resources.get("CPU", 1) // num_cpus_per_worker)
            workers = max(1, workers)
        if address is None and self._owns_ray:  # a local cluster does not grow: say now what cannot start
            try:
                _check_fits(workers, num_cpus_per_worker, num_gpus_per_worker, resources)
            except InputError:
                self._restore_sigterm()
                ray.shutdown()
                raise
        self.n_workers = workers
        self.batch_size = batch_size
        self.max_retries = max_retries
        self._cpus = num_cpus_per_worker
        self._gpus = num_gpus_per_worker
        self._actors: list[Any] = []
        self._closed = False

    # -- workers -----------------------------------------------------------------------------------------
    @property
    def actors(self) -> list[Any]:
        """The worker actors (started on first use)."""
        if self._closed:
            raise EngineError("this Ray engine was closed; make a new one")
        if not self._actors:
            cls = self.ray.remote(_Worker).options(
                num_cpus=self._cpus,
                num_gpus=self._gpus,
                max_restarts=self.max_retries,
                max_task_retries=self.max_retries,
            )
            self._actors = [cls.remote() for _ in range(self.n_workers)]
            ready, waiting = self.ray.wait(
                [a.pid.remote() for a in self._actors], num_returns=len(self._actors), timeout=START_TIMEOUT
            )
            if waiting:
                for a in self._actors:
                    self.ray.kill(a)
                self._actors = []
                raise EngineError(
                    f"only {len(ready)} of {self.n_workers} Ray workers started within {START_TIMEOUT:g} s (each "
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
        if issubclass(cls, Ranker):
            return cls(**(options or {}))
        return _remote_class(cls)(self, name, dict(options or {}))

    def call_one(self, method: str, *args: Any) -> Any:
        """Run one call on the first worker and return its value (errors as `_get` reports them)."""
        ref = getattr(self.actors[0], method).remote(*args)
        return self._get(ref, what=method)

    def _get(self, ref: Any, *, what: str) -> Any:
        ray = self.ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, VistkitError):
                raise cause from None
            raise EngineError(f"a Ray worker failed while {what}: {cause or exc}") from None
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
                pending[ref] = submitted
                whats[submitted] = what
                owner[ref] = a
                load[a] += 1
                submitted += 1
            if next_out in done:
                whats.pop(next_out, None)
                yield done.pop(next_out)
                next_out += 1
                continue
            if not pending:
                if exhausted:
                    return
                continue
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                idx = pending.pop(ref)
                load[owner.pop(ref)] -= 1
                done[idx] = self._get(ref, what=whats[idx])

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
            calls = (("score", (name, opts, s, signature), what(s)) for s in shards)
        parts = []
        for shard, part in zip(shards, self._ordered(calls), strict=True):
            _check_part(part, shard, name)
            parts.append(part)
            progress.advance(len(shard))  # the task `Metric.score` opened
        return merge_scores(parts, signature=signature)

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
        if not isinstance(metric, RemoteMetric):
            metric = self.metric(metric.name)
        assert isinstance(metric, RemoteMetric)
        if strategy(metric.name, metric.options) != "items":
            raise InputError(f"{metric.name} cannot be streamed (its item scores depend on the whole set)")
        name, opts = metric.name, metric.options
        shards: list[list[Item]] = []  # the shards in flight, for the completeness check (bounded window)

        def calls() -> Iterator[tuple[str, tuple[Any, ...], str]]:
            for shard in batched(items, batch_size):
                shards.append(shard)
                yield "score", (name, opts, shard, signature), f"scoring {len(shard)} stories with {name}"

        totals = StreamTotals()
        for part in self._ordered(calls()):
            shard = shards.pop(0)
            _check_part(part, shard, name)
            totals.add(part)
            if on_part is not None:
                on_part(part)
        return totals

    # -- shutdown ----------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the workers (their METEOR JVMs with them) and the local cluster this engine started."""
        if self._closed:
            return
        self._closed = True
        ray = self.ray
        if self._actors:
            try:
                ray.get([a.shutdown.remote() for a in self._actors], timeout=30)
            except Exception:  # a dead worker has nothing left to close
                pass
            for a in self._actors:
                ray.kill(a)
            self._actors = []
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
        self._restore_sigterm()

    def _restore_sigterm(self) -> None:
        import signal

        if getattr(self, "_sigterm", None) is not None:
            with contextlib.suppress(ValueError):  # not the main thread
                signal.signal(signal.SIGTERM, self._sigterm)
            self._sigterm = None


_REMOTE_CLASSES: dict[type[Metric], type[RemoteMetric]] = {}


def _remote_class(cls: type[Metric]) -> type[RemoteMetric]:
    if cls not in _REMOTE_CLASSES:
        attrs = {a: getattr(cls, a) for a in _CLASS_ATTRS if hasattr(cls, a)}
        _REMOTE_CLASSES[cls] = type(f"Remote{cls.__name__}", (RemoteMetric,), attrs)
    return _REMOTE_CLASSES[cls]


def _check_part(part: Score, shard: Sequence[Item], name: str) -> None:
    ids = [it.item_id for it in shard]
    if list(part.item_ids) != ids or len(part.item_scores) != len(ids):
        raise EngineError(
            f"a Ray worker returned {len(part.item_ids)} results for {len(ids)} stories of {name}; "
            "the run was stopped rather than drop stories: rerun, or use --engine local"
        )
