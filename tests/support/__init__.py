"""Helpers the test suites share, one concept a module, so that no suite keeps its own copy
(and no suite imports another suite's module for one).

ports: a free 127.0.0.1 port. waiting: until a condition holds. settings: settings and config
files pointed at an emulator. processes: `ccsync` and other subprocesses, spawned, logged and
stopped. daemon: the daemon run in the test's process. backfilled: one backfill into a mirror
file. mirror_rows: read-only queries of a mirror file. compare: a mirror against the emulator.
emulator_client: a signed client of the emulator, independent of `sync.channel`, and the
JSON:API schema. channel_fakes: the upstream faked at the HTTP seam for the client suites.
chaos: the storm's config and faults. management: the management suites' config and runs.
hostile: the hostile-input suites' mirror snapshot, error line and config. proxy: a tampering
proxy in front of the emulator. readonly: a read-only mount, a group reader. pages: a resource as
served, and a page written to a mirror. twin_stores: an SQLite mirror and a PostgreSQL schema
filled by the same pages, for the PostgreSQL read parts' contract tests. store_sides: an SQLite
mirror and a PostgreSQL schema written by their own page writes, for the links' and the
memberships' contract tests. twin_books: an SQLite mirror and a PostgreSQL schema with their
books (meta, cursors, runs, a transaction, a page with its links), for the contract tests of
the PostgreSQL parts that keep them.
"""
