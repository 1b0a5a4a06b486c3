"""Round 12 probes: inputs that exhausted memory or time in the metrics and the text code.

Each probe runs ``vistkit score`` in a child process whose address space is capped (`limited_run`), so a
regression shows as a refusal or an out-of-memory failure here, never as a machine that swaps.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest
from cli_probe_helpers import limited_run

from vistkit.errors import InputError

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs Java for the PTB tokeniser")


def write_jsonl(path: Path, rows: Iterable[tuple[str, str, list[str]]]) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for sid, text, photos in rows:
            fh.write(json.dumps({"story_id": sid, "text": text, "photo_ids": photos}) + "\n")
    return path


# ------------------------------------------------------------------------------------------------ sacrebleu
@pytest.mark.slow
def test_sacrebleu_many_stories_and_one_key_with_many_references_stays_under_2_gib(tmp_path: Path) -> None:
    """sacreBLEU takes reference *streams*: one list per reference position, as long as the corpus. 50,000
    stories and one key with 5,000 references made 5,000 lists of 50,000 (2 GB of pointers, 8 GB for 200,000
    stories: out of memory on a 27 MB input); statistics are now made item by item."""
    hyps = write_jsonl(tmp_path / "h.jsonl", ((f"s{i}", "we went to the park", [str(i)]) for i in range(50_000)))
    refs = write_jsonl(
        tmp_path / "r.jsonl",
        [
            *((f"r{i}", "we went to the park today", [str(i)]) for i in range(50_000)),
            *((f"x{i}", f"the park number {i}", ["0"]) for i in range(5_000)),
        ],
    )
    run = limited_run(["score", str(hyps), "-r", str(refs), "-m", "sacrebleu", "-b"])
    assert run.returncode == 0, run.stderr[-2000:]
    assert float(run.stdout.split()[-1]) > 0


@pytest.mark.parametrize("options", [{}, {"lowercase": True, "max_ngram_order": 6}, {"tokenize": "char"}])
def test_sacrebleu_item_statistics_equal_sacrebleus_own(options: dict[str, object]) -> None:
    """The item-by-item statistics are sacreBLEU's own integers (its corpus statistics from padded streams),
    with a varying number of references, repeated words and empty texts."""
    from vistkit.metrics.sacrebleu_bleu import SacreBleu

    rng = np.random.default_rng(12)
    words = ["the", "The", "park", "a", "dog", ".", "ran", "!", "we", "went"]

    def text() -> str:
        return " ".join(rng.choice(words, size=int(rng.integers(0, 14))))

    hyps = [text() for _ in range(60)]
    refs = [[text() for _ in range(int(rng.integers(1, 6)))] for _ in hyps]
    metric = SacreBleu(**options)  # type: ignore[arg-type]
    ours = metric.statistics(hyps, refs)
    bleu = metric._bleu(effective_order=False)
    width = max(len(r) for r in refs)
    streams = [[r[j] if j < len(r) else None for r in refs] for j in range(width)]
    theirs = np.asarray(bleu._extract_corpus_statistics(hyps, streams), dtype=np.int64)
    assert np.array_equal(ours, theirs)
    assert metric._corpus.num_refs == bleu.num_refs == -1
    metric.statistics(hyps[:3], [r[:1] for r in refs[:3]])
    assert metric._corpus.num_refs == 1


# ------------------------------------------------------------------------------------------- coco n-grams
@needs_java
@pytest.mark.parametrize("metric", ["bleu-4", "cider-d", "rouge-l"])
def test_coco_metrics_refuse_more_words_than_the_limit(tmp_path: Path, metric: str) -> None:
    """The coco n-gram table holds ~250 bytes a word (hypotheses and their references): 5,000 references of
    800 words for one key (a 39 MB file) took 2.4 GB for cider-d, 300 stories of 100,000 characters scored
    against themselves 1.7 GB, and a 256 MiB reference file would need 15 GB. Over `max_ngram_words` (here
    lowered) the run is refused in one sentence that names the limit and how to raise it."""
    text = " ".join(f"w{i}" for i in range(60))
    hyps = write_jsonl(tmp_path / "h.jsonl", ((f"s{i}", text, [str(i)]) for i in range(10)))
    refs = write_jsonl(tmp_path / "r.jsonl", ((f"r{i}", text, [str(i)]) for i in range(10)))
    env = {"VISTKIT_MAX_NGRAM_WORDS": "1000"}
    run = limited_run(["score", str(hyps), "-r", str(refs), "-m", metric, "-b"], env=env, cap="RLIMIT_DATA")
    assert run.returncode == 1, run.stderr[-2000:]
    assert "1,200 words" in run.stderr and "1,000" in run.stderr, run.stderr
    assert "VISTKIT_MAX_NGRAM_WORDS" in run.stderr and "Traceback" not in run.stderr
    env = {"VISTKIT_MAX_NGRAM_WORDS": "1200"}
    run = limited_run(["score", str(hyps), "-r", str(refs), "-m", metric, "-b"], env=env, cap="RLIMIT_DATA")
    assert run.returncode == 0, run.stderr[-2000:]


def test_max_ngram_words_reads_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from vistkit import limits

    monkeypatch.delenv("VISTKIT_MAX_NGRAM_WORDS", raising=False)
    assert limits.max_ngram_words() == limits.NGRAM_WORDS_DEFAULT
    assert limits.too_many_ngram_words(limits.NGRAM_WORDS_DEFAULT) is None
    monkeypatch.setenv("VISTKIT_MAX_NGRAM_WORDS", "lots")
    with pytest.raises(InputError, match="VISTKIT_MAX_NGRAM_WORDS"):
        limits.max_ngram_words()


def test_an_lm_batch_cannot_ask_for_terabytes() -> None:
    """`-O lm-perplexity.batch_tokens=16777216` was accepted: one batch's log-probabilities over SmolLM2's vocabulary
    would take 3 TB, and 2,000 long stories ended in "ran out of memory" after everything had loaded. The cap is
    2^17 tokens now (about 26 GB of log-probabilities), refused before any model loads."""
    from vistkit.errors import InputError
    from vistkit.models.lm import MAX_BATCH_TOKENS, check_batch_tokens

    check_batch_tokens(MAX_BATCH_TOKENS)
    for bad in (MAX_BATCH_TOKENS + 1, 1 << 24):
        with pytest.raises(InputError, match="batch_tokens must be a whole number from 1 to 131,072"):
            check_batch_tokens(bad)


def test_a_huge_bertscore_batch_size_is_held_to_a_token_budget_on_the_cpu() -> None:
    """`-O bertscore.batch_size=65536` put every text in one CPU batch (the token budget was 10^12): 2,000 texts
    of 512 tokens needed tens of GB of attention scores. A CPU batch now holds at most `CPU_TOKEN_BUDGET` padded
    tokens, which the default batch size never reaches."""
    from vistkit.metrics.bertscore import CPU_TOKEN_BUDGET
    from vistkit.models.runtime import batches_by_length

    lengths = [512] * 2000
    batches = batches_by_length(lengths, batch_size=65536, max_tokens=CPU_TOKEN_BUDGET)
    assert max(len(b) for b in batches) * 512 <= CPU_TOKEN_BUDGET
    assert 64 * 512 <= CPU_TOKEN_BUDGET  # the default batch of the longest texts fits: default runs are unchanged
