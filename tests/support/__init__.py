"""Helpers the test suites share, one concept a module, so that no suite keeps its own copy.

ports (a free 127.0.0.1 port), waiting (until a condition holds), settings (settings and config
files pointed at an emulator), processes (`ccsync` and other subprocesses: spawned, logged,
stopped), daemon (the daemon run inside the test's process), backfilled (one backfill into a
mirror file), mirror_rows (reading a mirror file's rows), compare (a mirror against the
emulator), emulator_client (a signed client independent of `sync.channel`), channel_fakes (the
canned upstream answers of the client suites), chaos (the storm's config and faults).
"""
