"""Issue 16 (items 2, 4, 5, 6, 7): nothing a user gives vistkit is dropped silently, exhausts memory or time, or
ends in the catch-all "unexpected ... bug" message.

Bombs are small synthetic files; every run that could grow without bound runs in a subprocess under a 2 GiB
address-space limit (``resource.setrlimit(RLIMIT_AS)``), so a regression fails instead of eating the machine.
"""

from __future__ import annotations

import json
import math
import re
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from cli_probe_helpers import GiB, limited_run
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import message_lines
from vistkit.cli import main
from vistkit.data.readers import load_json, read_stories
from vistkit.data.story import Story
from vistkit.errors import InputError

REPO = Path(__file__).resolve().parents[1]
META = REPO / "tests" / "fixtures" / "meta"


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """``vistkit ARGS`` in process: (exit code, stdout, stderr). VISTKIT_DEBUG=1 (conftest) turns a catch-all
    "unexpected" error into a test failure."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def one_error(err: str) -> str:
    """The one ``error:`` line of a refused command (never the catch-all)."""
    lines = message_lines(err)
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "unexpected" not in lines[0]
    return lines[0]


def deflated(size: int, *, prefix: bytes = b'{"1": "') -> bytes:
    """A raw deflate stream of ``prefix`` + ``size`` bytes of 'a' (compresses ~1000:1), made in 1 MiB steps."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    out = [c.compress(prefix)]
    block = b"a" * (1 << 20)
    left = size
    while left > 0:
        out.append(c.compress(block[: min(left, len(block))]))
        left -= len(block)
    out.append(c.flush())
    return b"".join(out)


def zip_with(path: Path, name: str, data: bytes, *, declared: int, crc: int = 0) -> Path:
    """A one-member zip whose headers declare ``declared`` uncompressed bytes for the deflate stream
    ``data`` (headers can lie)."""
    fn = name.encode()
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(data), declared, len(fn), 0) + fn
    central = (
        struct.pack(
            "<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0, crc, len(data), declared, len(fn), 0, 0, 0, 0, 0, 0
        )
        + fn
    )
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(central), len(local) + len(data), 0)
    path.write_bytes(local + data + central + end)
    return path


# =========================================================================================== 2. nothing dropped
def test_duplicate_key_in_a_story_dict_is_refused_naming_it(tmp_path: Path) -> None:
    f = tmp_path / "dup.json"
    f.write_text('{"1": "a story", "2": "x", "1": "another story"}', encoding="utf-8")
    with pytest.raises(InputError, match=r"dup.json: the key '1' appears twice"):
        read_stories(f)


def test_duplicate_key_inside_zipped_json_and_nested_objects(tmp_path: Path) -> None:
    f = tmp_path / "s.json.zip"
    with zipfile.ZipFile(f, "w") as zf:
        zf.writestr("s.json", '{"album": {"1_2": "a", "1_2": "b"}}')
    with pytest.raises(InputError, match=r"the key '1_2' appears twice"):
        read_stories(f)
    cfg = tmp_path / "config.json"
    cfg.write_text('{"hidden_size": 8, "hidden_size": 16}', encoding="utf-8")
    with pytest.raises(InputError, match="hidden_size"):
        load_json(cfg)


