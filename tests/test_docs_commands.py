"""The user guides as a newcomer follows them, kept honest the way tests/test_readme.py keeps the README.

docs/cli.md, docs/data.md, docs/meta.md and docs/studio.md name commands in two ways: whole command lines in
```bash blocks, and usage lines in inline code (`vistkit score sys.json -m bleu-4 ...`, meta.md's `meta gap
PAIRS.csv -m A,B`, studio.md's `invite --quota M`). Without running anything, every such line must name verbs and
options that exist in click's command tree (`vistkit.cli.app`): the ```bash lines and meta.md's usage column parse
completely (required options given, values accepted), the other inline lines name only existing verbs and
options, and every option a guide names in inline code exists on some verb. A few of the guides' commands then run
as written on the stand-in data of `readme_data.build` (the README test's), and the shapes the guides quote (CSV
columns, `-b` lines, the one-sentence refusals, the studio export columns) are compared with the program's.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest
import readme_data
from test_readme import commands

from vistkit.cli import app as _TYPER_APP  # bound at import: some test modules patch `vistkit.cli.app`

ROOT = Path(__file__).resolve().parents[1]
GUIDES = ("cli.md", "data.md", "meta.md", "studio.md")
ROOT_OPTIONS = {"-q", "--quiet", "-V", "--version", "--help"}

# inline code that names a spelling vistkit no longer takes, on purpose (and must keep refusing)
OLD_SPELLINGS = {
    "vrank train --out": "cli.md: renamed to --output (-o)",
    "vrank predict -m": "cli.md: -m is always --metrics; predict takes --model",
    "compare -b": "cli.md: -b is --score-only; compare takes --baseline",
}
# option-like inline code that is not a vistkit option
NOT_OPTIONS = {
    "-wal": "SQLite's file beside a study",
    "-shm": "SQLite's file beside a study",
    "-journal": "SQLite's file beside a study",
    "-Xmx2G": "a JVM option (VISTKIT_JAVA_OPTS)",
    "-XX": "a JVM option (VISTKIT_JAVA_OPTS)",
    "--out": "cli.md names the old spelling of vrank train --output",
}
# a guide command that runs, with a change, for the reason given
SUBSTITUTED = {
    "--metrics all": ("-m bleu-4,rovist-nr", "all also runs BERTScore and the LM metrics: minutes on a CPU"),
}


def guide(name: str) -> str:
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def inline_code(text: str) -> list[str]:
    """The inline code spans outside fenced blocks."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.findall(r"`([^`\n]+)`", prose)


# ------------------------------------------------------------------------------------------ the command tree
@pytest.fixture(scope="module")
def tree() -> Any:
    import typer

    from vistkit.cli import _load_commands

    _load_commands()
    return typer.main.get_command(_TYPER_APP)


def option_names(tree: Any) -> set[str]:
    names: set[str] = set()

    def walk(cmd: Any) -> None:
        for p in cmd.params:
            names.update(p.opts)
            names.update(p.secondary_opts)
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(tree)
    return names


class UnknownVerb(Exception):
    """A usage line names a verb the command tree lacks."""


def resolve(tree: Any, words: list[str]) -> tuple[list[tuple[str, Any]], list[str]] | None:
    """The command(s) the words name and the words left after the verb. ``a|b`` names several; a first word that
    is no top-level verb may be a sub-command of exactly one group (studio.md's `invite --quota M`). None when the
    words name no command at all (plain prose in code)."""
    if not words:
        return None
    groups = [tree]
    first = words[0].split("|")[0]
    if first not in tree.commands:
        owners = [g for g in tree.commands.values() if first in getattr(g, "commands", {})]
        if len(owners) != 1:
            return None
        groups = owners
    level: list[tuple[str, Any]] = [("" if g is tree else str(g.name), g) for g in groups]
    rest = list(words)
    while rest and all(getattr(cmd, "commands", None) for _, cmd in level):
        word = rest.pop(0)
        found = []
        for name in word.split("|"):
            subs = [(f"{path} {name}".strip(), cmd.commands[name]) for path, cmd in level if name in cmd.commands]
            if not subs:
                raise UnknownVerb(f"no verb {name!r} under {[p or 'vistkit' for p, _ in level]}")
            found += subs
        level = found
    return level, rest


def shell_words(line: str) -> list[str]:
    """A command line's words up to a redirection or a comment, from its last `vistkit` (after `cat x |`);
    `[--opt VALUE]` brackets dropped; ``...`` ends the words (a placeholder for the rest)."""
    line = re.split(r"\s(?:>|2>|#)\s", line)[0]
    if " | vistkit " in line:
        line = "vistkit " + line.split(" | vistkit ", 1)[1]
    line = re.split(r"\s\|\s", line)[0]
    words = [w.strip("[]") for w in shlex.split(line)]
    return words[: words.index("...")] if "..." in words else words


def check_names(tree: Any, line: str) -> list[str]:
    """What is wrong in an inline usage line: a verb or option that does not exist ([] when nothing is, or when
    the line names no command). Values are not checked: a line in prose may leave out required options."""
    words = shell_words(line)
    if words and words[0] == "vistkit":
        words = words[1:]
        while words and words[0] in ROOT_OPTIONS:
            words = words[1:]
    try:
        found = resolve(tree, words)
    except UnknownVerb as exc:
        return [f"{line!r}: {exc}"]
    if found is None:
        return []
    level, rest = found
    problems = []
    for path, cmd in level:
        opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
        for word in rest:
            if word.startswith("-") and word != "-" and not re.fullmatch(r"-[\d.]+", word):
                if word.split("=", 1)[0] not in opts:
                    problems.append(f"{line!r}: `vistkit {path}` has no option {word}")
    return problems


def parse_fully(tree: Any, line: str) -> str | None:
    """Parse a whole command line as click would run it (required options, value types, choices): None when it
    parses, else click's message. Nothing is run: the verb's function is not called."""
    words = shell_words(line)
    assert words[0] == "vistkit", line
    words = words[1:]
    while words and words[0] in ROOT_OPTIONS:
        words = words[1:]
    found = resolve(tree, words)
    assert found is not None, line
    level, rest = found
    for path, cmd in level:
        try:
            cmd.make_context(path.split()[-1], list(rest))
        except Exception as exc:  # click (or typer's vendored click) usage error
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            return f"`vistkit {path}`: {message}"
    return None


def guide_command_lines() -> list[tuple[str, str]]:
    """(guide, line) for every `vistkit` line of the guides' ```bash blocks."""
    return [
        (name, cmd)
        for name in GUIDES
        for block in bash_blocks(guide(name))
        for cmd in commands(block)
        if cmd.startswith("vistkit ")
    ]


def usage_column() -> list[str]:
    """meta.md's table of sub-commands, its usage column, as command lines (a bare verb only names it)."""
    cells = re.findall(r"^\| `(meta [^`]+)` \|", guide("meta.md"), re.M)
    return [f"vistkit {c}" for c in cells if len(shlex.split(c)) > 2]


