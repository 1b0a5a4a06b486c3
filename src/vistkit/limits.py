"""The limits that keep vistkit's memory and time bounded on any input (``vistkit formats`` lists them).

Each limit has a default sized for real data with a wide margin (the whole VIST SIS train file is ~170 MB, a
VIST story ~300 characters) and, where a real use could need more, an environment variable that overrides it.
"""

from __future__ import annotations

import os

from vistkit.errors import InputError

MiB = 1 << 20

# bytes a story or table file may hold once decompressed (plain, .gz or a .zip member); read while streaming,
# so an archive whose header lies is stopped at the limit too
INPUT_BYTES_ENV = "VISTKIT_MAX_INPUT_MB"
INPUT_BYTES_DEFAULT = 256 * MiB
# characters in one story's text (a 200 MB "story" would make every metric's regexes and pair loops crawl); the
# longest story in the VIST, VWP, dHM, AREL, TAPM and PR-VIST files is 2,212 characters
STORY_CHARS_ENV = "VISTKIT_MAX_STORY_CHARS"
STORY_CHARS_DEFAULT = 100_000
# stories one file may hold (each costs a few hundred bytes of memory before its text; the VIST SIS train file
# holds 40,155, with 200,775 storylets)
STORIES_ENV = "VISTKIT_MAX_STORIES"
STORIES_DEFAULT = 2_000_000
# values (objects, lists, strings, numbers) one JSON file may hold: a JSON file is parsed whole, and a value costs
# 50-250 bytes of memory, so 256 MiB of "[[],[],..." would need 6 GiB; counted before parsing. A 250 MB file of
# VIST SIS storylets holds about 7 million
JSON_VALUES_ENV = "VISTKIT_MAX_JSON_VALUES"
JSON_VALUES_DEFAULT = 12_000_000
# characters one line of a JSONL or CSV file may hold (each line is read whole; a story of `STORY_CHARS_DEFAULT`
# characters escaped as \uXXXX with its sentences takes about 1.2 million): at least 8 Mi, 16 per story character
LINE_CHARS_FLOOR = 8 * MiB
# blank lines in a row a JSONL or CSV file may hold (skipped one by one: 256 MiB of them took 76 s to refuse)
BLANK_LINES_MAX = 100_000
# bootstrap resamples (memory does not grow with the number: they are drawn in chunks; time does)
MAX_BOOTSTRAP = 1_000_000
# a checkpoint's zip records (torch.save's format) are read only when stored, never deflated, and each must fit
# the archive's own size; a safetensors header may be at most this large (as the safetensors library's limit)
SAFETENSORS_HEADER_MAX = 100_000_000
#: a model folder's config.json may declare at most this many times the weights its safetensors files hold, once
#: it declares more than `DECLARED_FLOOR_VALUES` (`vistkit.models.checkpoints.check_declared_size`)
DECLARED_RATIO = 16
DECLARED_FLOOR_VALUES = 1 << 28  # 1 GiB of float32
#: METEOR: words (whitespace-separated) of a hypothesis or reference sent to the jar (`vistkit.metrics.meteor`)
METEOR_MAX_WORDS = 1_000
#: pairs of equal words (one in the story, one in a reference) past which an item is not sent to Meteor: each is a
#: match its aligner must place (a story looping on one word against a reference that does: 1,000 x 1,000, six
#: minutes; two natural 1,000-word texts hold ~10^4)
METEOR_MAX_WORD_PAIRS = 250_000
# bytes each in-memory embedding cache keeps (`vistkit.models.runtime.ArrayCache`: CLIP's text, photo and region
# embeddings, the MiniLM sentence encoder's), least recently used out first; unbounded, CLIP regions of 10^6 photos
# took ~70 GB
CACHE_ENV = "VISTKIT_CACHE_MB"
CACHE_BYTES_DEFAULT = 512 * MiB
#: story-ranker-v1: sentences of a story it scores (it compares every pair; `vistkit.models.story_ranker`)
RANKER_V1_MAX_SENTENCES = 200
#: story pairs one meta command may build (`vistkit.meta.human.pairs_from_rankings`: C(N, 2) per task of N stories;
#: `build_reference_pairs`: every machine story with every reference of its key), counted before building: one
#: task of 20,000 stories (a 400 KB rankings file) made 200 million pairs (hours, ~100 GB); VHED's tasks hold 5
PAIRS_ENV = "VISTKIT_MAX_PAIRS"
PAIRS_DEFAULT = 1_000_000
# the same two limits bound the human-judgement tables of `vistkit meta`, counted row by row while reading, before
# the file is held: a pairs CSV may hold `max_pairs` rows (one pair each, ~450 bytes of memory with short texts; read
# as dicts, 1.5 million short pairs took 1.5 GB, and 256 MiB of them would have needed 14 GB), a rankings, Likert or
# error-label table `max_stories` rows (one worker's judgement of one story each; a rankings row costs ~400 bytes, so
# the limit is ~800 MB; unbounded, 2 million rows took 1.6 GB and 256 MiB would have needed 10 GB). Real data is
# far below either: VHED holds 13,875 pairs from 4,500 ranking tasks of 2-5 stories and 5 workers (about 80,000
# rankings rows), and large human studies about 100,000 judgements
#: gap buckets `--gap-edges` may give (`vistkit.meta.pairs.parse_edges`): no gap table or figure of more is readable,
#: and the report's figure and tables took 113 s and 1.2 GB for 10,000 buckets
MAX_GAP_BUCKETS = 100
#: sentences of a story the prefix-context coherence metrics score (coherence, dhm-c: each sentence is read with
#: all the ones before it, so the work grows with the square): coherence took 50 s on 4,000 sentences, and a
#: 100,000-character story holds 33,000 ("A. B. A. ..."); dhm-c's ALBERT reads at most 512 tokens, far fewer
CONTEXT_SENTENCES_ENV = "VISTKIT_MAX_CONTEXT_SENTENCES"
CONTEXT_SENTENCES_DEFAULT = 1_000
#: words (PTB tokens) of the stories the coco metrics score in one run, each story counted with its references
#: (bleu-1..4 and cider-d keep ~250 bytes a word in their n-gram table, rouge-l's time grows with them): 300 stories
#: of 100,000 characters scored against themselves took 1.7 GB, one key with 5,000 references of 800 words (a 39 MB
#: file) 2.4 GB, and a 256 MiB reference file would need ~15 GB; scoring VIST's train split (40,155 stories of ~55
#: words) against its references holds about 4.5 million
NGRAM_WORDS_ENV = "VISTKIT_MAX_NGRAM_WORDS"
NGRAM_WORDS_DEFAULT = 10_000_000


