"""``vistkit meta build-pairs|rankings-to-pairs``: build VHED-layout pair files."""

from __future__ import annotations

from pathlib import Path

import typer

from vistkit.commands.common import RefFormatOption, emit, writes_output
from vistkit.commands.meta import meta_app
from vistkit.commands.meta.common import _parse_story_files
from vistkit.data.output import is_standard_output
from vistkit.errors import InputError


@meta_app.command("build-pairs")
@writes_output(output="file")
def build_pairs_cmd(
    references: Path = typer.Option(..., "--references", "-r", help="Human stories (e.g. PR_VIST.json.zip)."),
    machine: list[str] = typer.Option(
        ..., "--machine", metavar="SYSTEM=FILE", help="SYSTEM=FILE[:FIELD] machine stories, repeatable."
    ),
    key: list[str] = typer.Option(
        [], "--key", "-k", metavar="SYSTEM=KEY", help="SYSTEM=story|sequence per machine file (default story)."
    ),
    output: Path = typer.Option(..., "--output", "-o", help="Pairs CSV to write (VHED layout)."),
    ref_format: str | None = RefFormatOption,
    limit: int | None = typer.Option(None, "--limit", help="Keep only the first N pairs per system."),
) -> None:
    """Human-vs-machine pairs in the VHED layout with the PROXY label "the human story is better"."""
    from vistkit.data.readers import read_stories
    from vistkit.meta.human import REFERENCE_SYSTEMS, build_reference_pairs, is_reference_system, write_pairs

    if limit is not None and limit < 1:  # 0 wrote a header-only file, which `meta pairs` refuses
        raise InputError(f"--limit must be 1 or more (pairs kept per system), not {limit}")
    files = _parse_story_files(machine, "--machine")  # checked before the references are read
    marker = next((name for name in files if is_reference_system(name)), None)
    if marker is not None:
        raise InputError(
            f"--machine {marker}=...: vistkit reads the system name {marker!r} as a human reference (any of "
            f"{', '.join(sorted(REFERENCE_SYSTEMS))}, in any case), so every pair would set a reference against a "
            "reference; name the machine system otherwise"
        )
    refs = read_stories(references, format=ref_format, system="human")
    keys = dict(_split_eq(k, "--key") for k in key)
    unknown = [k for k in keys if k not in files]
    if unknown:
        raise InputError(f"--key {unknown[0]}=...: no --machine is named {unknown[0]!r} (machines: {', '.join(files)})")
    from vistkit.data.story import Keying

    for system, value in keys.items():
        keys[system] = Keying.parse(value).value
        if keys[system] == Keying.ALBUM.value:  # a machine story against human stories of other photos
            raise InputError(
                f"--key {system}={value.strip()}: human-vs-machine pairs are keyed by story or sequence, not album (a "
                "machine story would be set against the human stories of other photos of its album, and written "
                f"with their photo sequence); pass --key {system}=story or {system}=sequence"
            )
    pairs = []
    for name, (path, field) in files.items():
        m = read_stories(path, field=field, system=name)
        pairs += build_reference_pairs(refs, [m], key=keys.get(name, "story"), limit=limit)
    write_pairs(pairs, output)
    emit(
        f"wrote {len(pairs)} pairs to {_where(output)} (label is a proxy: the human story is assumed better)",
        to_stderr=is_standard_output(output),
    )


def _split_eq(v: str, opt: str) -> tuple[str, str]:
    if "=" not in v:
        raise InputError(f"{opt} {v!r}: write SYSTEM=VALUE")
    from vistkit.meta.human import name_of

    a, b = v.split("=", 1)
    return name_of(a), b.strip()  # a system name as --machine's (`_parse_story_files`)


@meta_app.command("rankings-to-pairs")
@writes_output(output="file")
def rankings_to_pairs_cmd(
    rankings_csv: Path = typer.Argument(..., help="Raw rankings: task, worker, story, rank (+ text, system, ...)."),
    output: Path = typer.Option(..., "--output", "-o", help="Pairs CSV to write (VHED layout)."),
) -> None:
    """Turn raw rankings into VHED-style pairs (C(N,2) per task, agreement folded to 3/4/5, zero gaps
    dropped; a worker who ties two stories counts for neither side of the agreement)."""
    from vistkit.commands.common import note
    from vistkit.meta.human import pairs_from_rankings, read_rankings, write_pairs

    pairs = pairs_from_rankings(read_rankings(rankings_csv))
    if not pairs:
        raise InputError(
            f"{rankings_csv}: no two stories of a task have different average ranks (every pair is tied, or every "
            "task has one story), so there is no pair with a human preference to write"
        )
    write_pairs(pairs, output)
    emit(f"wrote {len(pairs)} pairs to {_where(output)}", to_stderr=is_standard_output(output))
    tied = sum(1 for p in pairs if p.meta.get("ties", "0") != "0")
    if tied:
        note(
            f"note: in {tied} of {len(pairs)} pairs some workers gave both stories the same rank; a tie counts for "
            "neither side of the agreement"
        )


def _where(output: str | Path) -> str:
    """An output as a message names it: ``-`` is standard output."""
    return "standard output" if str(output) == "-" else str(output)
