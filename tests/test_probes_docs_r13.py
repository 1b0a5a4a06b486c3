"""Probe round 13: a newcomer follows README.md and the guides on a fresh clone.

`pip install .` without the `models` extra is a documented install ("the CLI and every metric that needs no
model"), and the README then sends the newcomer to `vistkit demo`. There the demo's dHM distance stopped with
"skipped dHM distance: ... (or leave it out with --dimensions R)": an option `vistkit demo` does not have, and no
distance at all although its R dimension needs no model.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from vistkit.cli import main
from vistkit.errors import MissingDependencyError


def _no_coherence_model(*_a: object, **_k: object) -> None:
    raise MissingDependencyError("the coherence metric needs torch and transformers: pip install 'vistkit[models]'")


def test_the_demo_without_the_models_extra_gives_the_distance_it_can_and_names_no_foreign_option(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import vistkit.commands.demo as demo

    monkeypatch.setattr(demo, "DEMO_METRICS", ("rovist-nr", "coherence"))
    monkeypatch.setattr("vistkit.metrics.coherence.Coherence.__init__", _no_coherence_model)
    assert main(["demo"]) == 0
    out, err = capsys.readouterr()
    assert "skipped coherence: the coherence metric needs torch and transformers" in err
    assert "--dimensions" not in out + err  # `vistkit demo` has no such option
    assert "dHM, human vs LLaVA" in out  # the R dimension needs no model: the distance on R alone
    table = out.split("dHM, human vs LLaVA", 1)[1]
    assert "dR" in table and "dC" not in table
    assert "dHM's coherence dimension C is left out: the coherence metric needs torch and transformers" in err


def test_the_demo_says_how_to_score_its_stories_with_the_cli(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's last lines named `vistkit metrics` only: a newcomer could not rerun what the demo scored."""
    import vistkit.commands.demo as demo

    monkeypatch.setattr(demo, "DEMO_METRICS", ("rovist-nr",))
    monkeypatch.setattr(demo, "_demo_distance", lambda *_a: None)
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("The same with the CLI: vistkit score "))
    assert "llava_stories.json" in line and "human_stories.json" in line and "--key story -m rovist-nr" in line


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_does_not_reinstall_a_venv_whose_pyproject_only_got_a_new_mtime(tmp_path: Path) -> None:
    """A fresh clone (or a branch switch) gives pyproject.toml a new mtime; the install stamp is named after its
    checksum, yet `make demo` depended on the mtime too and reinstalled the whole environment (torch included)."""
    root = Path(__file__).resolve().parents[1]
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(root / name, tmp_path / name)
    # under `make test` (CI) the outer make's MAKEFLAGS / MAKELEVEL would add "make[1]: Entering directory" lines
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")}

    def dry_run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["make", "-n", "demo"], cwd=tmp_path, capture_output=True, text=True, check=True, env=env)

    listed = dry_run()
    stamp = next(line.split()[-1] for line in listed.stdout.splitlines() if line.startswith("touch .venv/.installed-"))
    (tmp_path / stamp).parent.mkdir()
    (tmp_path / stamp).touch()
    os.utime(tmp_path / stamp, (1_000_000_000, 1_000_000_000))  # installed long before the clone
    listed = dry_run()
    assert "pip install" not in listed.stdout
    assert listed.stdout.strip().splitlines()[-1] == ".venv/bin/vistkit demo"
    (tmp_path / "pyproject.toml").write_text(
        (tmp_path / "pyproject.toml").read_text(encoding="utf-8") + "\n", encoding="utf-8"
    )  # an edit: another checksum, another stamp, a reinstall
    listed = dry_run()
    assert "pip install" in listed.stdout
