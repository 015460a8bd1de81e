"""The management API v1 client (the successor API): `session` (headers, credentials, the
retried request, errors by status), `fields` (the writable fields of an update, checked before
sending), `walk` (what a press release walk proves absent), `press` (the press release list: its
one paging loop, and its mirroring) and `client` (`ManagementClient`, with the article and
message updates).

May import: model, core, channel.
"""
