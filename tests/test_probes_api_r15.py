"""API probes, round 15: `vistkit.score` and `vistkit.prefer` built the metric (a language model: 25 s here) before
refusing an empty list, a wrong shape, missing references or a non-ranker; two StorySets of the same stories were
unequal; ``f"{score:.3f}"`` and ``float(score)`` were TypeErrors, and ``score.to_dict()`` named no alternative.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pickle
import sys
from pathlib import Path
from typing import Any

import pytest

import vistkit
from vistkit import InputError, Story, StorySet, score
from vistkit.metrics.base import Metric, get_metric_class, mean_score

HYPS = [f"we went to the park number {i} . it was fun and sunny . then we went home ." for i in range(4)]
REFS = [f"we went to a park {i} . it was sunny . we went home after ." for i in range(4)]


# ------------------------------------------------------------------------------------- checks before loading
@pytest.fixture
def never_built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Metrics whose construction (the model load) is recorded and refused: the checks must come first."""
    built: list[str] = []

    def refusing(init: Any) -> Any:
        @functools.wraps(init)  # keeps the option names, which `check_options` reads
        def refuse(self: Metric, *args: Any, **options: Any) -> None:
            built.append(self.name)
            raise AssertionError(f"{self.name} was built (its model loaded) before its inputs were checked")

        return refuse

    for name in ("lm-perplexity", "bertscore", "coherence", "vrank", "bleu-4"):
        cls = get_metric_class(name)
        monkeypatch.setattr(cls, "__init__", refusing(cls.__init__))
    return built


@pytest.mark.parametrize(
    ("name", "hyps", "refs", "options", "said"),
    [
        ("lm-perplexity", [], None, {}, "there are no stories to score"),
        ("lm-perplexity", [1, 2], None, {}, "story 0 is int"),
        ("lm-perplexity", "a story .", None, {}, r"one story: give \[text\]"),
        ("lm-perplexity", {"a": None}, None, {}, "prediction 'a' is not a text"),
        ("bertscore", HYPS, None, {}, "needs reference stories"),
        ("bertscore", HYPS, REFS[:2], {}, "4 predictions but 2 references"),
        ("bertscore", HYPS, REFS, {"key": "colour"}, "is not a keying"),
        ("coherence", HYPS, None, {"key": "sequence"}, "cannot be keyed by sequence"),
        ("bleu-4", {"a": "x ."}, {"b": "y ."}, {}, "no hypothesis shares a story key"),
        ("bleu-4", HYPS, REFS, {"template": ["1-2-3-4-5"]}, "none of the 4 hypotheses is in the template"),
    ],
)
def test_bad_inputs_are_refused_before_the_metric_loads(
    never_built: list[str], name: str, hyps: Any, refs: Any, options: dict[str, Any], said: str
) -> None:
    """Each was refused only once the metric was built (lm-perplexity: 24.7 s of model load for an empty list)."""
    with pytest.raises(InputError, match=said):
        score(name, hyps, refs, **options)
    assert never_built == []


def test_prefer_checks_the_metric_and_the_pairs_before_loading(never_built: list[str]) -> None:
    """`vistkit.prefer` loaded coherence's model to say it is not a ranker, and vrank's to refuse a bare string."""
    with pytest.raises(InputError, match="coherence is not a pairwise metric"):
        vistkit.prefer("coherence", ["a ."], ["b ."])
    with pytest.raises(InputError, match="not one str"):
        vistkit.prefer("vrank", "a story .", ["b ."])
    with pytest.raises(InputError, match="1 first stories but 2 second stories"):
        vistkit.prefer("vrank", ["a ."], ["b .", "c ."])
    with pytest.raises(InputError, match="vrank has no option 'modle'"):
        vistkit.prefer("vrank", ["a ."], ["b ."], modle="x")
    with pytest.raises(vistkit.UnknownMetricError):
        vistkit.prefer("vrnak", ["a ."], ["b ."])
    assert never_built == []


