"""Jobs: each one way the mirror is brought level with the upstream. `fetch` (by id),
`worker` (the queue worker), `backfill`, `poll`, `mallincludes` (many malls in a request),
`mallroutes` and `relroutes` (linkage from other routes), `reconcile`, `sideloads`, `verify`,
`isolation` (faults kept in their type) and `progress`.

May import: model, core, channel, management, pipeline, store, ingest.
"""
