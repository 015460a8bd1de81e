"""Jobs: each one way the mirror is brought level with the upstream. `fetch` (by id),
`queueworker` (the queue worker), `backfill` (and its `missedrows` pass), `poll` (its `walks`
and the `lateness` its lookback adapts to), `mallincludes`
(many malls in a request), `mallroutes` and `relroutes` (linkage from other routes),
`reconcile`, `sideloads`, `verify`, `hours` (the malls' opening hours), `press` (the management
API's press releases), `isolation` (faults kept in their type) and `progress`; with `fanout`
(bounded concurrency), `oneshot` (a command's mirror and client), `probe` (`ccsync probe`) and
`accountmap` (which account reads which type, for `ccsync status`).

May import: model, core, channel, management, pipeline, store, ingest.
"""
