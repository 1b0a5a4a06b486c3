"""``vistkit vrank train|predict``: train Vrank (Hsu et al. 2022) on VHED-layout pairs and predict ranking gaps.

A trained folder is also the ``vrank`` metric: ``--metrics vrank --option vrank.model=DIR`` in ``vistkit score``,
``compare`` and ``meta``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import typer

from vistkit.cli import app
from vistkit.commands.common import FormatOption, echo, warn_ignored, writes_output
from vistkit.errors import InputError
from vistkit.report.tables import OutputFormat, dumps_json, render_table

vrank_app = typer.Typer(help="Vrank (Hsu et al. 2022): train on human story rankings, predict ranking gaps.")
app.add_typer(vrank_app, name="vrank")

LabelSignOpt = typer.Option(
    "auto",
    "--label-sign",
    metavar="auto|base-minus-comp|comp-minus-base",
    help="How 'label' was subtracted: auto, base-minus-comp or comp-minus-base.",
)
DeviceOpt = typer.Option(
    None, "--device", metavar="DEVICE", help="cpu, cuda, cuda:1, mps (default: a GPU when present)."
)
ThreadsOpt = typer.Option(None, "--threads", help="CPU threads for torch (default: torch's choice).")


def _progress() -> tuple[ExitStack, Callable[[str, int, int], None]]:
    """A ``with`` block and the ``progress(stage, done, total)`` callback of `train_vrank`: one task per stage
    (`vistkit.progress`: a bar on a terminal, a line every 10 s in a log, nothing with --quiet)."""
    from vistkit import progress

    stack = ExitStack()
    tasks: dict[str, Any] = {}

    def update(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            stack.close()  # the previous stage is over
            label = {"mlm": "MLM pre-training", "train": "training Vrank"}.get(stage, stage)
            tasks[stage] = stack.enter_context(progress.task(label, total, unit="steps", verb="ran"))
        tasks[stage].update(done)

    return stack, update


def _mlm_texts(path: Path) -> list[str]:
    """Every story of a story file, or of every file in a folder (any format vistkit reads)."""
    from vistkit.data.readers import read_stories

    if not path.exists():
        raise InputError(f"--mlm-stories {path}: no such file or folder")
    files = (
        sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")) if path.is_dir() else [path]
    )
    texts = [s.text for f in files for s in read_stories(f) if s.text.strip()]
    if not texts:
        raise InputError(f"--mlm-stories {path}: holds no stories")
    return texts


def _warn_proxy_labels(pairs: list[Any], consequence: str) -> None:
    """Warn when pairs carry a PROXY label (`meta build-pairs`: "the human story is better", an assumption that its
    ``label_source`` column names) rather than people's rankings; `meta pairs` says so, `vrank` said nothing."""
    from vistkit.errors import warn

    proxy = sum(1 for p in pairs if p.meta.get("label", "").startswith("proxy"))
    if proxy:
        warn(
            f"{proxy:,} of {len(pairs):,} pairs carry a PROXY label (`meta build-pairs`: the human story is assumed "
            f"better), not a human judgement; {consequence}"
        )


