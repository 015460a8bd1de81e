"""The page pipeline: a listing page turned into the rows the mirror's page write binds, with
no database (`staging`), the memo of rows already written (`seen`) and the worker processes
that stage backfill pages (`pagepool`).

May import: model, core, channel.
"""
