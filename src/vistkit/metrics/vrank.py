"""``vrank``: Vrank (Hsu et al., ACL 2022, Sec. 4) as a pairwise metric (a `CrossEncoderRanker`).

A trained Vrank folder (``vistkit vrank train``) reads ``story1 [SEP] story2`` and predicts the ranking gap g(s1,
s2) (> 0: story 1 preferred; the paper's story-pair accuracy, Eqs. 1-2, takes its sign). As a ranker, ``prefer(a, b)
= (g(a, b) - g(b, a)) / 2`` (antisymmetric by construction; the published Vrank reads only g(a, b), which ``vistkit
vrank predict`` also writes). The per-story score (``vistkit score``, story-level correlations) is the mean of
``prefer(story, anchor)`` over eight fixed human VIST val stories packaged with vistkit
(resources/vrank/anchors.json, see its SOURCE.md), or over the stories of ``anchors=FILE``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vistkit.data.story import Story
from vistkit.errors import MissingDependencyError
from vistkit.metrics.base import CrossEncoderRanker, MetricCard, check_num_threads, register

CITATION = "Hsu, Chen, Hsu, Li, Lin, Ku (2022). Learning to Rank Visual Stories From Human Ranking Data. ACL 2022."


def packaged_anchors() -> list[Story]:
    """The eight packaged anchor stories (human VIST val stories)."""
    from importlib import resources

    text = (resources.files("vistkit") / "resources" / "vrank" / "anchors.json").read_text(encoding="utf-8")
    return [Story(story_id=k, text=v, system="human") for k, v in json.loads(text).items()]


@register
class Vrank(CrossEncoderRanker):
    """Vrank: a trained ``story1 [SEP] story2`` regressor of the human ranking gap (see the module docstring)."""

    name = "vrank"
    weights = "a trained Vrank folder (`vistkit vrank train`; none is shipped)"
    card = MetricCard(
        summary="Vrank (Hsu et al. 2022): a reference-free pairwise metric that predicts which of two stories of "
        "the same photos people prefer; trained with `vistkit vrank train` on VHED-layout pairs.",
        definition="g(s1, s2) = a regression layer on the pooled embedding of `s1 [SEP] s2` through a SimCSE BERT "
        "(MLM-pre-trained on human stories when given them), trained with MSE on the ranking gap of a symmetric pair "
        "set (every pair also swapped, gap negated; all agreement levels); Adam lr 2e-5, batch 32, 30 epochs, seed "
        "7777, mixed precision (Vrank Sec. 4 and the appendix 'Training Details'). As a ranker: prefer(a, b) = "
        "(g(a, b) - g(b, a)) / 2. Per-story score: the mean of prefer(story, anchor) over 8 human VIST val "
        "stories packaged with vistkit (resources/vrank/anchors.json; the first story of every 111th val album) "
        "or over `anchors=FILE`.",
        range="unbounded; prefer > 0 means story a is preferred, in the units of the training target: by default "
        "VHED's label, the difference of the two stories' average ranks among the N stories of a task (N = 2-5, "
        "Vrank Table 1); with target=normalised, that difference divided by N, the paper's ranking gap (Sec. 3.1), "
        "in (-1, 1) for the data; the per-story score is in the same units",
        signature_fields="model (hash of the trained weights), encoder (id the model was trained from), data "
        "(training data name), cfg and tok (hashes of the saved encoder config and of the tokenizer, which the "
        "weights' hash does not cover), anchors (packaged, or the anchor file's name @ the hash of its story texts)",
        reproduces="the Vrank training recipe of the paper (no checkpoint is shipped: train one on VHED, "
        "AcademiaSinicaNLPLab/VHED; `vistkit vrank train --help`). Pair accuracy of the paper (Table 4, VHED "
        "test pairs, Eqs. 1-2): .786 on Omega_4, .826 on Omega_5, .796 on Omega_{4,5}; .816 reference-machine and "
        ".789 machine-machine pairs of Omega_{4,5}.",
        differences="The published model reads g(s1, s2) once and takes its sign; the ranker averages both orders "
        "(antisymmetrised), which can differ on pairs where g is not antisymmetric. `vistkit vrank predict` writes "
        "both. The paper always MLM-pre-trains SimCSE on SIND reference stories first (Sec. 4); vistkit does so "
        "only with --mlm-stories, with settings the paper does not give (run_mlm.py defaults). Unstated training "
        "details follow the Hugging Face Trainer defaults the paper's setup implies (linear decay, no warm-up, "
        "clipping 1.0).",
        citation=CITATION,
    )

    def __init__(
        self,
        *,
        model: str | Path | None = None,
        device: str | None = None,
        batch_size: int = 32,
        anchors: str | Path | None = None,
        num_threads: int | None = None,
    ) -> None:
        super().__init__()
        from vistkit.metrics._options import named_with_hash, option_batch_size, option_text, short_hash

        threads = check_num_threads(self.name, num_threads)
        batch_size = option_batch_size(self.name, batch_size)
        if model is not None:
            model = option_text(self.name, "model", model)
        if anchors is not None:
            anchors = option_text(self.name, "anchors", anchors)
        if model is None:
            raise MissingDependencyError(
                "vrank needs a trained Vrank folder (no model is shipped): train one with `vistkit vrank train "
                "PAIRS.csv --output DIR` and pass --option vrank.model=DIR (model=DIR in Python)"
            )
        # the anchors first: a wrong file is said before the model loads
        self._anchors = packaged_anchors() if anchors is None else self._read_anchors(Path(anchors))
        from vistkit.models.checkpoints import json_hash, model_fingerprint, tokenizer_fingerprint
        from vistkit.models.vrank import load_vrank

        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        from vistkit.models.resolve import user_path

        self.model = load_vrank(model, device=device, batch_size=batch_size)
        meta = self.model.meta
        self.model_hash = str(meta.get("tensors_sha256") or model_fingerprint(user_path(model)))[:12]
        self.encoder = str(meta.get("source", {}).get("encoder", "unknown"))
        self.training_data = str(meta.get("data", {}).get("name", "unknown"))
        # the weights' hash does not cover the encoder config (its head count changes no weight's shape) nor the
        # tokenizer: a folder edited by hand, or saved before its files were hash-checked, is signed by both
        self._config_hash = json_hash(meta.get("config", {}))
        self._tokenizer_hash = tokenizer_fingerprint(self.model.tokenizer)
        # a given file by its name and the hash of the stories read (two anchor files of one name signed alike)
        self._anchor_name = "packaged-val8" if anchors is None else named_with_hash(
            anchors, short_hash(*(s.text for s in self._anchors))
        )

    @staticmethod
    def _read_anchors(path: Path) -> list[Story]:
        """The stories of an anchors file; one without words is refused (every per-story score would average in
        a preference over an empty story)."""
        from vistkit.data.readers import read_stories
        from vistkit.errors import InputError

        stories = list(read_stories(path))
        empty = next((s for s in stories if not s.text.strip()), None)
        if empty is not None:
            raise InputError(
                f"vrank: anchor story {empty.story_id!r:.60} of {path} has no words; every anchor must be a story "
                "(remove it, or give its text)"
            )
        return stories

    def signature_fields(self) -> dict[str, object]:
        return {
            **super().signature_fields(),
            "cfg": self._config_hash,
            "tok": self._tokenizer_hash,
            "anchors": self._anchor_name,
        }

    def raw_preference(self, a: Sequence[Story], b: Sequence[Story]) -> np.ndarray:
        """Vrank's g(a, b): the model's prediction on each pair of texts."""
        return self.model.predict([s.text for s in a], [s.text for s in b])

    def anchors(self) -> Sequence[Story]:
        """The anchor stories: the eight packaged VIST val stories, or the stories of the ``anchors`` file."""
        return self._anchors
