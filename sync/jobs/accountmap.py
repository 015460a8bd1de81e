"""Which account reads which type, as the mirror records it (`ccsync status`).

With several accounts (`[[upstream.accounts]]`) the client learns, route by route, which account
the upstream lets read it (`sync.channel.accounts`) and keeps that in `_sync_meta`; this turns
the record into type -> e-mail for the readers layer, which does not import the channel.
"""

from __future__ import annotations

from collections.abc import Iterable

from sync.channel import accounts
from sync.channel.profile import route_key
from sync.model import catalogue
from sync.store import MirrorStore


def account_of_types(mirror: MirrorStore, types: Iterable[str]) -> dict[str, str]:
    """Type -> the e-mail of the account that reads its listing route. Empty with one account
    (nothing to choose, nothing recorded); a type no account has read yet is left out."""
    learned = accounts.loads(mirror.meta.get(accounts.META_KEY))["readers"]
    out: dict[str, str] = {}
    for name in types:
        rtype = catalogue.TYPES.get(name)
        email = learned.get(route_key(rtype)) if rtype is not None else None
        if email is not None:
            out[name] = email
    return out
