"""Probe round 10: the documentation a newcomer follows, checked against what the code does.

README.md, then docs/*.md, docs/models/*.md, the metric cards (`vistkit metrics --info NAME`, docs/metrics/) and
`--help`. tests/test_readme.py runs the README's tour and tests/test_docs_commands.py the guides' commands; this
round probes what those leave out: options a verb has that no page names, defaults and numbers a page states
against the code's, metric options and declared ranges against their cards, the signatures the docs show, the
commands of the README outside its tour and of the model cards, the CONTRIBUTING skeleton, and every link and
repository path. Nothing heavy runs: no model loads, no Java, no scoring beyond a toy metric.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import test_docs_commands as tdc
from test_readme import commands

from vistkit.cli import app as _TYPER_APP  # bound at import: some test modules patch `vistkit.cli.app`

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _read(rel: str) -> str:
    return (ROOT / rel).read_text(encoding="utf-8")


def _script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tree() -> Any:
    import typer

    from vistkit.cli import _load_commands

    _load_commands()
    return typer.main.get_command(_TYPER_APP)


def _leaves(cmd: Any, path: str = "vistkit") -> list[tuple[str, Any]]:
    subs = getattr(cmd, "commands", None)
    if not subs:
        return [(path, cmd)]
    return [leaf for name, sub in subs.items() for leaf in _leaves(sub, f"{path} {name}")]


# ----------------------------------------------------------------------------------------- options and defaults
def test_every_option_of_every_verb_is_documented_with_its_default(tree: Any) -> None:
    """55 options were named on no page (`compare --name`, `--n-samples`, `distance --g-metric`, `--tanh-g`,
    `studio demo --dir`, `--items`, `vrank train --device`, `meta build-pairs --limit`, ...): a newcomer met them
    only in `--help`. docs/reference.md, generated from the command tree, lists each verb's arguments and options
    with their defaults; a page older than the code fails here."""
    page = _script("gen_cli_docs").page()
    assert _read("docs/reference.md") == page, "run python scripts/gen_cli_docs.py"
    sections = dict(re.findall(r"^### `(vistkit [a-z -]+?)(?: [A-Z_.\[\]]+)*`\n(.*?)(?=^##|\Z)", page, re.M | re.S))
    leaves = _leaves(tree)
    assert set(sections) == {path for path, _ in leaves}
    checked = 0
    for path, cmd in leaves:
        rows = {r.split(" | ")[0]: r for r in sections[path].splitlines() if r.startswith("| `")}
        for p in cmd.params:
            if p.name == "quiet":
                continue
            names = [p.display_name_raw] if p.param_type_name == "argument" else [*p.opts, *p.secondary_opts]
            if p.param_type_name == "argument":
                found = [r for label, r in rows.items() if label.split(" (")[0] == f"| `{names[0]}`"]
            else:
                found = [r for label, r in rows.items() if set(re.findall(r"`(-{1,2}[\w-]+)`", label)) == set(names)]
            [row] = found or [None]
            assert row is not None, f"{path}: {names} not in docs/reference.md"
            default = row.split(" | ")[1]
            if p.required or p.default is None or p.default is False or p.default in ([], ()):
                assert default == "", (path, names, default)
            else:
                shown = getattr(p.default, "value", p.default)
                assert default.strip("`") in (str(shown), f"{shown:g}" if isinstance(shown, float) else "", names[0])
            checked += 1
    assert checked > 200
    # the reference is where a newcomer can find it
    assert "`docs/reference.md`" in _read("README.md") and "`docs/cli.md`" in _read("README.md")


#: defaults the guides state in prose: (file, phrase, verb, option, the default the phrase states)
PROSE_DEFAULTS = [
    ("docs/studio.md", "`--per-item` (k, default 5 as in VHED)", "studio init", "--per-item", 5),
    ("docs/studio.md", "`--claim-timeout` seconds (default 1 hour)", "studio init", "--claim-timeout", 3600),
    ("docs/studio.md", "`--gold-pass` (default 0.8)", "studio init", "--gold-pass", 0.8),
    ("docs/studio.md", "(`--reference-system`, default `human`)", "studio init", "--reference-system", "human"),
    ("docs/studio.md", "`--request-timeout` seconds (default 30)", "studio serve", "--request-timeout", 30),
    ("docs/studio.md", "(`--aspects focused,coherent,share,human,grounded,detailed`)", "studio init", "--aspects",
     "focused,coherent,share,human,grounded,detailed"),
    ("docs/meta.md", "(`--label-sign auto`, the default;", "meta pairs", "--label-sign", "auto"),
    ("docs/meta.md", "(`meta correlate --scale`, default `1-5`", "meta correlate", "--scale", "1-5"),
    ("docs/meta.md", "`--gap-edges auto` (the default)", "meta gap", "--gap-edges", "auto"),
    ("docs/meta.md", "(1000 resamples, `--bootstrap`, `--seed`)", "meta correlate", "--bootstrap", 1000),
    ("docs/meta.md", "(ties corrected, scipy's default; `--kendall c`", "meta correlate", "--kendall", "b"),
    ("docs/meta.md", "on by default, `--no-reference-absent` to disable", "meta pairs", "--reference-absent", True),
    ("docs/models/vrank.md", "`--target gap`, the default", "vrank train", "--target", "gap"),
    ("docs/models/vrank.md", "3 epochs, lr 5e-5, 15% masking, `--mlm-epochs`, `--mlm-lr`", "vrank train",
     "--mlm-epochs", 3),
    ("docs/models/vrank.md", "3 epochs, lr 5e-5, 15% masking, `--mlm-epochs`, `--mlm-lr`", "vrank train",
     "--mlm-lr", 5e-5),
    ("docs/models/vrank.md", "Adam, lr 2e-5, batch 32, 30 epochs, seed 7777", "vrank train", "--lr", 2e-5),
    ("docs/models/vrank.md", "Adam, lr 2e-5, batch 32, 30 epochs, seed 7777", "vrank train", "--batch-size", 32),
    ("docs/models/vrank.md", "Adam, lr 2e-5, batch 32, 30 epochs, seed 7777", "vrank train", "--epochs", 30),
    ("docs/models/vrank.md", "Adam, lr 2e-5, batch 32, 30 epochs, seed 7777", "vrank train", "--seed", 7777),
    ("docs/models/vrank.md", "`--encoder princeton-nlp/sup-simcse-bert-base-uncased` (default;", "vrank train",
     "--encoder", "princeton-nlp/sup-simcse-bert-base-uncased"),
    ("docs/models/vrank.md", "`--precision auto` = fp16 autocast", "vrank train", "--precision", "auto"),
    ("README.md", "then serves it on 127.0.0.1:8000 until Ctrl-C", "studio demo", "--port", 8000),
    ("README.md", "then serves it on 127.0.0.1:8000 until Ctrl-C", "studio demo", "--host", "127.0.0.1"),
    ("README.md", "# 10 shipped dHM stories", "studio demo", "--items", 10),
    ("README.md", "uvicorn on 127.0.0.1;", "studio serve", "--host", "127.0.0.1"),
    ("docs/cli.md", "--confidence 0.95 --n-bootstrap 20", "compare", "--confidence", 0.95),
]


@pytest.mark.parametrize("doc,phrase,verb,option,value", PROSE_DEFAULTS, ids=lambda v: str(v)[:30])
def test_defaults_the_guides_state_are_the_codes(tree: Any, doc: str, phrase: str, verb: str, option: str,
                                                 value: object) -> None:
    """A default stated in a guide's prose is the option's default in the command tree."""
    if doc == "docs/cli.md":  # not a prose default: compare's interval level is the one cli.md's CSV test uses
        value = 0.95
    else:
        assert phrase in " ".join(_read(doc).split()), f"{doc} no longer says {phrase!r}; update this table"
    cmd = dict(_leaves(tree))[f"vistkit {verb}"]
    [param] = [p for p in cmd.params if option in (*p.opts, *p.secondary_opts)]
    default = getattr(param.default, "value", param.default)
    assert default == value, (verb, option, default)


def test_help_texts_state_the_defaults_the_code_uses(tree: Any) -> None:
    """Options whose click default is unset say their default in words ("default 1000"); the number is the one
    the command then uses."""
    from vistkit.commands.score import DEFAULT_RESAMPLES
    from vistkit.scores import DEFAULT_SEED
    from vistkit.scores.stats import DEFAULT_SAMPLES

    helps = {(path, o): p.help or "" for path, cmd in _leaves(tree) for p in cmd.params for o in p.opts}
    assert f"(default {DEFAULT_RESAMPLES})" in helps[("vistkit score", "--n-bootstrap")]
    assert f"(default {DEFAULT_SEED}, sacreBLEU's)" in helps[("vistkit score", "--seed")]
    assert helps[("vistkit compare", "--n-samples")].endswith(
        f"(default {DEFAULT_SAMPLES['bs']} for bs, {DEFAULT_SAMPLES['ar']} for ar)."
    )
    # "(paper: X)" in vrank train's help is the default too
    cmd = dict(_leaves(tree))["vistkit vrank train"]
    for p in cmd.params:
        if m := re.search(r"\(paper: ([\d.e-]+)\)", p.help or ""):
            assert float(m.group(1)) == float(p.default), (p.opts, p.default)
    # studio export -f said "(see below)" and nothing followed it in --help: now it names each kind
    export = helps[("vistkit studio export", "--format")]
    assert "see below" not in export and all(k in export for k in ("rankings", "pairs", "likert", "jsonl", "tasks"))


# ------------------------------------------------------------------------------------------- environment table
def _env_table() -> dict[str, list[str]]:
    table = _read("docs/cli.md").split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(VISTKIT_[A-Z_]+)` \| (.*?) \| (.*?) \|$", table, re.M)
    return {name: [what, default] for name, what, default in rows}


def test_environment_table_defaults_and_ranges_are_the_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/cli.md's environment table: each default and range is the code's; `VISTKIT_WORDNET`'s default said
    Debian's folder, but NLTK's data path is looked in before it."""
    from vistkit import limits, progress
    from vistkit.engine import ray as ray_engine
    from vistkit.models import java

    env = _env_table()
    number = {k: float(re.sub(r"[,`]", "", v[1])) for k, v in env.items() if re.fullmatch(r"[\d,]+", v[1])}
    assert number == {
        "VISTKIT_PROGRESS_INTERVAL": progress.DEFAULT_INTERVAL,
        "VISTKIT_CACHE_MB": limits.CACHE_BYTES_DEFAULT / limits.MiB,
        "VISTKIT_MAX_INPUT_MB": limits.INPUT_BYTES_DEFAULT / limits.MiB,
        "VISTKIT_MAX_STORY_CHARS": limits.STORY_CHARS_DEFAULT,
        "VISTKIT_MAX_STORIES": limits.STORIES_DEFAULT,
        "VISTKIT_MAX_JSON_VALUES": limits.JSON_VALUES_DEFAULT,
        "VISTKIT_MAX_CONTEXT_SENTENCES": limits.CONTEXT_SENTENCES_DEFAULT,
        "VISTKIT_MAX_NGRAM_WORDS": limits.NGRAM_WORDS_DEFAULT,
        "VISTKIT_MAX_PAIRS": limits.PAIRS_DEFAULT,
        "VISTKIT_JAVA_TIMEOUT": java.JAVA_TIMEOUT,
        "VISTKIT_RAY_START_TIMEOUT": ray_engine.START_TIMEOUT,
    }
    monkeypatch.delenv("VISTKIT_JAVA_OPTS", raising=False)
    assert env["VISTKIT_JAVA_OPTS"][1] == f"`{' '.join(java.helper_jvm_options())}`"
    # "CPU count, 2 to 8"; ranges "1 to 256", "0.1 to 10^6", "1 to 86,400", "0 to 86,400"
    assert env["VISTKIT_METEOR_THREADS"][1] == "CPU count, 2 to 8"
    monkeypatch.delenv("VISTKIT_METEOR_THREADS", raising=False)
    for cpus, want in ((1, 2), (4, 4), (64, 8)):
        monkeypatch.setattr(java.os, "cpu_count", lambda c=cpus: c)
        assert java.default_threads() == want
    from vistkit.errors import InputError

    for var, func, low, high, words in (
        ("VISTKIT_METEOR_THREADS", java.default_threads, 1, java.MAX_METEOR_THREADS, "1 to 256"),
        ("VISTKIT_JAVA_TIMEOUT", java.java_timeout, 0.1, 1e6, "0.1 to 10^6"),
        ("VISTKIT_RAY_START_TIMEOUT", ray_engine.start_timeout, 1, 86_400, "1 to 86,400"),
    ):
        assert words in env[var][0]
        for ok in (low, high):
            monkeypatch.setenv(var, f"{ok:g}" if isinstance(ok, float) else str(ok))
            assert func() == ok
        for bad in ("0.05" if low == 0.1 else str(low - 1), str(high * 2)):
            monkeypatch.setenv(var, bad)
            with pytest.raises(InputError, match=var):
                func()
        monkeypatch.delenv(var)
    assert "0 to 86,400" in env["VISTKIT_PROGRESS_INTERVAL"][0]
    # VISTKIT_WORDNET first, then NLTK's data path, then Debian's folder
    from vistkit.metrics import groovist

    monkeypatch.setenv("VISTKIT_WORDNET", "/opt/wn")
    dirs = [str(d) for d in groovist._wordnet_dirs()]
    assert dirs[0] == "/opt/wn" and dirs.index("/usr/share/wordnet") > 1
    assert any(d.endswith("corpora/wordnet") for d in dirs[1 : dirs.index("/usr/share/wordnet")])
    assert env["VISTKIT_WORDNET"][1].startswith("NLTK's data path")


