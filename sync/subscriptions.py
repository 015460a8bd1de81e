"""Webhook subscriptions: make sure the upstream notifies our receiver about every mirrored topic.

The upstream unsubscribes a receiver after 5 failed deliveries and says nothing, so the daemon
checks `GET /webhooks` periodically; a topic that has vanished is subscribed again and the caller
runs an incremental catch-up for it at once. The callback URL carries the secret path segment, so
it is never logged: log lines name topics only.
"""

from __future__ import annotations

from collections.abc import Sequence

from sync.catalogue import ResourceType
from sync.channel.client import ChannelClient
from sync.config import WebhookSettings
from sync.errors import ConfigError
from sync.logs import get_logger


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
        """Our subscriptions upstream: topic -> webhook id."""
        mine: dict[str, str] = {}
        for hook in await self.client.list_webhooks():
            attrs = hook.get("attributes") or {}
            if attrs.get("callback_url") == self.url:
                mine[str(attrs.get("topic"))] = str(hook.get("id"))
        return mine

    async def ensure(self) -> list[str]:
        """Subscribe every missing topic; return those that had been subscribed and vanished."""
        mine = await self.current()
        vanished: list[str] = []
        for topic in self.topics:
            if topic in mine:
                self._had.add(topic)
                continue
            await self.client.subscribe(self.url, topic)
            if topic in self._had:
                vanished.append(topic)
                self.log.warning("subscriptions.resubscribed", topic=topic)
            else:
                self.log.info("subscriptions.subscribed", topic=topic)
            self._had.add(topic)
        return vanished

    async def unsubscribe_all(self) -> int:
        """Remove our subscriptions (all topics); returns how many were removed."""
        mine = await self.current()
        for webhook_id in mine.values():
            await self.client.unsubscribe(webhook_id)
        return len(mine)
