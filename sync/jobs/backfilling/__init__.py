"""The backfill: every page of every type (`backfill`), its run kept across resumes
(`backfillrun`: start, cursors handed on, report), whether a type needs the missed-row pass
(`missedrows`, on evidence such as `changedsince`) and what follows the pages (`backfilltail`:
linkage from other routes, press releases).

May import: model, core, channel, management, pipeline, store, ingest.
"""
