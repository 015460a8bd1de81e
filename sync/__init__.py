"""sync: keeps a local SQLite mirror of the Channel Content API up to date.

A library with a thin CLI (`sync.cli`, `sync.commands`). The packages are its layers, from the
ground up; each imports only those below it (its `__init__` says which, `tests/test_layers.py`
holds it to that):

- `model`: the spec's resource types, columns, stamps, scopes and notices; no I/O.
- `core`: configuration, errors, logging, redaction, metrics.
- `emulator`: the bundled stand-in upstream; it shares only `model` and `core` with the client.
- `channel`: the Channel Content API client (signing, transport, paging, profile).
- `management`: the management API v1 client.
- `pipeline`: a page turned into rows, with no database.
- `store`: the mirror; every SQL statement.
- `ingest`: the webhook receiver and subscriptions.
- `jobs`: fetch, queue worker, backfill, poll, reconcile, verify, sideloads, linkage routes.
- `readers`: status and Datasette metadata.
- `daemon`: the long-running service, systemd integration and the demo.
"""

__version__ = "0.1.0"
