"""`ArrayCache`: the bounded in-memory embedding cache behind CLIP's text/photo/region caches and the MiniLM
sentence encoder (least recently used out first, never above its byte budget)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vistkit.errors import InputError
from vistkit.limits import CACHE_BYTES_DEFAULT, cache_bytes
from vistkit.models.runtime import ArrayCache


def test_least_recently_used_goes_first() -> None:
    cache = ArrayCache(max_bytes=3 * 8)
    for key in "abc":
        cache.put(key, np.zeros(1, dtype=np.float64))
    assert cache.get("a") is not None  # a is now the most recently used
    cache.put("d", np.ones(1))
    assert "b" not in cache and {"a", "c", "d"} == {k for k in "abcd" if k in cache}
    assert cache.nbytes == 24


def test_an_array_larger_than_the_budget_is_returned_not_kept() -> None:
    cache = ArrayCache(max_bytes=16)
    big = np.arange(4.0)
    assert cache.put("big", big) is big and "big" not in cache and cache.nbytes == 0


def test_budget_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VISTKIT_CACHE_MB", raising=False)
    assert cache_bytes() == CACHE_BYTES_DEFAULT == 512 * 2**20
    monkeypatch.setenv("VISTKIT_CACHE_MB", "2")
    assert ArrayCache().max_bytes == 2 * 2**20
    monkeypatch.setenv("VISTKIT_CACHE_MB", "0")
    cache = ArrayCache()
    cache.put("a", np.zeros(1))
    assert len(cache) == 0
    for bad in ("-1", "nan", "lots", "inf"):
        monkeypatch.setenv("VISTKIT_CACHE_MB", bad)
        with pytest.raises(InputError, match="VISTKIT_CACHE_MB"):
            cache_bytes()


@settings(max_examples=200, deadline=None)
@given(
    budget=st.integers(0, 200),
    ops=st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 12), st.booleans()), max_size=60),
)
def test_never_above_budget_and_returns_what_was_put(budget: int, ops: list[tuple[str, int, bool]]) -> None:
    cache = ArrayCache(max_bytes=budget)
    last: dict[str, np.ndarray] = {}
    for key, size, read in ops:
        if read:
            got = cache.get(key)
            assert got is None or got is last[key]
        else:
            last[key] = cache.put(key, np.full(size, float(size)))
        assert cache.nbytes == sum(last[k].nbytes for k in last if k in cache) <= budget
