"""sync: keeps a local SQLite mirror of the Channel Content API up to date.

The package is a library with a thin CLI (`sync.cli`): configuration (`config`), the resource
catalogue (`catalogue`), the upstream client (`channel`), the mirror store (`store`), the backfill
(`backfill`), the daemon (`daemon`, `webhooks`, `jobs`) and the bundled emulator (`emulator`).
"""

__version__ = "0.1.0"
