"""sync.channel.protocols: the client offers every member its parts ask for through `Probed`, and a
store with only `MetaStore`'s two methods is all a client needs to keep what it learns."""

from __future__ import annotations

import inspect
from typing import Any

from sync.channel.accounts import META_KEY as ACCOUNTS_KEY
from sync.channel.client import ChannelClient
from sync.channel.clock import META_KEY as CLOCK_KEY
from sync.channel.paging import META_KEY as PAGING_KEY
from sync.channel.profile import META_KEY as PROFILE_KEY
from sync.channel.protocols import MetaStore, Probed
from sync.core.config import UpstreamSettings


def _members(protocol: type) -> dict[str, Any]:
    """A protocol's own members: annotated attributes, properties and methods."""
    out: dict[str, Any] = dict.fromkeys(inspect.get_annotations(protocol))
    for name, value in vars(protocol).items():
        if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property)):
            out[name] = value
    return out


def _client(**settings: Any) -> ChannelClient:
    return ChannelClient(
        UpstreamSettings(base_url="http://u", email="a@x", password="pw", **settings)
    )


def test_probed_names_what_the_probes_use_and_the_client_offers_it_alike() -> None:
    members = _members(Probed)
    assert set(members) == {
        "base",
        "api_version",
        "paging",
        "transport",
        "credentials",
        "clock_offset",
        "list_page",
        "list_deletions",
        "request",
    }
    client = _client()
    for name, declared in members.items():
        if inspect.isfunction(declared):
            offered = inspect.signature(getattr(ChannelClient, name))
            wanted = inspect.signature(declared)
            for param in wanted.parameters.values():  # the client may take more, not fewer
                assert param.name in offered.parameters, (name, param.name)
                assert offered.parameters[param.name].kind == param.kind, (name, param.name)
        elif isinstance(declared, property):  # (read only inside `async with`)
            assert isinstance(inspect.getattr_static(client, name), property), name
        else:
            assert name in vars(client), name


class _MetaOnly:
    """Nothing but `MetaStore`'s two methods, over a dict."""

    def __init__(self, meta: dict[str, str]) -> None:
        self.meta = meta
        self.asked: list[str] = []

    def get_meta(self, key: str) -> str | None:
        self.asked.append(key)
        return self.meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        self.meta[key] = value


def test_a_store_with_only_get_and_set_meta_restores_what_a_client_learned() -> None:
    assert set(_members(MetaStore)) == {"get_meta", "set_meta"}
    store = _MetaOnly({PAGING_KEY: "40:"})
    client = ChannelClient(
        UpstreamSettings(base_url="http://u", email="a@x", password="pw"), store=store
    )
    assert client.paging.asked == 40
    assert set(store.asked) == {PAGING_KEY, CLOCK_KEY, PROFILE_KEY}  # one account: none kept
    assert ACCOUNTS_KEY not in store.meta