def test_score_still_scores_and_warns_as_before() -> None:
    """Checking first changes no number: the functional face equals the scorer's method, warnings included."""
    assert score("rovist-nr", HYPS) == vistkit.get_metric("rovist-nr").score(HYPS)
    assert score("sacrebleu", HYPS, REFS) == vistkit.get_metric("sacrebleu").score(HYPS, REFS)


def test_unmatched_predictions_are_warned_about_once(capsys: pytest.CaptureFixture[str]) -> None:
    """Checked before the metric is built, the predictions without a reference are still said once, and left out."""
    by_id = {str(i): h for i, h in enumerate(HYPS)}
    got = score("sacrebleu", by_id, {"0": REFS[0], "1": REFS[1]})
    assert got.n == 2 and sorted(got.excluded) == ["2", "3"]
    err = capsys.readouterr().err
    assert err.count("2 of 4 predictions have no reference") == 1


# ------------------------------------------------------------------------------------------ StorySet equality
def _stories(n: int = 3) -> list[Story]:
    return [Story(str(i), f"text {i} .", photo_ids=(f"{i}a", f"{i}b")) for i in range(n)]


def test_storysets_of_the_same_stories_are_equal() -> None:
    """``read_stories(f) == read_stories(f)`` was False: a StorySet compared by identity."""
    a, b = StorySet(_stories(), source="a.json"), StorySet(_stories(), source="a.json")
    assert a == b and not (a != b) and hash(a) == hash(b)
    assert a[:2] + a[2:] == a
    assert StorySet(_stories(), source="b.json") == a  # the stories are compared; where they came from is not
    assert StorySet(_stories()[::-1]) != a  # order matters, as in a list
    assert StorySet(_stories(2)) != a
    assert a != _stories() and a != tuple(_stories())  # a list of stories is not a StorySet
    assert len({a, b, StorySet(_stories(2))}) == 2
    assert pickle.loads(pickle.dumps(a)) == a


def test_storysets_read_twice_from_one_file_are_equal(tmp_path: Any) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps({"story_id": str(i), "text": f"t {i} ."}) + "\n" for i in range(3)), "utf-8")
    assert vistkit.read_stories(path) == vistkit.read_stories(str(path))


# ---------------------------------------------------------------------------------------------- Score as number
def _score() -> vistkit.Score:
    return mean_score("rovist-nr", ["a", "b"], [0.25, 0.5], "rovist-nr|vistkit:0.1.0")


def test_a_score_formats_and_converts_as_its_corpus_score() -> None:
    """``f"{score:.3f}"`` said "unsupported format string passed to Score.__format__"; ``float(score)`` failed."""
    s = _score()
    assert f"{s:.3f}" == "0.375" and format(s, ".1%") == "37.5%" and f"{s:>8.2f}" == "    0.38"
    assert f"{s}" == str(s) == repr(s)
    assert float(s) == 0.375
    assert sorted([s, mean_score("x", ["a"], [0.1], "x")], key=float)[0].metric == "x"
    with pytest.raises(InputError, match="format of the corpus score"):
        format(s, "d")
    with pytest.raises(TypeError):
        _ = s + s  # type: ignore[operator]  # what adding two scores means is not obvious: still refused


def test_a_score_attribute_of_another_library_names_vistkits() -> None:
    """``score.to_dict()`` (pandas' name) said only "'Score' object has no attribute 'to_dict'"."""
    s = _score()
    aliases = (("to_dict", "as_dict"), ("to_json", "as_dict"), ("score", "corpus"), ("scores", "item_scores"))
    for wrong, meant in aliases:
        with pytest.raises(AttributeError, match=rf"'Score' object has no attribute '{wrong}'; .*{meant}"):
            getattr(s, wrong)
    with pytest.raises(AttributeError) as info:
        _ = s.zzzzzz  # type: ignore[attr-defined]
    assert str(info.value) == "'Score' object has no attribute 'zzzzzz'"
    assert not hasattr(s, "__array__") and not hasattr(s, "_repr_html_")  # tools probing dunders see nothing
    assert pickle.loads(pickle.dumps(s)) == s


