"""The daemon (`ccsync run`): the service that builds and runs the jobs (`service`), systemd integration (`systemd`) and the demo against the bundled emulator (`demo`).

May import: model, core, emulator, channel, pipeline, store, ingest, jobs, readers.
"""
