"""Following changes as they happen: the polls (`poll`, their `walks` by key and tie runs, the
`lateness` their lookback adapts to, the `freshness` of what they commit), the deletions feed's
entries as dated evidence (`feed`), the webhook queue's worker (`queueworker`), rows created
again under a deleted id (`recreated`) and copies tied with their tombstones
(`tombstoneties`). Every row's fate they cannot read off a listing is asked of the evidence
part (`sync.jobs.evidence`).

May import: model, core, channel, management, pipeline, store, ingest.
"""
