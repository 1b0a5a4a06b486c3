"""The README runs as written: every shell command of its tour (the ```bash blocks from "## A tour" up to
"## Documentation") and its Python snippet, from a folder outside the checkout, with ``DATA`` pointing at a small
stand-in of the docs/data.md folder (`readme_data.build`). Commands that need what no test has (private data,
weights, a cluster, a server that runs until stopped) are listed in ``SKIPPED`` with the reason; a README
command that is neither run nor listed fails the test, and so does a variable the tour defines that the test
does not provide."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import readme_data

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TOUR = ("## A tour", "## Documentation")

# a command starting with one of these is not run, for the reason given
SKIPPED = {
    "vistkit vrank train": "needs VHED's human rankings and SimCSE encoder weights (tests/test_vrank.py: tiny model)",
    "vistkit vrank predict": "needs a trained Vrank model (`vrank train`, skipped above)",
    "vistkit meta pairs VHED_test.csv": "needs VHED and a trained Vrank model",
    "vistkit compare sysA.json sysB.json --metrics vrank": "needs a trained Vrank model",
    "vistkit studio demo$": "serves until stopped; the --no-serve line builds the same study",
    "vistkit studio serve": "serves until stopped (tests/test_studio_server.py); the test submits judgements instead",
    "vistkit score $DATA/tapm/ours.json --references $DATA/PR_VIST.json.zip --metrics bleu-4,cider-d,meteor-coco "
    "--engine ray": "starts a local Ray cluster (tests/test_engine_ray.py checks the ray engine's numbers)",
    "vistkit score $DATA/tapm/ours.json --metrics coherence --engine ray --address auto": "needs a running Ray "
    "cluster with GPUs",
}
VARIABLES = {"DATA"}  # set by the test to the stand-in data folder


def tour_blocks(text: str) -> list[str]:
    start, end = text.index(TOUR[0]), text.index(TOUR[1])
    return re.findall(r"```bash\n(.*?)```", text[start:end], re.S)


def commands(block: str) -> list[str]:
    """The block's commands: continuation lines joined, comments and blank lines dropped."""
    out: list[str] = []
    for line in block.replace("\\\n", " ").splitlines():
        line = re.sub(r"\s+#\s.*$", "", line).rstrip()
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(line.strip())
    return out


def _matches(prefix: str, command: str) -> bool:
    """``prefix`` ending in ``$``: the whole command; else its start."""
    return command == prefix[:-1] if prefix.endswith("$") else command.startswith(prefix)


def _skip_reason(command: str) -> str | None:
    return next((reason for prefix, reason in SKIPPED.items() if _matches(prefix, command)), None)


def _judge(study: Path, tokens: list[str], per_annotator: int = 4) -> int:
    """What annotators would do at `studio serve`: each works through a few tasks (longer story ranked higher)."""
    from vistkit.studio import db, service

    st = db.open_study(study)
    done = 0
    try:
        for token in tokens:
            with st.engine.connect() as conn:
                who = service.authenticate(conn, token)
            assert who is not None
            for _ in range(per_annotator):
                aid = service.claim_next(st, who)
                if aid is None:
                    break
                task = service.load_task(st, who, aid)
                best_first = sorted(range(len(task.stories)), key=lambda i: -len(task.stories[i]["text"]))
                form = {
                    "assignment": str(aid),
                    "csrf": db.csrf_token(st.secret(), who.id, aid),
                    "ranking": ",".join(str(i + 1) for i in best_first),
                }
                assert service.submit(st, who, form)["saved"]
                done += 1
    finally:
        st.engine.dispose()
    return done


@pytest.fixture(scope="module")
def tour_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    return readme_data.command_env(tmp_path_factory.mktemp("readme"), ROOT)


def test_the_readme_lists_what_it_skips_and_defines_only_known_variables() -> None:
    cmds = [c for b in tour_blocks(README.read_text(encoding="utf-8")) for c in commands(b)]
    assert len(cmds) > 25
    for c in cmds:
        if re.match(r"^[A-Z_]+=", c):
            assert c.split("=", 1)[0] in VARIABLES, f"the tour defines {c!r}; teach tests/test_readme.py about it"
        else:
            assert c.startswith("vistkit "), f"a tour command that is not vistkit: {c!r}"
    skipped = {p for p in SKIPPED if any(_matches(p, c) for c in cmds)}
    assert skipped == set(SKIPPED), f"SKIPPED entries no README command matches: {set(SKIPPED) - skipped}"
    text = README.read_text(encoding="utf-8")
    assert "../shared" not in text[text.index(TOUR[0]) : text.index(TOUR[1])], "the tour must not need ../shared"


