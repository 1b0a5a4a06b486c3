"""``vistkit studio``: collect human judgements of stories (rank, pairwise, Likert) and feed them to ``vistkit meta``.

Sub-commands: ``init`` (a study file and its assignment plan), ``invite`` (annotator links), ``serve`` (the web
app on uvicorn), ``status`` (progress, agreement, results), ``export`` (rankings, pairs, likert, jsonl, tasks),
``report`` (the meta-evaluation of metrics against the judgements) and ``demo``. SQLAlchemy, Starlette and uvicorn
are imported inside the commands, so ``vistkit --help`` stays fast.
"""

from __future__ import annotations

import contextvars
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from vistkit.cli import app
from vistkit.commands.common import (
    ForceOption,
    FormatOption,
    check_resamples,
    check_seed,
    echo,
    note,
    parse_metric_names,
    writes_output,
)
from vistkit.errors import InputError, MissingDependencyError, VistkitError
from vistkit.report.tables import OutputFormat

studio_app = typer.Typer(
    help="Collect human judgements of stories (rank, pairwise, Likert) in the browser; export them to `meta`.",
    no_args_is_help=True,
)
app.add_typer(studio_app, name="studio")

StudyArg = typer.Argument(..., help="The study: a .db file (SQLite) or a SQLAlchemy URL such as postgresql://...")
DbOpt = typer.Option(None, "--db", help="A SQLAlchemy URL (postgresql://...) to use instead of the STUDY file.")
ASPECTS_DEFAULT = "focused,coherent,share,human,grounded,detailed"
BaseUrlOpt = typer.Option("http://127.0.0.1:8000", "--base-url", help="Where the server is reached (for links).")


def _need_extra() -> None:
    try:
        import jinja2  # noqa: F401
        import sqlalchemy  # noqa: F401
        import starlette  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            f"vistkit studio needs {exc.name}; install the extra with `pip install 'vistkit[studio]'`"
        ) from None


#: the studies `_open` opened during the running verb (`study_errors` closes their connections when it ends)
_OPENED: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("vistkit_studio_opened", default=None)


def study_errors(func: Callable[..., None]) -> Callable[..., None]:
    """Decorator (innermost, below ``@writes_output``) of a verb that uses a study: a failure of the study's
    storage (a damaged file, a read-only file or folder, a full disk, a lock held elsewhere) becomes one sentence
    naming the study (`vistkit.studio.db.study_error`) instead of "unexpected error". The study's connections
    are closed when the verb ends (a verb run in a longer-lived process, `vistkit.cli.main`, held them open
    until garbage collection: a server whose ``-wal`` file was changed saw another program on the study)."""

    @functools.wraps(func)
    def command(*args: Any, **kwargs: Any) -> None:
        opened: list[Any] = []
        token = _OPENED.set(opened)
        try:
            func(*args, **kwargs)
        except VistkitError:
            raise
        except Exception as exc:
            if "sqlalchemy" not in sys.modules:  # the studio extra is missing: nothing of the study was used
                raise
            from vistkit.studio import db

            if db.storage_problem(exc) is None:
                raise
            name = kwargs.get("db_url") or kwargs.get("study") or (args[0] if args else None)
            if name is None and kwargs.get("folder") is not None:  # demo: the study inside its folder
                name = Path(kwargs["folder"]) / "study.db"
            raise db.study_error(exc, db.display_name(str(name or "the study"))) from None
        finally:
            _OPENED.reset(token)
            for st in opened:
                st.engine.dispose()

    return command


def _open(study: str, db_url: str | None) -> Any:
    _need_extra()
    from vistkit.data.output import OutputPolicy, input_paths, refuse_stdout_input
    from vistkit.studio.db import display_name, open_study

    # `studio status study.db >> study.db` would append text to the database (or its log): refused before it opens
    refuse_stdout_input(OutputPolicy(inputs=tuple(input_paths([study, db_url]))))
    st = open_study(db_url or study)
    opened = _OPENED.get()
    if opened is not None:
        opened.append(st)
    if st.setting("task") is None:  # an empty database, or what an interrupted init left: nothing was initialised
        raise InputError(
            f"{display_name(db_url or study)} holds no study (an interrupted `vistkit studio init` leaves such a "
            "file); create one with `vistkit studio init STUDY --task rank --stories NAME=FILE ...`"
        )
    return st


