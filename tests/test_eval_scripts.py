"""The development scripts still build their pairs from ../shared (they are not run by the suite otherwise)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tests.conftest import requires_shared

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@requires_shared
def test_eval_ranker_builds_its_proxy_and_vwp_pairs() -> None:
    ev = _script("eval_ranker")
    proxy = ev.proxy_pairs()
    systems = {p.system_2 for p in proxy}
    assert systems == {"llava", "tapm", "pr-vist"}
    assert all(p.system_1 == "human" and p.text_1 and p.text_2 for p in proxy)
    sample = ev.sample_per_group(proxy, lambda p: p.system_2, 5)
    assert len(sample) == 15
    vwp = ev.vwp_pairs()
    assert vwp and all(p.text_1 != p.text_2 for p in vwp)
    acc = ev.accuracy(ev.ttr_scores(sample), sample, lambda p: p.system_2)
    assert set(acc) == systems | {"all"} and all(0.0 <= a <= 1.0 for a, _ in acc.values())
