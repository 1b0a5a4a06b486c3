"""Round-13 probes of the reference-free model metrics (clipscore, groovist, rovist-*, coherence) and model loading.

- clipscore with ``sentences="source"`` scored an empty storylet (or one of spaces or invisible format characters)
  as the prefix ``"A photo depicts "`` alone against its photo, and clipscore-story scored an empty story the same
  way: a number for no text. Such stories are now excluded with the reason.
- GROOViST's spaCy pass took ~1.1 GB and 31 s on one 100,000-character sentence ("a a a ...", within the story
  limit), and all sentences of a run went to spaCy 256 at a time whatever their length; RoViST-VG's spaCy tagger
  the same (1.3 GB). Long sentences are now read in pieces and batches are bounded by size; real stories give the
  same phrases and nouns (checked on 3,000 VIST val stories).
- A model whose weights hold NaN or infinity (a training run that diverged) scored every story NaN with no reason
  (clipscore's corpus was NaN, rovist-c's stories NaN; the coherence head too): loading it is now one error naming
  the folder and weights.
- A tokenizer of another model (rovist-c / dhm-c ``tokenizer=`` a BERT folder; a CLIP folder whose vocab.json is
  not its weights') crashed scoring with "IndexError: index out of range in self"; it is now refused at load.
- ``-O clipscore.prefix=...`` of 77 CLIP tokens or more left no room for the text: every sentence was cut away and
  every story scored the prefix alone (only "truncated_sentences" hinted at it); such a prefix is refused.
- rovist-c/dhm-c ``cache=FILE`` (`ScoreCache`): a cache that cannot be written (read-only, full disk) raised
  sqlite3.OperationalError after every pair was scored, losing the run; a NaN written to it came back as NULL and
  made the next run crash with TypeError; a file whose ``scores`` table had other columns crashed too. Now a
  write that fails is one warning (the scores are returned), a non-finite value is not cached, and an unreadable
  value is scored again.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from vistkit.data.story import Story, StorySet

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def clip_and_photos(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    pytest.importorskip("transformers")
    from tiny_models import make_photo_folder, make_tiny_clip

    root = tmp_path_factory.mktemp("r13clip")
    return make_tiny_clip(root / "clip", seed=1), make_photo_folder(root, ["1", "2", "3"])


# ------------------------------------------------------------------------------------- empty text in clipscore
@pytest.mark.parametrize("blank", ["", "   ", "\u200b", "\u200b \u00ad"])
def test_clipscore_source_sentence_without_text_excludes_the_story(clip_and_photos, blank: str):
    from vistkit.metrics.clipscore import ClipScore

    clip, photos = clip_and_photos
    sents = ("a cat .", blank, "a dog .")
    good = ("a cat .", "the one .", "a dog .")
    stories = StorySet(
        [
            Story("bad", " ".join(sents), sentences=sents, photo_ids=("1", "2", "3")),
            Story("good", " ".join(good), sentences=good, photo_ids=("1", "2", "3")),
        ]
    )
    res = ClipScore(images=photos, clip_model=str(clip), sentences="source").score(stories)
    assert math.isnan(res.item_scores[0]) and not math.isnan(res.item_scores[1])
    assert "sentence 2 of 3 has no text" in res.excluded["bad"]
    assert "bad" not in res.extra["per_sentence"] and "good" in res.extra["per_sentence"]


@pytest.mark.parametrize("blank", ["", "  \n", "\u200b\u200b"])
def test_clipscore_story_without_text_is_excluded(clip_and_photos, blank: str):
    from vistkit.metrics.clipscore import ClipScoreStory

    clip, photos = clip_and_photos
    stories = StorySet([Story("e", blank, photo_ids=("1", "2")), Story("t", "a cat .", photo_ids=("1", "2"))])
    res = ClipScoreStory(images=photos, clip_model=str(clip)).score(stories)
    assert math.isnan(res.item_scores[0]) and not math.isnan(res.item_scores[1])
    assert "the story has no text" in res.excluded["e"]


# ------------------------------------------------------------------------------------- spaCy memory bounds
class _FakeDoc:
    def __init__(self, text: str) -> None:
        self.noun_chunks = [_Chunk(w) for w in text.split()]


class _Chunk:
    def __init__(self, text: str) -> None:
        self.text = text


class _FakeNlp:
    """Records how many characters each ``pipe`` call is given at once; a doc's noun chunks are its words."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def pipe(self, texts, batch_size: int = 1):
        texts = list(texts)
        self.calls.append(texts)
        return iter([_FakeDoc(t) for t in texts])


