"""Probe round 15: a newcomer follows README.md and the guides on a fresh clone, as a researcher with their own
system's stories.

The README's tour scores published files (TAPM, dHM, PR-VIST) but never said what file to write for one's own
stories, nor how to compare them with a published system: the format list (`vistkit formats`) was the only
lead. Its studio lines called the demo "10 shipped dHM stories" (it is 10 items, each a human and a LLaVA story)
and said `studio status` needs judgements (it shows the plan and zeros before any). docs/cli.md's significance
section did not say that the paired bootstrap is overconfident on a handful of items, which meta.md says for
`meta compare`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_docs_commands import _TYPER_APP, check_names, inline_code, parse_fully

from vistkit.data.readers import read_stories

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def tree() -> Any:
    """click's command tree, as tests/test_docs_commands.py builds it."""
    import typer

    from vistkit.cli import _load_commands

    _load_commands()
    return typer.main.get_command(_TYPER_APP)


def _section(text: str, heading: str) -> str:
    assert heading in text, f"README has no {heading!r} section"
    return text.split(heading, 1)[1].split("\n#", 1)[0]


def test_the_readme_says_how_to_write_and_score_ones_own_stories(tmp_path: Path, tree: Any) -> None:
    own = _section(README, "### Your own stories")
    tour = README[README.index("## A tour") : README.index("## Documentation")]
    assert "### Your own stories" in tour  # found where a newcomer reads the commands
    # the example lines, written to a file as the text says, read as stories matched by photo sequence
    [example] = re.findall(r"```json\n(.*?)```", own, re.S)
    path = tmp_path / "mine.jsonl"
    path.write_text(example, encoding="utf-8")
    stories = read_stories(path)
    assert len(stories) == len(example.strip().splitlines()) >= 2
    assert all(s.photo_ids and len(s.photo_ids) == 5 for s in stories)
    # the commands it names exist as written (score, compare with a significance test, validate)
    lines = [c for c in inline_code(own) if c.startswith("vistkit ")]
    verbs = {line.split()[1] for line in lines}
    assert {"score", "compare", "validate"} <= verbs, lines
    assert "--test ar" in own and "bootstrap" in own  # which significance test, and the other one
    for line in lines:
        assert not check_names(tree, line), check_names(tree, line)
        if " score " in line or " compare " in line:
            assert parse_fully(tree, line) is None, (line, parse_fully(tree, line))


def test_the_readme_own_stories_example_scores_by_sequence_with_the_csv_twin(tmp_path: Path) -> None:
    """The JSON lines example and the CSV the text says reads the same give the same stories, keyed alike."""
    own = _section(README, "### Your own stories")
    [example] = re.findall(r"```json\n(.*?)```", own, re.S)
    records = [json.loads(line) for line in example.strip().splitlines()]
    assert "photo_ids,text" in own
    csv_path = tmp_path / "mine.csv"
    rows = ["photo_ids,text"] + ['{},"{}"'.format("-".join(r["photo_ids"]), r["text"]) for r in records]
    csv_path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    jsonl_path = tmp_path / "mine.jsonl"
    jsonl_path.write_text(example, encoding="utf-8")
    a, b = read_stories(jsonl_path), read_stories(csv_path)
    assert [(s.photo_ids, s.text) for s in a] == [(s.photo_ids, s.text) for s in b]


def test_the_readme_studio_demo_line_counts_what_the_demo_builds(tree: Any) -> None:
    """`vistkit studio demo` builds --items items (default 10), each a human and a LLaVA story of one photo
    sequence: the README said "10 shipped dHM stories (human vs LLaVA-NeXT)", which reads as 10 stories in all."""
    line = next(x for x in README.splitlines() if x.startswith("vistkit studio demo --no-serve"))
    comment = line.split("#", 1)[1]
    demo = tree.commands["studio"].commands["demo"]
    items = next(p for p in demo.params if p.name == "items").default
    assert re.search(rf"\b{items} shipped dHM stories by LLaVA-NeXT, each with the human story\b", comment), comment


