"""Write docs/reference.md, every verb's arguments and options with their defaults, from the command tree.

    .venv/bin/python scripts/gen_cli_docs.py

The guides (docs/cli.md, docs/meta.md, docs/studio.md, README.md) explain; this page lists, so that every option
of every verb is documented with the spelling, default and help text the program has (`vistkit VERB --help`
shows the same). tests/test_probes_docs_r10.py fails when the page is older than the code.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "docs" / "reference.md"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _default(param: Any) -> str:
    """The default as a user would type it; empty when the option has none (or is required)."""
    value = param.default
    if param.required or value is None or value == [] or value == ():
        return ""
    if getattr(param, "is_flag", False):
        if getattr(param, "secondary_opts", None):  # --x/--no-x
            return f"`{param.opts[0] if value else param.secondary_opts[0]}`"
        return "" if value is False else "on"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value) if "e" not in repr(value) else value
    return f"`{value}`"


def _row(param: Any) -> str:
    names = [*param.opts, *param.secondary_opts]
    if param.param_type_name == "argument":
        label = f"`{param.display_name_raw}`"
    else:
        shorts = [n for n in names if not n.startswith("--")]
        longs = [n for n in names if n.startswith("--")]
        label = ", ".join(f"`{n}`" for n in [*longs, *shorts])
        value = None if getattr(param, "is_flag", False) else param.display_type_rich(None)
        if value:
            label += f" `{value}`".replace("|", "\\|")
    if param.required:
        label += " (required)"
    return f"| {label} | {_default(param)} | {_cell(getattr(param, 'help', None) or '')} |"


def page() -> str:
    """The Markdown of docs/reference.md."""
    import typer

    from vistkit.cli import _load_commands, app

    _load_commands()
    tree = typer.main.get_command(app)
    lines = [
        "# Command reference",
        "",
        "Every verb of `vistkit` with its arguments and options, their defaults and help text, generated from the "
        "program (`python scripts/gen_cli_docs.py`; `vistkit VERB --help` shows the same help texts). The conventions "
        "they share are in [cli.md](cli.md); `-q`/`--quiet` is accepted by every verb and before it, `-V`/`--version` "
        "before any verb. An empty default: the option is off or unset (its text says what that means).",
        "",
    ]

    def walk(cmd: Any, path: str) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            lines.extend([f"## `{path}`", "", _cell((cmd.help or "").split("\n\n")[0]), ""])
        if not subs:
            args = " ".join(p._usage_display_name() for p in cmd.params if p.param_type_name == "argument")
            lines.extend([f"### `{path}{' ' + args if args else ''}`", "", _cell((cmd.help or "").split("\n\n")[0])])
            rows = [_row(p) for p in cmd.params if p.name != "quiet"]
            if rows:
                lines.extend(["", "| argument / option | default | meaning |", "|---|---|---|", *rows])
            lines.append("")
        # sorted as `vistkit --help` lists them: the order verbs were registered in depends on which command
        # modules were imported first (in a test run, on the tests before), so the page was not reproducible
        for name, sub in sorted((subs or {}).items()):
            walk(sub, f"{path} {name}")

    walk(tree, "vistkit")
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> None:
    OUT.write_text(page(), encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
