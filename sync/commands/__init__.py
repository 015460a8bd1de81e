"""CLI commands, one module per command group; each module wires options to the library.

`ALL` is what `sync.cli` attaches to the `sync` group.
"""

from __future__ import annotations

import click

from sync.commands import daemon, emulator, management, mirror

ALL: list[click.Command] = [
    mirror.backfill_command,
    mirror.status_command,
    daemon.run_command,
    daemon.reconcile_command,
    daemon.webhooks_group,
    daemon.demo_command,
    emulator.emulator_command,
    management.articles_group,
    management.messages_group,
]
