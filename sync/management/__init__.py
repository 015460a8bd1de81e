"""The management API v1 client (the successor API): press release list, article and message
update.

May import: model, core, channel.
"""