def _argv(cmd: str, env: dict[str, str], work: Path) -> list[str] | None:
    """The command's words as bash expands them (``$DATA``, ``~``, quotes), or None for a line with shell
    syntax beyond words (a pipe, redirect or list), which runs in bash as a whole."""
    if re.search(r"[|<>;&`(){}]", cmd):
        return None
    proc = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {cmd}"], cwd=work, env=env, capture_output=True, text=True, check=True
    )
    return proc.stdout.split("\0")[:-1]


@pytest.mark.slow
def test_every_tour_command_runs_as_written(
    tour_env: dict[str, object], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first command runs as the installed ``vistkit`` on PATH (the entry point, from a folder outside the
    checkout); the others run ``vistkit.cli.main`` in this process with the words bash makes of the line, in the
    same folder and environment, so torch, the LM and the encoders load once (a process per command took about
    three minutes of a test run, this about one; other tests run the console script on many verbs)."""
    from vistkit.cli import main

    env, work = tour_env["env"], tour_env["work"]
    assert isinstance(env, dict) and isinstance(work, Path)
    monkeypatch.chdir(work)
    for name in ("DATA", "COLUMNS", "VISTKIT_DEBUG"):
        monkeypatch.setenv(name, env[name])
    ran: list[tuple[str, float]] = []
    last_out = ""
    for block in tour_blocks(README.read_text(encoding="utf-8")):
        for cmd in commands(block):
            if re.match(r"^[A-Z_]+=", cmd):
                continue  # DATA=...: the test's own value stands
            if cmd.startswith("vistkit studio serve"):
                tokens = re.findall(r"/a/([A-Za-z0-9_-]{20,})", last_out)
                assert tokens, "the invite command printed no links"
                assert _judge(work / "study.db", tokens) > 0
                continue
            if _skip_reason(cmd):
                continue
            start = time.perf_counter()
            argv = _argv(cmd, env, work) if ran else None
            if argv is None:
                proc = subprocess.run(
                    ["bash", "-c", cmd], cwd=work, env=env, capture_output=True, text=True, timeout=300
                )
                code, out, err = proc.returncode, proc.stdout, proc.stderr
            else:
                assert argv[0] == "vistkit", argv
                capsys.readouterr()
                code = main(argv[1:])
                out, err = capsys.readouterr()
            ran.append((cmd, time.perf_counter() - start))
            assert code == 0, f"{cmd}\nexit {code}\n{out[-2000:]}\n{err[-3000:]}"
            last_out = out
    # what the commands were meant to write is there
    assert (work / "items.csv").stat().st_size > 0
    assert (work / "human_vs_machine.csv").read_text().count("proxy: human is better") == 3 * readme_data.SEQUENCES * 2
    index = (work / "meta-report" / "index.html").read_text()
    assert "pair_accuracy.pdf" in index and "proxy label" in index
    assert (work / "rankings.csv").exists() and (work / "pairs.csv").exists()
    assert (work / "report" / "index.html").exists()
    summary = "\n".join(f"{t:6.1f}s  {c[:110]}" for c, t in ran)
    print(f"\n{len(ran)} README commands, {sum(t for _, t in ran):.1f}s\n{summary}")


@pytest.mark.slow
def test_the_readme_python_snippet_runs(tour_env: dict[str, object]) -> None:
    text = README.read_text(encoding="utf-8")
    [snippet] = re.findall(r"```python\n(.*?)```", text, re.S)
    assert 'DATA = Path("~/vist-data").expanduser()' in snippet
    code = snippet.replace('Path("~/vist-data").expanduser()', f"Path({str(tour_env['data'])!r})")
    env = tour_env["env"]
    assert isinstance(env, dict)
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tour_env["work"], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    corpus, bert = float(lines[0].split()[0]), float(lines[-1])
    assert 0 < corpus < 10 and 0 < bert <= 1
    assert "cider-d|" in lines[0]


def test_the_stand_in_data_has_the_names_docs_data_md_promises(tmp_path: Path) -> None:
    import zipfile

    data = readme_data.build(tmp_path / "d")
    doc = (ROOT / "docs" / "data.md").read_text(encoding="utf-8")
    names = {p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file()}
    promised = {
        "PR_VIST.json.zip",
        "vist-challenge-template.json",
        "example-submission-file.test.json",
        "tapm/ours.json",
        "tapm/AREL.json",
        "tapm/XE.json",
        "dhm/stories/vist/gt_test.json",
        "dhm/stories/vist/llava_vc_p3.json",
    }
    scores = {f"dhm/scores/vist/{s}_{x}" for s in ("gt_test", "llava_vc_p3") for x in ("G.json", "C.csv", "R.csv")}
    assert names == promised | scores
    for name in promised:
        assert f"`{name}" in doc or f"{name}`" in doc, name
    assert "`dhm/scores/vist/gt_test_{G.json,C.csv,R.csv}`" in doc
    refs = json.loads(zipfile.ZipFile(data / "PR_VIST.json.zip").read("PR_VIST.json"))
    assert len(refs) == 5 * 2 * readme_data.SEQUENCES