# ------------------------------------------------------------------------------------ registry after an interrupt
def test_a_metric_module_imported_again_after_an_interrupt_registers_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C (or an error) inside a metric module's import, after its first ``@register``, left that class in the
    registry while Python forgot the module; the next `get_metric` imported it again and every later call in the
    session said "metric name 'clipscore' registered twice" (a RuntimeError) until the kernel restarted."""
    from vistkit.metrics import base

    real = base.register
    calls = [0]

    def interrupted(cls: type[Metric]) -> type[Metric]:
        calls[0] += 1
        if calls[0] == 3:  # inside coco's import, after its first two metrics
            raise KeyboardInterrupt
        return real(cls)

    vistkit.list_metrics()  # every metric module imported: the next discovery imports coco alone
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    monkeypatch.setattr(base, "_UNAVAILABLE", dict(base._UNAVAILABLE))
    monkeypatch.setattr(base, "_DISCOVERED", False)
    import vistkit.metrics as metrics_package

    # the package's attribute too: the import below rebinds it, and later tests' `from vistkit.metrics import coco`
    # must find the module that `from vistkit.metrics.coco import ...` finds
    monkeypatch.setattr(metrics_package, "coco", sys.modules["vistkit.metrics.coco"])
    monkeypatch.delitem(sys.modules, "vistkit.metrics.coco")  # as in a fresh session, where it was not imported
    monkeypatch.setattr(base, "register", interrupted)
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C after coco's bleu-1 and bleu-2 were registered
        vistkit.list_metrics()
    assert "vistkit.metrics.coco" not in sys.modules
    monkeypatch.setattr(base, "register", real)
    names = vistkit.list_metrics()
    assert {"bleu-1", "bleu-4", "cider-d", "rouge-l", "sacrebleu"} <= set(names)
    assert names["bleu-1"] is sys.modules["vistkit.metrics.coco"].Bleu1  # the class of the module imported again


def test_two_metrics_of_one_name_are_still_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from vistkit.metrics import base

    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    first = type("First", (), {"name": "probe-metric", "__module__": "probe_a"})
    second = type("Second", (), {"name": "probe-metric", "__module__": "probe_b"})
    base.register(first)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"two metrics are named 'probe-metric': probe_a\.First and probe_b\.Second"):
        base.register(second)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ StorySet membership
def test_an_id_in_a_storyset_says_how_to_look_it_up() -> None:
    """``"1" in stories`` compared the text with every Story and was False, silently, for an id the set holds."""
    stories = StorySet(_stories(), source="a.json")
    assert _stories()[1] in stories and Story("9", "other .") not in stories
    for wanted in ("1", 1, "1a-1b"):
        with pytest.raises(InputError, match=r"a StorySet holds Story objects.*by_key\('story'\)"):
            _ = wanted in stories
    assert "1" in stories.by_key("story") and "1a-1b" in stories.by_key("sequence")


# --------------------------------------------------------------------------------------------- Story keywords
@pytest.mark.parametrize(
    ("wrong", "meant"),
    [("id", "story_id"), ("storyid", "story_id"), ("photos", "photo_ids"), ("image_ids", "photo_ids"),
     ("img_seq", "photo_ids"), ("album", "album_id"), ("sents", "sentences"), ("model", "system"),
     ("story", "text")],
)
def test_a_misspelt_story_field_says_what_was_meant(wrong: str, meant: str) -> None:
    """``Story(id=...)`` or ``photos=`` said only "got an unexpected keyword argument"."""
    fields: dict[str, Any] = {"story_id": "1", "text": "a story ."}
    fields.pop(meant, None)
    with pytest.raises(InputError, match=rf"Story has no field '{wrong}'.*did you mean {meant}="):
        Story(**fields, **{wrong: "x"})


def test_a_story_built_every_way_still_builds() -> None:
    story = Story("1", "a .", ("a .",), ("p1",), "al", "sys", {"k": "v"})
    assert Story(story_id="1", text="a .", sentences=["a ."], photo_ids=["p1"], album_id="al", system="sys") == story
    assert pickle.loads(pickle.dumps(story)) == story and story.with_text("b .").text == "b ."
    with pytest.raises(TypeError):
        Story("1")  # type: ignore[call-arg]  # a missing text stays Python's own error

    @dataclasses.dataclass(frozen=True)
    class Rated(Story):  # a user's own kind of story, with a field of its own
        rating: float = 0.0

    assert Rated(story_id="1", text="a .", rating=4.0).rating == 4.0
    with pytest.raises(InputError, match=r"Rated has no field 'ratng' .*did you mean rating=\?"):
        Rated(story_id="1", text="a .", ratng=4.0)


def test_a_story_without_the_keyed_field_names_the_python_argument_too() -> None:
    """In Python the advice was only the command line's ``--key story``."""
    for key in ("sequence", "album"):
        with pytest.raises(InputError, match=r"use --key story \(key='story' in Python\)"):
            score("rovist-nr", [Story("1", "we went out . it was fun .")], key=key)


