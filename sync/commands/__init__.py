"""CLI commands, one module per command group; each module wires options to the library.

`COMMANDS` maps each command name to where it is defined; `sync.cli` imports a module only when
its command runs (or `--help` lists them), so `ccsync backfill` does not load the daemon's
scheduler and web server.

May import: model, core, emulator, channel, management, pipeline, store, ingest, jobs, readers,
daemon.
"""

from __future__ import annotations

COMMANDS: dict[str, str] = {
    "backfill": "sync.commands.mirror:backfill_command",
    "check": "sync.commands.check:check_command",
    "status": "sync.commands.mirror:status_command",
    "changes": "sync.commands.mirror:changes_command",
    "probe": "sync.commands.probe:probe_command",
    "datasette-metadata": "sync.commands.mirror:datasette_metadata_command",
    "run": "sync.commands.daemon:run_command",
    "reconcile": "sync.commands.daemon:reconcile_command",
    "webhooks": "sync.commands.daemon:webhooks_group",
    "demo": "sync.commands.daemon:demo_command",
    "emulator": "sync.commands.emulator:emulator_command",
    "articles": "sync.commands.management:articles_group",
    "messages": "sync.commands.management:messages_group",
}