# ------------------------------------------------------------------------------------------------ metric cards
def test_metric_cards_list_their_options_with_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    """A metric's `-O NAME.OPTION=VALUE` options were named nowhere for 19 of 27 metrics (bertscore's `lang`,
    `fast_tokenizer`, `num_threads`; sacrebleu's `tokenize`, `smooth_method`; every `device`/`batch_size`): the
    card (docs/metrics/NAME.md, `metrics --info NAME`, its JSON `options`) now lists each with its default."""
    from vistkit.cli import main
    from vistkit.commands.metrics import card_page
    from vistkit.metrics.base import list_metrics, metric_options

    for name, cls in list_metrics().items():
        page = card_page(cls)
        assert (ROOT / "docs" / "metrics" / f"{name}.md").read_text(encoding="utf-8") == page
        options = metric_options(cls)
        if not options:
            assert "## Options" not in page
            continue
        section = page.split("## Options\n", 1)[1].split("\n\n", 1)[0]
        assert section.startswith(f"`-O {name}.OPTION=VALUE`")
        assert re.findall(r"`(\w+)` \(", section) == options
    assert main(["metrics", "--info", "sacrebleu", "-f", "json"]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["options"] == {
        "lowercase": False, "tokenize": "13a", "smooth_method": "exp", "smooth_value": None, "max_ngram_order": 4
    }
    assert main(["metrics", "--info", "bertscore"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "-O bertscore.OPTION=VALUE" in shown and "fast_tokenizer (false)" in shown and "model (minilm-l6)" in shown


#: what each card's Range section says, and the bounds the class declares (the `range` column of every table)
CARD_RANGES = {
    "bertscore": ("-1 to 1", -1.0, 1.0),
    "bleu-4": ("[0, 1]", 0.0, 1.0),
    "cider-d": ("(unbounded by declaration)", 0.0, None),
    "clipscore": ("[0, 2.5]", 0.0, 2.5),
    "coherence": ("[0, 1]", 0.0, 1.0),
    "dhm-c": ("[0, 1]", 0.0, 1.0),
    "groovist": ("Unbounded", None, None),
    "lm-coherence": ("Unbounded", None, None),
    "lm-perplexity": ("[1, inf)", 1.0, None),
    "meteor-vist": ("[0, 1]", 0.0, 1.0),
    "rouge-l": ("[0, 1]", 0.0, 1.0),
    "rovist-nr": ("At most 1 (no repetition); NOT bounded below", None, 1.0),
    "rovist-nr-jaccard": ("[0, 1]", 0.0, 1.0),
    "rovist-vg": ("Unbounded", None, None),
    "rovist-vg-scaled": ("(-1, 1)", -1.0, 1.0),
    "sacrebleu": ("0 to 100", 0.0, 100.0),
    "story-ranker": ("the declared range is unbounded", None, None),
    "story-ranker-v1": ("Per-story score in (0, 1)", 0.0, 1.0),
    "vrank": ("unbounded", None, None),
}


def test_declared_bounds_agree_with_the_cards() -> None:
    """story-ranker-v1's card says its per-story score (a sigmoid) is in (0, 1), but the class declared
    [-inf, inf], so tables said `unbounded`; story-ranker's card said "within +-15" while the class (rightly:
    a `model` folder may set other weights and clip) declares no bounds. Each card's range and its class agree."""
    from vistkit.metrics.base import list_metrics
    from vistkit.models.story_ranker_v2 import StoryRankerV2Model

    metrics = list_metrics()
    for name, (phrase, lo, hi) in CARD_RANGES.items():
        cls = metrics[name]
        assert phrase in cls.card.range, (name, cls.card.range)
        assert (cls.lower_bound, cls.upper_bound) == (lo, hi), name
    # the packaged story-ranker: +-15 = clip x the sum of the weights, and its bf16 bound 0.4, as its card says
    model = StoryRankerV2Model()
    card = " ".join(metrics["story-ranker"].card.signature_fields.split())
    assert "Within +-15 with the packaged model (each |z_k| at most 3, weights summing to 5" in metrics[
        "story-ranker"
    ].card.range
    assert (model.clip, float(abs(model.coef).sum())) == (3.0, 5.0)
    assert f"a bound on the utility's change: {model.lm_deviation_bound()}," in card
    # the language rules' numbers in the card are the model's constants
    from vistkit.models import story_ranker_v2 as v2

    definition = " ".join(metrics["story-ranker"].card.definition.split())
    assert f"under {v2.MIN_FUNCTION_SHARE:.0%} English function words among {v2.MIN_WORDS_FOR_LANGUAGE} or more" in (
        definition
    )
    assert f"{v2.MIN_WORDS_FOR_SENTENCE_LANGUAGE}+ Latin-script words at least {v2.FOREIGN_NATS_PER_WORD:g} nats" in (
        definition
    )
    assert f"windows of ~{v2.LANGUAGE_WINDOW_WORDS} words" in definition
    assert f"gets the lowest utility, -{model.clip * float(abs(model.coef).sum()):g}" in definition
    # a capped feature's centre keeps its z inside the clip, so the sum stays within +-15
    assert all(-model.clip <= m - c <= model.clip for m, c in zip(model.max_z, model.centre, strict=True))


def test_precision_refusals_describe_only_the_modes_offered(monkeypatch: pytest.MonkeyPatch) -> None:
    """`-O bertscore.precision=tf32` was refused with "must be one of fp32, tf32x3, bf16 (...; tf32 / bf16 are
    faster and approximate)", and story-ranker's refusal described tf32x3, which it does not take. The sentence
    now describes the offered modes only; README's lists of modes are the ones the metrics take."""
    from vistkit.errors import InputError
    from vistkit.metrics.base import list_metrics, metric_options

    offered: dict[str, list[str]] = {}
    for name, cls in list_metrics().items():
        if "precision" not in metric_options(cls):
            continue
        with pytest.raises(InputError) as exc:
            cls.precheck({"precision": "fp8"}, local=False)
        message = str(exc.value)
        listed = re.search(r"must be one of ([\w, ]+) \((.*)\), not 'fp8'", message)
        assert listed is not None, message
        modes = listed.group(1).split(", ")
        described = set(re.findall(r"\b(fp32|tf32x3|tf32|bf16)\b", listed.group(2)))
        assert described == set(modes), (name, message)
        for mode in modes:
            cls.precheck({"precision": mode}, local=False)
        offered[name] = modes
    assert len(offered) >= 8
    readme = " ".join(_read("README.md").split())
    [sop] = re.findall(r"`--option rovist-c\.precision=([\w|]+)`", readme)
    assert offered["rovist-c"] == offered["dhm-c"] == sop.split("|")
    [fast] = re.findall(r"`bertscore` and `coherence` take `([\w|]+)`", readme)
    assert offered["bertscore"] == offered["coherence"] == fast.split("|")
    # and the measured bounds the README gives for tf32 / bf16 (rovist-c, dhm-c) are the signature's
    from vistkit.models.sop import FAST_DEVIATION

    assert f"(~{FAST_DEVIATION['tf32']} / ~{FAST_DEVIATION['bf16']})" in readme


def test_metric_options_named_in_the_docs_exist() -> None:
    """Every `-O`/`--option METRIC.OPTION=VALUE` a page names is an option of that metric, with a value its
    precheck accepts (paths and placeholders aside)."""
    from vistkit.metrics.base import list_metrics, metric_options

    metrics = list_metrics()
    pages = ["README.md", "CONTRIBUTING.md", "BENCHMARKS.md", *(p.relative_to(ROOT).as_posix()
                                                               for p in (ROOT / "docs").rglob("*.md"))]
    seen = 0
    for page in pages:
        for metric, option, value in re.findall(r"(?:-O|--option) ([a-z0-9-]+)\.(\w+)=([^\s`|]+)", _read(page)):
            assert metric in metrics, (page, metric)
            if option == "OPTION":  # the cards' `-O NAME.OPTION=VALUE` pattern
                continue
            assert option in metric_options(metrics[metric]), (page, metric, option)
            if option in ("precision", "idf"):
                metrics[metric].precheck({option: value}, local=False)
            seen += 1
    assert seen >= 8


# --------------------------------------------------------------------------------------------------- signatures
def test_signatures_the_docs_show_are_the_current_format() -> None:
    """README's example signatures are what the metrics print today (field order and versions included), and
    docs/models/vrank.md's form now says that `score`/`compare` put the key first (it showed only meta's)."""
    from vistkit import get_metric
    from vistkit.metrics.vrank import Vrank

    lines = re.findall(r"^((?:meteor-vist|sacrebleu)\|.*)$", _read("README.md"), re.M)
    assert len(lines) == 2
    meteor = get_metric("meteor-vist", prefetch=False)
    assert lines[0] == meteor.signature(keying="sequence", n_refs="1-5")
    from vistkit import score

    res = score("sacrebleu", {"a": "a cat sat .", "b": "a dog ran ."},
                {"a": ["a cat sat .", "the cat sat ."], "b": ["a dog ran ."]})
    live = res.signature.replace("key:story", "key:sequence").replace("nrefs:1-2", "nrefs:1-5")
    assert lines[1] == live
    # vrank: meta's form (no key) and score's (key first)
    vr = Vrank.__new__(Vrank)
    vr.model_hash, vr.encoder, vr.training_data, vr._anchor_name = "0123456789ab", "enc", "train.csv", "packaged-val8"
    vr._config_hash, vr._tokenizer_hash = "c0ffee00", "70cafe00"
    doc = " ".join(_read("docs/models/vrank.md").split())
    assert ("`vrank|model:<tensors_sha256[:12]>|encoder:<id>|data:<training file name>|cfg:<config hash>|"
            "tok:<tokenizer hash>|anchors:<set>|vistkit:<v>`") in doc
    assert "`vrank|key:<key>|model:...`" in doc
    assert re.fullmatch(r"vrank\|model:0123456789ab\|encoder:enc\|data:train\.csv\|cfg:c0ffee00\|tok:70cafe00\|"
                        r"anchors:packaged-val8\|vistkit:.+", vr.signature())
    assert vr.signature(keying="story").startswith("vrank|key:story|model:0123456789ab|")


# --------------------------------------------------------------------------------------- commands outside tours
def _fenced_vistkit_lines(text: str) -> list[str]:
    blocks = re.findall(r"```(?:bash)?\n(.*?)```", text, re.S)
    return [c for b in blocks for c in commands(b) if c.startswith("vistkit ")]


def test_every_vistkit_line_of_the_readme_and_model_cards_parses(tree: Any) -> None:
    """test_readme runs the README's tour; the lines it skips (vrank, ray), the model cards' command blocks
    (docs/models/vrank.md, coherence.md) and BENCHMARKS.md's cluster lines were never parsed: each now parses as
    click would run it, and every inline `vistkit ...` of those pages names existing verbs and options."""
    pages = ["README.md", *(p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "docs" / "models").glob("*.md")))]
    pages += ["BENCHMARKS.md"]
    lines = [(page, line) for page in pages for line in _fenced_vistkit_lines(_read(page))]
    assert len(lines) >= 15
    problems = [f"{page}: {msg}" for page, line in lines if (msg := tdc.parse_fully(tree, line))]
    inline = [(page, s) for page in [*pages, "CONTRIBUTING.md"] for s in tdc.inline_code(_read(page))
              if s.startswith("vistkit ")]
    assert len(inline) >= 20
    problems += [f"{page}: {p}" for page, s in inline for p in tdc.check_names(tree, s)]
    names = tdc.option_names(tree)
    problems += [f"{page}: {w} in `{s}`" for page, s in inline
                 for w in re.findall(r"(?<![\w/.\[-])(--?[A-Za-z][\w-]*)", s) if w not in names | tdc.ROOT_OPTIONS]
    assert problems == []


def test_readme_scripts_commands_name_existing_subcommands_and_options() -> None:
    """README's `python scripts/train_ranker_v2.py build --check` (`features` first) and `python
    scripts/eval_ranker.py --per-group 100` name sub-commands and options the scripts' parsers have."""
    readme = _read("README.md")
    assert "`python scripts/train_ranker_v2.py build --check`" in readme and "(`features` first" in readme
    assert "`python scripts/eval_ranker.py --per-group 100`" in readme
    train, evaluate = _read("scripts/train_ranker_v2.py"), _read("scripts/eval_ranker.py")
    assert 'add_parser("build"' in train and 'add_parser("features"' in train
    assert re.search(r'b\.add_argument\("--check"', train)
    assert re.search(r'add_argument\("--per-group", type=int', evaluate)


def test_readme_setup_commands_and_what_make_demo_prints() -> None:
    """The README opens with exactly `make demo` and `make test`; the Makefile's targets run `vistkit demo` and
    the suite; `make demo`'s comment (50 shipped LLaVA stories against their human stories) is what the demo
    reads and prints first; `vistkit demo --help` said "every offline metric" for its nine."""
    from importlib import resources

    from vistkit.commands.demo import DEMO_METRICS, demo

    text = _read("README.md")
    first = re.search(r"```bash\n(.*?)```", text, re.S)
    assert first is not None and text.index(first.group(0)) < text.index("\n## ")
    assert [c.split()[:2] for c in commands(first.group(1))] == [["make", "demo"], ["make", "test"]]
    assert "scores 50 shipped LLaVA stories against their human stories" in first.group(1)
    makefile = _read("Makefile")
    assert re.search(r"^demo: \$\(STAMP\)\n\t\$\(BIN\)/vistkit demo$", makefile, re.M)
    assert re.search(r"^test: \$\(STAMP\)\n\t\$\(BIN\)/python -m pytest", makefile, re.M)
    folder = resources.files("vistkit.resources") / "demo"
    human = json.loads((folder / "human_stories.json").read_text(encoding="utf-8"))
    llava = json.loads((folder / "llava_stories.json").read_text(encoding="utf-8"))
    assert len(llava) == len(human) == 50 and set(llava) == set(human)
    source = inspect.getsource(demo)
    assert 'f"vistkit demo: {len(llava)} LLaVA-NeXT stories vs their human VIST stories' in source
    assert "nine offline metrics" in (demo.__doc__ or "") and len(DEMO_METRICS) == 9
    # the README's pinned torch is the Makefile's
    [pin] = re.findall(r"pip install (torch==[\d.]+)", text)
    assert f"pip install -q {pin}" in makefile


def test_contributing_skeleton_runs() -> None:
    """CONTRIBUTING.md's metric skeleton registers, scores and signs as the text around it says."""
    from vistkit import get_metric, score
    from vistkit.metrics import base

    [snippet] = re.findall(r"```python\n(.*?)```", _read("CONTRIBUTING.md"), re.S)
    base.list_metrics()  # discovery first, so the skeleton's registration is the last
    try:
        exec(compile(snippet, "CONTRIBUTING.md", "exec"), {"__name__": "contributing_skeleton"})
        res = score("word-count", ["a b c .", "d e"])
        assert res.corpus == 3.0 and list(res.item_scores) == [4.0, 2.0]
        assert res.signature.startswith("word-count|key:story|lower:no|vistkit:")
        assert get_metric("word-count", lower=True).signature().startswith("word-count|lower:yes|")
    finally:
        base._REGISTRY.pop("word-count", None)


# ----------------------------------------------------------------------------------------- numbers across pages
def test_numbers_quoted_twice_agree() -> None:
    """The proxy meta table is in README and docs/meta.md; dHM's published distances in README and the test
    that reproduces them; the H100 and oneDNN speed-ups README quotes are BENCHMARKS.md's."""
    def rows(text: str) -> dict[str, tuple[str, str]]:
        found = re.findall(r"^\| (bleu-4|rouge-l|cider-d|sacrebleu|meteor-vist|rovist-nr) \| ([\d.]+) \|(?: [\d,]+ \|)?"
                           r" ([\d. /]+) \|$", text, re.M)
        return {m: (acc, beats.strip()) for m, acc, beats in found}

    readme, meta = rows(_read("README.md")), rows(_read("docs/meta.md"))
    assert len(readme) == 6 and readme == meta
    from test_distance import GOLDEN

    published = re.findall(r"(VIST|VWP) ([\d.]+) / ([\d.]+) / ([\d.]+) / ([\d.]+)", _read("README.md"))
    assert len(published) == 2
    for name, *values in published:
        want = GOLDEN[name.lower()]
        assert [float(x) for x in values] == [want["dG"], want["dC"], want["dR"], want["dHM"]]
    assert f"(n = {GOLDEN['vist']['n']:,})" in _read("README.md")
    bench = _read("BENCHMARKS.md")
    best_bf16 = re.search(r"\(runs: [\d,]+, [\d,]+, ([\d,]+)\) \| \*\*([\d,]+)\*\*", bench)
    assert best_bf16 is not None
    bf16 = int(best_bf16.group(2).replace(",", ""))
    fp32 = int(re.findall(r"\*\*this code\*\* \(run 3\), fp32 \(runs: [\d, ]+\) \| (\d+)", bench)[0])
    readme_text = " ".join(_read("README.md").split())
    m = re.search(r"~([\d,]+) stories/s in bf16 and ~(\d+) in fp32", readme_text)
    assert m is not None
    assert abs(int(m.group(1).replace(",", "")) - bf16) / bf16 < 0.05 and abs(int(m.group(2)) - fp32) / fp32 < 0.05
    speedup = re.search(r"oneDNN median \*\*[\d.]+\*\* \(best [\d.]+\): \*\*([\d.]+)x\*\*", bench)
    assert speedup is not None and f"({round(float(speedup.group(1)), 1)}x faster" in _read("docs/cli.md")
    assert math.isclose(float(speedup.group(1)), 1.22)


# ------------------------------------------------------------------------------------------------ links, paths
#: repository paths the pages name that are another repository's files (or placeholders), with where they live
NOT_OURS = {
    "scripts/coherence_scorer.py": "usydnlp/rovist",
    "scripts/non_redun_scorer.py": "usydnlp/rovist",
    "scripts/visual_grounding_scorer.py": "usydnlp/rovist",
    "scripts/experiments/coherence/": "removed; docs/models/coherence.md says to read it at commit 8be7e5d",
    "scripts/experiments/coherence/README.md": "as above (`git show 8be7e5d:...`)",
    "tests/test_foo.py": "CONTRIBUTING.md's placeholder",
    "tests/test_NAME.py": "CONTRIBUTING.md's placeholder",
    "src/vistkit/metrics/NAME.py": "CONTRIBUTING.md's placeholder",
    "docs/metrics/NAME.md": "CONTRIBUTING.md's placeholder",
    "scripts/rovist_c.py": "usydnlp/rovist (named in vistkit/models/sop.py)",
}


def _heading_anchors(path: Path) -> set[str]:
    out = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if m := re.match(r"#+\s+(.*)", line):
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def test_links_and_repository_paths_resolve() -> None:
    """Every relative link (and its #anchor) of README, CONTRIBUTING, BENCHMARKS and docs/ resolves, and every
    repository path a page names (tests/, docs/, src/, scripts/, bench/) exists, other repositories' paths and
    placeholders aside (`NOT_OURS`)."""
    pages = [README, ROOT / "CONTRIBUTING.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md"))]
    missing, used = [], set()
    links = 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path) if path else page
            links += 1
            if not dest.exists():
                missing.append(f"{page.name}: {target}")
            elif anchor and anchor not in _heading_anchors(dest):
                missing.append(f"{page.name}: {target} (no such heading)")
        for name in re.findall(r"(?<![\w/.-])((?:tests|docs|src|scripts|bench)/[\w./*-]+)", text):
            name = name.rstrip(".")
            if "*" in name:
                if not list(ROOT.glob(name)):
                    missing.append(f"{page.relative_to(ROOT)}: {name}")
                continue
            if name in NOT_OURS:
                used.add(name)
                continue
            if not ((ROOT / name).exists() or (page.parent / name).exists()):
                missing.append(f"{page.relative_to(ROOT)}: {name}")
    # the package's own words (help texts, error messages, docstrings) name only paths that exist
    # (file names only: "tests/benchmarks" in prose is two words)
    pattern = re.compile(r"(?<![\w/.-])((?:tests|docs|scripts|bench)/[\w./*-]+\.(?:py|md|json|csv))\b")
    for module in sorted((ROOT / "src" / "vistkit").rglob("*.py")):
        for name in pattern.findall(module.read_text(encoding="utf-8")):
            if name in NOT_OURS:
                used.add(name)
            elif not list(ROOT.glob(name)):
                missing.append(f"{module.relative_to(ROOT)}: {name}")
    assert links >= 28
    assert missing == []
    assert used == set(NOT_OURS), f"NOT_OURS entries no page names: {set(NOT_OURS) - used}"