def test_text_pieces_cut_at_spaces_and_keep_every_character():
    from vistkit.metrics.groovist import text_pieces

    text = "alpha beta gamma delta " * 50
    pieces = text_pieces(text, 30)
    assert "".join(pieces) == text and all(len(p) <= 30 for p in pieces)
    assert all(p.endswith(" ") and not q.startswith(" ") for p, q in itertools.pairwise(pieces))  # between words
    assert text_pieces("x" * 70, 30) == ["x" * 30, "x" * 30, "x" * 10]  # no space: cut at the limit
    assert text_pieces("short", 30) == ["short"]


def test_groovist_spacy_is_never_given_a_huge_text_at_once():
    from vistkit.metrics import groovist as gv

    nlp = _FakeNlp()
    long_sentence = " ".join(f"w{i}" for i in range(20_000))  # ~128,000 characters
    stories = [[long_sentence], ["a cat .", "a dog ."], [long_sentence, "the end ."]]
    out = gv.noun_phrases_many(stories, nlp)
    biggest = max(sum(map(len, call)) for call in nlp.calls)
    assert biggest <= gv.SPACY_BATCH_CHARS
    assert all(len(t) <= gv.SPACY_PIECE_CHARS for call in nlp.calls for t in call)
    # every word of the long sentence is still read once, in order, and the sentences keep their stories
    assert out[0] == long_sentence.split()
    assert out[1] == ["a", "cat", ".", "a", "dog", "."]  # de-duplicated within a sentence only
    assert out[2] == [*long_sentence.split(), "the", "end", "."]
    assert gv.noun_phrases([long_sentence], nlp) == out[0]


def test_groovist_batches_of_many_ordinary_sentences_stay_bounded():
    from vistkit.metrics import groovist as gv

    nlp = _FakeNlp()
    stories = [["x" * 4_000 + " y ."] * 5 for _ in range(60)]  # 300 sentences of 4,000 characters
    gv.noun_phrases_many(stories, nlp)
    assert max(sum(map(len, call)) for call in nlp.calls) <= gv.SPACY_BATCH_CHARS
    assert sum(len(call) for call in nlp.calls) == 300


def test_rovist_vg_spacy_tagger_reads_bounded_pieces(monkeypatch: pytest.MonkeyPatch):
    from spacy.tokens import Doc
    from spacy.vocab import Vocab

    from vistkit.metrics import groovist as gv
    from vistkit.metrics import rovist_vg as rv

    seen: list[int] = []

    class Tagger:
        def pipe(self, docs, batch_size: int = 1):
            docs = list(docs)
            seen.append(sum(len(d) for d in docs))
            for d in docs:
                for t in d:
                    t.tag_ = "NN" if t.text.startswith("n") else "DT"
                yield d

    class Nlp:
        vocab = Vocab()
        pipeline = (("tagger", Tagger()),)

    monkeypatch.setattr(rv, "load_spacy", lambda name: Nlp())
    assert isinstance(Doc(Nlp.vocab, words=["a"]), Doc)
    long = [f"n{i}" if i % 2 else "the" for i in range(30_000)]
    tags = rv.pos_tag_many([long, [], ["the", "n1"]], tagger="spacy")
    assert max(seen) <= gv.SPACY_BATCH_TOKENS
    assert tags[0] == ["NN" if i % 2 else "DT" for i in range(30_000)]
    assert tags[1] == [] and tags[2] == ["DT", "NN"]


