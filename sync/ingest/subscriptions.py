"""Webhook subscriptions: make sure the upstream notifies our receiver about every mirrored topic.

The upstream unsubscribes a receiver after 5 failed deliveries and says nothing, so the daemon
checks `GET /webhooks` periodically; a topic that has vanished is subscribed again and the caller
runs an incremental catch-up for it at once. The callback URL carries the secret path segment, so
it is never logged: log lines name topics only.

Subscribing is not idempotent: `POST /webhooks` is sent once, never retried blind. After a 5xx
or a timeout (it may have taken effect) the subscriptions are listed and a matching one adopted;
only if none is there is it sent again. Duplicates for our callback (one topic subscribed twice,
by an earlier run's retry or by hand) are removed, one kept per topic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from sync.channel.client import ChannelClient
from sync.core.config import Settings, WebhookSettings
from sync.core.errors import ConfigError, MaybeAppliedError
from sync.core.logs import get_logger
from sync.model.catalogue import ResourceType


def callback_url(settings: WebhookSettings, bound_port: int | None = None) -> str:
    """The URL the upstream posts notices to: `<public_url>/webhooks/<secret>`."""
    if settings.secret is None:
        raise ConfigError(
            "[webhooks] secret is required when webhooks are enabled; set secret, secret_env or "
            "secret_file (16+ random characters), or set enabled = false to rely on polling"
        )
    base = settings.public_url or f"http://{settings.host}:{bound_port or settings.port}"
    return f"{base.rstrip('/')}/webhooks/{settings.secret.get_secret_value()}"


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
        return {topic: ids[0] for topic, ids in (await self._ours()).items()}

    async def _ours(self) -> dict[str, list[str]]:
        """topic -> the ids of every subscription of ours to it, lowest first."""
        mine: dict[str, list[str]] = {}
        for hook in await self.client.list_webhooks():
            attrs = hook.get("attributes") or {}
            if attrs.get("callback_url") == self.url:
                mine.setdefault(str(attrs.get("topic")), []).append(str(hook.get("id")))
        return {t: sorted(ids, key=lambda i: (len(i), i)) for t, ids in mine.items()}

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
        for topic, ids in ours.items():
            for extra in ids[1:]:
                await self.client.unsubscribe(extra)
                self.log.warning("subscriptions.duplicate_removed", topic=topic, id=extra)
        return vanished

    async def _subscribe(self, topic: str, tries: int = 3) -> None:
        """`POST /webhooks` once; after an answer that may follow its effect, look before
        sending again."""
        for attempt in range(1, tries + 1):
            try:
                await self.client.subscribe(self.url, topic)
                return
            except MaybeAppliedError as exc:
                if topic in await self.current():
                    self.log.info("subscriptions.adopted", topic=topic, after=exc.message)
                    return
                if attempt == tries:
                    raise

    async def unsubscribe_all(self) -> int:
        """Remove our subscriptions (all topics); returns how many were removed."""
        ids = [i for found in (await self._ours()).values() for i in found]
        for webhook_id in ids:
            await self.client.unsubscribe(webhook_id)
        return len(ids)


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
