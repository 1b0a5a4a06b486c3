"""Progress of long loops (stories, pairs, batches), on stderr, in one place.

- On a terminal: a rich progress bar per task with items done / total, rate and ETA (removed when done).
- When stderr is not a terminal (a log file, a pipe, CI): one plain line every ``VISTKIT_PROGRESS_INTERVAL``
  seconds (default 10) and a final line, e.g. ``bertscore: scored 1,200/2,019 stories (37.1/s, ETA 0:00:22)``.
  The final line is printed only for a task that took at least 2 s or already printed a line; it gives the time
  taken (``stopped after 0:00:05`` when an error or Ctrl-C ended the loop). The rate of a line is measured after
  the first items when they carried the start-up (`Task._line`); a rate under 0.1/s is given per minute or hour.
- Silent under ``vistkit -q`` / ``--quiet`` (`set_quiet`) or ``VISTKIT_QUIET=1``.
- In the Python API (``vistkit.score`` in a script or notebook) progress is off unless ``VISTKIT_PROGRESS=1``
  (or `set_quiet(False)`); the ``vistkit`` command turns it on.

Library code opens a task with `task` (or wraps an iterable with `track`) and advances it; code deep inside a
loop that cannot see the task (a metric's batched model loop) reports through `advance` / `fraction`, which move
the innermost open task of this thread and do nothing when there is none. ``Metric.score`` opens the task of
each metric (`vistkit.metrics.base`), so every metric shows its count; metrics with a long inner loop report
their batches with `fraction`. This module imports nothing heavy (rich only when a terminal shows a bar).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TextIO, TypeVar

T = TypeVar("T")

#: seconds between two plain lines when stderr is not a terminal (``VISTKIT_PROGRESS_INTERVAL`` overrides)
DEFAULT_INTERVAL = 10.0
#: a task shorter than this prints no final line when it printed nothing before (plain mode)
QUIET_BELOW_S = 2.0

_LIBRARY = "library"
_quiet: bool | str | None = _LIBRARY  # None: VISTKIT_QUIET decides (the CLI); "library": VISTKIT_PROGRESS decides
_local = threading.local()
clock: Callable[[], float] = time.monotonic  # tests replace it with a fake clock


def set_quiet(value: bool | str | None) -> None:
    """Silence progress (True), show it (False), follow ``VISTKIT_QUIET`` (None: the command line's default) or
    go back to the library default (``"library"``: off unless ``VISTKIT_PROGRESS=1``)."""
    global _quiet
    _quiet = value


#: what turns a yes/no variable (`env_flag`) off; any other value turns it on
_OFF_VALUES = ("", "0", "no", "n", "false", "f", "off")


def env_flag(name: str) -> bool:
    """Whether the yes/no variable ``name`` (VISTKIT_QUIET, VISTKIT_PROGRESS, VISTKIT_DEBUG) is on:
    ``VISTKIT_DEBUG=0``, ``=off`` and unset are off, as are no and false."""
    return os.environ.get(name, "").strip().lower() not in _OFF_VALUES


def is_quiet() -> bool:
    """Whether progress and chatter are off (``-q``/``--quiet`` or ``VISTKIT_QUIET=1``; in the Python API
    unless ``VISTKIT_PROGRESS=1``)."""
    if env_flag("VISTKIT_QUIET"):
        return True
    if _quiet == _LIBRARY:
        return not env_flag("VISTKIT_PROGRESS")
    if isinstance(_quiet, bool):
        return _quiet
    return False


def warnings_silenced() -> bool:
    """Whether ``warning:`` lines are off: ``-q``/``--quiet`` or ``VISTKIT_QUIET=1`` (the two are one switch);
    the Python API's default (no progress) keeps them."""
    return env_flag("VISTKIT_QUIET") or _quiet is True


def interval() -> float:
    """Seconds between two plain progress lines (``VISTKIT_PROGRESS_INTERVAL``, default 10)."""
    raw = os.environ.get("VISTKIT_PROGRESS_INTERVAL", "")
    try:
        value = float(raw) if raw.strip() else DEFAULT_INTERVAL
    except ValueError:
        value = math.nan
    if not 0 <= value <= 86_400:  # NaN too: progress is chatter, so a bad value is said once, not fatal
        if raw not in _BAD_INTERVALS_SAID:
            _BAD_INTERVALS_SAID.add(raw)
            say(
                f"warning: VISTKIT_PROGRESS_INTERVAL={raw!r} is not a number of seconds from 0 to 86400; "
                f"using {DEFAULT_INTERVAL:g}"
            )
        return DEFAULT_INTERVAL
    return value


_BAD_INTERVALS_SAID: set[str] = set()


def note(message: str) -> None:
    """One line of chatter on stderr (a warning the user can act on goes through `warn` instead); silent when quiet."""
    if not is_quiet():
        say(message)


def colour() -> bool | None:
    """Whether the CLI's coloured lines (notes, errors) may carry colour: False with ``NO_COLOR`` set and not empty
    (no-color.org) or ``TERM=dumb``, as the progress display already did; None lets click decide (colour on a
    terminal only)."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return None


#: where the ``warning: ...`` lines said on stderr go instead while a run says each once (`warnings_to`). A context
#: variable, not a stand-in ``sys.stderr``: a process-wide swap was left in place by two threads streaming at once,
#: and held the text of a progress bar until its newline.
_WARNINGS_TO: ContextVar[Callable[[str], None] | None] = ContextVar("vistkit_warnings_to", default=None)


@contextmanager
def warnings_to(hook: Callable[[str, Callable[[str], None]], None]) -> Iterator[None]:
    """In the block (this thread or task, and threads started with its context), each warning said on stderr
    (`vistkit.errors.warn`) goes to ``hook(message, show)`` instead, which calls ``show(message)`` to say it
    (through the hook of an enclosing block, if any)."""
    show = _WARNINGS_TO.get() or _show_warning
    token = _WARNINGS_TO.set(lambda message: hook(message, show))
    try:
        yield
    finally:
        _WARNINGS_TO.reset(token)


_WARNING = "warning: "


def _show_warning(message: str) -> None:
    _say(_WARNING + message, None)


def say(text: str, stream: TextIO | None = None) -> None:
    """``text`` as one line on ``stream`` (stderr by default). Chatter never stops the work: a stream that is gone
    (``sys.stderr`` None under pythonw or set so by a notebook, closed, a broken pipe) takes nothing (a closed
    stderr stopped every metric with "ValueError: I/O operation on closed file", and a None one sent the lines to
    stdout, into the results). A warning on stderr inside `warnings_to` goes to its hook."""
    if stream is None and text.startswith(_WARNING) and (route := _WARNINGS_TO.get()) is not None:
        route(text[len(_WARNING) :])
        return
    _say(text, stream)


def _say(text: str, stream: TextIO | None) -> None:
    """`say` without the warnings' hook."""
    stream = sys.stderr if stream is None else stream
    if stream is None or getattr(stream, "closed", False):
        return
    try:
        print(text, file=stream, flush=True)
    except (OSError, ValueError):
        pass


def format_duration(seconds: float) -> str:
    """``0:00:22`` (hours:minutes:seconds)."""
    s = int(max(0.0, seconds) + 0.5)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def rate_text(rate: float) -> str:
    """Items per unit of time: ``37.1/s``; under 0.1 a second, per minute (``1.5/min``) or per hour (``0.5/h``), so
    a slow loop (a resample every 40 s) does not read ``0.0/s`` beside its ETA."""
    for per, factor in (("s", 1), ("min", 60), ("h", 3600)):
        if rate * factor >= 0.1 or rate <= 0:
            return f"{rate * factor:.1f}/{per}"
    return f"{rate * 3600:.1f}/h"


def format_line(
    label: str,
    verb: str,
    done: int,
    total: int | None,
    unit: str,
    elapsed: float,
    *,
    rate: float | None = None,
    starting: bool = False,
    final: bool = False,
    stopped: bool = False,
) -> str:
    """``label: verb 1,200/2,019 stories (37.1/s, ETA 0:00:22)``; the ``final`` line (and a line of a task with no
    total) gives the time taken instead, ``stopped after 0:00:05`` for a task an error or Ctrl-C ended (``stopped``).
    ``rate``: the items per second to show and extrapolate (default: done / elapsed); ``starting``: no rate
    measured yet, the line says ``(starting, 0:00:10)`` (the time so far)."""
    count = f"{done:,}/{total:,}" if total is not None else f"{done:,}"
    prefix = f"{label}: " if label else ""
    if starting:
        return f"{prefix}{verb} {count} {unit} (starting, {format_duration(elapsed)})"
    if rate is None:
        rate = done / elapsed if elapsed > 0 else 0.0
    timing = rate_text(rate)
    if stopped:
        timing += f", stopped after {format_duration(elapsed)}"
    elif total is not None and done < total and rate > 0 and not final:
        timing += f", ETA {format_duration((total - done) / rate)}"
    else:  # the end, a task with no total, or nothing done yet: the time taken
        timing += f", {format_duration(elapsed)}"
    return f"{prefix}{verb} {count} {unit} ({timing})"


#: the first items took this many times as long each as the items after them: they carried the start-up (a model
#: loading on the first batch), and the rate of a progress line is measured after them
START_UP_FACTOR = 10
#: while only the first items are done, a line gives no rate or ETA unless they are this share of the total
FIRST_ITEMS_SHARE = 0.1


class Task:
    """One progress task: ``done`` of ``total`` ``unit`` (a story, a pair, a batch)."""

    def __init__(
        self,
        label: str,
        total: int | None,
        *,
        unit: str,
        verb: str,
        display: _Display | None,
        parent: Task | None = None,
    ) -> None:
        self.label, self.total, self.unit, self.verb = label, total, unit, verb
        self.done = 0
        # a hidden task inside another one moves its parent over the next `span` of the parent's items
        self.parent = parent
        self.base = parent.done if parent is not None else 0
        self.span = 0
        if parent is not None and parent.total is not None and total:
            self.span = min(total, parent.total - parent.done)
        self.start = clock()
        self._last_line = self.start
        self._first_at: float | None = None  # when the first items were done (plain lines), and how many
        self._first_done = 0
        self._printed = False
        self._display = display
        self._bar: Any = None
        if display is not None:
            self._bar = display.add(self)

    def advance(self, n: int = 1) -> None:
        """``n`` more items done."""
        self.update(self.done + n)

    def fraction(self, done: float, total: float) -> None:
        """An inner loop's ``done`` of ``total`` (batches, sentence pairs), mapped onto this task's items."""
        if self.total is None or total <= 0:
            return
        self.update(int(self.total * min(1.0, max(0.0, done / total))))

    def update(self, done: int) -> None:
        """Set the items done to ``done`` (capped at the total; never backwards), moving the parent task and the
        display."""
        if self.total is not None:
            done = min(done, self.total)
        if done <= self.done:
            return
        self.done = done
        if self.parent is not None and self.total:
            self.parent.update(self.base + int(self.span * done / self.total))
        if self._display is None:
            return
        if self._bar is not None:
            self._display.refresh(self)
            return
        now = clock()
        if self._first_at is None:
            self._first_at, self._first_done = now, done
        if now - self._last_line >= interval() and (self.total is None or done < self.total):
            self._last_line = now
            self._printed = True
            self._display.line(self._line(done, now))

    def _line(self, done: int, now: float) -> str:
        """A progress line before the end. The first items of a run often carry its start-up (a model loading on
        the first batch): the first line of 15,015 pairs read "scored 1/15,015 pairs (0.1/s, ETA 42:57:24)" for a
        run of three minutes. So a line gives no rate or ETA while only the first items, under a tenth of the
        total, are done; and once later items show the first ones took `START_UP_FACTOR` times as long each, the
        rate (and ETA) is measured after them."""
        elapsed = now - self.start
        args = (self.label, self.verb, done, self.total, self.unit, elapsed)
        first_at = self.start if self._first_at is None else self._first_at
        after = done - self._first_done
        if after > 0 and now > first_at:
            steady = after / (now - first_at)
            if (first_at - self.start) / self._first_done >= START_UP_FACTOR / steady:
                return format_line(*args, rate=steady)
            return format_line(*args)
        if self.total is not None and done < FIRST_ITEMS_SHARE * self.total:
            return format_line(*args, starting=True)
        return format_line(*args)

    def finish(self, *, stopped: bool = False) -> None:
        """End the task on the display: a task that took a while (or printed) leaves its final line, which says
        the task ``stopped`` when an error or Ctrl-C ended it (it read as a run going on, with an ETA)."""
        if self._display is None:
            return
        elapsed = clock() - self.start
        stopped = stopped and (self.total is None or self.done < self.total)  # all done: nothing was cut short
        final = format_line(
            self.label, self.verb, self.done, self.total, self.unit, elapsed, final=True, stopped=stopped
        )
        if self._bar is not None:  # the bar goes; a task that took a while leaves its final line above
            self._display.remove(self, final if elapsed >= QUIET_BELOW_S else None)
            return
        if self._printed or elapsed >= QUIET_BELOW_S:
            self._display.line(final)


class _Display:
    """Where tasks show: a rich live display on a terminal, else plain lines on ``stream``."""

    def __init__(self, stream: TextIO, rich: bool) -> None:
        self.stream = stream
        self.progress: Any = None
        self.rich = rich

    def add(self, task: Task) -> Any:
        if not self.rich:
            return None
        if self.progress is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            class _Rate(TextColumn):
                def render(self, t: Any) -> Any:  # items per second, as the plain lines show it
                    from rich.text import Text

                    speed = t.finished_speed or t.speed
                    return Text(rate_text(speed) if speed else "", style="progress.data.speed")

            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TextColumn("{task.fields[unit]}"),
                TaskProgressColumn(),
                _Rate(""),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self.progress.start()
        return self.progress.add_task(task.label or task.verb, total=task.total, unit=task.unit)

    def refresh(self, task: Task) -> None:
        self.progress.update(task._bar, completed=task.done)

    def remove(self, task: Task, final: str | None) -> None:
        if final is not None:
            self.progress.console.print(final, markup=False, highlight=False)
        self.progress.remove_task(task._bar)
        if not self.progress.tasks:
            self.progress.stop()
            self.progress = None

    def line(self, text: str) -> None:
        say(text, self.stream)


_displays: dict[int, _Display] = {}


def _display() -> _Display | None:
    if is_quiet():
        return None
    stream = sys.stderr
    if stream is None or getattr(stream, "closed", False):  # nowhere to show it (see `say`)
        return None
    key = id(stream)
    found = _displays.get(key)
    if found is None or found.stream is not stream:
        _displays.clear()
        isatty = getattr(stream, "isatty", None)
        try:
            rich = bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"
        except (OSError, ValueError):
            rich = False
        found = _displays[key] = _Display(stream, rich)
    return found


def _stack() -> list[Task]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


@contextmanager
def task(
    label: str, total: int | None, *, unit: str = "stories", verb: str = "scored", outermost: bool = False
) -> Iterator[Task]:
    """A progress task for the ``with`` block: ``t.advance(n)`` as items finish; the innermost open task also
    receives `advance` / `fraction` calls from code that cannot see ``t``.

    ``outermost``: show the task only when no other task is open; inside one (a command's loop over pairs or
    systems) it is hidden and moves the open task instead (`Metric.score` opens its tasks so).
    """
    stack = _stack()
    label = _label(label)
    if outermost and stack:
        t = Task(label, total, unit=unit, verb=verb, display=None, parent=stack[-1])
    else:
        t = Task(label, total, unit=unit, verb=verb, display=_display())
    stack.append(t)
    stopped = False
    try:
        yield t
    except GeneratorExit:  # a `track` loop its caller left early: not an error
        raise
    except BaseException:
        stopped = True
        raise
    finally:
        stack.remove(t)
        t.finish(stopped=stopped)


@contextmanager
def part(start: float, stop: float, total: float) -> Iterator[None]:
    """In the block, the `fraction` calls of an inner loop (an LM's batches, an encoder's) move the innermost open
    task over ``start`` to ``stop`` of ``total`` only: a block of stories inside a longer run. Without it, the
    first block's inner loop reported its own end as the run's (a ranker over 2,019 stories showed 2,019/2,019
    after its first block of 1,024, then nothing for minutes)."""
    stack = _stack()
    outer = stack[-1] if stack else None
    if outer is None or outer.total is None or total <= 0:
        yield
        return
    inner = Task("", 1 << 30, unit="", verb="", display=None, parent=outer)
    inner.base = int(outer.total * min(max(start / total, 0.0), 1.0))
    inner.span = max(int(outer.total * min(max(stop / total, 0.0), 1.0)) - inner.base, 0)
    stack.append(inner)
    try:
        yield
    finally:
        stack.remove(inner)


def track(
    items: Iterable[T], label: str, *, total: int | None = None, unit: str = "stories", verb: str = "scored"
) -> Iterator[T]:
    """``for x in track(xs, "label")``: advance one item per element (``total`` defaults to ``len(items)``)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with task(label, total, unit=unit, verb=verb) as t:
        for x in items:
            yield x
            t.advance()


@contextmanager
def labelled(prefix: str) -> Iterator[None]:
    """Tasks opened in the block are labelled ``PREFIX: label`` (e.g. the system a metric scores in compare)."""
    prefixes = getattr(_local, "prefixes", None)
    if prefixes is None:
        prefixes = _local.prefixes = []
    prefixes.append(prefix)
    try:
        yield
    finally:
        prefixes.pop()


def _label(label: str) -> str:
    prefixes = getattr(_local, "prefixes", None) or []
    return ": ".join([*prefixes, label]) if label else ": ".join(prefixes)


def current() -> Task | None:
    """The innermost open task of this thread (None when there is none)."""
    stack = _stack()
    return stack[-1] if stack else None


def advance(n: int = 1) -> None:
    """Advance the innermost open task by ``n`` items (no-op without one)."""
    t = current()
    if t is not None:
        t.advance(n)


def fraction(done: float, total: float) -> None:
    """Report an inner loop's ``done`` of ``total`` to the innermost open task (no-op without one)."""
    t = current()
    if t is not None:
        t.fraction(done, total)
