"""The development scripts still build their pairs from ../shared (they are not run by the suite otherwise)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

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
    reserved = ev.reserved_pairs()  # (d), evaluation only: human vs AREL / XE of the same photos
    assert {p.system_2 for p in reserved} == {"arel", "xe"} and len(reserved) > 1000
    assert all(p.system_1 == "human" and p.text_1 != p.text_2 for p in reserved)


def test_feature_accuracy_counts_ties_as_wrong_and_reports_them() -> None:
    from vistkit.meta.human import StoryPair

    ev = _script("eval_ranker")
    texts = [("a b c d", "a a a a", "x"), ("a b c", "a b c", "x"), ("p q r s t", "p p q q", "y")]
    pairs = [StoryPair(f"p{i}", f"s{i}", (), t1, t2, "human", g, 1.0) for i, (t1, t2, g) in enumerate(texts)]

    def contributions(batch: list[str]) -> list[dict[str, float]]:
        return [{"ttr": len(set(t.split())) / len(t.split()), "words": float(len(t.split()))} for t in batch]

    acc = ev.feature_accuracy(pairs, lambda p: p.system_2, contributions)
    assert acc["ttr alone"]["x"] == (0.5, 2) and acc["ttr alone"]["y"] == (1.0, 1)  # the tie (pair 1) is wrong
    assert acc["ttr alone"]["ties"][0] == pytest.approx(1 / 3)
    assert acc["words alone"]["all"][0] == pytest.approx(1 / 3)  # pair 2: 5 > 4 words; pairs 0, 1 tie
    assert acc["u (the ranker)"]["all"][0] == pytest.approx(2 / 3)
