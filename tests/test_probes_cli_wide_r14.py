"""Regressions found in session 14's second probe wave (command-line conventions across every verb): each test failed
on the code before."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vistkit.cli import main


def _leaf_commands() -> Iterator[tuple[list[str], Any]]:
    """Every verb and sub-verb that runs (``meta pairs``, ``studio init`` ...), with its click command."""
    import typer.main

    from vistkit.cli import _load_commands, app

    _load_commands()

    def walk(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                yield from walk(sub, [*path, name])
        else:
            yield path, command

    yield from walk(typer.main.get_command(app), [])


def _takes_paths(param: Any) -> bool:
    from vistkit.commands.common import _takes_paths as takes

    return takes(getattr(param, "type_descriptor", None))


def _other_required(command: Any, skip: Any) -> list[str]:
    """Values for the verb's other required arguments and options (files that do not exist: never read)."""
    args: list[str] = []
    for param in command.params:
        if param is skip:
            continue
        if param.param_type_name == "argument":
            args += ["/nonexistent/x.json"] * (1 if param.nargs == 1 else 2)
        elif param.required:
            args += [param.opts[0], "/nonexistent/x.json" if _takes_paths(param) else "x"]
    return args


def _path_cases() -> list[Any]:
    cases = []
    for path, command in _leaf_commands():
        for param in command.params:
            if _takes_paths(param):
                cases.append(pytest.param(path, param.name, id=f"{' '.join(path)}:{param.name}"))
    return cases


def _single_value_cases() -> list[Any]:
    cases = []
    for path, command in _leaf_commands():
        for param in command.params:
            if (
                param.param_type_name == "option"
                and not getattr(param, "multiple", False)
                and not getattr(param, "is_flag", False)
                and not getattr(param, "count", False)
            ):
                cases.append(pytest.param(path, param.name, id=f"{' '.join(path)}:{param.name}"))
    return cases