def test_studio_status_runs_before_any_judgement_and_the_readme_says_so(tmp_path: Path) -> None:
    study = tmp_path / "demo"
    run = [sys.executable, "-m", "vistkit", "studio"]
    built = subprocess.run([*run, "demo", "--no-serve", "--dir", str(study)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    status = subprocess.run([*run, "status", str(study / "study.db")], capture_output=True, text=True)
    assert status.returncode == 0 and "judgements" in status.stdout, status.stderr
    note = README[README.index("vistkit studio report study.db") :]
    assert "(`status`, `export` and `report` need judgements" not in note


def test_cli_md_warns_that_neither_test_means_much_on_few_items() -> None:
    """Five sequences: bootstrap p 0.037, ar 0.12; two sequences both won: ar p = 1/(B+1)."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = text.split("## Significance in `compare`", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"handful of items|few items", section)
    assert "--test ar" in section and "n_paired" in section


@pytest.mark.parametrize("name", ["README.md"])
def test_the_readme_has_no_inline_vistkit_line_naming_an_unknown_option(name: str, tree: Any) -> None:
    """The README's inline code is checked as the guides' is (tests/test_docs_commands.py reads docs/ only)."""
    text = (ROOT / name).read_text(encoding="utf-8")
    problems = [p for line in inline_code(text) if line.startswith("vistkit ") for p in check_names(tree, line)]
    assert not problems, problems


def _dry_run(folder: Path, *args: str) -> str:
    """What `make demo ARGS` would run on a fresh clone (``make -n``: recipes printed, nothing installed)."""
    import os
    import shutil

    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, folder / name)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")}
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "demo", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(__import__("shutil").which("make") is None, reason="needs make")
def test_make_demo_can_take_torch_from_its_cpu_index_where_no_local_cpu_wheel_exists(tmp_path: Path) -> None:
    """`make demo` installed `torch==2.13.0` from whatever index pip has: on a fresh Linux machine without a local
    CPU wheel that is PyPI's CUDA build (GBs of nvidia-* wheels) for a demo that needs no GPU, and the Makefile
    had no way to say otherwise (only the README's pip steps named the CPU index)."""
    url = "https://download.pytorch.org/whl/cpu"
    torch_line = next(x for x in _dry_run(tmp_path, f"TORCH_INDEX={url}").splitlines() if "torch==" in x)
    assert f"--index-url {url}" in torch_line, torch_line
    plain = next(x for x in _dry_run(tmp_path).splitlines() if "torch==" in x and "pip install" in x)
    assert "--index-url" not in plain  # unchanged where a local CPU wheel serves (the default)
    assert f"make demo TORCH_INDEX={url}" in README  # the README's first lines say how


def test_meta_md_likert_example_reads_and_matches_the_readme_stories(tmp_path: Path, tree: Any) -> None:
    """meta.md described the Likert table in prose only; its example must read as a Likert table whose items
    are the ids of the README's own-stories example, and its command must parse."""
    from vistkit.meta.human import read_likert

    meta = (ROOT / "docs" / "meta.md").read_text(encoding="utf-8")
    [table] = re.findall(r"```csv\n(system,item,worker.*?)```", meta, re.S)
    (tmp_path / "ratings.csv").write_text(table, encoding="utf-8")
    scores = read_likert(tmp_path / "ratings.csv")
    assert scores is not None
    [example] = re.findall(r"```json\n(.*?)```", _section(README, "### Your own stories"), re.S)
    (tmp_path / "mine.jsonl").write_text(example, encoding="utf-8")
    ids = {s.story_id for s in read_stories(tmp_path / "mine.jsonl")}
    items = {row.split(",")[1] for row in table.strip().splitlines()[1:]}
    assert items == ids
    [line] = [c for c in inline_code(meta) if c.startswith("vistkit meta correlate ratings.csv")]
    assert parse_fully(tree, line) is None


def test_the_demo_names_a_command_for_its_human_rows_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`vistkit demo` ends with "The same with the CLI: vistkit score LLAVA --references HUMAN ...", but its table
    also holds "METRIC (human)" rows (the reference-free metrics on the human stories), which that command does not
    print: a newcomer who ran it found rows missing. The demo now names the command for those rows too, and both
    commands give the demo's numbers."""
    import shlex

    import vistkit.commands.demo as demo
    from vistkit.cli import main

    monkeypatch.setattr(demo, "DEMO_METRICS", ("sacrebleu", "rovist-nr"))
    monkeypatch.setattr(demo, "_demo_distance", lambda human, llava: None)
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    rows = dict(re.findall(r"^│ (\S+(?: \(human\))?) +│ +([0-9.e-]+) ", out, re.M))
    assert set(rows) == {"sacrebleu", "rovist-nr", "rovist-nr (human)"}, rows
    commands = [line.split(": ", 1)[1] for line in out.splitlines() if ": vistkit score " in line]
    assert len(commands) == 2, out[-1500:]
    got: dict[str, str] = {}
    for command, suffix in zip(commands, ("", " (human)"), strict=True):
        argv = shlex.split(command)[1:]
        assert main([*argv, "-b"]) == 0
        values = capsys.readouterr().out.split()
        metrics = argv[argv.index("-m") + 1].split(",")
        got.update({f"{m}{suffix}": v for m, v in zip(metrics, values, strict=True)})
    assert got == rows
