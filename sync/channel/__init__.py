"""The upstream client for the Channel Content API, in layers: `signing` (signed query
parameters), `transport` (the aiohttp session's retries, backoff and concurrency), `budget` (the
request budget), `session` (login, re-login, skew correction and status mapping, each one
method, and the paged GET, over a transport), `pages` (a page validated on arrival), `paging`
(the one stop rule and the one paging loop), `listing` (a listing request as a value),
`protocols` (the seams: what the session needs of a transport, `Sender`, and of a store), then
the endpoints: `client` (the listings, holding the session and the two below), `includes` (the
include= fallback), `webhooks` (the subscriptions); `profile` (what the upstream was seen to
honour) and `clock` (now on the scale of the stamps served, learned from them).

Nothing is imported here, so that `sync.channel.pages` stays light: a backfill's staging worker
process imports it without aiohttp.

May import: model, core.
"""