#: a limit given larger than this (after its unit) is taken as this: no practical limit, and still a number every
#: reader can pass on (``VISTKIT_MAX_STORY_CHARS=99999999999999999999999`` made a line limit of 16 times that, which
#: `readline` refused with "OverflowError: Python int too large to convert to C ssize_t")
NO_PRACTICAL_LIMIT = 1 << 48


def _env_int(name: str, default: int, *, scale: int = 1) -> int:
    """``$name`` as a positive whole number times ``scale`` (``default`` when unset or blank), at most
    `NO_PRACTICAL_LIMIT`; anything else is one sentence."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        example = f"{name}={default // scale}"
        raise InputError(f"{name}={raw!r} is not a whole number; unset it or give e.g. {example}") from None
    if value <= 0:
        raise InputError(f"{name}={raw!r} must be a positive whole number")
    return min(value * scale, NO_PRACTICAL_LIMIT)


def env_number(name: str, default: float, *, low: float, high: float, integer: bool = False) -> float:
    """``$name`` as a number from ``low`` to ``high`` (a whole number with ``integer``), ``default`` when unset or
    blank; anything else is one sentence (a typo such as ``VISTKIT_METEOR_THREADS=100000`` started 100,000 Java
    threads and failed after 81 s with an unrelated message)."""
    import math

    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    kind = "a whole number" if integer else "a number"
    shown = f"{default:g}" if not integer else str(int(default))
    try:
        value = int(raw.strip()) if integer else float(raw.strip())
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and low <= value <= high):
        raise InputError(
            f"{name}={raw!r} must be {kind} from {low:g} to {high:g}; unset it or give e.g. {name}={shown}"
        )
    return value


def max_input_bytes() -> int:
    """Most bytes one input file may hold decompressed (`VISTKIT_MAX_INPUT_MB`, in MiB; default 256)."""
    return _env_int(INPUT_BYTES_ENV, INPUT_BYTES_DEFAULT, scale=MiB)


def max_story_chars() -> int:
    """Most characters one story's text may hold (`VISTKIT_MAX_STORY_CHARS`; default 100,000)."""
    return _env_int(STORY_CHARS_ENV, STORY_CHARS_DEFAULT)


def max_stories() -> int:
    """Most stories one input file may hold (`VISTKIT_MAX_STORIES`; default 2,000,000)."""
    return _env_int(STORIES_ENV, STORIES_DEFAULT)


