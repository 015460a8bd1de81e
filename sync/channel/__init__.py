"""The upstream client for the Channel Content API: signing, retries, paging (see `client`)."""

from sync.channel.client import ChannelClient
from sync.channel.pages import Page

__all__ = ["ChannelClient", "Page"]
