"""``vistkit demo``: the main job on data the package ships (no ../shared, no download)."""

from __future__ import annotations

import shlex
from importlib import resources
from pathlib import Path

from vistkit.cli import app
from vistkit.commands.common import echo, note
from vistkit.data.story import StorySet
from vistkit.errors import MissingDependencyError, VistkitError, out_of_memory

# Offline metrics, in display order; a metric that cannot run here is reported, not fatal.
DEMO_METRICS = (
    "meteor-vist",
    "bleu-4",
    "rouge-l",
    "cider-d",
    "sacrebleu",
    "bertscore",
    "rovist-nr",
    "coherence",
    "story-ranker",
)


@app.command()
def demo() -> None:
    """Score 50 LLaVA stories against their human VIST stories with nine offline metrics, then dHM's C and R."""
    from vistkit import progress
    from vistkit.commands.score import render_scores
    from vistkit.data.readers import read_stories
    from vistkit.metrics.base import Score, get_metric, list_metrics
    from vistkit.report.tables import OutputFormat

    root = resources.files("vistkit.resources") / "demo"
    with resources.as_file(root) as folder:
        human = read_stories(folder / "human_stories.json", system="human")
        llava = read_stories(folder / "llava_stories.json", system="llava")
    shipped = Path(str(root))  # a folder on disk in every ordinary install (not inside a zip)
    echo(
        f"vistkit demo: {len(llava)} LLaVA-NeXT stories vs their human VIST stories (dHM sample, CC BY 4.0), "
        "keyed by story id.\n"
    )
    available = list_metrics()
    results: list[Score] = []
    skipped: list[str] = []
    for name in DEMO_METRICS:
        if name not in available:
            skipped.append(f"{name}: not in this build")
            continue
        try:
            metric = get_metric(name)
            refs = human if metric.needs_references else None
            with progress.labelled("llava"):
                results.append(metric.score(llava, refs, key="story"))
            if not metric.needs_references:  # reference-free: show the human stories too
                with progress.labelled("human"):
                    human_score = metric.score(human, None, key="story")
                human_score.metric = f"{name} (human)"
                results.append(human_score)
        except VistkitError as exc:
            skipped.append(f"{name}: {exc}")
        except (MemoryError, RuntimeError) as exc:  # the other metrics' results are still shown
            if (memory := out_of_memory(exc)) is None:
                raise
            skipped.append(f"{name}: {memory}")
    if results:
        echo(render_scores(results, OutputFormat.TEXT))
        if any(r.metric == "story-ranker" for r in results):
            echo(
                "story-ranker is vistkit's own learned ranker: how far its v2 agrees with people is not known yet "
                "(no held-out number has been measured; docs/models/story-ranker-v2.md)."
            )
    for line in skipped:
        note(f"skipped {line}")
    _demo_distance(human, llava)
    scored = [r.metric for r in results if " (" not in r.metric]  # "rovist-nr (human)" is a second run
    on_human = [r.metric.removesuffix(" (human)") for r in results if r.metric.endswith(" (human)")]
    if scored and (shipped / "llava_stories.json").is_file():
        stories = shlex.quote(str(shipped / "llava_stories.json"))
        references = shlex.quote(str(shipped / "human_stories.json"))
        echo(
            f"\nThe same with the CLI: vistkit score {stories} --references {references} --key story "
            f"-m {','.join(scored)}"
        )
        if on_human:  # the "(human)" rows: the reference-free metrics on the human stories, a run of their own
            echo(f"The (human) rows: vistkit score {references} --key story -m {','.join(on_human)}")
    echo("\nNext: `vistkit metrics` lists every metric; `vistkit metrics --info NAME` shows its card.")


def _demo_distance(human: StorySet, llava: StorySet) -> None:
    """dHM human-model distance on the two dimensions that need no download (coherence C, non-redundancy R); on R
    alone when the coherence model is not installed."""
    from vistkit.metrics.base import Metric, get_metric
    from vistkit.report.tables import OutputFormat
    from vistkit.scores.dhm import compute_dhm, render_dhm

    coherence: Metric | str = "coherence"
    dimensions = "C,R"
    try:  # without its model (no `models` extra) C is left out, not the distance: R needs no model
        coherence = get_metric("coherence")
    except MissingDependencyError as exc:
        note(f"dHM's coherence dimension C is left out: {exc}")
        dimensions = "R"
    except (MemoryError, RuntimeError) as exc:
        if (memory := out_of_memory(exc)) is None:
            raise
        note(f"dHM's coherence dimension C is left out: {memory}")
        dimensions = "R"
    try:
        result = compute_dhm(human, llava, c_metric=coherence, dimensions=dimensions)
    except VistkitError as exc:
        note(f"skipped dHM distance: {exc}")
        return
    except (MemoryError, RuntimeError) as exc:
        if (memory := out_of_memory(exc)) is None:
            raise
        note(f"skipped dHM distance: {memory}")
        return
    echo("\n" + render_dhm(result, OutputFormat.TEXT, title="dHM, human vs LLaVA"))
