"""Ingest: the webhook receiver (`receiver`) and the upstream subscriptions (`subscriptions`).
Notices go into the durable queue in the store; the jobs take them from there.

May import: model, core, channel, store.
"""
