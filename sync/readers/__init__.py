"""Readers: what the mirror tells those who only read it: `status`, the change feed
(`changes`) and Datasette metadata (`datasette`).

May import: model, core, store, jobs.
"""
