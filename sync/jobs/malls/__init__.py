"""What the malls hold and where their members come from: the fast path of many malls in one
request (`mallincludes`), the malls' routes as the source of a top-level type's memberships
(`mallroutes`, and `touchedmalls`, the routes asked only for the rows a change touched),
relationships no include brings (`relroutes`), rows other rows include (`sideloads`) and the
malls' opening hours (`hours`). They ask `filter[id]` through the evidence part
(`sync.jobs.evidence`).

May import: model, core, channel, management, pipeline, store, ingest.
"""