def test_studio_md_routes_are_the_apps() -> None:
    """studio.md's route table left out `GET /`, `GET /healthz` (what an uptime check or load balancer polls) and
    the static files; every route the app mounts is now in the table and the table names no other."""
    source = _read("src/vistkit/studio/app.py")
    app_routes = {re.sub(r"\{(\w+):\w+\}", r"{\1}", p) for p in re.findall(r"Route\(\"([^\"]+)\"", source)}
    app_routes |= {f"{p}/..." for p in re.findall(r"Mount\(\"([^\"]+)\"", source)}
    table = _read("docs/studio.md").split("## Routes", 1)[1].split("\n## ", 1)[0]
    documented = {p for cell in re.findall(r"^\| (`(?:GET|POST) [^|]+) \|", table, re.M)
                  for p in re.findall(r"(/[^`,\s]*)`", cell)}
    assert len(app_routes) >= 9
    assert documented == app_routes


def test_data_md_counts_are_the_files() -> None:
    """docs/data.md's counts (5,005 stories in 1,999 sequences, a 1,938-sequence template, 2,019 / 2,017 TAPM
    stories, 5,055 dHM stories) are those of the files it names (../shared's copies)."""
    from conftest import shared_file

    from vistkit import read_stories
    from vistkit.data.readers import load_json

    doc = " ".join(_read("docs/data.md").split())
    refs = read_stories(shared_file("pr-vist", "PR_VIST.json.zip"))
    assert "5,005 stories x 5 sentences, 1,999 photo sequences" in doc
    assert len(refs) == 5005 and len({s.photo_ids for s in refs}) == 1999
    template = load_json(shared_file("vist-challenge-naacl2018", "vist-challenge-template.json"))
    assert "the 1,938 test photo sequences that are scored" in doc and len(template["output_stories"]) == 1938
    folder = ("tapm-vist-outputs", "vist")
    assert "(challenge submission format, 2,019 sequences)" in doc and "2,017 sequences)" in doc
    assert len(read_stories(shared_file(*folder, "ours.json"))) == 2019
    assert [len(read_stories(shared_file(*folder, f))) for f in ("AREL.json", "XE.json")] == [2017, 2017]
    assert "all 5,055 VIST test human stories" in doc
    dhm = ("dhm-visual-storytelling", "data", "stories", "vist")
    assert [len(read_stories(shared_file(*dhm, f))) for f in ("gt_test.json", "llava_vc_p3.json")] == [5055, 5055]


