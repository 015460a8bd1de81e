"""sync.ingest.subscriptions: the callback URL, and `Subscriptions` keeping one per topic, per account."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from sync.channel.accounts import Accounts, _pinned
from sync.core.config import UpstreamSettings, WebhookSettings
from sync.core.errors import ConfigError, MaybeAppliedError
from sync.ingest.subscriptions import Subscriptions, callback_url
from sync.model.catalogue import TYPES

SECRET = "u1-subscriptions-secret-0123"
URL = f"http://127.0.0.1:8787/webhooks/{SECRET}"


class _Upstream:
    """`client.webhooks` over a list of subscriptions, each held by the account that made it
    (the pinned one): an account lists and deletes only its own."""

    def __init__(self) -> None:
        self.hooks: list[dict[str, Any]] = []
        self.posts: list[tuple[str, str]] = []  # (e-mail, topic)
        self.deleted: list[tuple[str, str]] = []  # (e-mail, id)
        self.fail_next_post = False
        self._ids = 0

    def _me(self) -> str:
        account = _pinned.get()
        assert account is not None, "a subscription request must be pinned to an account"
        return account.email

    def hold(self, owner: str, topic: str, url: str = URL) -> None:
        self._ids += 1
        hid = str(self._ids)
        attrs = {"topic": topic, "callback_url": url}
        self.hooks.append({"id": hid, "owner": owner, "attributes": attrs})

    async def list_all(self) -> list[dict[str, Any]]:
        return [h for h in self.hooks if h["owner"] == self._me()]

    async def subscribe(self, callback_url: str, topic: str) -> dict[str, Any]:
        self.posts.append((self._me(), topic))
        self.hold(self._me(), topic, callback_url)
        if self.fail_next_post:  # applied, but the answer was lost
            self.fail_next_post = False
            raise MaybeAppliedError("POST /webhooks timed out")
        return self.hooks[-1]

    async def unsubscribe(self, webhook_id: str) -> None:
        self.deleted.append((self._me(), webhook_id))
        self.hooks = [h for h in self.hooks if h["id"] != webhook_id]


class _Client:
    """Just what `Subscriptions` uses of a channel client."""

    def __init__(self, *emails: str) -> None:
        settings = UpstreamSettings(
            base_url="http://u",
            accounts=[{"email": e, "password": "pw"} for e in emails],  # type: ignore[misc]
        )
        self.accounts = Accounts(settings)
        self.webhooks = _Upstream()


def _hooks(**kw: Any) -> WebhookSettings:
    return WebhookSettings(secret=SecretStr(SECRET), **kw)


def test_callback_url_from_public_url_or_the_bound_port() -> None:
    assert callback_url(_hooks(public_url="https://me.example/")) == (
        f"https://me.example/webhooks/{SECRET}"
    )
    assert callback_url(_hooks(listen="0.0.0.0:0"), bound_port=4321) == (
        f"http://0.0.0.0:4321/webhooks/{SECRET}"
    )
    with pytest.raises(ConfigError, match=r"^\[webhooks\] secret is required when webhooks"):
        callback_url(WebhookSettings())


async def test_each_topic_is_subscribed_by_the_account_that_reads_its_type() -> None:
    client = _Client("a@x", "b@x")
    client.accounts.readers["/malls/{id}/stores"] = "b@x"
    subs = Subscriptions(client, _hooks(), [TYPES["deals"], TYPES["stores"]])  # type: ignore[arg-type]
    assert subs.topics == ["deals", "stores"]
    assert await subs.ensure() == []
    assert client.webhooks.posts == [("a@x", "deals"), ("b@x", "stores")]
    assert await subs.current() == {"deals": "1", "stores": "2"}
    # another receiver's subscription (another callback URL) is not ours
    client.webhooks.hold("a@x", "malls", url="http://elsewhere/webhooks/zzz")
    assert await subs.current() == {"deals": "1", "stores": "2"}


async def test_a_vanished_topic_is_resubscribed_and_duplicates_removed_by_their_holder() -> None:
    client = _Client("a@x", "b@x")
    subs = Subscriptions(client, _hooks(topics=["deals", "events"]), [])  # type: ignore[arg-type]
    await subs.ensure()
    client.webhooks.hooks = [
        h for h in client.webhooks.hooks if h["attributes"]["topic"] != "events"
    ]
    client.webhooks.hold("b@x", "deals")  # a second one, held by the other account
    assert await subs.ensure() == ["events"]
    assert client.webhooks.deleted == [("b@x", "3")]
    assert sorted(await subs.current()) == ["deals", "events"]
    assert await subs.unsubscribe_all() == 2
    assert client.webhooks.hooks == []


async def test_a_post_that_may_have_applied_is_looked_for_before_sending_again() -> None:
    client = _Client("a@x")
    client.webhooks.fail_next_post = True
    subs = Subscriptions(client, _hooks(topics=["deals"]), [])  # type: ignore[arg-type]
    await subs.ensure()
    assert client.webhooks.posts == [("a@x", "deals")]  # adopted: not sent twice
    assert await subs.current() == {"deals": "1"}