def test_every_bash_command_of_the_guides_parses(tree: Any) -> None:
    lines = guide_command_lines()
    assert len(lines) >= 2, "the guides lost their command blocks; teach this test where they went"
    problems = [f"docs/{g}: {msg}" for g, line in lines if (msg := parse_fully(tree, line))]
    assert problems == []


def test_meta_md_usage_column_parses(tree: Any) -> None:
    lines = usage_column()
    assert len(lines) >= 7
    problems = [msg for line in lines if (msg := parse_fully(tree, line))]
    assert problems == []


def test_every_inline_usage_line_names_existing_verbs_and_options(tree: Any) -> None:
    checked, problems = 0, []
    seen_old = set()
    for name in GUIDES:
        for span in inline_code(guide(name)):
            if span in OLD_SPELLINGS:
                seen_old.add(span)
                assert check_names(tree, span), f"{span!r} parses, but docs/{name} says it was renamed"
                continue
            if not re.match(r"(vistkit|cat \S+ \| vistkit) |[a-z-]+( |$)", span):
                continue
            found = check_names(tree, span)
            problems += [f"docs/{name}: {p}" for p in found]
            checked += 1
    assert seen_old == set(OLD_SPELLINGS), f"OLD_SPELLINGS no guide names: {set(OLD_SPELLINGS) - seen_old}"
    assert checked > 30
    assert problems == []


def test_every_option_a_guide_names_exists(tree: Any) -> None:
    names = option_names(tree)
    unknown = set()
    for name in GUIDES:
        for span in inline_code(guide(name)):
            for word in re.findall(r"(?<![\w/.\[-])(--?[A-Za-z][\w-]*)", span):
                if word not in names and word not in NOT_OPTIONS:
                    unknown.add(f"docs/{name}: {word} (in `{span}`)")
    assert unknown == set()