def test_readme_ranker_time_counts_the_distinct_stories() -> None:
    """README said the ranker scores "~17,000 distinct stories" of the proxy pairs in "~1 hour", counting every
    story id; it scores each distinct text once, and the LLaVA / PR-VIST / TAPM story of a photo sequence repeats
    for each of its human stories: 10,994 texts (5,000 human + 3 x 1,998), ~37 minutes at 5 stories/s."""
    from conftest import shared_file

    from vistkit import read_stories

    prvist = shared_file("pr-vist", "PR_VIST.json.zip")
    human = read_stories(prvist)
    ids, seqs = {s.story_id for s in human}, {s.photo_ids for s in human}
    llava = read_stories(shared_file("dhm-visual-storytelling", "data", "stories", "vist", "llava_vc_p3.json"))
    tapm = read_stories(shared_file("tapm-vist-outputs", "vist", "ours.json"))
    texts = {s.text for s in human} | {s.text for s in read_stories(prvist, field="predicted_story")}
    texts |= {s.text for s in llava if s.story_id in ids} | {s.text for s in tapm if s.photo_ids in seqs}
    readme = " ".join(_read("README.md").split())
    m = re.search(r"about (\d+) stories/s on two CPU cores in fp32 .*?~(\d+) minutes for the ([\d,]+) distinct", readme)
    assert m is not None
    rate, minutes, distinct = int(m.group(1)), int(m.group(2)), int(m.group(3).replace(",", ""))
    assert distinct == len(texts) == 10_994
    assert abs(distinct / rate / 60 - minutes) < 5


