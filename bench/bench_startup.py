"""CLI start-up: wall time of ``vistkit --help`` in fresh processes (target: about 0.2 s), and of a bare interpreter.

    .venv/bin/python bench/bench_startup.py [--runs 8]

Each run is a new ``python -c "from vistkit.cli import main; main(['--help'])"`` process (the console script's
code path, without the shell wrapper), output discarded; prints every run, the best and the median, next to the
same for ``python -c pass`` and ``python -c "import numpy"`` (what the help path must not pay for).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def timed(code: str, runs: int) -> list[float]:
    """Wall seconds of ``runs`` fresh ``python -c code`` processes."""
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        out.append(time.perf_counter() - t)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8, help="fresh processes per command")
    args = ap.parse_args(argv)
    one, five, _ = os.getloadavg()
    print(f"{os.cpu_count()} CPU(s), load average {one:.2f} (5 min {five:.2f}), Python {sys.version.split()[0]}")
    for label, code in (
        ("python -c pass", "pass"),
        ("python -c 'import numpy'", "import numpy"),
        ("vistkit --help", "import sys; from vistkit.cli import main; sys.exit(main(['--help']))"),
    ):
        times = timed(code, max(1, args.runs))
        print(f"{label:26s} best {min(times):.3f} s, median {statistics.median(times):.3f} s "
              f"(runs {', '.join(f'{t:.3f}' for t in times)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