@pytest.mark.slow
def test_groovist_long_sentence_real_spacy_is_noted(clip_and_photos, monkeypatch: pytest.MonkeyPatch):
    """With spaCy itself: a sentence over the piece size (lowered here) is parsed in pieces, its phrases are
    found and the story is listed; an ordinary story's phrases are those of one whole parse."""
    from vistkit.metrics import groovist as gv

    clip, photos = clip_and_photos
    nlp = gv.load_spacy()
    short = "the old man walked his small dog to the park near the river ."
    whole = gv.noun_phrases([short], nlp)
    monkeypatch.setattr(gv, "SPACY_PIECE_CHARS", 40)
    monkeypatch.setattr(gv.text_pieces, "__defaults__", (40,))
    long = "we saw a red car and a blue boat and a green tree and a tall tower near the lake ."
    stories = StorySet([Story("l", long, photo_ids=("1",)), Story("s", "a cat .", photo_ids=("1",))])
    res = gv.Groovist(images=photos, clip_model=str(clip)).score(stories)
    assert res.extra["sentences_read_in_pieces"] == {"l": 1}
    found = set(res.extra["np_scores"]["l"])
    assert {"a red car", "a blue boat"} <= found and all(p == p.strip() for p in found)
    monkeypatch.undo()
    assert gv.noun_phrases([short], nlp) == whole


# ------------------------------------------------------------------------------------- non-finite weights
def _poison(folder: Path, name_part: str) -> None:
    from safetensors.torch import load_file, save_file

    f = next(folder.glob("*.safetensors"))
    state = load_file(str(f))
    key = next(k for k in sorted(state) if name_part in k and state[k].is_floating_point())
    state[key].view(-1)[0] = float("nan")
    save_file(state, str(f), metadata={"format": "pt"})


def test_clip_with_nan_weights_is_refused_at_load(clip_and_photos, tmp_path: Path):
    import shutil

    from vistkit.errors import InputError
    from vistkit.metrics.clipscore import ClipScore

    clip, photos = clip_and_photos
    bad = tmp_path / "diverged-clip"
    shutil.copytree(clip, bad)
    _poison(bad, "visual_projection")
    with pytest.raises(InputError, match=r"NaN or infinite.*visual_projection\.weight"):
        ClipScore(images=photos, clip_model=str(bad))


def test_sop_with_nan_weights_is_refused_converted_and_official(tmp_path: Path):
    import torch
    from tiny_models import make_tiny_sop_folder

    from vistkit.errors import InputError
    from vistkit.metrics.base import get_metric
    from vistkit.models.checkpoints import META_FILE, file_sha256

    folder = make_tiny_sop_folder(tmp_path / "sop")
    _poison(folder, "linear")
    meta_path = folder / META_FILE
    import json

    meta = json.loads(meta_path.read_text())
    meta["weights_sha256"] = file_sha256(next(folder.glob("*.safetensors")))  # keep the hash check happy
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(InputError, match="NaN or infinite"):
        get_metric("rovist-c", model=folder)

    ckpt = tmp_path / "sop" / "official" / "sop_model_epoch4.pth.tar"
    obj = torch.load(ckpt, weights_only=False)
    obj["model"]["linear.weight"][0, 0] = float("inf")
    torch.save(obj, ckpt)
    with pytest.raises(InputError, match=r"NaN or infinite.*linear\.weight"):
        get_metric(
            "rovist-c",
            model=ckpt,
            trust_checkpoint=True,
            config=ckpt.parent / "config.json",
            tokenizer=ckpt.parent / "tokenizer",
        )


# ------------------------------------------------------------------------------------- tokenizer of another model
def test_sop_tokenizer_of_another_model_is_refused_at_load(tmp_path: Path):
    from tiny_models import make_tiny_encoder, make_tiny_sop_checkpoint

    from vistkit.errors import InputError
    from vistkit.metrics.base import get_metric

    ckpt = make_tiny_sop_checkpoint(tmp_path / "sop")
    bert = make_tiny_encoder(tmp_path / "bert", words=[f"word{i}" for i in range(300)])
    for name in ("rovist-c", "dhm-c"):
        with pytest.raises(InputError, match=r"tokenizer .*ids up to .*token embeddings"):
            get_metric(name, model=ckpt, trust_checkpoint=True, config=ckpt.parent / "config.json", tokenizer=bert)
    # `vistkit models convert --tokenizer` does not write a folder that could never load
    from vistkit.models.sop import convert_sop_checkpoint

    with pytest.raises(InputError, match=r"tokenizer .*ids up to .*token embeddings"):
        convert_sop_checkpoint(
            ckpt, tmp_path / "out", trust_checkpoint=True, config=ckpt.parent / "config.json", tokenizer=bert
        )
    assert not (tmp_path / "out").exists()