def test_script_commands_the_pages_give_name_existing_options() -> None:
    """Every `python bench/X.py ...` / `python scripts/X.py ...` line of README, BENCHMARKS, CONTRIBUTING, the
    Makefile and docs/ names a script that exists, and each `--option` (and sub-command) it passes is one the
    script's parser declares; every `tests/FILE.py::NAME` a page or card cites is a test that exists."""
    pages = [README, ROOT / "BENCHMARKS.md", ROOT / "CONTRIBUTING.md", ROOT / "Makefile",
             *sorted((ROOT / "docs").rglob("*.md"))]
    checked, problems = 0, []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for script, rest in re.findall(
            r"(?:python3?|\$\(BIN\)/python|\.venv/bin/python)\s+((?:bench|scripts)/[\w.]+\.py)([^\n`]*)", text
        ):
            source = (ROOT / script).read_text(encoding="utf-8") if (ROOT / script).exists() else None
            if source is None:
                problems.append(f"{page.name}: {script} does not exist")
                continue
            rest = re.split(r"\s#|\s\||\)\s", rest)[0]
            words = rest.split()
            wanted = re.findall(r"(?<![\w-])(--[\w-]+)", rest)
            wanted += words[:1] if words and re.fullmatch(r"[a-z]+", words[0]) else []
            for opt in wanted:
                checked += 1
                if f'"{opt}"' not in source:
                    problems.append(f"{page.name}: {script} has no {opt}")
    assert checked >= 100 and problems == []
    sources = [_read(p) for p in ("README.md", "BENCHMARKS.md", "CONTRIBUTING.md")]
    sources += [p.read_text(encoding="utf-8") for p in (ROOT / "docs").rglob("*.md")]
    sources += [p.read_text(encoding="utf-8") for p in (ROOT / "src" / "vistkit").rglob("*.py")]
    cited = {c for text in sources for c in re.findall(r"tests/\w+\.py::\w+", text)}
    assert len(cited) >= 3
    for c in cited:
        path, name = c.split("::")
        assert re.search(rf"^(def|class) {name}\b", _read(path), re.M), c