def test_duplicate_field_in_a_jsonl_record(tmp_path: Path) -> None:
    f = tmp_path / "s.jsonl"
    f.write_text('{"story_id": "a", "text": "one"}\n{"story_id": "b", "text": "x", "text": "y"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2: the key 'text' appears twice"):
        read_stories(f)


def test_validate_reports_a_duplicate_key(tmp_path: Path) -> None:
    from vistkit.data.validate import validate_submission

    sub = {"team_name": "t", "evaluation_info": {"additional_description": ""}, "output_stories": []}
    text = json.dumps(sub)[:-1] + ', "team_name": "u"}'
    report = validate_submission(text.encode())
    assert any(f.check == "json-duplicate-key" and "team_name" in f.message for f in report.findings)


def test_build_pairs_refuses_a_negative_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refs = tmp_path / "r.json"
    refs.write_text('{"1": "a b c", "2": "d e f"}', encoding="utf-8")
    code, _, err = cli(
        capsys, "meta", "build-pairs", "-r", refs, "--machine", f"m={refs}", "-o", tmp_path / "p.csv", "--limit", "-1"
    )
    assert code == 1 and "--limit must be 1 or more" in one_error(err)
    assert not (tmp_path / "p.csv").exists()
    # --limit 0 wrote a header-only file that `meta pairs` then refused (round 11): refused as well
    code, _, err = cli(
        capsys, "meta", "build-pairs", "-r", refs, "--machine", f"m={refs}", "-o", tmp_path / "p.csv", "--limit", "0"
    )
    assert code == 1 and "--limit must be 1 or more" in one_error(err)
    assert not (tmp_path / "p.csv").exists()


LIKERT_HEAD = "system,item,worker,coherent\n"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            "a,i1,w1,3\na,i1,w1,3\nb,i1,w1,2\n",
            r"1 row judges a story a worker already judged \(first: line 3 .* line 2\)",
        ),
        ("a,i1,w1,3\nb,i1,w1,42\n", r"line 3: rating 'coherent' is '42', outside the scale 1-5"),
        ("a,i1,w1,0\n", "outside the scale 1-5"),
        ("", "has a header but no rows"),
    ],
)
def test_likert_refuses_repeats_and_ratings_off_the_scale(tmp_path: Path, rows: str, message: str) -> None:
    from vistkit.meta.human import read_likert

    f = tmp_path / "likert.csv"
    f.write_text(LIKERT_HEAD + rows, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        read_likert(f)


def test_likert_scale_can_be_declared(tmp_path: Path) -> None:
    from vistkit.meta.human import parse_scale, read_likert

    f = tmp_path / "likert.csv"
    f.write_text(LIKERT_HEAD + "a,i1,w1,42\nb,i1,w1,0\n", encoding="utf-8")
    t = read_likert(f, scale=parse_scale("0-100"))
    assert t.values[:, 0].tolist() == [42.0, 0.0]
    with pytest.raises(InputError, match="--scale must be LOW-HIGH"):
        parse_scale("five")
    with pytest.raises(InputError, match="lowest rating must be below"):
        parse_scale("5-1")


def _pairs(tmp_path: Path, rows: list[str]) -> Path:
    head = (META / "vhed_small.csv").read_text(encoding="utf-8").splitlines()[0]
    f = tmp_path / "pairs.csv"
    f.write_text("\n".join([head, *rows]) + "\n", encoding="utf-8")
    return f


@pytest.mark.parametrize("agreement", ["-1", "42000", "3.5"])
def test_pairs_refuse_agreement_that_is_not_a_count(tmp_path: Path, agreement: str) -> None:
    from vistkit.meta.human import read_pairs

    f = _pairs(tmp_path, [f"a b c d e,a b c,-1.6,s1,1-2-3-4-5,gt,m1,{agreement},1.4,3.0,5,-0.32"])
    with pytest.raises(InputError, match=r"line 2: column 'agreement' must be a whole number from 0 to 100"):
        read_pairs(f)


def test_pairs_refuse_agreement_over_the_workers_column(tmp_path: Path) -> None:
    from vistkit.meta.human import read_pairs

    f = tmp_path / "p.csv"
    f.write_text("sent1,sent2,label,agreement,workers\na,b,1,4,3\n", encoding="utf-8")
    with pytest.raises(InputError, match="agreement 4 is more than the 3 workers"):
        read_pairs(f, label_sign="base-minus-comp")


def test_pairs_warn_once_about_repeated_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vistkit.meta.human import read_pairs

    row = "a b c d e,a b c,-1.6,s1,1-2-3-4-5,gt,m1,5,1.4,3.0,5,-0.32"
    other = "a b,a b c d,-1.2,s2,6-7-8-9-10,m1,m2,4,2.0,3.2,5,-0.24"
    pairs = read_pairs(_pairs(tmp_path, [row, other, row, row]))
    assert len(pairs) == 4  # still counted, but said
    err = capsys.readouterr().err
    assert err.count("warning:") == 1
    assert "2 rows repeat an earlier row exactly (first: line 4 = line 2)" in err


def test_header_only_pairs_csv_says_no_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _pairs(tmp_path, [])
    code, _, err = cli(capsys, "meta", "pairs", f, "-m", "bleu-4")
    assert code == 1
    line = one_error(err)
    assert "has a header but no rows" in line and "column" not in line


# =========================================================================================== 4. bounded
def test_zip_member_declared_over_the_limit_is_refused_before_reading(tmp_path: Path) -> None:
    bomb = zip_with(tmp_path / "bomb.zip", "bomb.json", deflated(1 << 20), declared=4 * GiB - 1)
    with pytest.raises(InputError, match=r"bomb.zip:bomb.json holds more than 256 MiB once decompressed"):
        read_stories(bomb)


def test_zip_member_that_lies_about_its_size_is_stopped(tmp_path: Path) -> None:
    """Declared 100 bytes, inflates to 8 MiB: never more than the declared bytes come out (then the CRC fails)."""
    liar = zip_with(tmp_path / "liar.zip", "s.json", deflated(8 << 20), declared=100)
    with pytest.raises(InputError, match=r"liar\.zip"):
        read_stories(liar)


def test_gzip_is_counted_while_streaming(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip

    monkeypatch.setenv("VISTKIT_MAX_INPUT_MB", "1")
    f = tmp_path / "s.json.gz"
    f.write_bytes(gzip.compress(b'{"1": "' + b"a" * (2 << 20) + b'"}'))
    with pytest.raises(InputError, match=r"s.json.gz holds more than 1 MiB once decompressed.*VISTKIT_MAX_INPUT_MB"):
        read_stories(f)
    jsonl = tmp_path / "s.jsonl.gz"
    lines = "".join(f'{{"story_id": "{i}", "text": "b"}}\n' for i in range(50_000)).encode()
    jsonl.write_bytes(gzip.compress(lines))  # 1.6 MB: streamed line by line, still capped
    with pytest.raises(InputError, match="holds more than 1 MiB"):
        read_stories(jsonl)
    monkeypatch.setenv("VISTKIT_MAX_INPUT_MB", "2")
    assert len(read_stories(jsonl)) == 50_000


def test_input_limit_env_must_be_a_number(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VISTKIT_MAX_INPUT_MB", "lots")
    f = tmp_path / "s.json"
    f.write_text('{"1": "a"}', encoding="utf-8")
    with pytest.raises(InputError, match="VISTKIT_MAX_INPUT_MB='lots' is not a whole number"):
        read_stories(f)


def test_plain_file_over_the_limit_is_refused_by_its_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VISTKIT_MAX_INPUT_MB", "1")
    f = tmp_path / "big.json"
    f.write_text('{"1": "' + "a" * (1 << 20) + '"}', encoding="utf-8")
    with pytest.raises(InputError, match=r"big\.json holds more than 1 MiB"):
        read_stories(f)


def test_story_length_is_capped_with_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InputError, match=r"story 'x' holds 100,001 characters, over vistkit's limit of 100,000"):
        Story("x", "a" * 100_001)
    monkeypatch.setenv("VISTKIT_MAX_STORY_CHARS", "10")
    with pytest.raises(InputError, match="VISTKIT_MAX_STORY_CHARS"):
        Story("x", "a" * 11)
    assert Story("x", "a" * 10).text == "a" * 10


@pytest.mark.slow
def test_score_on_a_4_gib_zip_bomb_stays_under_2_gib(tmp_path: Path) -> None:
    """The issue's bomb: a member declared honestly at 4 GiB (refused from the header)."""
    bomb = zip_with(tmp_path / "bomb.zip", "bomb.json", deflated(1 << 20), declared=4 * GiB - 1)
    refs = tmp_path / "r.json"
    refs.write_text('{"1": "a b c"}', encoding="utf-8")
    run = limited_run(["score", str(bomb), "-r", str(refs), "-m", "bleu-4"])
    assert run.returncode == 1, run.stderr
    assert "holds more than 256 MiB once decompressed" in run.stderr


@pytest.mark.slow
def test_gzip_bomb_over_the_default_limit_stays_under_2_gib(tmp_path: Path) -> None:
    """300 MiB of one story in a 300 KB .gz: counted while inflating, stopped at the default 256 MiB."""
    import gzip

    f = tmp_path / "bomb.json.gz"
    with gzip.open(f, "wb", compresslevel=1) as fh:
        fh.write(b'{"1": "')
        block = b"a" * (1 << 20)
        for _ in range(300):
            fh.write(block)
        fh.write(b'"}')
    run = limited_run(["score", str(f), "-m", "rovist-nr"])
    assert run.returncode == 1, run.stderr
    assert "bomb.json.gz holds more than 256 MiB once decompressed" in run.stderr


@pytest.mark.slow
def test_a_200_mb_story_is_refused_quickly_under_2_gib(tmp_path: Path) -> None:
    f = tmp_path / "long.jsonl"
    with open(f, "w", encoding="utf-8") as fh:
        fh.write('{"story_id": "big", "text": "')
        sentence = "we went to the park and it was great . " * 1000
        for _ in range(200 * (1 << 20) // len(sentence)):
            fh.write(sentence)
        fh.write('"}\n')
    run = limited_run(["score", str(f), "-m", "rovist-nr"])
    assert run.returncode == 1, run.stderr
    assert "longer than" in run.stderr and "VISTKIT_MAX_STORY_CHARS" in run.stderr  # the line limit refuses it


# ------------------------------------------------------------------------------------------------ bootstrap
@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 40),
    samples=st.integers(1, 300),
    cells=st.integers(1, 200),
    seed=st.integers(0, 2**32),
)
def test_blocked_draws_are_the_one_call_draws(n: int, samples: int, cells: int, seed: int) -> None:
    """sacreBLEU's draws (one call for all B rows) equal vistkit's blocks, for any block size."""
    import vistkit.scores.stats as stats

    old = stats._BLOCK_CELLS
    stats._BLOCK_CELLS = cells
    try:
        got = np.concatenate(list(stats.resample_blocks(np.random.default_rng(seed), n, samples)))
        masks = np.concatenate(list(stats._mask_blocks(np.random.default_rng(seed), n, samples)))
    finally:
        stats._BLOCK_CELLS = old
    assert (got == np.random.default_rng(seed).choice(n, size=(samples, n), replace=True)).all()
    assert (masks == np.random.default_rng(seed).integers(2, size=(samples, n), dtype=bool)).all()


def test_bootstrap_results_do_not_depend_on_the_block_size(monkeypatch: pytest.MonkeyPatch) -> None:
    import vistkit.scores.stats as stats
    from vistkit.metrics.base import mean_score

    rng = np.random.default_rng(0)
    a = mean_score("m", [str(i) for i in range(50)], rng.random(50).tolist(), "sig")
    b = mean_score("m", [str(i) for i in range(50)], rng.random(50).tolist(), "sig")
    whole = (
        stats.bootstrap_ci(a, n_bootstrap=500).as_list(),
        stats.paired_bootstrap(a, b, n_samples=500).p_value,
        stats.approximate_randomization(a, b, n_samples=500).p_value,
    )
    monkeypatch.setattr(stats, "_BLOCK_CELLS", 77)
    blocked = (
        stats.bootstrap_ci(a, n_bootstrap=500).as_list(),
        stats.paired_bootstrap(a, b, n_samples=500).p_value,
        stats.approximate_randomization(a, b, n_samples=500).p_value,
    )
    assert whole == blocked


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--n-bootstrap", "100000000", "--confidence", "0.95"], "'--n-bootstrap' / '--bootstrap': must be from 1"),
        (["--n-bootstrap", "0", "--confidence", "0.95"], "'--n-bootstrap' / '--bootstrap': must be from 1"),
        (["--seed", "-1", "--confidence", "0.95"], "'--seed': must be 0 or more, got -1"),
    ],
)
def test_resample_counts_and_seeds_are_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    f = tmp_path / "s.json"
    f.write_text('{"1": "a b c", "2": "d e f"}', encoding="utf-8")
    code, _, err = cli(capsys, "score", f, "-m", "rovist-nr", *args)
    assert code == 2 and message in err
    code, _, err = cli(capsys, "meta", "correlate", META / "likert_small.csv", "-m", "bleu-4", "--bootstrap", "-1")
    assert code == 2 and "'--bootstrap' / '--n-bootstrap': must be from 1 to 1,000,000 resamples, got -1" in err


