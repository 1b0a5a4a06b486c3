"""One module per ``vistkit`` verb; each registers itself on `vistkit.cli.app`."""
