"""Jobs: each one way the mirror is brought level with the upstream. `fetch` (by id),
`queueworker` (the queue worker), `backfill` (with `backfillrun`, its start, cursors and
report; its `missedrows` pass, run on evidence such as `changedsince`; `backfilltail`, what
follows the pages), `poll` (its `walks` and the `lateness` its lookback adapts to),
`mallincludes` (many malls in a request), `feed` (the deletions feed's entries applied as
dated evidence), `mallroutes` and `relroutes` (linkage from other routes),
`reconcile`, `proof` (the rolling proof of every scope once per staleness bound, with
`proofdiff` its unit diff, `pacing` its arithmetic and `freshness` the change lag), `sideloads`,
`verify`, `hours` (the malls' opening hours), `press` (the management
API's press releases), `typefaults` (faults kept in their type) and `progress`; with `fanout`
(bounded concurrency), `oneshot` (a command's mirror and client), `probe` (`ccsync probe`), `check` (`ccsync check`) and
`accountmap` (which account reads which type, for `ccsync status`).

May import: model, core, channel, management, pipeline, store, ingest.
"""