def test_library_refuses_negative_seed_and_absurd_resamples() -> None:
    from vistkit.metrics.base import mean_score
    from vistkit.scores.stats import bootstrap_ci

    s = mean_score("m", ["a", "b"], [0.1, 0.2], "sig")
    with pytest.raises(InputError, match="seed must be 0 or more"):
        bootstrap_ci(s, seed=-1)
    with pytest.raises(InputError, match="from 1 to 1,000,000"):
        bootstrap_ci(s, n_bootstrap=10**8)


@pytest.mark.slow
def test_a_million_resamples_run_in_bounded_memory(tmp_path: Path) -> None:
    """The most resamples allowed: memory must not grow with the count (one call would draw 1.6 GB of indices)."""
    f = tmp_path / "s.jsonl"
    f.write_text(
        "".join(json.dumps({"story_id": str(i), "text": f"a b c d {i} e f"}) + "\n" for i in range(200)),
        encoding="utf-8",
    )
    run = limited_run(
        ["score", str(f), "-r", str(f), "-m", "rovist-nr", "--confidence", "0.95", "--n-bootstrap", "1000000"],
        limit=GiB + GiB // 2,
    )
    assert run.returncode == 0, run.stderr


# ------------------------------------------------------------------------------------------------ rovist-nr
def test_streamed_mean_is_numpy_mean_to_the_bit() -> None:
    from vistkit.metrics.rovist_nr import streamed_mean

    rng = np.random.default_rng(3)
    for n in [*range(1, 300), 1000, 8191, 8192, 8193, 20_000, 100_003]:
        values = (rng.random(n) * 10.0 ** rng.integers(-3, 3, n)).tolist()
        assert streamed_mean(n, iter(values)) == float(np.mean(values)), n
    assert math.isnan(streamed_mean(0, iter([])))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "b", "c", "the", "."]), max_size=12), min_size=2, max_size=30))
