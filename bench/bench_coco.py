"""Benchmark: the coco family (BLEU-1..4, METEOR, ROUGE-L, CIDEr-D) against pycocoevalcap 1.2, end to end.

Both sides score the five TAPM-released VIST test systems (TAPM ``ours``, ``joint_ss``, ``no_ss``, AREL, XE)
against the VIST test human stories (PR-VIST's copy of the test SIS), keyed by photo sequence:

- pycocoevalcap: per system, ``PTBTokenizer`` on the references and on the hypotheses (two jar calls), then
  ``Bleu(4)``, ``Meteor()``, ``Rouge()`` and ``Cider()``, exactly as ``COCOEvalCap.evaluate`` does;
- vistkit: `vistkit.metrics.coco.coco_family` on all five systems at once (one tokeniser call for every text),
  plus ``meteor-coco`` when it is registered.

The script asserts equal numbers (corpus and per item, 1e-9) and prints both times and the ratio.

    .venv/bin/python bench/bench_coco.py             # benchmark (sequence keying)
    .venv/bin/python bench/bench_coco.py --golden    # print pycocoevalcap's full-set numbers (test constants)
    .venv/bin/python bench/bench_coco.py --golden-items  # moments of its per-item scores (test constants)

Album keying (``--golden`` prints it too): one hypothesis per album, the first story of that album in file
order (AREL's album-level evaluation scores one story per album), against all human stories of the album.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("VISTKIT_SHARED", REPO.parent / "shared")).resolve() / "data"
REFERENCES = DATA / "pr-vist" / "PR_VIST.json.zip"
SYSTEMS = {
    "ours": DATA / "tapm-vist-outputs" / "vist" / "ours.json",
    "joint_ss": DATA / "tapm-vist-outputs" / "vist" / "joint_ss.json",
    "no_ss": DATA / "tapm-vist-outputs" / "vist" / "no_ss.json",
    "AREL": DATA / "tapm-vist-outputs" / "vist" / "AREL.json",
    "XE": DATA / "tapm-vist-outputs" / "vist" / "XE.json",
}
COCO_NAMES = {
    "Bleu_1": "bleu-1",
    "Bleu_2": "bleu-2",
    "Bleu_3": "bleu-3",
    "Bleu_4": "bleu-4",
    "METEOR": "meteor-coco",
    "ROUGE_L": "rouge-l",
    "CIDEr": "cider-d",
}


def first_per_album(stories: Any) -> Any:
    """One story per album: the first one in file order (album-keyed evaluation)."""
    from vistkit.data.story import StorySet

    seen: set[str] = set()
    keep = []
    for s in stories:
        if s.album_id not in seen:
            seen.add(s.album_id)
            keep.append(s)
    return StorySet(keep, source=stories.source)


def load(keying: str) -> tuple[Any, dict[str, Any]]:
    """References and the five systems (album keying: one hypothesis per album)."""
    from vistkit.data.readers import read_stories

    refs = read_stories(REFERENCES)
    systems = {name: read_stories(path, system=name) for name, path in SYSTEMS.items()}
    if keying == "album":
        systems = {name: first_per_album(s) for name, s in systems.items()}
    return refs, systems


def reference_inputs(hyps: Any, refs: Any, keying: str) -> tuple[dict[str, list], dict[str, list]]:
    """pycocoevalcap's ``gts``/``res`` dicts, in the item order vistkit uses (hypothesis file order)."""
    from vistkit.metrics.base import align

    alignment = align(hyps, refs, keying=keying)
    gts = {it.item_id: [{"caption": r.text} for r in it.references] for it in alignment.items}
    res = {it.item_id: [{"caption": it.hypothesis.text}] for it in alignment.items}
    return gts, res


def run_pycocoevalcap(
    hyps: Any, refs: Any, keying: str, *, meteor: bool = True, timings: dict[str, float] | None = None
) -> dict[str, tuple[float, np.ndarray, list[str]]]:
    """What ``COCOEvalCap.evaluate`` computes: {method: (corpus, per-item scores, item ids)}."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.meteor.meteor import Meteor
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    timings = {} if timings is None else timings
    gts, res = reference_inputs(hyps, refs, keying)
    t0 = time.perf_counter()
    tokenizer = PTBTokenizer()
    gts = tokenizer.tokenize(gts)
    res = tokenizer.tokenize(res)
    timings["tokenise"] = timings.get("tokenise", 0.0) + time.perf_counter() - t0
    ids = list(gts)
    out: dict[str, tuple[float, np.ndarray, list[str]]] = {}
    scorers: list[tuple[Any, Any]] = [(Bleu(4), ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4"])]
    if meteor:
        scorers.append((Meteor(), "METEOR"))
    scorers += [(Rouge(), "ROUGE_L"), (Cider(), "CIDEr")]
    for scorer, method in scorers:
        t0 = time.perf_counter()
        if isinstance(scorer, Bleu):
            score, scores = scorer.compute_score(gts, res, verbose=0)  # verbose only prints
        else:
            score, scores = scorer.compute_score(gts, res)
        if isinstance(method, list):
            for sc, scs, m in zip(score, scores, method, strict=True):
                out[m] = (float(sc), np.asarray(scs, dtype=float), ids)
        else:
            out[method] = (float(score), np.asarray(scores, dtype=float), ids)
        label = scorer.method()
        timings[label] = timings.get(label, 0.0) + time.perf_counter() - t0
    return out


def golden() -> None:
    """Print pycocoevalcap's full-set corpus numbers for every system and keying (the test constants)."""
    for keying in ("sequence", "album"):
        refs, systems = load(keying)
        print(f"# keying: {keying}")
        for name, hyps in systems.items():
            out = run_pycocoevalcap(hyps, refs, keying)
            values = {COCO_NAMES[m]: v[0] for m, v in out.items()}
            print(f"    ({keying!r}, {name!r}): {values!r},  # n={len(next(iter(out.values()))[2])}")
            sys.stdout.flush()


