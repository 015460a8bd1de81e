"""Webhook subscriptions: make sure the upstream notifies our receiver about every mirrored topic.

The upstream unsubscribes a receiver after 5 failed deliveries and says nothing, so the daemon
checks `GET /webhooks` periodically; a topic that has vanished is subscribed again and the caller
runs an incremental catch-up for it at once. The callback URL carries the secret path segment, so
it is never logged: log lines name topics only.

Subscribing is not idempotent: `POST /webhooks` is sent once, never retried blind. After a 5xx
or a timeout (it may have taken effect) the subscriptions are listed and a matching one adopted;
only if none is there is it sent again. Duplicates for our callback (one topic subscribed twice,
by an earlier run's retry or by hand) are removed, one kept per topic.

With several accounts (`[[upstream.accounts]]`) GET /webhooks lists only the caller's
subscriptions, so ours are the union over the accounts (each listed as itself); a missing topic
is subscribed once, by the account that reads that type (else the first), and a duplicate is
removed by the account that holds it, whichever account made the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

from sync.channel.accounts import Account
from sync.channel.client import ChannelClient
from sync.channel.profile import route_key
from sync.core.config import MISSING_WEBHOOK_SECRET, Settings, WebhookSettings
from sync.core.errors import ConfigError, MaybeAppliedError
from sync.core.logs import get_logger
from sync.model import catalogue
from sync.model.catalogue import ResourceType


def callback_url(settings: WebhookSettings, bound_port: int | None = None) -> str:
    """The URL the upstream posts notices to: `<public_url>/webhooks/<secret>`."""
    if settings.secret is None:
        raise ConfigError(f"[webhooks] {MISSING_WEBHOOK_SECRET}")
    base = settings.public_url or f"http://{settings.host}:{bound_port or settings.port}"
    return f"{base.rstrip('/')}/webhooks/{settings.secret.get_secret_value()}"


class Held(NamedTuple):
    """One subscription of ours upstream: its id and the account that holds it."""

    id: str
    account: Account


class Subscriptions:
    """Keeps one subscription per topic pointing at our callback URL."""

    def __init__(
        self,
        client: ChannelClient,
        settings: WebhookSettings,
        types: Sequence[ResourceType],
        bound_port: int | None = None,
    ) -> None:
        self.client = client
        self.settings = settings
        self.topics = list(settings.topics or [t.name for t in types])
        self.bound_port = bound_port
        self.log = get_logger("sync.subscriptions")
        self._had: set[str] = set()

    @property
    def url(self) -> str:
        return callback_url(self.settings, self.bound_port)

    async def current(self) -> dict[str, str]:
        """Our subscriptions upstream: topic -> webhook id (the lowest, if several)."""
        return {topic: held[0].id for topic, held in (await self._ours()).items()}

    async def _ours(self) -> dict[str, list[Held]]:
        """topic -> every subscription of ours to it, lowest id first, over every account."""
        mine: dict[str, list[Held]] = {}
        accounts = self.client.accounts
        for account in accounts.all:
            with accounts.pinned(account):
                hooks = await self.client.webhooks.list_all()
            for hook in hooks:
                attrs = hook.get("attributes") or {}
                if attrs.get("callback_url") == self.url:
                    held = Held(str(hook.get("id")), account)
                    mine.setdefault(str(attrs.get("topic")), []).append(held)
        return {t: sorted(h, key=lambda h: (len(h.id), h.id)) for t, h in mine.items()}

    def _subscriber(self, topic: str) -> Account:
        """The account that subscribes `topic`: the one that reads that type's listing, else
        the first."""
        rtype = catalogue.TYPES.get(topic)
        accounts = self.client.accounts
        return accounts.reader(route_key(rtype)) if rtype is not None else accounts.first

    async def ensure(self) -> list[str]:
        """Subscribe every missing topic, remove duplicates; return the topics that had been
        subscribed and vanished."""
        ours = await self._ours()
        vanished: list[str] = []
        for topic in self.topics:
            if topic in ours:
                self._had.add(topic)
                continue
            await self._subscribe(topic)
            if topic in self._had:
                vanished.append(topic)
                self.log.warning("subscriptions.resubscribed", topic=topic)
            else:
                self.log.info("subscriptions.subscribed", topic=topic)
            self._had.add(topic)
        for topic, held in ours.items():
            for extra in held[1:]:
                await self._unsubscribe(extra)
                self.log.warning("subscriptions.duplicate_removed", topic=topic, id=extra.id)
        return vanished

    async def _subscribe(self, topic: str, tries: int = 3) -> None:
        """`POST /webhooks` once; after an answer that may follow its effect, look before
        sending again."""
        accounts = self.client.accounts
        for attempt in range(1, tries + 1):
            try:
                with accounts.pinned(self._subscriber(topic)):
                    await self.client.webhooks.subscribe(self.url, topic)
                return
            except MaybeAppliedError as exc:
                if topic in await self.current():
                    self.log.info("subscriptions.adopted", topic=topic, after=exc.message)
                    return
                if attempt == tries:
                    raise

    async def unsubscribe_all(self) -> int:
        """Remove our subscriptions (all topics); returns how many were removed."""
        held = [h for found in (await self._ours()).values() for h in found]
        for one in held:
            await self._unsubscribe(one)
        return len(held)

    async def _unsubscribe(self, held: Held) -> None:
        """DELETE a subscription as the account that holds it (no other may)."""
        with self.client.accounts.pinned(held.account):
            await self.client.webhooks.unsubscribe(held.id)


async def manage(
    settings: Settings, action: Literal["list", "subscribe", "unsubscribe"] = "list"
) -> list[str]:
    """`ccsync webhooks list|subscribe|unsubscribe`: do `action` for this receiver's topics,
    then list the topics it is subscribed to upstream (sorted)."""
    async with ChannelClient(settings.upstream) as client:
        subs = Subscriptions(client, settings.webhooks, settings.upstream.mirrored_types())
        if action == "subscribe":
            await subs.ensure()
        elif action == "unsubscribe":
            await subs.unsubscribe_all()
        return sorted(await subs.current())