def test_rovist_nr_streamed_equals_the_official_list_mean(tokens: list[list[str]]) -> None:
    """The metric's streamed inter mean equals np.mean of the code's full list (built here, as the code does)."""
    from vistkit.metrics import rovist_nr as nr

    for jaccard in (False, True):
        inter, _ = nr.nr_components(tokens, jaccard=jaccard)
        bags = [nr._Sentence(t) for t in tokens]
        empty = sum(1 for t in tokens if not t)
        count = len(tokens) * (len(tokens) - 1) // 2 - empty * (empty - 1) // 2
        assert count == len(inter)
        if inter:
            assert nr.streamed_mean(count, nr._inter_ratios(bags, jaccard=jaccard)) == float(np.mean(inter))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "b", "c", "the", "."]), max_size=12), min_size=2, max_size=80))
def test_rovist_nr_rows_of_arrays_equal_the_official_list_mean(tokens: list[list[str]]) -> None:
    """The vectorised path (per-word postings, a row of ratios per sentence; stories of VECTOR_SENTENCES or more)
    gives np.mean of the code's full list to the bit, as the pair-by-pair path does."""
    from vistkit.metrics import rovist_nr as nr

    for jaccard in (False, True):
        inter, _ = nr.nr_components(tokens, jaccard=jaccard)
        if inter:
            rows = nr._inter_ratio_rows(tokens, jaccard=jaccard)
            assert nr.streamed_mean(len(inter), rows, arrays=True) == float(np.mean(inter))


def test_rovist_nr_of_many_sentences_is_exact_and_fast() -> None:
    """1,500 sentences (1.1 million inter-sentence ratios) give the official list mean to the bit, through the
    metric; 20,000 one-word sentences (200 million ratios, ~150 s pair by pair) run as arrays."""
    import random

    from vistkit.metrics import rovist_nr as nr

    rnd = random.Random(1)
    words = "the a cat dog sat on mat we went to park and had fun".split()
    sentences = [" ".join(rnd.choice(words) for _ in range(rnd.randint(1, 9))) + " ." for _ in range(1500)]
    tokens = nr.sentence_tokens(sentences)
    inter, intra = nr.nr_components(tokens)
    expected = 1.0 - float(np.mean([float(np.mean(inter)), float(np.mean(intra)) if intra else 0.0]))
    assert nr.rovist_nr_story(sentences) == (expected, None)
    value, reason = nr.rovist_nr_story(["go ."] * 20_000)
    assert reason is None and value == 0.5  # every pair has ratio 1, no sentence has an intra pair


def test_rovist_nr_ratio_is_the_code_ratio() -> None:
    """The counted ratio equals the code's ``sum(b.count(x) for x in a) / len(set(a) | set(b))``."""
    from vistkit.metrics.rovist_nr import _pair_count_ratio

    a, b = ["the", "the", "the", "cat"], ["the", "dog", "cat", "cat"]
    assert _pair_count_ratio(a, b) == sum(b.count(x) for x in a) / len(set(a) | set(b)) == 5 / 3


def test_rovist_nr_memory_is_linear_in_the_story() -> None:
    """500 sentences: 124,750 inter-sentence ratios, which the code's list holds (~5 MB traced at 062defd, 12.9 MB
    at 800 sentences); the metric's peak must stay near the size of the story's tokens (0.8 MB at 800 now)."""
    import random
    import tracemalloc

    from vistkit.metrics.rovist_nr import rovist_nr_story

    rnd = random.Random(0)
    words = "the a cat dog sat on mat log ran we went to park beach and had fun it was great day".split()
    sentences = [" ".join(rnd.choice(words) for _ in range(8)).capitalize() + "." for _ in range(500)]
    rovist_nr_story(sentences[:3])  # warm up (Punkt model, caches)
    tracemalloc.start()
    try:
        value, reason = rovist_nr_story(sentences)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert reason is None and 0.0 < value < 1.0
    assert peak < 2 * (1 << 20), peak


# =========================================================================================== 5. fingerprint
def _converted(tmp_path: Path) -> Path:
    torch = pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    from vistkit.models import save_converted

    state = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}
    return save_converted(
        tmp_path / "m", state, kind="state-dict", config={}, source={"file": "x.pt", "sha256": "ab" * 32}
    )


def test_models_info_prints_the_weights_hash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vistkit.models.checkpoints import file_sha256

    folder = _converted(tmp_path)
    code, out, _ = cli(capsys, "models", "info", folder, "-f", "json")
    data = json.loads(out)
    assert code == 0
    assert data["weights_sha256"] == file_sha256(folder / "model.safetensors")
    assert data["fingerprint"] == "ab" * 6  # the source checkpoint's hash: conversion keeps signatures


