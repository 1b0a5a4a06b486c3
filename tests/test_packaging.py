"""What pip users get: the sdist carries the tests (conftest, fixtures, helpers, tiny models), docs, scripts,
bench, the Makefile and the project's notes, and a test file runs from the unpacked sdist; the wheel holds the
package only (no tests); the metadata has keywords, classifiers and project links."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
pytest.importorskip("setuptools", reason="building the distributions needs setuptools")

FAST_TESTS = ["tests/test_text.py", "tests/test_meta_pairs.py"]  # run from the unpacked sdist
IN_SDIST = [
    "Makefile",
    "README.md",
    "LICENSE",
    "CHANGELOG.md",
    "CONTRIBUTING.md",
    "BENCHMARKS.md",
    "pyproject.toml",
    "tests/conftest.py",
    "tests/meta_dummies.py",
    "tests/studio_helpers.py",
    "tests/tiny_models.py",
    "tests/readme_data.py",
    "tests/test_readme.py",
    "tests/fixtures/meta/vhed_small.csv",
    "tests/fixtures/meta/dummy_metrics.py",
    "tests/java/ParaphraseCheck.java",
    "docs/data.md",
    "docs/meta.md",
    "docs/studio.md",
    "docs/metrics/README.md",
    "scripts/gen_metric_docs.py",
    "scripts/train_ranker.py",
    "bench/bench_coco.py",
    "src/vistkit/__init__.py",
    "src/vistkit/studio/templates/admin.html",
    "src/vistkit/resources/demo/human_stories.json",
]


def _build(kind: str, src: Path, out: Path) -> Path:
    code = f"from setuptools import build_meta as b; print(b.build_{kind}({str(out)!r}))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=src, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out / proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the source tree (the build writes egg-info next to the package; the checkout stays clean)."""
    dst = tmp_path_factory.mktemp("pkg") / "vistkit"
    ignore = shutil.ignore_patterns(
        ".git", ".venv", "__pycache__", "*.egg-info", ".hypothesis", ".pytest_cache", ".mypy_cache", ".ruff_cache",
        "build", "dist",
    )  # fmt: skip
    shutil.copytree(ROOT, dst, ignore=ignore)
    return dst


def test_the_sdist_carries_its_tests_and_they_run_unpacked(tree: Path, tmp_path: Path) -> None:
    sdist = _build("sdist", tree, tmp_path / "dist")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        tar.extractall(tmp_path / "unpacked", filter="data")
    missing = [n for n in IN_SDIST if n not in names]
    assert not missing, f"not in the sdist: {missing}"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    [top] = list((tmp_path / "unpacked").iterdir())
    pkg_info = (top / "PKG-INFO").read_text(encoding="utf-8")
    assert "Classifier: Intended Audience :: Science/Research" in pkg_info
    assert "Project-URL: Changelog, CHANGELOG.md" in pkg_info and "Keywords: visual storytelling" in pkg_info
    env = dict(os.environ, PYTHONPATH=str(top / "src"), VISTKIT_DEBUG="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *FAST_TESTS],
        cwd=top,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert " passed" in proc.stdout and "error" not in proc.stdout.lower()


def test_the_wheel_holds_the_package_only(tree: Path, tmp_path: Path) -> None:
    wheel = _build("wheel", tree, tmp_path / "dist")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"vistkit", "vistkit-0.1.0.dist-info"}
    assert "vistkit/studio/templates/admin.html" in names and "vistkit/studio/charts.py" in names
    assert not [n for n in names if "/tests/" in n or n.startswith("tests/") or "conftest" in n]