# ------------------------------------------------------------------ empty or blank paths, on every verb
@pytest.mark.parametrize("blank", ["", "  "], ids=["empty", "blank"])
@pytest.mark.parametrize(("verb", "name"), _path_cases())
def test_every_verb_refuses_an_empty_path_as_a_usage_error(
    verb: list[str],
    name: str,
    blank: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``-r "$REFS"`` with REFS unset: score, compare and distance refused it, but validate, the meta verbs, vrank,
    models convert and studio read ``""`` as the current folder ("error: . is a folder", an output written into the
    current folder, `studio demo --dir ""` a whole study there). Every file or folder of every verb is now a usage
    error (exit 2) naming the option, before anything is read or written."""
    command = dict((tuple(p), c) for p, c in _leaf_commands())[tuple(verb)]
    param = next(p for p in command.params if p.name == name)
    given = [blank] if param.param_type_name == "argument" else [param.opts[0], blank]
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = main([*verb, *given, *_other_required(command, param)])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert "the path is " in captured.err and "give a file name" in captured.err, captured.err
    assert list(tmp_path.iterdir()) == []  # nothing written into the current folder


def test_studio_demo_with_an_empty_folder_writes_no_study_into_the_current_folder(tmp_path: Path) -> None:
    """``vistkit studio demo --dir "$DIR"`` with DIR unset built a whole demo study (study.db, links.json, photos/)
    in the current folder and started serving it; it is a usage error now."""
    env = {**os.environ, "VISTKIT_QUIET": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "vistkit", "studio", "demo", "--dir", "", "--port", "1"],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("studio demo --dir '' started serving a study in the current folder")
    assert done.returncode == 2, done.stderr
    assert "--dir" in done.stderr and "the path is empty" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ a single-value option given twice, on every verb
@pytest.mark.parametrize(("verb", "name"), _single_value_cases())
def test_every_verb_refuses_a_single_value_option_given_twice(
    verb: list[str], name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``meta correlate ... --report a --report b``, ``validate --template A --template B``, ``studio init --task
    rank --task likert``: only score, compare and distance refused a repeated option; the others kept the last
    value without a word (the first report or template silently unused). Every verb now refuses it (exit 2)."""
    command = dict((tuple(p), c) for p, c in _leaf_commands())[tuple(verb)]
    param = next(p for p in command.params if p.name == name)
    flag = param.opts[0]
    capsys.readouterr()
    code = main([*verb, flag, "1", flag, "2", *_other_required(command, param)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "is given 2 times but takes one value: give it once" in err, err


# ------------------------------------------------------------------ -h, as --help, on every verb
@pytest.mark.parametrize(
    "verb", [pytest.param([], id="vistkit")] + [pytest.param(p, id=" ".join(p)) for p, _ in _leaf_commands()]
)
def test_dash_h_shows_the_help_of_every_verb(verb: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """``vistkit score -h`` said "Error: No such option: -h" (exit 2) although vistkit counts ``-h`` as asking for
    help elsewhere (a deleted current folder); it shows the verb's help, exit 0, as ``--help`` does."""
    capsys.readouterr()
    code = main([*verb, "-h"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.startswith(f"Usage: vistkit {' '.join(verb)}".rstrip() + " "), captured.out[:200]
    assert "-h, --help" in captured.out and captured.err == ""


# ------------------------------------------------------------------ VISTKIT_QUIET=off
@pytest.mark.parametrize("value", ["off", "OFF", "n", " no "])
def test_vistkit_quiet_off_keeps_warnings(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``VISTKIT_QUIET=off`` (as 0, no and false) silenced every warning and the progress display: only
    "", 0, no and false counted as "not quiet"."""
    from vistkit import progress

    monkeypatch.setenv("VISTKIT_QUIET", value)
    monkeypatch.setattr(progress, "_quiet", None)  # the command line's default: the variable decides
    assert not progress.warnings_silenced() and not progress.is_quiet()
    monkeypatch.setenv("VISTKIT_QUIET", "on")
    assert progress.warnings_silenced() and progress.is_quiet()


@pytest.mark.parametrize("value", ["0", "no", "off", "false"])
def test_vistkit_debug_off_keeps_the_one_sentence(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``VISTKIT_DEBUG=0`` (a job script's default) showed the raw traceback of an unexpected error, as
    ``VISTKIT_DEBUG=1`` does: any non-empty value counted as on."""
    import vistkit.commands.formats as formats_module

    def boom(*args: Any, **kwargs: Any) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr(formats_module, "render_table", boom)
    monkeypatch.setenv("VISTKIT_DEBUG", value)
    capsys.readouterr()
    code = main(["formats"])
    err = capsys.readouterr().err
    assert code == 1 and "error: unexpected RuntimeError: boom" in err, err


# ------------------------------------------------------------------ -r=FILE
def _short_value_cases() -> list[Any]:
    cases = []
    for path, command in _leaf_commands():
        for param in command.params:
            if param.param_type_name != "option" or getattr(param, "is_flag", False) or getattr(param, "count", False):
                continue
            for flag in param.opts:
                if not flag.startswith("--"):
                    cases.append(pytest.param(path, param.name, flag, id=f"{' '.join(path)}:{flag}"))
    return cases


@pytest.mark.parametrize(("verb", "name", "flag"), _short_value_cases())
def test_a_short_option_written_with_an_equals_sign_reads_as_with_a_space(
    verb: list[str], name: str, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-r=refs.json`` (the habit of ``--references=refs.json``) gave the value ``=refs.json``: "error:
    =refs.json: no such file", "unknown metric '=sacrebleu'", "'=json' is not one of ...". It now does what
    ``-r refs.json`` does, on every verb."""
    command = dict((tuple(p), c) for p, c in _leaf_commands())[tuple(verb)]
    param = next(p for p in command.params if p.name == name)
    rest = _other_required(command, param)
    capsys.readouterr()
    spaced = main([*verb, flag, "/nonexistent/value.txt", *rest]), capsys.readouterr().err
    joined = main([*verb, f"{flag}=/nonexistent/value.txt", *rest]), capsys.readouterr().err
    assert joined == spaced
    assert "=/nonexistent" not in joined[1]


def test_a_short_option_with_an_equals_sign_scores_as_with_a_space(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example: ``vistkit score FILE -r=refs.jsonl -m=sacrebleu -f=json`` scores as the spaced command does;
    ``-r=`` alone is the empty path, a usage error."""
    from cli_probe_helpers import write_stories

    hyp, refs = write_stories(tmp_path / "hyp.jsonl"), write_stories(tmp_path / "refs.jsonl")
    capsys.readouterr()
    assert main(["score", str(hyp), f"-r={refs}", "-m=sacrebleu", "-f=json"]) == 0
    joined = capsys.readouterr().out
    assert main(["score", str(hyp), "-r", str(refs), "-m", "sacrebleu", "-f", "json"]) == 0
    assert joined == capsys.readouterr().out and '"sacrebleu"' in joined
    assert main(["score", str(hyp), "-r=", "-m=sacrebleu"]) == 2
    assert "the path is empty" in capsys.readouterr().err


# ------------------------------------------------------------------ a group without its sub-verb
def _groups() -> list[Any]:
    import typer.main

    from vistkit.cli import _load_commands, app

    _load_commands()
    root = typer.main.get_command(app)
    return [pytest.param(name, id=name) for name, sub in root.commands.items() if getattr(sub, "commands", None)]


@pytest.mark.parametrize("group", _groups())
def test_a_group_alone_lists_its_verbs(group: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``vistkit meta`` and ``vistkit studio`` alone list their verbs, but ``vistkit models`` and ``vistkit vrank``
    said only "Error: Missing command."; every group now shows its help (a usage error, exit 2, as ``vistkit``
    alone)."""
    capsys.readouterr()
    code = main([group])
    captured = capsys.readouterr()
    assert code == 2
    assert "Missing command" not in captured.err and "Commands:" in captured.err, captured.err


# ------------------------------------------------------------------ a report or model folder given as -
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["meta", "pairs", "/nonexistent/p.csv", "-m", "rouge-l", "--report", "-"], id="meta pairs"),
        pytest.param(["meta", "gap", "/nonexistent/p.csv", "-m", "rouge-l", "--report", "-"], id="meta gap"),
        pytest.param(["meta", "correlate", "/nonexistent/l.csv", "-m", "rouge-l", "--report", "-"], id="correlate"),
        pytest.param(["meta", "errors", "/nonexistent/e.csv", "-m", "rouge-l", "--report", "-"], id="meta errors"),
        pytest.param(["studio", "report", "/nonexistent/s.db", "-m", "rouge-l", "--report", "-"], id="studio report"),
        pytest.param(["vrank", "train", "/nonexistent/p.csv", "--output", "-"], id="vrank train"),
        pytest.param(["models", "convert", "/nonexistent/ckpt.pt", "-"], id="models convert"),
    ],
)
def test_a_folder_output_given_as_dash_is_refused_before_any_work(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--report -`` (as ``--per-item -`` prints to stdout): a report or model is a folder of files, and the
    refusal ("the output folder is empty or '-'") came only after every metric had scored every pair. It is now
    refused first, naming the option."""
    capsys.readouterr()
    code = main(args)
    err = capsys.readouterr().err
    assert code == 1, err
    assert "standard output" in err and "give a folder name" in err and "/nonexistent" not in err, err


# ------------------------------------------------------------------ -q and the environment's warnings
@pytest.mark.parametrize("args", [["-q", "formats"], ["formats", "--quiet"], ["formats", "-f", "csv", "-q"]])
def test_quiet_silences_the_warnings_about_the_environment(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-q`` promises no warnings on stderr, but ``SOURCE_DATE_EPOCH=x`` or ``OMP_NUM_THREADS=0`` were warned about
    before the command line was read, so ``-q`` could not silence them (``VISTKIT_QUIET=1`` did)."""
    monkeypatch.delenv("VISTKIT_QUIET", raising=False)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    monkeypatch.setenv("OMP_NUM_THREADS", "0")
    capsys.readouterr()
    assert main(args) == 0
    assert capsys.readouterr().err == ""
    assert "SOURCE_DATE_EPOCH" not in os.environ  # still dropped
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    assert main(["formats"]) == 0  # without -q: said once
    assert capsys.readouterr().err.count("warning: SOURCE_DATE_EPOCH='yesterday'") == 1
