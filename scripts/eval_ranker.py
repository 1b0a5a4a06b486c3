"""Evaluate the default ranker (or any ranker / metric) against every other vistkit metric.

    python scripts/eval_ranker.py [--metrics story-ranker,coherence,rovist-nr,...] [--vhed VHED.csv -r REFS]
                                  [--per-group N] [--features] [--reserved] [--skip-proxy] [--skip-vwp]
                                  [--json OUT.json]

(a) proxy pairs: every VIST test human story vs the LLaVA, TAPM and PR-VIST story of the same photos (built as
    `vistkit meta build-pairs` does; label "the human story is better" is a PROXY, not a human judgement);
(b) synthetic-error pairs built from the VWP human stories (never used to train the ranker): human vs the same
    story with one error, accuracy by error type (reference-free metrics only: VWP has one story per sequence);
(c) a VHED-layout file, when given (`--vhed`, with `--references` for reference-based metrics);
(d) `--reserved`: VIST test human stories vs the AREL and XE machine stories of the same photos (TAPM's copies).
    EVALUATION ONLY: ../shared/data/RESERVED.md allows these files for evaluation and forbids any training or
    tuning on them (they are the machine side of the held-out edit pairs); run it on a frozen ranker and change
    nothing because of it;
`--features`: each feature of story-ranker v2 alone on the (a), (b) and (d) pairs (what carries the ranker where).

Pair accuracy is Vrank's Eq. 1-2 (a metric tie is wrong). Trivial baselines are always shown beside the metrics:
type-token ratio, word count and mean sentence length (the longer story preferred). `--per-group N` samples N
pairs per system / error kind (seeded) for the LM metrics, which are slow on a CPU.
These are development signals: the ranker's acceptance numbers come from held-out human judgements.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from vistkit.data.readers import read_stories  # noqa: E402
from vistkit.meta.human import StoryPair, build_reference_pairs, read_pairs  # noqa: E402
from vistkit.meta.pairs import pair_correct  # noqa: E402
from vistkit.meta.perturb import PERTURBATIONS, perturb  # noqa: E402
from vistkit.meta.scoring import PairScores, score_pairs  # noqa: E402
from vistkit.metrics.base import get_metric, get_metric_class  # noqa: E402
from vistkit.models.story_ranker import sentences_of  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
REFS = SHARED / "pr-vist" / "PR_VIST.json.zip"
REFERENCE_FREE = (
    "story-ranker,story-ranker-v1,lm-perplexity,lm-fluency,lm-coherence,coherence,rovist-nr,rovist-nr-jaccard"
)
DEFAULT_METRICS = REFERENCE_FREE + ",bleu-4,rouge-l,cider-d,sacrebleu,meteor-vist"


#: (a): (system, file, field, key) of the machine stories compared with VIST test human stories
PROXY_MACHINES = (
    ("llava", SHARED / "dhm-visual-storytelling/data/stories/vist/llava_vc_p3.json", None, "story"),
    ("tapm", SHARED / "tapm-vist-outputs/vist/ours.json", None, "sequence"),
    ("pr-vist", REFS, "predicted_story", "story"),
)
#: (d): the reserved AREL / XE stories (TAPM's copies), for evaluation only (RESERVED.md: never to tune)
RESERVED_MACHINES = tuple(
    (name.lower(), SHARED / f"tapm-vist-outputs/vist/{name}.json", None, "sequence") for name in ("AREL", "XE")
)


def human_vs_machine_pairs(machines: tuple[tuple[str, Path, str | None, str], ...]) -> list[StoryPair]:
    """The VIST test human story against each machine story of the same photos (label: the human one is better)."""
    refs = read_stories(REFS, system="human")
    pairs: list[StoryPair] = []
    for name, path, field, key in machines:
        m = read_stories(path, field=field, system=name)
        pairs += build_reference_pairs(refs, [m], key=key)
    return pairs


def proxy_pairs() -> list[StoryPair]:
    return human_vs_machine_pairs(PROXY_MACHINES)


def reserved_pairs() -> list[StoryPair]:
    """(d): human vs AREL / XE stories of the same photos, for evaluation only (RESERVED.md: never to tune)."""
    return human_vs_machine_pairs(RESERVED_MACHINES)


def vwp_pairs(seed: int = 1) -> list[StoryPair]:
    vwp = json.loads((SHARED / "dhm-visual-storytelling/data/stories/vwp/gt_test.json").read_text())
    split = {k: [" ".join(s) for s in sentences_of(vwp[k])] for k in sorted(vwp)}
    pool = [s for ss in split.values() for s in ss]
    rng = random.Random(seed)
    pairs = []
    for kind in PERTURBATIONS:
        for sid, ss in split.items():
            if len(ss) < 3:
                continue
            worse = perturb(ss, kind, rng=rng, pool=pool)
            if worse != ss:
                pairs.append(StoryPair(f"{sid}:{kind}", f"{sid}:{kind}", (), " ".join(ss), " ".join(worse),
                                       "human", kind, 1.0))
    return pairs


def _words(text: str) -> list[list[str]]:
    return [[w for w in s if w not in ".,!?;:"] for s in sentences_of(text)]


def _ttr(text: str) -> float:
    words = [w for s in _words(text) for w in s]
    return len(set(words)) / len(words) if words else float("nan")


def _word_count(text: str) -> float:
    return float(sum(len(s) for s in _words(text)))


def _mean_sentence_words(text: str) -> float:
    lengths = [len(s) for s in _words(text)]
    return float(np.mean(lengths)) if lengths else float("nan")


#: trivial baselines shown beside every learned number (higher value = preferred)
BASELINES = {"ttr": _ttr, "word-count": _word_count, "mean-sentence-words": _mean_sentence_words}


def baseline_scores(name: str, pairs: list[StoryPair]) -> PairScores:
    f = BASELINES[name]
    a = np.array([f(p.text_1) for p in pairs])
    b = np.array([f(p.text_2) for p in pairs])
    return PairScores(name, f"{name}|baseline", True, a, b, {})


def ttr_scores(pairs: list[StoryPair]) -> PairScores:
    return baseline_scores("ttr", pairs)


def sample_per_group(pairs: list[StoryPair], group, n: int | None, seed: int = 0) -> list[StoryPair]:
    """At most ``n`` pairs of each group (seeded), for metrics too slow for every pair (the LM ones)."""
    if not n:
        return pairs
    by: dict[str, list[StoryPair]] = {}
    for p in pairs:
        by.setdefault(group(p), []).append(p)
    rng = random.Random(seed)
    out: list[StoryPair] = []
    for g in sorted(by):
        ps = list(by[g])
        rng.shuffle(ps)
        out += ps[:n]
    return out


def accuracy(scores: PairScores, pairs: list[StoryPair], group) -> dict[str, tuple[float, int]]:
    correct = pair_correct(scores, pairs)
    out: dict[str, list[float]] = {}
    for p, c in zip(pairs, correct, strict=True):
        if not np.isnan(c):
            out.setdefault(group(p), []).append(c)
            out.setdefault("all", []).append(c)
    return {k: (float(np.mean(v)), len(v)) for k, v in out.items()}


OPTIONS: dict[str, dict] = {}


def evaluate(name: str, pairs: list[StoryPair], metrics: list[str], group, refs=None) -> dict[str, dict]:
    result = {name: accuracy(baseline_scores(name, pairs), pairs, group) for name in BASELINES}
    for m in metrics:
        t = time.time()
        try:
            metric = get_metric(m, **OPTIONS.get(m, {}))
            if metric.needs_references and refs is None:
                continue
            scores = score_pairs(metric, pairs, references=refs)
        except Exception as exc:  # a metric that cannot run here is reported, not fatal
            print(f"  {name}: {m} skipped ({exc})", file=sys.stderr)
            continue
        result[m] = accuracy(scores, pairs, group)
        print(f"  {name}: {m} done in {time.time() - t:.0f} s", file=sys.stderr)
    return result


#: |difference| of two contributions counted as a tie (float32 LM rounding is ~1e-6 of a feature's SD)
FEATURE_TIE = 1e-4


def feature_accuracy(pairs: list[StoryPair], group, contributions) -> dict[str, dict]:
    """Pair accuracy of each feature of story-ranker v2 alone (its contribution w_k s_k z_k, so its sign is
    applied; a tie is wrong) and of their sum u, by group, with the share of ties under the group ``ties``.
    ``contributions``: texts -> list of {feature: contribution} (`StoryRanker.explain`). A difference within
    `FEATURE_TIE` is a tie: features that cannot see a change (fluency and relatedness do not depend on sentence
    order) differ between the two stories only by float32 rounding of different LM batches."""
    texts = list(dict.fromkeys(t for p in pairs for t in (p.text_1, p.text_2)))
    table = dict(zip(texts, contributions(texts), strict=True))
    names = list(next(iter(table.values()))) if table else []
    out: dict[str, dict] = {}
    for name in [*names, "u"]:
        def value(text: str, name: str = name) -> float:
            row = table[text]
            return float(sum(row.values())) if name == "u" else float(row[name])

        diff = np.array([value(p.text_1) - value(p.text_2) for p in pairs])
        diff[np.abs(diff) <= FEATURE_TIE] = 0.0
        by: dict[str, list[float]] = {}
        for p, d in zip(pairs, diff, strict=True):
            by.setdefault(group(p), []).append(float(d > 0))
        result = {g: (float(np.mean(v)), len(v)) for g, v in by.items()}
        result["all"] = (float(np.mean(diff > 0)), len(pairs))
        result["ties"] = (float(np.mean(diff == 0)), len(pairs))
        out[f"{name} alone" if name != "u" else "u (the ranker)"] = result
    return out


def print_table(title: str, result: dict[str, dict]) -> None:
    groups = sorted({g for r in result.values() for g in r}, key=lambda g: ({"all": 1, "ties": 2}.get(g, 0), g))
    print(f"\n### {title}\n")
    print("| metric | " + " | ".join(groups) + " |")
    print("|---" * (len(groups) + 1) + "|")
    for m, r in result.items():
        cells = [f"{r[g][0]:.4f}" if g in r else "" for g in groups]
        print(f"| {m} | " + " | ".join(cells) + " |")
    n = {g: max(r[g][1] for r in result.values() if g in r) for g in groups}
    print("| n | " + " | ".join(str(n[g]) for g in groups) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics", default=DEFAULT_METRICS)
    ap.add_argument("--vhed", type=Path, help="a VHED-layout pairs CSV (c)")
    ap.add_argument("--references", "-r", type=Path, help="human references for (c)")
    ap.add_argument("--skip-proxy", action="store_true")
    ap.add_argument("--skip-vwp", action="store_true")
    ap.add_argument("--reserved", action="store_true", help="(d) AREL / XE vs human: evaluation only, never tuning")
    ap.add_argument("--json", type=Path, help="write every number here")
    ap.add_argument("--ranker-model", type=Path, help="a story-ranker model folder (default: the packaged one)")
    ap.add_argument("--per-group", type=int, default=None, help="at most N pairs per system / error kind")
    ap.add_argument(
        "--features", action="store_true", help="each feature of story-ranker v2 alone on the (a), (b), (d) pairs"
    )
    args = ap.parse_args()
    if args.ranker_model:
        OPTIONS["story-ranker"] = {"model": args.ranker_model}
    metrics = [m for m in args.metrics.split(",") if m]
    out = {}
    refs = read_stories(REFS, system="human")  # the references of reference-based metrics in (a) and (d)
    proxy: list[StoryPair] = []
    if not args.skip_proxy:
        proxy = sample_per_group(proxy_pairs(), lambda p: p.system_2, args.per_group)
        out["proxy"] = evaluate("proxy", proxy, metrics, lambda p: p.system_2, refs)
        print_table("(a) proxy pairs: human story vs machine story (PROXY label: human is better)", out["proxy"])
    free = [m for m in metrics if not get_metric_class(m).needs_references]
    vwp: list[StoryPair] = []
    if not args.skip_vwp:
        vwp = sample_per_group(vwp_pairs(), lambda p: p.system_2, args.per_group)
        out["vwp"] = evaluate("vwp", vwp, free, lambda p: p.system_2)
        print_table("(b) VWP synthetic errors: human vs one error (accuracy by error type)", out["vwp"])
    reserved: list[StoryPair] = []
    if args.reserved:
        reserved = sample_per_group(reserved_pairs(), lambda p: p.system_2, args.per_group)
        out["reserved"] = evaluate("reserved", reserved, metrics, lambda p: p.system_2, refs)
        print_table("(d) reserved machine stories (AREL, XE) vs human, EVALUATION ONLY", out["reserved"])
    if args.features:
        from vistkit.metrics.story_ranker import StoryRanker

        ranker = StoryRanker(**OPTIONS.get("story-ranker", {}))
        for name, sample in (("proxy", proxy), ("vwp", vwp), ("reserved", reserved)):
            if not sample:
                continue
            out[f"features-{name}"] = feature_accuracy(sample, lambda p: p.system_2, ranker.explain)
            print_table(f"each feature of story-ranker alone, {name} pairs (last column: share of ties)",
                        out[f"features-{name}"])
    if args.vhed:
        pairs = read_pairs(args.vhed)
        refs = read_stories(args.references, system="human") if args.references else None
        out["vhed"] = evaluate("vhed", pairs, metrics, lambda p: p.kind, refs)
        print_table(f"(c) {args.vhed.name}", out["vhed"])
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
