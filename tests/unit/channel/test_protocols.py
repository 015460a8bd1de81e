"""sync.channel.protocols: the transport seam (`Sender`) names what the session uses of a
transport, which the real one and the test fake both offer alike; and a store with only
`MetaStore`'s two methods is all a client needs to keep what it learns."""

from __future__ import annotations

import inspect
from typing import Any

from sync.channel.accounts import META_KEY as ACCOUNTS_KEY
from sync.channel.client import ChannelClient
from sync.channel.clock import META_KEY as CLOCK_KEY
from sync.channel.paging import META_KEY as PAGING_KEY
from sync.channel.profile import META_KEY as PROFILE_KEY
from sync.channel.protocols import MetaStore, Sender
from sync.channel.transport import Transport
from sync.core.config import UpstreamSettings
from tests.support.transport import FakeTransport, answer


def _members(protocol: type) -> dict[str, Any]:
    """A protocol's own members: annotated attributes, properties and methods."""
    out: dict[str, Any] = dict.fromkeys(inspect.get_annotations(protocol))
    for name, value in vars(protocol).items():
        if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property)):
            out[name] = value
    return out


def test_sender_names_what_the_session_uses_and_both_transports_offer_it_alike() -> None:
    """The real `Transport` and the fake take every parameter `Sender.send` names, of the
    same kind (they may take more, not fewer), and hold its attributes."""
    members = _members(Sender)
    assert set(members) == {"stats", "unreachable_reason", "send", "aclose"}
    fake = FakeTransport(lambda sent: answer(200, {"data": []}))
    for cls in (Transport, FakeTransport):
        for name, declared in members.items():
            if not inspect.isfunction(declared):
                continue
            offered = inspect.signature(getattr(cls, name))
            assert inspect.iscoroutinefunction(getattr(cls, name)), (cls, name)
            for param in inspect.signature(declared).parameters.values():
                assert param.name in offered.parameters, (cls, name, param.name)
                assert offered.parameters[param.name].kind == param.kind, (cls, param.name)
    assert hasattr(fake, "stats") and hasattr(fake, "unreachable_reason")


class _MetaOnly:
    """Nothing but `MetaStore`'s two methods, over a dict."""

    def __init__(self, meta: dict[str, str]) -> None:
        self.meta = meta
        self.asked: list[str] = []

    def get(self, key: str) -> str | None:
        self.asked.append(key)
        return self.meta.get(key)

    def set(self, key: str, value: str) -> None:
        self.meta[key] = value


def test_a_store_with_only_get_and_set_restores_what_a_client_learned() -> None:
    assert set(_members(MetaStore)) == {"get", "set"}
    store = _MetaOnly({PAGING_KEY: "40:"})
    client = ChannelClient(
        UpstreamSettings(base_url="http://u", email="a@x", password="pw"), store=store
    )
    assert client.session.paging.asked == 40
    assert set(store.asked) == {PAGING_KEY, CLOCK_KEY, PROFILE_KEY}  # one account: none kept
    assert ACCOUNTS_KEY not in store.meta
