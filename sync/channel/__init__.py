"""The upstream client for the Channel Content API, in layers: `signing` (signed query
parameters), `transport` (the aiohttp session, retries, re-login, skew, status mapping),
`budget` (the request budget), `pages` (a page validated on arrival), `paging` (the one stop
rule), `client` (the listing endpoints and the one paging loop) and `profile` (what the upstream
was seen to honour).

Nothing is imported here, so that `sync.channel.pages` stays light: a backfill's staging worker
process imports it without aiohttp.

May import: model, core.
"""
