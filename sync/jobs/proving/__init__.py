"""Proving the mirror complete: the rolling proof of every scope once per staleness bound
(`proof`, with `position` where it stands, `proofdiff` its unit diff and `pacing` its
arithmetic), the listing diff of a whole pass (`reconcile`: `ccsync reconcile` and the
backfill's missed-row pass) and the rolling verify of content changed under an unchanged
stamp (`verify`). What a diff finds is decided by the evidence part (`sync.jobs.evidence`).

May import: model, core, channel, management, pipeline, store, ingest.
"""