def test_rewritten_weights_are_refused_on_info_and_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch
    from safetensors.torch import save_file

    from vistkit.models import load_converted, model_fingerprint

    folder = _converted(tmp_path)
    save_file({"w": torch.zeros(2, 3)}, str(folder / "model.safetensors"))  # same shapes, other weights
    code, _, err = cli(capsys, "models", "info", folder)
    line = one_error(err)
    assert code == 1 and "model.safetensors is not the file this folder was converted with" in line
    for fn in (load_converted, model_fingerprint):
        with pytest.raises(InputError, match="weights_sha256"):
            fn(folder)


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda b: b[:5], "shorter than its 8-byte header length"),
        (lambda b: (10**12).to_bytes(8, "little") + b[8:], "the header claims 1,000,000,000,000 bytes"),
        (lambda b: b[8 : 8 + 0] + len(b"[1]").to_bytes(8, "little") + b"[1]", "the header is not a JSON object"),
        (lambda b: b[: len(b) - 8], "tensor 'w' lies outside the file"),
    ],
)
def test_corrupt_safetensors_names_the_file(tmp_path: Path, damage: object, why: str) -> None:
    from vistkit.models import resolve_model

    folder = _converted(tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(damage(weights.read_bytes()))  # type: ignore[operator]
    with pytest.raises(InputError, match=rf"{weights}: not a valid safetensors file \({why}"):
        resolve_model(folder)


def test_damaged_weights_with_a_matching_hash_still_name_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vistkit.models.checkpoints import META_FILE, file_sha256

    folder = _converted(tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4])
    meta = json.loads((folder / META_FILE).read_text())
    meta["weights_sha256"] = file_sha256(weights)
    (folder / META_FILE).write_text(json.dumps(meta))
    code, _, err = cli(capsys, "models", "info", folder)
    assert code == 1 and f"{weights}: not a valid safetensors file" in one_error(err)


def _torch_zip(tmp_path: Path, *, deflate: bool, declared: int | None = None) -> Path:
    torch = pytest.importorskip("torch")
    plain = tmp_path / "plain.pt"
    torch.save({"model": {"w": torch.ones(3)}}, plain)
    out = tmp_path / "ckpt.pt"
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("data.pkl") and deflate:
                dst.writestr(info.filename, data, compress_type=zipfile.ZIP_DEFLATED)
            else:
                dst.writestr(info.filename, data, compress_type=zipfile.ZIP_STORED)
    if declared is not None:  # rewrite the first record's declared size in both headers
        raw = bytearray(out.read_bytes())
        first = zipfile.ZipFile(out).infolist()[0]
        struct.pack_into("<L", raw, first.header_offset + 22, declared)
        cd = raw.find(b"PK\x01\x02")
        struct.pack_into("<L", raw, cd + 24, declared)
        out.write_bytes(bytes(raw))
    return out


def test_trusted_checkpoint_with_a_deflated_record_is_refused_before_inflating(tmp_path: Path) -> None:
    from vistkit.models import load_legacy_checkpoint

    ckpt = _torch_zip(tmp_path, deflate=True)
    with pytest.raises(InputError, match=r"ckpt.pt: record '.*data.pkl' is compressed .* torch.save never compresses"):
        load_legacy_checkpoint(ckpt, trust=True)
    (tmp_path / "ok").mkdir()
    assert set(load_legacy_checkpoint(_torch_zip(tmp_path / "ok", deflate=False), trust=True)) == {"model"}


def test_trusted_checkpoint_record_claiming_16_gib_is_refused(tmp_path: Path) -> None:
    from vistkit.models import load_legacy_checkpoint

    ckpt = _torch_zip(tmp_path, deflate=False, declared=(1 << 32) - 1)
    with pytest.raises(InputError, match=r"ckpt\.pt: record"):
        load_legacy_checkpoint(ckpt, trust=True)


def _legacy_checkpoint(path: Path, numel: int, *, payload: int) -> Path:
    """A legacy (non-zip) ``torch.save`` file whose one float tensor declares ``numel`` elements but carries
    ``payload`` bytes, written pickle by pickle as torch's legacy format lays them out."""
    import pickle

    import torch
    from torch.serialization import MAGIC_NUMBER, PROTOCOL_VERSION

    class Tensor:
        def __reduce__(self) -> tuple[object, ...]:
            return (torch._utils._rebuild_tensor_v2, ("STORAGE", 0, (numel,), (1,), False, {}))

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj: object) -> object:
            return ("storage", torch.FloatStorage, "0", "cpu", numel, None) if obj == "STORAGE" else None

    with path.open("wb") as fh:
        for header in (MAGIC_NUMBER, PROTOCOL_VERSION, {"protocol_version": PROTOCOL_VERSION, "little_endian": True}):
            pickle.dump(header, fh, protocol=2)
        Pickler(fh, protocol=2).dump({"model": {"w": Tensor()}})
        pickle.dump(["0"], fh, protocol=2)
        fh.write(struct.pack("<q", numel) + b"\0" * payload)
    return path


def test_trusted_legacy_checkpoint_declaring_16_gib_is_refused_before_allocating(tmp_path: Path) -> None:
    """A legacy checkpoint's storages are allocated at their declared size before torch reads a byte: a file
    of a few hundred bytes declaring 16 GB is refused first, naming the sizes; an honest one still loads."""
    from vistkit.models import load_legacy_checkpoint

    bomb = _legacy_checkpoint(tmp_path / "bomb.pt", 4_000_000_000, payload=12)
    with pytest.raises(InputError, match=r"bomb\.pt: its tensors declare 16,000,000,000 bytes, more than the file"):
        load_legacy_checkpoint(bomb, trust=True)
    ok = load_legacy_checkpoint(_legacy_checkpoint(tmp_path / "ok.pt", 3, payload=12), trust=True)
    assert ok["model"]["w"].tolist() == [0.0, 0.0, 0.0]


# =========================================================================================== 6. one sentence
@pytest.fixture
def stories(tmp_path: Path) -> Path:
    f = tmp_path / "s.json"
    f.write_text('{"1": "we went to the park. it was fun.", "2": "the dog ran. the cat sat."}', encoding="utf-8")
    return f


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("bertscore.layer=abc", "--option bertscore.layer=abc: layer takes a whole number, not 'abc'"),
        ("meteor-vist.drop_non_ascii=maybe", "drop_non_ascii takes true or false, not 'maybe'"),
        ("rovist-nr.sentences=source=x", None),  # a string option takes any text; the metric checks it
    ],
)
def test_metric_option_types_are_checked(
    stories: Path, capsys: pytest.CaptureFixture[str], option: str, message: str | None
) -> None:
    code, _, err = cli(capsys, "score", stories, "-m", "rovist-nr", "--option", option)
    assert code == 1
    line = one_error(err)
    if message is not None:
        assert message in line