def max_json_values() -> int:
    """Most values one JSON file may hold (`VISTKIT_MAX_JSON_VALUES`; default 12,000,000)."""
    return _env_int(JSON_VALUES_ENV, JSON_VALUES_DEFAULT)


def max_line_chars() -> int:
    """Most characters one line of a JSONL or CSV file may hold: 16 per story character (`max_story_chars`), at
    least 8 Mi."""
    return max(LINE_CHARS_FLOOR, 16 * max_story_chars())


def max_pairs() -> int:
    """Most story pairs one meta command may build (`VISTKIT_MAX_PAIRS`; default 1,000,000)."""
    return _env_int(PAIRS_ENV, PAIRS_DEFAULT)


def too_many_pairs(count: int, what: str) -> InputError | None:
    """The one error for ``count`` story pairs over `max_pairs` (``what``: where they come from), else None."""
    limit = max_pairs()
    if count <= limit:
        return None
    return InputError(
        f"{what} make {count:,} story pairs, more than vistkit's limit of {limit:,} (the pairs grow with the square "
        f"of the stories per task or key); if that is intended, raise the limit with {PAIRS_ENV}=<n>"
    )


def too_many_rows(where: object, limit: int, *, what: str, kind: str, env: str) -> InputError:
    """The one error for a human-judgement table with more than ``limit`` rows (``what``: what a row is, e.g.
    ``pairs``; ``kind``: the limit's name, e.g. ``story pairs``; ``env``: the variable that raises it)."""
    return InputError(
        f"{where} holds more than {limit:,} {what}, over vistkit's limit of {kind} (each is held in memory); split "
        f"the file, or raise the limit with {env}=<n>"
    )


def max_context_sentences() -> int:
    """Most sentences of a story the prefix-context coherence metrics score (`VISTKIT_MAX_CONTEXT_SENTENCES`;
    default 1,000)."""
    return _env_int(CONTEXT_SENTENCES_ENV, CONTEXT_SENTENCES_DEFAULT)


def too_many_context_sentences(n_sentences: int) -> str | None:
    """The exclusion reason of a story of ``n_sentences`` over `max_context_sentences`, else None."""
    limit = max_context_sentences()
    if n_sentences <= limit:
        return None
    return (
        f"{n_sentences:,} sentences, over the limit of {limit:,} for a metric that reads each sentence with all the "
        f"ones before it (raise it with {CONTEXT_SENTENCES_ENV}=<n>)"
    )


def max_ngram_words() -> int:
    """Most words (hypotheses with their references) the coco metrics score in one run (`VISTKIT_MAX_NGRAM_WORDS`;
    default 10,000,000)."""
    return _env_int(NGRAM_WORDS_ENV, NGRAM_WORDS_DEFAULT)


def too_many_ngram_words(count: int) -> InputError | None:
    """The one error for ``count`` words over `max_ngram_words`, else None."""
    limit = max_ngram_words()
    if count <= limit:
        return None
    return InputError(
        f"the stories to score hold {count:,} words with their references, over vistkit's limit of {limit:,} for "
        f"bleu, rouge-l and cider-d (their n-gram tables take about 250 bytes a word); score fewer stories or "
        f"references at a time, or raise the limit with {NGRAM_WORDS_ENV}=<n>"
    )


def cache_bytes() -> int:
    """Bytes each in-memory embedding cache keeps: `VISTKIT_CACHE_MB` MiB (a fraction is fine; 0 keeps nothing),
    default 512."""
    raw = os.environ.get(CACHE_ENV, "").strip()
    if not raw:
        return CACHE_BYTES_DEFAULT
    try:
        mib = float(raw)
    except ValueError:
        mib = float("nan")
    if not 0 <= mib < 2**40:  # NaN fails too
        raise InputError(f"{CACHE_ENV}={raw[:40]!r} must be a number of MiB, 0 or more; unset it or give e.g. 512")
    return int(mib * MiB)


def input_too_large(where: object, limit: int) -> InputError:
    """The one error for an input over `max_input_bytes` (``where``: the file, or ARCHIVE.zip:MEMBER)."""
    return InputError(
        f"{where} holds more than {limit // MiB} MiB once decompressed, over vistkit's input limit; if the file "
        f"is genuine, raise the limit with {INPUT_BYTES_ENV}=<MiB>"
    )