def golden_items() -> None:
    """Print (mean, mean of squares) of pycocoevalcap's PER-ITEM scores (no METEOR): pins the items."""
    for keying in ("sequence", "album"):
        refs, systems = load(keying)
        for name, hyps in systems.items():
            out = run_pycocoevalcap(hyps, refs, keying, meteor=False)
            values = {
                COCO_NAMES[m]: (float(np.mean(v[1])), float(np.mean(v[1] ** 2))) for m, v in out.items()
            }
            print(f"    ({keying!r}, {name!r}): {values!r},")
            sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", action="store_true", help="print pycocoevalcap's full-set numbers")
    parser.add_argument("--golden-items", action="store_true", help="print moments of pycocoevalcap's items")
    parser.add_argument("--key", default="sequence", choices=["sequence", "album"])
    args = parser.parse_args()
    if args.golden:
        golden()
        return
    if args.golden_items:
        golden_items()
        return

    from vistkit.metrics import coco
    from vistkit.metrics.base import list_metrics
    from vistkit.metrics.coco import coco_family

    with_meteor = "meteor-coco" in list_metrics()
    refs, systems = load(args.key)

    ref_timings: dict[str, float] = {}
    t0 = time.perf_counter()
    reference = {
        name: run_pycocoevalcap(hyps, refs, args.key, meteor=with_meteor, timings=ref_timings)
        for name, hyps in systems.items()
    }
    t_ref = time.perf_counter() - t0

    names = [COCO_NAMES[m] for m in next(iter(reference.values()))]
    t0 = time.perf_counter()
    ours = coco_family(systems, refs, key=args.key, metrics=names)
    t_ours = time.perf_counter() - t0

    worst = 0.0
    for system, methods in reference.items():
        for method, (corpus, items, ids) in methods.items():
            got = ours[system][COCO_NAMES[method]]
            assert got.item_ids == ids, (system, method)
            worst = max(worst, abs(got.corpus - corpus), float(np.max(np.abs(got.item_scores - items))))
            assert abs(got.corpus - corpus) <= 1e-9, (system, method, got.corpus, corpus)
            np.testing.assert_allclose(
                got.item_scores, items, rtol=0, atol=1e-9, err_msg=f"{system} {method}"
            )
    n_items = sum(len(next(iter(m.values()))[2]) for m in reference.values())
    print(f"systems: {len(systems)}  items: {n_items}  key: {args.key}  metrics: {', '.join(names)}")
    if not with_meteor:
        print("meteor-coco is not registered yet: both sides ran WITHOUT METEOR")
    print(f"largest difference (corpus and per item): {worst:.3g}")
    print(f"pycocoevalcap 1.2: {t_ref:8.2f} s")
    print(f"vistkit:           {t_ours:8.2f} s")
    print(f"ratio:             {t_ref / t_ours:8.2f}x")
    print("pycocoevalcap by step (s): " + ", ".join(f"{k} {v:.2f}" for k, v in ref_timings.items()))
    if with_meteor:
        # where vistkit's time goes: the same run again without METEOR (fresh tokeniser cache)
        coco._TOKEN_CACHE.clear()
        coco._INPUTS_CACHE.clear()
        t0 = time.perf_counter()
        coco_family(systems, refs, key=args.key, metrics=[m for m in names if m != "meteor-coco"])
        t_rest = time.perf_counter() - t0
        rest_ref = t_ref - ref_timings.get("METEOR", 0.0)
        print(
            f"without METEOR: pycocoevalcap {rest_ref:.2f} s, vistkit {t_rest:.2f} s, "
            f"ratio {rest_ref / t_rest:.2f}x (so vistkit's meteor-coco took about {t_ours - t_rest:.2f} s)"
        )


if __name__ == "__main__":
    main()
