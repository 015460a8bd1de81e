"""The page pipeline: a listing page turned into the rows the mirror's page write binds, with
no database. From the ground up: `encoding` (values as the mirror stores them, a copy's
version), `linkage` (relationships as columns and links), `batches` (the staged rows: `Staged`,
`StagedPage`), `checks` (stamps and declared values held to the spec), `seen` (the memo of rows
already written, the one place it lives), `staging` (a page to batches), `pageworker` (the process
that stages backfill pages, and its pipe) and `pagepool` (the main process's side of it).

May import: model, core, channel.
"""