def test_python_names_the_pages_give_exist() -> None:
    """Every dotted `vistkit.X.Y` name and `Class.method` a page gives in code spans is importable / present, so a
    reader who follows "Library: `vistkit.meta.scoring.score_pairs`" finds it."""
    import importlib

    from vistkit.metrics import base
    from vistkit.metrics.story_ranker import StoryRanker

    pages = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    dotted, methods = set(), set()
    for page in pages:
        spans = tdc.inline_code(page.read_text(encoding="utf-8"))
        dotted |= {m.group(1) for s in spans if (m := re.fullmatch(r"(vistkit(?:\.\w+)+)(?:\(\))?", s))}
        for s in spans:  # Class.method (file names such as CHANGELOG.md aside)
            m = re.fullmatch(r"([A-Z][a-z]\w+)\.([a-z_]+)(?:\(\))?", s)
            if m and m.group(2) not in ("md", "json", "zip"):
                methods.add(m.groups())
    assert len(dotted) >= 15
    for name in sorted(dotted):
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj: Any = importlib.import_module(".".join(parts[:i]))
                break
            except ImportError:
                continue
        for attr in parts[i:]:
            assert hasattr(obj, attr), name
            obj = getattr(obj, attr)
    classes = {"Metric": base.Metric, "Ranker": base.Ranker, "StoryRanker": StoryRanker}
    assert {c for c, _ in methods} == set(classes)
    assert all(hasattr(classes[c], m) for c, m in methods), methods


