"""Readers: what the mirror tells those who only read it: `status` and Datasette metadata
(`datasette`).

May import: model, core, store, jobs.
"""