def _shown(study: str) -> str:
    """A study as it is typed in a suggested command: quoted for the shell, a URL's password masked."""
    import shlex

    from vistkit.studio.db import display_name

    return shlex.quote(display_name(study))


def _check_apart(outputs: dict[str, Path | None], inputs: dict[str, Path | None]) -> None:
    """Refuse, before anything is read or written, an output that is, or lies inside, another output (``--keep``
    inside ``--report``) or that holds an input (a study or references file inside the report folder, which the
    report replaces): one of them would destroy the other."""
    import os

    def real(p: Path) -> Path:
        return Path(os.path.realpath(p))

    given = {k: v for k, v in outputs.items() if v is not None and str(v) not in ("", "-")}
    names = list(given)
    for n, a in enumerate(names):
        for b in names[n + 1 :]:
            pa, pb = real(given[a]), real(given[b])
            if pa == pb:
                raise InputError(f"{a} and {b} are the same place ({given[a]}); give them separate places")
            if pa.is_relative_to(pb) or pb.is_relative_to(pa):
                inner, outer = (a, b) if pa.is_relative_to(pb) else (b, a)
                raise InputError(
                    f"{inner} {given[inner]} lies inside {outer} {given[outer]}, also written by this command; "
                    "give them separate places"
                )
    for label, inp in inputs.items():
        if inp is None or not os.path.lexists(inp):
            continue
        for out_label, out in given.items():
            if real(inp) == real(out) or real(inp).is_relative_to(real(out)):
                raise InputError(
                    f"{label} {inp} lies inside {out_label} {out}, which this command writes; move that input out "
                    f"of it or choose another place for {out_label}"
                )


def _parse_stories(values: list[str]) -> dict[str, tuple[Path, str]]:
    from vistkit.data.readers import split_field, split_member

    out: dict[str, tuple[Path, str]] = {}
    for v in values:
        if "=" not in v:
            raise InputError(f"--stories {v!r}: write NAME=FILE or NAME=FILE:FIELD (e.g. human=refs.json)")
        name, path = (x.strip() for x in v.split("=", 1))
        path, field = split_field(path)  # FILE:FIELD, not ARCHIVE.zip:MEMBER
        if not name or name in out:
            raise InputError(f"--stories {v!r}: every system needs its own, non-empty name")
        if path != "-" and not split_member(path)[0].exists():  # - : standard input
            raise InputError(f"--stories {name}: no file {path}")
        out[name] = (Path(path), field)
    return out


def _print_kv(data: dict[str, Any], fmt: OutputFormat, title: str) -> None:
    from vistkit.report.tables import dumps_json, render_table

    if fmt is OutputFormat.JSON:
        echo(dumps_json(data))
        return
    rows = [[k, v] for k, v in data.items() if not isinstance(v, (list, dict))]
    echo(render_table(["field", "value"], rows, fmt, title=title))