def test_option_values_follow_the_declared_type() -> None:
    from vistkit.commands.score import coerce_option

    assert coerce_option("meteor-vist", "drop_non_ascii", "TRUE") is True
    assert coerce_option("meteor-vist", "drop_non_ascii", "0") is False
    assert coerce_option("bertscore", "layer", "7") == 7
    assert coerce_option("bertscore", "layer", "none") is None
    assert coerce_option("rovist-nr", "sentences", "1") == "1"  # a str option keeps its text
    assert coerce_option("bertscore", "idf", "yes") is True
    assert coerce_option("rovist-c", "cache", "off") is False  # bool | str | Path
    assert coerce_option("rovist-c", "cache", "cache.sqlite") == "cache.sqlite"


def test_ignored_options_and_flags_warn_once_each(stories: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(
        capsys,
        "score",
        stories,
        "-m",
        "rovist-nr",
        "--option",
        "bleu-4.foo=1",
        "--option",
        "nosuch.x=1",
        "--workers",
        "3",
        "--drop-non-ascii",
    )
    assert code == 0
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert warnings == [
        "warning: --option bleu-4.foo is ignored: bleu-4 is not among the metrics run (rovist-nr)",
        "warning: --option nosuch.x is ignored: vistkit has no metric 'nosuch' (see `vistkit metrics`)",
        "warning: --drop-non-ascii is ignored: none of the metrics run (rovist-nr) uses it",
        "warning: --workers is ignored: it applies to --engine ray, and this runs on the local engine",
    ]


def test_symbolic_link_loop_is_reported_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.json").symlink_to(tmp_path / "b.json")
    (tmp_path / "b.json").symlink_to(tmp_path / "a.json")
    (tmp_path / "dangling.json").symlink_to(tmp_path / "gone.json")
    code, _, err = cli(capsys, "score", tmp_path / "a.json", "-m", "rovist-nr")
    assert code == 1 and "a.json: a symbolic link loop" in one_error(err)
    with pytest.raises(InputError, match=r"dangling.json: a symbolic link to '.*gone.json', which does not exist"):
        read_stories(tmp_path / "dangling.json")


def test_template_with_story_keyed_hypotheses_explains_the_keying(
    tmp_path: Path, stories: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tmpl = tmp_path / "template.json"
    tmpl.write_text(
        json.dumps(
            {"output_stories": [{"album_id": "9", "photo_sequence": list("12345"), "story_text_normalized": ""}]}
        ),
        encoding="utf-8",
    )
    code, _, err = cli(capsys, "score", stories, "-r", stories, "-m", "bleu-4", "--template", tmpl)
    line = one_error(err)
    assert code == 1 and "none of the 2 hypotheses is in the template: they are keyed by story (e.g. '1')" in line
    assert "photo sequence (e.g. '1-2-3-4-5')" in line and "no hypotheses" not in line


def test_postgresql_url_without_its_driver_names_the_driver(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    if importlib.util.find_spec("psycopg") or importlib.util.find_spec("psycopg2"):
        pytest.skip("a PostgreSQL driver is installed here")
    code, _, err = cli(capsys, "studio", "status", "postgresql://me:secret@localhost/study")
    line = one_error(err)
    assert code == 1 and "needs the database driver" in line and "pip install" in line
    assert "secret" not in line


def test_photo_url_template_is_checked_at_init() -> None:
    from vistkit.studio.service import check_photo_url, photo_link

    check_photo_url("https://example.org/{id}.jpg")
    for bad, why in (
        ("https://x/{id}/{0}.jpg", "{0} is not a field vistkit fills"),
        ("https://x/{id.x}.jpg", "{id.x} is not a field"),
        ("https://x/{id!r}.jpg", "{id!r} is not a field"),
        ("https://x/{id}{.jpg", "for a literal brace"),
        ("https://x/y.jpg", "must contain {id}"),
    ):
        with pytest.raises(InputError, match=__import__("re").escape(why)):
            check_photo_url(bad)
    assert photo_link("https://x/{{v}}/{id}.jpg", "7") == "https://x/{v}/7.jpg"
    assert photo_link("https://x/{id}/{0}.jpg", "7") == "https://x/7/{0}.jpg"  # an old study's template: no 500


def test_studio_init_refuses_a_bad_photo_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = tmp_path / "s.jsonl"
    s.write_text(
        "".join(
            json.dumps({"story_id": f"k{i}", "text": "a b c", "photo_ids": list("12345")}) + "\n" for i in range(2)
        ),
        encoding="utf-8",
    )
    code, _, err = cli(
        capsys,
        "studio",
        "init",
        tmp_path / "study.db",
        "-s",
        f"a={s}",
        "-s",
        f"b={s}",
        "--task",
        "pairwise",
        "--photo-url",
        "https://x/{id}/{0}.jpg",
    )
    assert code == 1 and "{0} is not a field vistkit fills" in one_error(err)
    assert not (tmp_path / "study.db").exists()


@pytest.mark.slow
@pytest.mark.skipif(not __import__("shutil").which("javac"), reason="needs a JDK (javac)")
def test_damaged_cached_java_helper_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pycocoevalcap")
    from vistkit.models import java

    monkeypatch.setenv("VISTKIT_CACHE", str(tmp_path / "cache"))
    info = java.find_java()
    assert info is not None
    folder = Path(java._helper_classpath(info) or "")
    helper = folder / f"{java.HELPER_CLASS}.class"
    good = helper.read_bytes()
    helper.write_bytes(good[: len(good) // 2])  # a truncated class file: the JVM would refuse to start
    assert not java._classes_intact(folder)
    assert Path(java._helper_classpath(info) or "") == folder
    assert helper.read_bytes() == good and java._classes_intact(folder)


# =========================================================================================== 7. studio privacy
def test_study_file_is_private(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    from tests.studio_helpers import make_study

    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    path = Path(made.path)
    assert path.stat().st_mode & 0o777 == 0o600
    for side in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        if side.exists():
            assert side.stat().st_mode & 0o777 == 0o600, side


def test_existing_study_files_are_tightened_on_open(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    from tests.studio_helpers import make_study
    from vistkit.studio import db

    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    made.study.engine.dispose()
    path = Path(made.path)
    wal = Path(f"{path}-wal")
    wal.touch()
    for p in (path, wal):
        p.chmod(0o644)
    st = db.open_study(path)
    try:
        assert path.stat().st_mode & 0o777 == 0o600
        assert not wal.exists() or wal.stat().st_mode & 0o777 == 0o600
    finally:
        st.engine.dispose()


def test_studio_refuses_a_form_field_given_twice(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from tests.studio_helpers import make_study
    from vistkit.studio.app import create_app

    made = make_study(tmp_path, n_items=1, per_item=1, annotators=1)
    c = TestClient(create_app(made.study))
    tok = made.tokens[0]
    c.get(f"/a/{tok}")
    for body, ctype in (
        ('{"assignment": "1", "assignment": "2", "csrf": "x"}', "application/json"),
        ("assignment=1&assignment=2&csrf=x", "application/x-www-form-urlencoded"),
    ):
        r = c.post(f"/a/{tok}/submit", content=body, headers={"content-type": ctype, "accept": "application/json"})
        assert r.status_code == 400 and r.json() == {"error": "the request body is not a valid form"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gold", "-1"], "--gold must be 0 or more"),
        (["--max-items", "-1"], "--max-items must be at least 1, not -1"),
        (["--claim-timeout", "-5"], "--claim-timeout must be a number of seconds above 0"),
    ],
)
def test_studio_init_refuses_negative_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    pytest.importorskip("sqlalchemy")
    s = tmp_path / "s.jsonl"
    s.write_text("".join(json.dumps({"story_id": f"k{i}", "text": "a b c"}) + "\n" for i in range(3)), encoding="utf-8")
    code, _, err = cli(
        capsys, "studio", "init", tmp_path / "t.db", "-s", f"a={s}", "-s", f"b={s}", "--task", "pairwise", *args
    )
    assert code == 1 and message in one_error(err)
    assert not (tmp_path / "t.db").exists()


def test_studio_demo_and_invite_refuse_no_annotators(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sqlalchemy")
    code, _, err = cli(capsys, "studio", "demo", "--dir", tmp_path / "d", "--no-serve", "--annotators", "-1")
    assert code == 1 and "--annotators must be from 1 to 10,000, not -1" in one_error(err)
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "99999"], "--port must be from 1 to 65535 (got 99999)"),
        (["--port", "-1"], "--port must be from 1 to 65535"),
        (["--host", "999.1.1.1"], "cannot listen on '999.1.1.1': not an address or host name of this machine"),
        (["--host", "192.0.2.1"], "cannot listen on 192.0.2.1:"),  # TEST-NET-1: an address of no machine here
        (["--port", "TAKEN"], "is in use by another program; choose another with --port"),
    ],
)
def test_studio_serve_and_demo_refuse_where_they_cannot_listen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """A bad --host/--port is one sentence before anything is built or served (it was uvicorn's traceback)."""
    import socket

    pytest.importorskip("uvicorn")
    with socket.socket() as taken:  # a port in use on loopback, held for the test
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        args = [str(taken.getsockname()[1]) if a == "TAKEN" else a for a in args]
        code, _, err = cli(capsys, "studio", "demo", "--dir", tmp_path / "d", "--items", "2", *args)
        assert code == 1 and message in one_error(err)
        assert not (tmp_path / "d").exists()
        if message.startswith("--port"):  # links name the port even when nothing is served
            code, _, err = cli(capsys, "studio", "demo", "--dir", tmp_path / "d", "--no-serve", *args)
            assert code == 1 and message in one_error(err)
        code, _, err = cli(
            capsys,
            "studio",
            "init",
            tmp_path / "s.db",
            "--task",
            "likert",
            "-s",
            f"a={META / 'references_small.jsonl'}",
        )
        assert code == 0
        code, _, err = cli(capsys, "studio", "serve", tmp_path / "s.db", *args)
        assert code == 1 and message in one_error(err)


@pytest.mark.parametrize(
    ("device", "message"),
    [
        ("tpu", "device 'tpu' is not one vistkit runs on; use auto, cpu, cuda, cuda:N or mps"),
        ("meta", "device 'meta' is not one vistkit runs on"),
        ("cuda:x", "device 'cuda:x' is not one vistkit runs on"),
    ],
)
def test_a_device_vistkit_does_not_run_on_is_one_sentence(device: str, message: str) -> None:
    pytest.importorskip("torch")
    from vistkit.models.runtime import choose_device

    with pytest.raises(InputError, match=re.escape(message)):
        choose_device(device)
    assert str(choose_device(" CPU ")) == "cpu"


def test_an_error_echoing_a_huge_value_stays_one_short_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A 100,000-character metric name (or one with a line break) echoed back: one line of about 1,000
    characters that keeps the start and the end of the sentence."""
    code, _, err = cli(capsys, "score", META / "references_small.jsonl", "-m", "x" * 100_000)
    line = one_error(err)
    assert code == 1 and len(line) < 1100 and "characters left out" in line and line.endswith("lists them")
    code, _, err = cli(capsys, "score", META / "references_small.jsonl", "-m", "a\nb")
    assert code == 1 and "'a\\nb'" in one_error(err)


@pytest.mark.parametrize("option", ["--references", "--template", "--per-item"])
def test_a_file_name_too_long_is_one_sentence(option: str, capsys: pytest.CaptureFixture[str]) -> None:
    """ENAMETOOLONG (and the other path errors of the operating system) name the path and the reason, never
    the catch-all; the over-long name is cut in the middle."""
    stories = META / "references_small.jsonl"
    extra = ["--references", stories] if option != "--references" else []
    code, _, err = cli(capsys, "score", stories, "-m", "bleu-4", *extra, option, "x" * 100_000)
    line = one_error(err)
    assert code == 1 and line.endswith("the file name is too long; check the path") and len(line) < 1100


def test_options_that_cannot_apply_warn_or_refuse(stories: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--ref-format without --references and --address on the local engine warn (they did nothing, silently);
    a story field for a format with one text per story is refused (it silently read the text instead)."""
    code, _, err = cli(capsys, "score", stories, "-m", "rovist-nr", "--ref-format", "jsonl", "--address", "auto")
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert code == 0 and sorted(warnings) == [
        "warning: --address is ignored: it applies to --engine ray, and this runs on the local engine",
        "warning: --ref-format is ignored: no --references given",
    ]
    code, _, err = cli(capsys, "score", stories, "-m", "rovist-nr", "--hyp-field", "predicted_story")
    assert code == 1 and "the field 'predicted_story' (--hyp-field or FILE:FIELD) applies to storylet files" in (
        one_error(err)
    )


def test_distance_warns_about_options_it_cannot_use(
    tmp_path: Path, stories: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = stories
    code, _, err = cli(
        capsys, "distance", "--human-stories", s, "--model-stories", s, "--dimensions", "R", "--g-metric", "groovist",
        "--images", tmp_path,
    )  # fmt: skip
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert code == 0 and warnings[:2] == [
        "warning: --g-metric is ignored: --dimensions R leaves G out",
        "warning: --images is ignored: it feeds G, which --dimensions R leaves out",
    ]
    assert len(warnings) == 3 and "the human and model stories have the same text for all" in warnings[2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--base-url", ""], "--base-url '' is not an http(s) address to put in front of the links"),
        (["--base-url", "ftp://h"], "--base-url 'ftp://h' is not an http(s) address"),
        (["--base-url", "http://h:99999"], "--base-url 'http://h:99999': its port is not a number from 1 to 65535"),
    ],
)
def test_studio_links_need_an_http_base(
    tmp_path: Path, stories: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """The printed links are shown once (only their hashes are stored): a base that makes them useless is refused
    before the study is written."""
    pytest.importorskip("sqlalchemy")
    code, _, err = cli(capsys, "studio", "init", tmp_path / "s.db", "--task", "likert", "-s", f"a={stories}", *args)
    assert code == 1 and message in one_error(err) and not (tmp_path / "s.db").exists()


def test_studio_hosts_and_study_names_are_checked(
    tmp_path: Path, stories: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("sqlalchemy")
    for host in ("", "../x", "a=b"):
        code, _, err = cli(capsys, "studio", "demo", "--dir", tmp_path / "d", "--no-serve", "--host", host)
        assert code == 1 and "is not a host name or an IP address" in one_error(err)
    code, out, _ = cli(capsys, "studio", "demo", "--dir", tmp_path / "d6", "--no-serve", "--host", "::1")
    assert code == 0 and "http://[::1]:8000/admin/" in out  # an IPv6 address goes in brackets in a URL
    code, _, err = cli(capsys, "studio", "init", "-", "--task", "likert", "-s", f"a={stories}")
    assert code == 1 and "'-' cannot hold a study" in one_error(err)


def test_build_pairs_refuses_a_key_for_no_machine(stories: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["meta", "build-pairs", "-r", stories, "--machine", f"m={stories}", "-o", "-"]
    code, _, err = cli(capsys, *base, "--key", "a=sequence")
    assert code == 1 and "--key a=...: no --machine is named 'a' (machines: m)" in one_error(err)
    code, _, err = cli(capsys, *base, "--key", "m=bogus")
    assert code == 1 and "key 'bogus' is not a keying" in one_error(err)


def test_studio_init_checks_the_reference_system_and_warns_about_aspects(
    tmp_path: Path, stories: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("sqlalchemy")
    base = ["studio", "init", "-s", f"a={stories}", "-s", f"b={stories}", "--task", "rank"]
    code, _, err = cli(capsys, *base[:2], tmp_path / "s.db", *base[2:], "--reference-system", "humans")
    assert code == 1 and "--reference-system 'humans' is none of the study's systems (a, b)" in one_error(err)
    code, _, err = cli(capsys, *base[:2], tmp_path / "t.db", *base[2:], "--aspects", "coherent")
    assert code == 0 and "warning: --aspects is ignored: it applies to --task likert, not rank" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lr", "nan"], "--lr must be a learning rate above 0 and at most 1"),
        (["--mlm-lr", "inf"], "--mlm-lr must be a learning rate above 0 and at most 1"),
        (["--batch-size", "1000000000000"], "--batch-size must be from 1 to 65,536"),
        (["--epochs", "0"], "--epochs must be from 1 to 10,000, not 0"),
        (["--threads", "0"], "--threads must be from 1 to 1,024, not 0"),
        (["--threads", "1000000000000"], "--threads must be from 1 to 1,024"),
    ],
)
def test_vrank_train_options_are_checked_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """nan/inf learning rates passed the old `<= 0` test; --threads 0 or 10^12 reached torch (the catch-all)."""
    code, _, err = cli(
        capsys, "vrank", "train", META / "vhed_small.csv", "-o", tmp_path / "v", "--encoder", tmp_path / "none", *args
    )
    assert code == 1 and message in one_error(err) and not (tmp_path / "v").exists()


def test_bootstrap_options_without_confidence_warn(stories: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`score --n-bootstrap 100000` without --confidence did nothing, silently."""
    code, _, err = cli(capsys, "score", stories, "-m", "rovist-nr", "--n-bootstrap", "50", "--seed", "3")
    assert code == 0 and (
        "warning: --n-bootstrap and --seed are ignored: they apply to the bootstrap of --confidence" in err
    )
    code, out, err = cli(capsys, "score", stories, "-m", "rovist-nr", "--confidence", "0.9", "-f", "json")
    assert code == 0 and "warning" not in err and json.loads(out)


# devices and pipes (no size to check): tests/test_probes_inputs_r4.py refuses every reader's device unread and
# caps what a pipe gives (`test_every_reader_refuses_a_device_before_reading_it`, `test_data_piped_in_...`)