def test_formats_lists_every_input_limit_the_environment_table_names(capsys: pytest.CaptureFixture[str]) -> None:
    """cli.md: "`vistkit formats` lists the input limits"; each `VISTKIT_MAX_*` / `VISTKIT_CACHE_MB` of its table
    is in `vistkit formats` with the default the table gives."""
    from vistkit.cli import main

    assert main(["formats", "-f", "json"]) == 0
    listed = capsys.readouterr().out
    env = _env_table()
    limits = [v for v in env if v.startswith("VISTKIT_MAX_") or v == "VISTKIT_CACHE_MB"]
    assert len(limits) == 8  # VISTKIT_MAX_NGRAM_WORDS since round 12
    for var in limits:
        assert var in listed, var
        assert env[var][1] in listed, (var, env[var][1])


def test_data_md_names_the_commits_and_repositories_of_the_shared_copies() -> None:
    """docs/data.md's table names, per file, the upstream repository and the commit the numbers were checked on;
    they are those the ../shared copies' SOURCE.md record. README's and pyproject's torch pins agree."""
    from conftest import shared_file

    doc = _read("docs/data.md")
    for folder, repo, commit in (
        ("pr-vist", "ethan5437/PR-VIST", "52c15c5"),
        ("vist-challenge-naacl2018", "windx0303/VIST-Challenge-NAACL-2018", "b04bf1d"),
        ("tapm-vist-outputs", "JiwanChung/tapm", "d24fbe8"),
        ("dhm-visual-storytelling", "akskuchi/dHM-visual-storytelling", "b72807a"),
    ):
        source = shared_file(folder, "SOURCE.md").read_text(encoding="utf-8")
        assert f"`{repo}`" in doc and f"commit {commit} checked" in doc
        assert f"Repo: {repo}" in source and re.search(rf"Commit: {commit}[0-9a-f]{{33}}\b", source), folder
    [pin] = re.findall(r"pip install (torch==[\d.]+)", _read("README.md"))
    assert f'"{pin}",' in _read("pyproject.toml")


def test_cli_md_progress_line_is_the_programs() -> None:
    """cli.md's example progress line is what the progress display writes for 1,200 of 2,019 stories at 37.1/s."""
    from vistkit.progress import format_line

    [example] = re.findall(r"^    (bertscore: scored .*)$", _read("docs/cli.md"), re.M)
    assert format_line("bertscore", "scored", 1200, 2019, "stories", 1200 / 37.1) == example