def test_help_texts_and_formats_name_only_existing_options(tree: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """The program's own words: every --option a verb's help or `vistkit formats` names is a real one."""
    from vistkit.cli import main

    names = option_names(tree)
    texts: list[tuple[str, str]] = []

    def walk(cmd: Any, path: str) -> None:
        texts.append((path, cmd.help or ""))
        texts.extend((f"{path} {p.opts[0]}", getattr(p, "help", None) or "") for p in cmd.params)
        for sub_name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {sub_name}")

    walk(tree, "vistkit")
    assert main(["formats", "-f", "json"]) == 0
    texts.append(("vistkit formats", capsys.readouterr().out))
    stale = {
        f"{where}: {opt}"
        for where, text in texts
        for opt in re.findall(r"(?<![\w/.-])(--[a-z][\w-]*)", text)
        if opt not in names
    }
    assert stale == set()


# --------------------------------------------------------------------------------------- commands that run
@pytest.fixture(scope="module")
def guide_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return readme_data.command_env(tmp_path_factory.mktemp("guides"), ROOT)


def run(cmd: str, env: dict[str, Any], cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{cmd}\nexit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
def test_meta_md_demo_runs_as_written(guide_env: dict[str, Any]) -> None:
    """meta.md's demo block on the stand-in data: build-pairs as written, meta pairs with cheaper metrics."""
    [block] = bash_blocks(guide("meta.md"))
    work = guide_env["work"] / "meta"
    work.mkdir()
    ran, substituted = 0, set()
    for cmd in commands(block):
        if re.match(r"^[A-Z_]+=", cmd):
            assert cmd.split("=", 1)[0] == "DATA", f"meta.md defines {cmd!r}; teach this test about it"
            continue
        for old, (new, _why) in SUBSTITUTED.items():
            if old in cmd:
                cmd = cmd.replace(old, new)
                substituted.add(old)
        run(cmd, guide_env["env"], work)
        ran += 1
    assert ran == 2
    assert substituted == set(SUBSTITUTED), f"SUBSTITUTED entries no command uses: {set(SUBSTITUTED) - substituted}"
    rows = list(csv.DictReader((work / "human_vs_machine.csv").open(encoding="utf-8")))
    assert len(rows) == 3 * readme_data.SEQUENCES * 2
    assert list(rows[0])[-1] == "label_source"  # meta.md: the proxy pairs' extra last column
    index = (work / "meta-report" / "index.html").read_text(encoding="utf-8")
    assert "proxy label" in index and "nothing to bucket" in index  # meta.md: proxy pairs have no gap buckets


@pytest.mark.slow
def test_cli_md_standard_input_and_output_lines_run(guide_env: dict[str, Any]) -> None:
    """cli.md's `cat stories.jsonl | vistkit score - ...` and `--per-item - > items.csv`, as written."""
    data, work = guide_env["data"], guide_env["work"] / "cli"
    work.mkdir()
    stories = json.loads((data / "dhm" / "stories" / "vist" / "llava_vc_p3.json").read_text(encoding="utf-8"))
    jsonl = "".join(json.dumps({"story_id": k, "text": v}) + "\n" for k, v in stories.items())
    (work / "stories.jsonl").write_text(jsonl, encoding="utf-8")
    shutil.copy(data / "tapm" / "ours.json", work / "sys.json")
    (work / "refs.json").write_bytes(zipfile.ZipFile(data / "PR_VIST.json.zip").read("PR_VIST.json"))
    lines = [s for s in inline_code(guide("cli.md")) if re.match(r"(cat \S+ \| )?vistkit score \S", s)]
    assert len(lines) == 2, lines
    for line in lines:
        proc = run(line, guide_env["env"], work)
        if "--per-item -" in line:
            assert "vistkit score" in proc.stderr  # the table went to stderr
            assert (work / "items.csv").read_text(encoding="utf-8").splitlines()[0] == "id,bleu-4,bleu-4 signature"
        else:
            assert "rovist-nr" in proc.stdout


@pytest.fixture(scope="module")
def small_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    data = readme_data.build(tmp_path_factory.mktemp("small"))
    return {"sys": data / "tapm" / "ours.json", "refs": data / "PR_VIST.json.zip"}


def test_cli_md_score_only_and_csv_shapes(small_files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    from vistkit.cli import main

    text = guide("cli.md")
    sys_, refs = str(small_files["sys"]), str(small_files["refs"])
    # -b: one line per metric in -m order, 4 decimals (two significant digits below 0.00005)
    assert "4 decimals, one line per metric, in `-m` order" in text
    assert main(["score", sys_, "-r", refs, "-m", "sacrebleu,bleu-4,rovist-nr", "-b", "-q"]) == 0
    out = capsys.readouterr().out.split()
    assert len(out) == 3 and all(re.fullmatch(r"-?\d+\.\d{4}|-?\d\.\de-\d\d|n/a", v) for v in out), out
    assert float(out[0]) > 0.01 > float(out[1])  # sacrebleu (0-100) first, as asked
    # --format csv: the columns cli.md lists, with and without the interval columns
    [spec] = re.findall(r"`(metric,score\[,[^`]+)`", text)
    for extra in ([], ["--confidence", "0.95", "--n-bootstrap", "20"]):
        metrics = "bleu-4" if extra else "bleu-4,sacrebleu,cider-d,rovist-nr"
        assert main(["score", sys_, "-r", refs, "-m", metrics, "-f", "csv", "-q", *extra]) == 0
        header, *rows = csv.reader(io.StringIO(capsys.readouterr().out))
        expected = spec.replace("[", "").replace("]", "") if extra else re.sub(r"\[.*?\]", "", spec)
        assert ",".join(header) == expected
        # the range column's labels are among those cli.md lists
        ranges = [row[header.index("range")] for row in rows]
        assert ranges and all(f"`{r}`" in text for r in ranges), ranges


def test_cli_md_refused_values_are_one_sentence_exit_2(
    tree: Any, small_files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from vistkit.cli import main

    text = guide("cli.md")
    [examples] = re.findall(r"A value the option itself refuses \(([^)]*)\)", text.replace("\n", " "))
    values = [shlex.split(v) for v in re.findall(r"`([^`]+)`", examples)]
    assert len(values) == 3
    base = {"--bootstrap": ["meta", "pairs", str(small_files["refs"]), "-m", "bleu-4"]}
    for option, value in values:
        argv = [*base.get(option, ["score", str(small_files["sys"]), "-m", "bleu-4"]), option, value]
        assert main(argv) == 2, argv
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(err) == 1 and err[0].startswith("error: Invalid value for"), err


def test_cli_md_python_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cli.md's Python API snippet, in this process, beside a `stories.json` (any story file, as it says)."""
    [snippet] = re.findall(r"```python\n(.*?)```", guide("cli.md"), re.S)
    data = readme_data.build(tmp_path / "data")
    shutil.copy(data / "dhm" / "stories" / "vist" / "llava_vc_p3.json", tmp_path / "stories.json")
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet, "docs/cli.md", "exec"), {})


def test_data_md_offline_copy_block_gives_the_promised_names(tmp_path: Path) -> None:
    """data.md's copy from ../shared/data (run from the checkout) gives the names the stand-in data has."""
    from conftest import DATA

    if not DATA.is_dir():
        pytest.skip(f"needs the ../shared data folder ({DATA} not found)")
    blocks = [b for b in bash_blocks(guide("data.md")) if "S=../shared/data" in b]
    assert len(blocks) == 1
    home = tmp_path / "home"
    home.mkdir()
    script = blocks[0].replace("S=../shared/data", f"S={shlex.quote(str(DATA))}")
    env = {**os.environ, "HOME": str(home)}
    proc = subprocess.run(["bash", "-e", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = {p.relative_to(home / "vist-data").as_posix() for p in (home / "vist-data").rglob("*") if p.is_file()}
    stand_in = readme_data.build(tmp_path / "stand-in")
    want = {p.relative_to(stand_in).as_posix() for p in stand_in.rglob("*") if p.is_file()}
    assert want <= got
    assert all("/vwp/" in name for name in got - want), got - want  # data.md: the vwp parts are not used


def test_studio_md_export_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """studio.md's Rankings and Likert export columns are the columns `studio export` writes."""
    from test_readme import _judge

    from vistkit.cli import main

    text = " ".join(guide("studio.md").split())
    [rank_cols] = re.findall(r"Rankings: `([^`]+)`", text)
    [likert_head] = re.findall(r"Likert: `(system, item, worker)`", text)
    [likert_tail] = re.findall(r"one column per statement, `([^`]+)`", text)
    for task in ("rank", "likert"):
        folder = tmp_path / task
        assert main(["studio", "demo", "--no-serve", "--dir", str(folder), "--task", task, "--items", "2", "-q"]) == 0
        tokens = re.findall(r"/a/([A-Za-z0-9_-]{20,})", capsys.readouterr().out)
        study = folder / "study.db"
        if task == "rank":
            assert _judge(study, tokens[:1], per_annotator=2) > 0
        else:
            assert _likert(study, tokens[0])
        out = tmp_path / f"{task}.csv"
        fmt = "rankings" if task == "rank" else "likert"
        assert main(["studio", "export", str(study), "-f", fmt, "-o", str(out), "-q"]) == 0
        header = out.read_text(encoding="utf-8").splitlines()[0].split(",")
        if task == "rank":
            assert header == rank_cols.split(", ")
        else:
            head, tail = likert_head.split(", "), likert_tail.split(", ")
            assert header[:3] == head and header[-len(tail) :] == tail
            assert header[3 : -len(tail)] == "focused,coherent,share,human,grounded,detailed".split(",")


def _likert(study: Path, token: str) -> bool:
    """One Likert judgement, as the page's form would send it."""
    from vistkit.studio import LIKERT_STATEMENTS, db, service

    st = db.open_study(study)
    try:
        with st.engine.connect() as conn:
            who = service.authenticate(conn, token)
        assert who is not None
        aid = service.claim_next(st, who)
        assert aid is not None
        form = {"assignment": str(aid), "csrf": db.csrf_token(st.secret(), who.id, aid)}
        form.update({aspect: "4" for aspect in LIKERT_STATEMENTS})
        return bool(service.submit(st, who, form)["saved"])
    finally:
        st.engine.dispose()
