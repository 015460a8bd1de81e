"""The daemon (`ccsync run`): its lifecycle (`service`), the parts it holds open while it runs
(`running`) and its record of its own sync (`state`), the schedule arithmetic (`schedule`), the job
bodies it schedules (`bodies`, the polls one lane per type: `lanes`) and their run records (`runs`), its health and live gauges (`health`),
its HTTP app (`http`: webhook route, `/healthz`, `/metrics`), systemd integration (`systemd`) and
the demo against the bundled emulator (`demo`).

May import: model, core, emulator, channel, pipeline, store, ingest, jobs, readers.
"""
