"""The upstream client for the Channel Content API: signing, retries, paging (`client`), and
pages validated on arrival (`pages`).

Nothing is imported here, so that `sync.channel.pages` stays light: a backfill's staging worker
process imports it without aiohttp.
"""