@vrank_app.command("train")
@writes_output(out="model")
def train_cmd(
    pairs_csv: Path = typer.Argument(..., help="Training pairs in the VHED layout (sent1, sent2, label, ...)."),
    out: Path = typer.Option(..., "--output", "-o", metavar="FOLDER", help="Folder to write the trained model to."),
    encoder: str = typer.Option(
        "princeton-nlp/sup-simcse-bert-base-uncased",
        "--encoder",
        help="Encoder folder or hub id (local path > packaged > Hugging Face cache; never downloaded).",
    ),
    lr: float = typer.Option(2e-5, "--lr", help="Adam learning rate (paper: 2e-5)."),
    batch_size: int = typer.Option(32, "--batch-size", help="Batch size (paper: 32)."),
    epochs: int = typer.Option(30, "--epochs", help="Training epochs (paper: 30)."),
    seed: int = typer.Option(7777, "--seed", help="Random seed (paper: 7777)."),
    precision: str = typer.Option(
        "auto",
        "--precision",
        metavar="auto|fp32|fp16|bf16",
        help="auto (fp16 mixed precision on CUDA, else fp32), fp32, fp16 or bf16.",
    ),
    max_length: int = typer.Option(512, "--max-length", help="Tokens of 'story1 [SEP] story2' kept."),
    target: str = typer.Option(
        "gap", "--target", metavar="gap|normalised", help="Regress the ranking gap (gap) or gap / N (normalised)."
    ),
    schedule: str = typer.Option(
        "linear", "--schedule", metavar="linear|constant", help="Learning rate: linear decay to 0, or constant."
    ),
    mlm_stories: Path | None = typer.Option(
        None, "--mlm-stories", help="Story file or folder: masked-LM pre-training first (paper: VIST train refs)."
    ),
    mlm_epochs: int = typer.Option(3, "--mlm-epochs", help="MLM pre-training epochs."),
    mlm_lr: float = typer.Option(5e-5, "--mlm-lr", help="MLM pre-training learning rate."),
    data_name: str | None = typer.Option(
        None, "--data-name", help="Training data name for the signature (default: the file name)."
    ),
    label_sign: str = LabelSignOpt,
    device: str | None = DeviceOpt,
    threads: int | None = ThreadsOpt,
    force: bool = typer.Option(False, "--force", help="Overwrite a model already in --output."),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Train Vrank as published: symmetric pairs, 'story1 [SEP] story2' -> ranking gap, MSE (Vrank Sect. 4)."""
    from vistkit.meta.human import read_pairs
    from vistkit.models.checkpoints import META_FILE, file_sha256, model_fingerprint
    from vistkit.models.vrank import VrankSettings, set_threads, train_vrank

    settings = VrankSettings(
        lr=lr,
        batch_size=batch_size,
        epochs=epochs,
        seed=seed,
        precision=precision,
        max_length=max_length,
        target=target,
        schedule=schedule,
        mlm_epochs=mlm_epochs,
        mlm_lr=mlm_lr,
    )
    settings.check()
    from vistkit.metrics._options import check_device, check_device_here
    from vistkit.models.vrank import check_target, check_threads, resolve_encoder

    check_device(device)  # these three before torch is imported or a file read
    check_threads(threads)
    resolve_encoder(encoder)
    set_threads(threads)
    if (out / META_FILE).exists() and not force:
        raise InputError(f"{out} already holds a model; pass --force to overwrite it or choose another --output")
    pairs = read_pairs(pairs_csv, label_sign=label_sign)
    _warn_proxy_labels(pairs, "the model learns that assumption, not what people prefer")
    check_target(pairs, settings.target)  # --target normalised needs every pair's N: before the MLM stories load
    texts = _mlm_texts(mlm_stories) if mlm_stories is not None else None
    check_device_here(device)  # a cuda/mps device this machine lacks: before the encoder loads (torch only then)
    progress, update = _progress()
    from vistkit.data.output import MODEL_MARKERS, replaced_folder

    # trained beside it, then renamed into place whole: a failed save (a full disk) leaves an earlier model loadable
    with progress, replaced_folder(out, markers=MODEL_MARKERS) as fresh:
        train_vrank(
            pairs,
            fresh,
            encoder=encoder,
            settings=settings,
            mlm_texts=texts,
            data_name=data_name or pairs_csv.name,
            data_sha256=file_sha256(pairs_csv),
            device=device,
            threads=threads,
            progress=update,
        )
    folder = out
    import json

    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    summary = {
        "model": str(folder),
        "fingerprint": model_fingerprint(folder),
        "encoder": encoder,
        "data": meta["data"],
        "device": meta["device"],
        "precision": meta["precision"],
        "seconds": meta["seconds"],
        "final_epoch_loss": meta["epoch_loss"][-1],
        "settings": meta["training"],
    }
    if fmt is OutputFormat.JSON:
        echo(dumps_json(summary))
        return
    rows = [
        [k, v if not isinstance(v, dict) else ", ".join(f"{a}={b}" for a, b in v.items())] for k, v in summary.items()
    ]
    echo(render_table(["field", "value"], rows, fmt, title="vrank train"))


@vrank_app.command("predict")
@writes_output(output="file")
def predict_cmd(
    pairs_csv: Path = typer.Argument(..., help="Pairs in the VHED layout."),
    model: Path = typer.Option(
        ..., "--model", metavar="FOLDER", help="A trained Vrank folder (`vistkit vrank train`)."
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="CSV to write (default: the CSV goes to stdout and no summary is printed)."
    ),
    label_sign: str = LabelSignOpt,
    batch_size: int = typer.Option(32, "--batch-size", min=1, max=1_000_000, help="Pairs per forward pass."),
    device: str | None = DeviceOpt,
    threads: int | None = ThreadsOpt,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Predicted ranking gap per pair (> 0: story 1 preferred): the published g(s1, s2) and the antisymmetrised
    (g(s1, s2) - g(s2, s1)) / 2 that the `vrank` metric uses; with --output, also the pair accuracy of both."""
    import numpy as np

    from vistkit.errors import MissingDependencyError
    from vistkit.meta.human import read_pairs
    from vistkit.metrics._options import check_device, check_device_here
    from vistkit.models.vrank import check_threads, load_vrank, set_threads

    check_device(device)  # these three before torch is imported (`load_vrank` says the same, after it)
    check_threads(threads)
    if output is None and fmt is not OutputFormat.TEXT:  # -f json printed the CSV without a word
        warn_ignored(["--format"], "the summary printed with --output (without it the CSV goes to stdout)")
    if not model.expanduser().exists():
        raise MissingDependencyError(
            f"no Vrank model at {model.expanduser()}; train one with `vistkit vrank train PAIRS.csv --output DIR` "
            "and pass that folder"
        )
    set_threads(threads)
    pairs = read_pairs(pairs_csv, label_sign=label_sign)
    if output is not None:  # the accuracy is then against that assumption
        _warn_proxy_labels(pairs, "the accuracy is how often the model prefers the human story")
    check_device_here(device)  # a cuda/mps device this machine lacks: before the model loads (torch only then)
    vr = load_vrank(model, device=device, batch_size=batch_size)
    t1, t2 = [p.text_1 for p in pairs], [p.text_2 for p in pairs]
    from vistkit import progress

    with progress.task("vrank", 2 * len(pairs), unit="pairs (both orders)", verb="predicted") as task:
        both = vr.predict([*t1, *t2], [*t2, *t1])
        task.update(2 * len(pairs))
    raw, rev = both[: len(pairs)], both[len(pairs) :]
    sym = (raw - rev) / 2.0
    columns = ["pair_id", "story_id", "img_seq", "model_base", "model_comp", "gap", "pred_gap", "pred_gap_sym"]
    from vistkit.data.output import open_csv_output

    with open_csv_output(output if output is not None else "-") as w:
        w.writerow(columns)
        for p, g, s in zip(pairs, raw, sym, strict=True):
            w.writerow(
                [
                    p.pair_id,
                    p.story_id,
                    "-".join(p.img_seq),
                    p.system_1,
                    p.system_2,
                    repr(p.gap),
                    repr(float(g)),
                    repr(float(s)),
                ]
            )
    if output is None:
        return
    gold = np.array([p.gap for p in pairs])
    # as `meta pairs`: a pair without a human preference, or whose prediction is undefined (NaN: a model whose
    # weights hold NaN), counts in no denominator; the undefined ones are counted
    undefined = gold != 0
    undefined &= np.isnan(raw) | np.isnan(sym)
    keep = (gold != 0) & ~undefined
    summary = {
        "pairs": len(pairs),
        "scored_pairs": int(keep.sum()),
        "undefined_pairs": int(undefined.sum()),
        "accuracy": float(np.mean(np.sign(raw[keep]) == np.sign(gold[keep]))) if keep.any() else None,
        "accuracy_sym": float(np.mean(np.sign(sym[keep]) == np.sign(gold[keep]))) if keep.any() else None,
        "output": str(output),
        "note": "pred_gap > 0: story 1 preferred (sign of -label for VHED's base-minus-comp label); "
        "accuracy counts pairs with a non-zero human gap (predicted ties are wrong) and a defined prediction",
    }
    if fmt is OutputFormat.JSON:
        echo(dumps_json(summary))
    else:
        echo(render_table(["field", "value"], [[k, v] for k, v in summary.items()], fmt, title="vrank predict"))
