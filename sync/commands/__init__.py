"""CLI commands, one module per command group; each module wires options to the library.

`ALL` is what `sync.cli` attaches to the `sync` group. Add a command by adding a module here and
its click command to `ALL`.
"""

from __future__ import annotations

import click

ALL: list[click.Command] = []