@studio_app.command("init")
@writes_output(force_flag=False, study="file", db_url="file")  # a study is never overwritten
@study_errors
def init_cmd(
    study: str = StudyArg,
    task: str = typer.Option(..., "--task", metavar="rank|pairwise|likert", help="rank, pairwise or likert."),
    stories: list[str] = typer.Option(
        ...,
        "--stories",
        "-s",
        metavar="NAME=FILE",
        help="NAME=FILE[:FIELD], one per system (FILE may be ARCHIVE.zip:MEMBER).",
    ),
    key: str = typer.Option(
        "story", "--key", "-k", metavar="KEY", help="Match the systems' stories by story, sequence or album."
    ),
    photos: Path | None = typer.Option(None, "--photos", help="Folder of photos named PHOTO_ID.jpg (or .png...)."),
    photo_url: str | None = typer.Option(None, "--photo-url", help="Photo URL template with {id}."),
    per_item: int = typer.Option(5, "--per-item", help="Annotators per unit (k; VHED used 5)."),
    aspects: str = typer.Option(
        ASPECTS_DEFAULT,
        "--aspects",
        metavar="ASPECTS",
        help="Likert statements to ask, comma-separated.",
    ),
    gold: int = typer.Option(0, "--gold", help="Attention-check items (human story vs its shuffled copy)."),
    gold_pass: float = typer.Option(0.8, "--gold-pass", help="Gold pass rate an annotator must reach."),
    reference_system: str = typer.Option("human", "--reference-system", help="The human system (for gold)."),
    same: bool = typer.Option(True, "--same/--no-same", help="Offer 'about the same' in pairwise tasks."),
    max_items: int | None = typer.Option(None, "--max-items", help="Use only the first N shared items."),
    one_per_sequence: bool = typer.Option(
        False,
        "--one-per-sequence",
        help="With --key story: only the first story id of each photo sequence (machines that wrote one story per "
        "sequence are then not judged twice).",
    ),
    claim_timeout: float = typer.Option(3600.0, "--claim-timeout", help="Seconds before an open task is reassigned."),
    seed: int = typer.Option(0, "--seed", callback=check_seed, help="Seed of the story orders and gold items."),
    title: str = typer.Option("", "--title", help="Shown on every page (up to 200 visible characters)."),
    db_url: str | None = DbOpt,
    base_url: str = BaseUrlOpt,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Create a study from story files, with its assignment plan (k annotators per unit, random story orders)."""
    _need_extra()
    from vistkit.studio.network import check_base_url

    base_url = check_base_url(base_url)  # before anything is written: the links are printed only once
    if task != "likert" and aspects != ASPECTS_DEFAULT:
        from vistkit.commands.common import warn_ignored

        warn_ignored(["--aspects"], f"--task likert, not {task}")
    from vistkit.data.readers import read_stories
    from vistkit.studio import TASKS
    from vistkit.studio.plan import create_study, items_from_story_sets, warn_repeated_stories

    if key not in ("story", "sequence", "album"):  # these two before a story file is read
        raise InputError(f"--key must be story, sequence or album, not {key!r}")
    if task not in TASKS:
        raise InputError(f"--task must be one of {', '.join(TASKS)}, not {task!r}")
    sets = {
        name: read_stories(path, field=field, system=name) for name, (path, field) in _parse_stories(stories).items()
    }
    if one_per_sequence and key != "story":
        from vistkit.commands.common import warn_ignored

        warn_ignored(["--one-per-sequence"], f"--key story (with --key {key} each item is a different key already)")
        one_per_sequence = False
    plan_items = items_from_story_sets(sets, key=key, max_items=max_items, one_per_sequence=one_per_sequence)
    summary = create_study(
        db_url or study,
        task=task,
        items=plan_items,
        per_item=per_item,
        aspects=parse_metric_names(aspects),
        photos_dir=photos,
        photo_url=photo_url,
        gold=gold,
        gold_pass=gold_pass,
        reference_system=reference_system,
        allow_same=same,
        claim_timeout=claim_timeout,
        seed=seed,
        title=title,
    )
    if not one_per_sequence:  # once the study is made: a refused option says only its one sentence
        warn_repeated_stories(plan_items)
    if claim_timeout < 60:  # `--claim-timeout 1` meant as an hour: tasks would change hands under annotators
        from vistkit.errors import warn

        warn(
            f"--claim-timeout {claim_timeout:g} is in seconds: a task left open longer than that goes to another "
            "annotator once no free task is left, and the first one's answer is then refused; the default is 3600 "
            "(an hour)"
        )
    if photos is None and photo_url is None:
        from vistkit.errors import warn

        warn(
            "the study has no photos (no --photos DIR or --photo-url TEMPLATE): annotators see a numbered box "
            "where each photo would be (none for stories without photo ids); make the study again with one of "
            "them if the stories should be judged against their photos"
        )
    summary["admin_link"] = f"{base_url}/admin/{summary['admin_token']}"
    from vistkit.studio.db import display_name

    try:
        _print_kv(summary, fmt, f"study {display_name(db_url or study)}")
        if fmt is OutputFormat.TEXT:
            echo("Keep the admin link: only its hash is stored. Next: `vistkit studio invite STUDY --n 10`.")
    except OSError as exc:  # a full disk, a closed pipe: the study is made, its admin link (shown once) is lost
        from vistkit.errors import OutputError

        raise OutputError(
            f"study {display_name(db_url or study)} was made, but its admin link could not be written "
            f"({exc.strerror or exc}); get a new admin link with `vistkit studio invite "
            f"{_shown(db_url or study)} --admin` (no new init is needed)"
        ) from None


@studio_app.command("invite")
@study_errors
def invite_cmd(
    study: str = StudyArg,
    n: int = typer.Option(1, "--n", help="How many annotator links to create."),
    quota: int | None = typer.Option(None, "--quota", help="At most this many tasks per annotator."),
    prefix: str = typer.Option("annotator", "--prefix", help="Annotator names: PREFIX-001, ..."),
    admin: bool = typer.Option(False, "--admin", help="Make a new admin link instead (the old one stops working)."),
    withdraw: str | None = typer.Option(
        None,
        "--withdraw",
        metavar="NAMES|unsent",
        help="Remove these annotators instead (comma-separated; their links stop working), or `unsent`: those of "
        "an invite run that stopped before writing their links (`status` lists them). Only annotators who have "
        "claimed no task.",
    ),
    db_url: str | None = DbOpt,
    base_url: str = BaseUrlOpt,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Print new invite links (one random token per annotator; shown once, stored hashed)."""
    from vistkit.errors import OutputError
    from vistkit.report.tables import render_table

    st = _open(study, db_url)
    from vistkit.studio import service
    from vistkit.studio.db import display_name
    from vistkit.studio.network import check_base_url

    name = display_name(db_url or study)
    if withdraw is not None and admin:
        raise InputError("give --withdraw or --admin, not both")
    shaping = (("--n", n != 1), ("--quota", quota is not None), ("--prefix", prefix != "annotator"))
    unused = [flag for flag, given in shaping if given]
    if unused and (admin or withdraw is not None):  # they shape new annotators, which neither makes
        from vistkit.commands.common import warn_ignored

        warn_ignored(unused, "new annotator links (not --admin or --withdraw)")
    if withdraw is not None:
        names = service.withdraw_names(st, withdraw)  # "a, b-001" alone: that annotator, if there is one
        if not names:
            raise InputError(
                "--withdraw needs annotator names (comma-separated, as `studio status` lists them) or unsent"
            )
        removed, young = service.withdraw_annotators(st, names)
        if young:
            from vistkit.errors import warn

            warn(
                f"kept {len(young):,} unsent annotators made less than {service.UNSENT_SETTLE_S:.0f} s ago "
                f"({', '.join(young[:5])}): an invite run may still be writing their links; run --withdraw unsent "
                "again in a minute if none is"
            )
        if not removed:
            if not young:
                note(f"{name} has no unsent annotators: nothing was withdrawn")
            return
        echo(render_table(["withdrawn"], [[g] for g in removed], fmt))
        return
    base = check_base_url(base_url)
    if admin:
        from vistkit.studio.db import new_token

        token = new_token()
        try:  # the link is written before its token is stored: a failure in between must not lock the owner out
            echo(render_table(["annotator", "link"], [["admin", f"{base}/admin/{token}"]], fmt))
        except OSError as exc:
            raise OutputError(
                f"cannot write the new admin link ({exc.strerror or exc}); nothing was changed, the old admin link "
                "still works"
            ) from None
        try:
            service.set_admin_token(st, token)
        except Exception as exc:
            from vistkit.studio.db import storage_problem, study_error

            if isinstance(exc, VistkitError):
                said = str(exc)
            elif storage_problem(exc) is not None:
                said = str(study_error(exc, name))
            else:
                raise
            raise OutputError(
                f"{said.rstrip('.')}; the admin link printed above was not stored, so it does not work, and the old "
                "admin link still works: run `vistkit studio invite --admin` again once the study can be written"
            ) from None
        return
    from vistkit.studio import MAX_INVITES

    if not 1 <= n <= MAX_INVITES:
        raise InputError(f"--n must be from 1 to {MAX_INVITES:,}, not {n:,}")
    # listed as unsent until their links are out: a run killed in between leaves them for `status` to name
    made = service.invite(st, n=n, prefix=prefix, quota=quota, unsent=True)
    names = [nm for nm, _ in made]
    rows = [[nm, f"{base}/a/{token}"] for nm, token in made]
    try:
        echo(render_table(["annotator", "link"], rows, fmt))
    except BaseException as exc:  # a full disk, a closed pipe, Ctrl-C: links shown to nobody are not kept
        try:
            gone = service.withdraw_invites(st, names)
        except Exception:  # the study cannot be written now either: they stay listed as unsent
            gone = None
        if not isinstance(exc, OSError):
            raise
        why = exc.strerror or str(exc)
        if gone is None:
            raise OutputError(
                f"cannot write the invite links ({why}), and their {len(names):,} annotators could not be removed "
                f"again: nobody has their links; `vistkit studio invite {_shown(db_url or study)} --withdraw "
                "unsent` removes them (`vistkit studio status` lists them)"
            ) from None
        raise OutputError(
            f"cannot write the invite links ({why}); the {gone:,} new annotators were not kept, so no link of this "
            "run works: run `vistkit studio invite` again with its output going where it can be written"
        ) from None
    try:
        lost = service.confirm_invites(st, names)
    except Exception as exc:  # the links are out and work; only the unsent mark stays
        from vistkit.studio.db import storage_problem

        if storage_problem(exc) is None and not isinstance(exc, VistkitError):
            raise
        from vistkit.errors import warn

        warn(
            f"the links above work, but {name} could not be written to mark them as handed out, so `studio status` "
            "lists these annotators as unsent: do not `--withdraw unsent` them"
        )
        return
    if lost:  # `--withdraw unsent` ran while this run was still writing them (it waits a minute: a slow pipe)
        raise OutputError(
            f"{len(lost):,} of the links above ({', '.join(lost[:5])}) were withdrawn by `studio invite "
            "--withdraw` while they were being written, so they do not work; run `vistkit studio invite` again for "
            "new ones"
        )


@studio_app.command("serve")
@study_errors
def serve_cmd(
    study: str = StudyArg,
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on (loopback by default)."),
    port: int = typer.Option(8000, "--port", help="TCP port."),
    db_url: str | None = DbOpt,
    request_timeout: float = typer.Option(
        30.0,
        "--request-timeout",
        help="Seconds a client has to send a whole request; slower ones are disconnected (they hold connections).",
    ),
) -> None:
    """Run the annotation web app (uvicorn) until Ctrl-C."""
    from vistkit.studio.network import check_listen, http_url

    if not 0 < request_timeout <= 3600:  # NaN too
        raise InputError(f"--request-timeout must be a number of seconds from 0 to 3600, not {request_timeout}")
    host = check_listen(host, port)
    _need_extra()
    from vistkit.studio.db import sqlite_path

    file = sqlite_path(db_url or study)
    if file is not None:  # before the study is opened: what an init of it killed with kill -9 left beside it
        from vistkit.errors import warn
        from vistkit.studio.plan import remove_leftover_work_files

        if cleaned := remove_leftover_work_files(file):
            names = ", ".join(p.name for p in cleaned)
            warn(f"removed what an earlier init of {file} left when it was killed (its work file {names})")
    st = _open(study, db_url)
    try:
        import uvicorn  # noqa: F401
    except ImportError:
        raise MissingDependencyError("vistkit studio serve needs uvicorn; `pip install 'vistkit[studio]'`") from None
    from vistkit.studio.app import serve
    from vistkit.studio.db import check_writable, display_name

    name = display_name(db_url or study)
    check_writable(st, name)  # a read-only or damaged study is refused now, not on every request
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.secho(f"warning: serving on {host}: put it behind HTTPS before sharing links", err=True)
    echo(f"serving study {name} ({st.setting('task')}) on {http_url(host, port)}/  (Ctrl-C stops)")
    sys.stdout.flush()
    serve(st, host=host, port=port, name=name, check=False, request_timeout=request_timeout)


@studio_app.command("status")
@study_errors
def status_cmd(study: str = StudyArg, db_url: str | None = DbOpt, fmt: OutputFormat = FormatOption) -> None:
    """Progress, agreement (Krippendorff's alpha), gold pass rates and results so far."""
    from vistkit.report.tables import dumps_json, render_table
    from vistkit.studio.analysis import load, summary

    st = _open(study, db_url)
    s = summary(load(st))
    if fmt is OutputFormat.JSON:
        echo(dumps_json(s))
        return
    head = [
        [k, s[k]]
        for k in (
            "study_id",
            "task",
            "units",
            "gold_units",
            "per_item",
            "judgements",
            "target",
            "complete_units",
            "gold_pass_rate",
        )
    ]
    shown_none = "n/a" if fmt is OutputFormat.TEXT else None
    head += [[f"alpha ({k})", shown_none if v is None else v] for k, v in s["alpha"].items()]
    undefined = "\n".join(f"note: alpha ({k}) is undefined: {why}" for k, why in s["alpha_undefined"].items())
    if unsent := s["unsent_invites"]:
        shown = ", ".join(unsent[:5]) + (f" and {len(unsent) - 5:,} more" if len(unsent) > 5 else "")
        note(
            f"note: {len(unsent):,} annotators ({shown}) were made by a `studio invite` run that stopped before "
            f"writing their links (or is still running), so nobody may have them; `vistkit studio invite "
            f"{_shown(db_url or study)} --withdraw unsent` removes them"
        )
    cols = ["annotator", "done", "median_seconds", "gold_passed", "gold_total"]
    if fmt is OutputFormat.CSV:  # one table (three printed one after another had headers mid-file): long form
        long = [["study", "", k, v] for k, v in head]
        for r in s["results"]:
            first = next(iter(r))
            long += [["results", r[first], c, v] for c, v in r.items() if c != first]
        long += [["annotators", a["annotator"], c, a[c]] for a in s["annotators"] for c in cols[1:]]
        echo(render_table(["table", "row", "field", "value"], long, fmt))
        if undefined:  # a CSV has no caption: the notes on stderr
            note(undefined)
        return
    echo(render_table(["field", "value"], head, fmt, title="study", caption=undefined or None))
    if s["results"]:
        results = list(s["results"][0])
        echo(render_table(results, [[r.get(c) for c in results] for r in s["results"]], fmt, title="results"))
    echo(render_table(cols, [[a[c] for c in cols] for a in s["annotators"]], fmt, title="annotators"))


@studio_app.command("export")
@writes_output(output="file")
@study_errors
def export_cmd(
    study: str = StudyArg,
    fmt: str = typer.Option(
        ...,
        "--format",
        "-f",
        metavar="rankings|pairs|likert|jsonl|tasks",
        help="What to write: rankings (for meta rankings-to-pairs), pairs (meta pairs), likert (meta correlate), "
        "jsonl (one judgement per line) or tasks (one row per unit, for crowdsourcing platforms).",
    ),
    output: Path = typer.Option(
        ...,
        "--output",
        "-o",
        metavar="FILE",
        help="File to write (provenance goes to FILE.provenance.json); - writes to stdout, without provenance.",
    ),
    include_gold: bool = typer.Option(False, "--include-gold", help="Keep the attention-check items."),
    drop_failed_gold: bool = typer.Option(
        False, "--drop-failed-gold", help="Leave out annotators below the study's gold pass rate."
    ),
    db_url: str | None = DbOpt,
) -> None:
    """Write the judgements in the formats `vistkit meta` reads (rankings-to-pairs, pairs, correlate)."""
    from vistkit.commands.common import emit
    from vistkit.data.output import STDOUT
    from vistkit.studio.analysis import export, writes_in_place

    st = _open(study, db_url)
    prov = export(st, output, fmt=fmt, include_gold=include_gold, drop_failed_gold=drop_failed_gold)
    in_place = writes_in_place(output)  # stdout, a device, a pipe: the line goes to stderr, out of the data's way
    where = "standard output" if str(output) == STDOUT else str(output)
    where += " (no provenance file)" if in_place else ""
    emit(f"wrote {prov['rows']} rows ({prov['judgements']} judgements) to {where}", to_stderr=in_place)


@studio_app.command("report")
@writes_output(report="folder", keep="file")
@study_errors
def report_cmd(
    study: str = StudyArg,
    metrics: list[str] = typer.Option(
        ..., "--metrics", "-m", metavar="METRICS", help="Metric names, comma-separated (or all)."
    ),
    references: Path | None = typer.Option(None, "--references", "-r", metavar="FILE", help="Human reference stories."),
    key: str | None = typer.Option(
        None, "--key", "-k", metavar="KEY", help="Match pairs/items to references by story or sequence."
    ),
    option: list[str] = typer.Option(
        [], "--option", "-O", metavar="METRIC.OPTION=VALUE", help="A metric option (repeatable)."
    ),
    report: Path | None = typer.Option(None, "--report", help="Also write tables, figures and index.html here."),
    bootstrap: int = typer.Option(
        1000, "--bootstrap", "--n-bootstrap", callback=check_resamples, help="Bootstrap resamples."
    ),
    drop_failed_gold: bool = typer.Option(False, "--drop-failed-gold", help="Leave out annotators below gold."),
    keep: Path | None = typer.Option(None, "--keep", help="Keep the exported judgements file here."),
    db_url: str | None = DbOpt,
    fmt: OutputFormat = FormatOption,
    force: bool = ForceOption,
) -> None:
    """Meta-evaluate metrics against the collected judgements in one step: exports the study and runs
    `vistkit meta pairs` (rank, pairwise) or `vistkit meta correlate` (Likert) on it.

    Every output is checked against the others and the inputs before anything is written; ``--keep`` is written
    only once the meta-evaluation has succeeded, so a failed run leaves an earlier ``--keep`` file as it was."""
    import tempfile

    from vistkit.data.output import STDOUT, check_output
    from vistkit.studio.analysis import export, keep_copy, provenance_path, writes_in_place

    if keep is not None and (str(keep) == STDOUT or writes_in_place(keep)):
        raise InputError(f"--keep needs a file name (the judgements are read back from it), not {keep}")
    _need_extra()
    from vistkit.studio.db import sqlite_path

    study_file = sqlite_path(db_url or study)
    _check_apart(
        {"--report": report, "--keep": keep, "--keep's provenance": None if keep is None else provenance_path(keep)},
        {"the study": study_file, "--references": references},
    )
    if keep is not None:
        check_output(provenance_path(keep))  # --keep itself was checked with the other outputs
    _check_report_inputs(metrics, option, references, key)
    st = _open(study, db_url)
    task = st.setting("task")
    with tempfile.TemporaryDirectory(prefix="vistkit-studio-") as tmp:
        kind = "likert" if task == "likert" else "pairs"
        out = Path(tmp) / f"{kind}.csv"
        prov = export(st, out, fmt=kind, drop_failed_gold=drop_failed_gold)
        from vistkit.meta.human import SHOWN_AS

        # a warning naming lines of the export names the file the user keeps (the same lines), not this one
        SHOWN_AS[str(out)] = str(keep) if keep is not None else f"the export of {study} (--keep FILE keeps it)"
        args = ["meta", "correlate" if task == "likert" else "pairs", str(out), "--metrics", ",".join(metrics)]
        args += ["--format", fmt.value, "--bootstrap", str(bootstrap)]
        if references is not None:
            args += ["--references", str(references)]
        if key is not None:
            args += ["--key", key]
        for o in option:
            args += ["--option", o]
        if report is not None:
            args += ["--report", str(report)] + (["--force"] if force else [])
        rv = app(args=args, standalone_mode=False)
        if isinstance(rv, int) and not isinstance(rv, bool) and rv:
            raise typer.Exit(rv)
        if keep is not None:
            keep_copy(out, keep, prov)


def _check_report_inputs(metrics: list[str], option: list[str], references: Path | None, key: str | None) -> None:
    """What `vistkit meta` would refuse in ``studio report`` (metric names, ``-O`` options, ``--references``
    read and parsed, ``--key``), said before the study is opened and exported."""
    from vistkit.commands.common import read_references
    from vistkit.commands.meta.common import _check_metrics
    from vistkit.data.story import Keying

    _check_metrics(metrics, option)
    if key is not None:
        Keying.parse(key)
    read_references(references, None)


@studio_app.command("demo")
@study_errors
def demo_cmd(
    ctx: typer.Context,
    folder: Path = typer.Option(Path("vistkit-studio-demo"), "--dir", help="Where the demo study is written."),
    task: str = typer.Option("rank", "--task", metavar="rank|pairwise|likert", help="rank, pairwise or likert."),
    items: int = typer.Option(10, "--items", help="How many of the 50 shipped story pairs to use."),
    annotators: int = typer.Option(3, "--annotators", help="Invite links to create."),
    per_item: int = typer.Option(3, "--per-item", help="Annotators per unit."),
    serve: bool = typer.Option(True, "--serve/--no-serve", help="Serve the study after building it."),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Interface the server listens on and the links point to (loopback by default)."
    ),
    port: int = typer.Option(8000, "--port", help="TCP port of the server (and of the links)."),
) -> None:
    """Build a small study from the shipped dHM sample (human vs LLaVA-NeXT stories, CC0 stand-in photos),
    print the annotator and admin links, and serve it."""
    _need_extra()
    from vistkit.studio.demo import build_demo
    from vistkit.studio.network import check_host, check_listen, check_port, http_url

    if serve:  # before building: a taken port should not cost a demo folder
        host = check_listen(host, port)
    else:  # the links name the host and port
        check_port(port)
        host = check_host(host)

    def given(name: str, value: Any) -> Any:  # None: left at its default (a reused demo warns only for the others)
        source = ctx.get_parameter_source(name)
        return None if source is None or source.name == "DEFAULT" else value

    info = build_demo(
        folder,
        task=given("task", task),
        items=given("items", items),
        annotators=given("annotators", annotators),
        per_item=given("per_item", per_item),
        base_url=http_url(host, port),
    )
    echo(f"demo study: {info['study']} ({info['task']}, {info['items']} items, photos: {info['photos']})")
    for name, link in info["links"]:
        echo(f"  {name}: {link}")
    echo(f"  admin: {info['admin_link']}")
    echo(f"(links also in {info['links_file']})")
    if serve:
        from vistkit.studio.app import serve as run_server

        echo(f"serving on {http_url(host, port)}/  (Ctrl-C stops)")
        sys.stdout.flush()  # the links must show before the server blocks, also when stdout is a file
        run_server(info["study"], host=host, port=port)
    else:
        serve_line = f"vistkit studio serve {info['study']}"
        if (host, port) != ("127.0.0.1", 8000):
            serve_line += f" --host {host} --port {port}"
        echo(f"The links work once the server runs; start it with: {serve_line}")