def test_model_cards_fingerprints_and_script_defaults_are_the_shipped_ones() -> None:
    """The head hashes the model cards quote (coherence `fb8721b68123`, story-ranker-v1 `263c3fafc9f7`) are the
    shipped files' SHA-256, and the defaults coherence.md gives for its training script are the script's."""
    import hashlib

    models = ROOT / "src" / "vistkit" / "resources" / "models"
    for card, folder in (("coherence.md", "coherence-minilm-v1"), ("story-ranker.md", "story-ranker-v1")):
        digest = hashlib.sha256((models / folder / "head.safetensors").read_bytes()).hexdigest()
        assert f"`{digest[:12]}`" in _read(f"docs/models/{card}"), card
    m = re.search(r"\(defaults: `([^`]+)`", " ".join(_read("docs/models/coherence.md").split()))
    assert m is not None
    script = _read("scripts/train_coherence.py")
    for option, value in re.findall(r"(--[\w-]+) (\S+)", m.group(1)):
        found = re.search(rf'add_argument\("{option}"[^\n]*default=([^,)]+)', script)
        assert found is not None and found.group(1).strip("\"'") == value, (option, value)


def test_key_choices_each_verb_takes_are_the_ones_its_help_and_cli_md_give(tree: Any) -> None:
    """cli.md's `-k` row offered `album` everywhere; `meta` and `studio report` key pairs and judgements by story or
    sequence only. Each verb's `--key` help names exactly the choices the row gives it."""
    row = next(ln for ln in _read("docs/cli.md").splitlines() if ln.startswith("| `-k` |"))
    assert "`meta` and `studio report` match pairs and judgements by `story` or `sequence`" in row
    for path, cmd in _leaves(tree):
        [key] = [p for p in cmd.params if "--key" in p.opts] or [None]
        if key is None or path == "vistkit meta build-pairs":  # build-pairs: SYSTEM=story|sequence per file
            continue
        text = key.help or ""
        if path.startswith(("vistkit meta", "vistkit studio report")):
            assert "album" not in text and "story" in text and "sequence" in text, (path, text)
        else:
            assert all(k in text for k in ("story", "sequence", "album")), (path, text)


def test_numbers_in_metric_cards_are_the_codes_constants() -> None:
    """Constants a card quotes are the ones the metric uses: GROOViST's theta per dataset, CLIPScore's w, and the
    measured deviations of the precision modes that go into the signatures."""
    from vistkit.metrics import bertscore, clipscore, coherence, groovist
    from vistkit.metrics.base import list_metrics

    cards = {name: " ".join(cls.card.render(name).split()) for name, cls in list_metrics().items()}
    theta = ", ".join(f"{k.upper()} {v:.4f}" for k, v in groovist.THETA.items())
    assert f"(theta {theta})" in cards["groovist"]
    assert f"CLIP-S(c, v) = {clipscore.CLIPSCORE_W:g} * max(cos(" in cards["clipscore"]
    assert list_metrics()["clipscore"].upper_bound == clipscore.CLIPSCORE_W
    dev = coherence.COHERENCE_DEVIATION
    assert f"precision and maxdev (measured: {dev['tf32x3']} / {dev['bf16']})" in cards["coherence"]
    dev = bertscore.FAST_DEVIATION
    assert f"(the measured largest F1 deviation: {dev['tf32x3']} / {dev['bf16']})" in cards["bertscore"]


def test_coherence_cards_say_how_many_val_stories_trained_the_model() -> None:
    """docs/models/coherence.md and the packaged MODEL_CARD.md said the model was trained on "the 3,000" val
    stories; the script drops the 74 with fewer than two sentences (no sentence pair): config.json records 2,634
    train and 292 dev stories, which both cards now give."""
    models = ROOT / "src" / "vistkit" / "resources" / "models" / "coherence-minilm-v1"
    training = json.loads((models / "config.json").read_text(encoding="utf-8"))["training"]
    used = training["train_stories"] + training["dev_stories"]
    for text in (_read("docs/models/coherence.md"), (models / "MODEL_CARD.md").read_text(encoding="utf-8")):
        flat = " ".join(text.split())
        assert f"{used:,}" in flat and f"{training['train_stories']:,} train" in flat, flat[:200]
        assert f"{training['dev_stories']:,} dev stories" in flat
    assert "if len(ids) >= 2:" in _read("scripts/train_coherence.py")


def test_readme_names_exactly_the_verbs_that_take_engine_ray(tree: Any) -> None:
    """README's Ray section lists the verbs that take `--engine ray`; they are exactly those whose options have it."""
    readme = " ".join(_read("README.md").split())
    m = re.search(r"`vistkit score`, `compare`, `meta ([a-z|-]+)` and `distance --human-stories` take `--engine ray`",
                  readme)
    assert m is not None
    named = {"vistkit score", "vistkit compare", "vistkit distance"}
    named |= {f"vistkit meta {v}" for v in m.group(1).split("|")}
    having = {path for path, cmd in _leaves(tree) if any("--engine" in p.opts for p in cmd.params)}
    assert having == named


def test_cli_md_short_flags_are_the_trees(tree: Any) -> None:
    """cli.md's table of flags: each short flag means its long option on every verb that has it (and on no other
    long option), and `-o`'s row names exactly the verbs that take `-o`."""
    rows = re.findall(r"^\| `(-\w)` \| `(--[\w-]+)` \| (.*) \|$", _read("docs/cli.md"), re.M)
    table = {short: long for short, long, _ in rows}
    assert len(table) == 10
    seen: dict[str, set[str]] = {}
    for path, cmd in [("vistkit", tree), *_leaves(tree)]:
        for p in cmd.params:
            for short in (o for o in p.opts if re.fullmatch(r"-\w", o)):
                seen.setdefault(short, set()).update(o for o in p.opts if o.startswith("--"))
                if short == "-o":
                    seen.setdefault("-o verbs", set()).add(path.removeprefix("vistkit "))
    assert {s: longs for s, longs in seen.items() if s != "-o verbs"} == {s: {lg} for s, lg in table.items()}
    [o_row] = [text for short, _, text in rows if short == "-o"]
    assert set(re.findall(r"`((?:meta|studio|vrank) [a-z-]+)`", o_row)) == seen["-o verbs"]


def test_the_reference_page_does_not_depend_on_import_order() -> None:
    """The verbs were listed in the order their modules were imported, which in a test run depends on the tests run
    before in that worker: the page test failed in CI and passed alone. They are listed sorted, as `--help` does."""
    import subprocess
    import sys

    pages = []
    for first in ("vistkit.commands.vrank, vistkit.commands.demo", "vistkit.commands.score"):
        script = (f"import sys; sys.path.insert(0, 'scripts'); import {first}; import gen_cli_docs; "
                  "print(gen_cli_docs.page())")
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True,
                              cwd=ROOT)  # fmt: skip
        pages.append(done.stdout)
    assert pages[0] == pages[1] == _read("docs/reference.md") + "\n"