# -------------------------------------------------------------------------------------------- static type hints
def test_the_lazy_names_are_typed_for_an_ide() -> None:
    """`score`, `get_metric`, `read_stories`, `prefer` and `Score` are loaded on first use (`vistkit.__getattr__`),
    so mypy and an IDE saw them as ``Any``: no signature, no completion of a Score's parts. Each is now imported for
    type checkers only (``if TYPE_CHECKING:``), which costs ``import vistkit`` nothing."""
    import ast
    import typing

    tree = ast.parse(Path(vistkit.__file__).read_text(encoding="utf-8"))
    typed: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    typed |= {a.asname or a.name for a in stmt.names}
    assert set(vistkit._LAZY) <= typed
    hints = typing.get_type_hints(vistkit.score)
    assert hints["return"] is vistkit.Score


def test_a_metric_with_its_own_score_method_still_scores_its_own_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """`vistkit.score` aligns the stories itself before building the metric; a registered metric overriding
    `Metric.score` (a user's own) is still called through its method."""
    from vistkit.metrics import base

    rovist = get_metric_class("rovist-nr")
    calls: list[int] = []

    class Counted(rovist):  # type: ignore[valid-type, misc]
        name = "probe-counted"

        def score(self, hypotheses: Any = None, references: Any = None, **kw: Any) -> vistkit.Score:
            calls.append(len(hypotheses))
            return super().score(hypotheses, references, **kw)

    monkeypatch.setitem(base._REGISTRY, "probe-counted", Counted)
    got = score("probe-counted", HYPS)
    assert calls == [4] and got.corpus == score("rovist-nr", HYPS).corpus


# ---------------------------------------------------------------------------------------- dict keys that collide
def test_dict_keys_that_become_one_id_are_refused() -> None:
    """``{1: ..., "1": ...}`` or ``{"a": ..., "a ": ...}`` are two keys but one id once read as text: references
    were merged into one item silently (two references where the user gave one each), predictions were refused as
    "a hypothesis file must hold one story per key (choose another --key?)"."""
    for refs in ({1: "a reference .", "1": "another one ."}, {"1": "a reference .", " 1": ["another one ."]}):
        with pytest.raises(InputError, match=r"references .* are both the id '1'"):
            score("sacrebleu", {"1": "a story ."}, refs)
    with pytest.raises(InputError, match=r"predictions 1 and '1' are both the id '1'"):
        score("sacrebleu", {1: "a story .", "1": "b story ."}, {"1": "r ."})
