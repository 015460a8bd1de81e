"""Jobs: each one way the mirror is brought level with the upstream, in floors by concern.

At the bottom, what every job shares: `evidence` (the one place a row's fate is asked by
`filter[id]` and written), `typefaults` (faults kept in their type), `fanout` (bounded
concurrency), `oneshot` (a command's mirror and client), `progress`, `accountmap` (which
account reads which type), `probe` (`ccsync probe`), `check` (`ccsync check`) and `press` (the
management API's press releases). Above it, one subpackage per concern: `malls` (members,
routes, relationships, sideloads, hours), `incremental` (polls, the deletions feed, the
webhook queue's worker), `proving` (the rolling proof, the reconcile, the verify) and
`backfilling` (the backfill and its missed-row pass).

May import: model, core, channel, management, pipeline, store, ingest.
"""