def test_clip_tokenizer_of_another_model_is_refused_at_load(clip_and_photos, tmp_path: Path):
    import json
    import shutil

    from vistkit.errors import InputError
    from vistkit.metrics.clipscore import ClipScore

    clip, photos = clip_and_photos
    bad = tmp_path / "mixed-clip"
    shutil.copytree(clip, bad)
    vocab = json.loads((bad / "vocab.json").read_text(encoding="utf-8"))
    vocab["<|endoftext|>"] = len(vocab) + 50
    (bad / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    with pytest.raises(InputError, match=r"tokenizer .*ids up to .*token embeddings"):
        ClipScore(images=photos, clip_model=str(bad))


def test_clipscore_prefix_that_leaves_no_room_for_the_text_is_refused(clip_and_photos):
    from vistkit.errors import InputError
    from vistkit.metrics.clipscore import ClipScore, ClipScoreStory

    clip, photos = clip_and_photos
    for cls in (ClipScore, ClipScoreStory):
        with pytest.raises(InputError, match=r"prefix is .* no room for the text"):
            cls(images=photos, clip_model=str(clip), prefix="x " * 80)
        cls(images=photos, clip_model=str(clip), prefix="x " * 60)  # room left: accepted


# ------------------------------------------------------------------------------------- the score cache
def test_score_cache_does_not_keep_non_finite_values(tmp_path: Path):
    from vistkit.models.runtime import ScoreCache

    cache = ScoreCache(tmp_path / "scores.sqlite")
    cache.put_many({"nan": float("nan"), "inf": float("inf"), "ok": 0.25})
    assert cache.get_many(["nan", "inf", "ok"]) == {"ok": 0.25}
    # a NULL or a text left by an older version or another program is read as "not cached", not a crash
    cache._db.execute("INSERT INTO scores VALUES ('null', NULL), ('text', 'abc')")
    assert cache.get_many(["null", "text", "ok"]) == {"ok": 0.25}


def test_score_cache_that_cannot_be_written_warns_and_scores(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from tiny_models import make_tiny_sop_folder

    from vistkit.metrics.base import get_metric

    folder = make_tiny_sop_folder(tmp_path / "sop")
    story = Story("a", "the dog ran . the cat sat . we had fun .")
    plain = get_metric("rovist-c", model=folder).score([story])
    metric = get_metric("rovist-c", model=folder, cache=str(tmp_path / "c.sqlite"))
    metric.cache._db.execute("PRAGMA query_only = ON")  # as a read-only file or a full disk: every write fails
    res = metric.score([story])
    assert res.item_scores.tolist() == pytest.approx(plain.item_scores.tolist())
    assert "cannot be written" in capsys.readouterr().err


def test_score_cache_of_another_layout_is_refused_in_one_sentence(tmp_path: Path):
    import sqlite3

    from vistkit.errors import InputError
    from vistkit.models.runtime import ScoreCache

    p = tmp_path / "other.sqlite"
    with sqlite3.connect(p) as db:
        db.execute("CREATE TABLE scores (id INTEGER, name TEXT NOT NULL)")
    with pytest.raises(InputError, match=r"score cache .* not a vistkit score cache"):
        ScoreCache(p)


def test_coherence_head_with_nan_weights_is_refused(tmp_path: Path):
    import shutil

    from vistkit.errors import InputError
    from vistkit.models.coherence_head import CoherenceModel, default_model_dir

    bad = tmp_path / "head"
    shutil.copytree(default_model_dir(), bad)
    _poison(bad, "")
    with pytest.raises(InputError, match="NaN or infinite"):
        CoherenceModel(bad)