LIMIT_ROWS = [
    [
        "input size",
        f"{INPUT_BYTES_DEFAULT // MiB} MiB per file once decompressed (.gz, zip members: counted while "
        "streaming, headers are not trusted)",
        f"{INPUT_BYTES_ENV}=<MiB>",
    ],
    ["story length", f"{STORY_CHARS_DEFAULT:,} characters of text per story", f"{STORY_CHARS_ENV}=<characters>"],
    [
        "stories per file",
        f"{STORIES_DEFAULT:,} stories in one input file, and rows in one meta rankings, Likert or error-label table "
        "(one judgement of a story each); counted while reading",
        f"{STORIES_ENV}=<n>",
    ],
    [
        "JSON values",
        f"{JSON_VALUES_DEFAULT:,} values (objects, lists, strings, numbers) in one JSON file, counted before it is "
        "parsed (a JSON file is read whole; each value costs memory)",
        f"{JSON_VALUES_ENV}=<n>",
    ],
    [
        "bootstrap resamples",
        f"--n-bootstrap, --bootstrap, --n-samples: 1 to {MAX_BOOTSTRAP:,}; drawn in blocks of at most 2 million "
        "indices (16 MiB), so memory does not grow with the count; --seed 0 or more",
        "-",
    ],
    [
        "checkpoints",
        "torch zip records must be stored (not deflated) and fit in the file; safetensors headers at most "
        f"{SAFETENSORS_HEADER_MAX // 1_000_000} MB with every tensor inside the file; a model's config.json may not "
        f"declare {DECLARED_RATIO} times the weights its files hold (above 2^28); checked before reading",
        "-",
    ],
    ["CSV cell", "as long as a line (the 'JSONL and CSV lines' row)", f"{STORY_CHARS_ENV}=<characters>"],
    [
        "JSONL and CSV lines",
        f"{LINE_CHARS_FLOOR // MiB} Mi characters per line (or 16 per story character, if more); at most "
        f"{BLANK_LINES_MAX:,} blank lines in a row",
        f"{STORY_CHARS_ENV}=<characters>",
    ],
    [
        "input kinds",
        "a regular file, or data piped in (-, /dev/stdin, /dev/fd/N); a FIFO, a device (/dev/zero), a socket or a "
        "folder given as a file is refused before it is read",
        "-",
    ],
    [
        "METEOR text length",
        f"meteor-vist/-album/-coco: a story or reference of more than {METEOR_MAX_WORDS:,} words is excluded "
        "with the reason (the jar's aligner takes minutes on 4,000 words and runs out of memory on 8,000); so is "
        f"an item whose story and one reference hold more than {METEOR_MAX_WORD_PAIRS:,} pairs of equal words (a "
        "looping story against a looping reference)",
        "-",
    ],
    [
        "story-ranker-v1 sentences",
        f"a story of more than {RANKER_V1_MAX_SENTENCES} sentences is excluded with the reason (it compares every "
        "pair of sentences)",
        "-",
    ],
    [
        "story pairs",
        f"meta rankings-to-pairs / build-pairs and a rank study's results: {PAIRS_DEFAULT:,} pairs (C(N, 2) per "
        "ranking task of N stories; each machine story with each reference of its key), counted before building; "
        "the rows of a pairs CSV that meta or vrank reads, counted while reading",
        f"{PAIRS_ENV}=<n>",
    ],
    [
        "coherence / dhm-c sentences",
        f"a story of more than {CONTEXT_SENTENCES_DEFAULT:,} sentences is excluded with the reason (each sentence is "
        "read with all the ones before it)",
        f"{CONTEXT_SENTENCES_ENV}=<n>",
    ],
    [
        "coco n-gram words",
        f"bleu-1..4, rouge-l, cider-d: {NGRAM_WORDS_DEFAULT:,} words (PTB tokens) per run, each story counted with "
        "its references (the n-gram table takes about 250 bytes a word); counted before the table is built",
        f"{NGRAM_WORDS_ENV}=<n>",
    ],
    [
        "gap buckets",
        f"meta pairs / gap --gap-edges: at most {MAX_GAP_BUCKETS} buckets ({MAX_GAP_BUCKETS + 1} edges; a gap table "
        "or figure of more is not readable)",
        "-",
    ],
    ["word vectors", "GloVe / word2vec text: 16 GiB per file, 1 MiB per line (streamed)", "-"],
    [
        "in-memory caches",
        f"{CACHE_BYTES_DEFAULT // MiB} MiB each (CLIP text/photo/region embeddings, the MiniLM sentence encoder's: "
        "least recently used out first; the coco metrics' PTB tokens: emptied when full); values do not depend on it",
        f"{CACHE_ENV}=<MiB>",
    ],
]
