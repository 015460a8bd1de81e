"""`ManagementClient`: the three management API v1 operations the mirror uses.

The press release list (`sync.management.press`), and here the article update and the message
update: a body the spec forbids is refused before anything is sent (`sync.management.fields`).
The two operations the spec labels "user token" (the press release list, the message update)
refuse to start without one (`ManagementSettings.require_user_token`). Requests, headers and
error mapping are `sync.management.session`'s.
"""

from __future__ import annotations

from typing import Any

from sync.core.errors import InvalidParametersError
from sync.management.fields import article_problems, message_problems
from sync.management.press import PressReleaseList
from sync.management.session import segment


class ManagementClient(PressReleaseList):
    """Authenticated, retried access to the three management operations."""

    async def update_article(
        self, article_id: int, article: dict[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        """PUT the article's changes; what the spec forbids is refused before anything is sent
        (`InvalidParametersError` without a URL)."""
        problems = article_problems(article)
        if problems:
            raise InvalidParametersError(
                "Invalid parameters (refused before sending)", details=problems
            )
        params = {"dry_run": "true"} if dry_run else {}
        doc = await self._send(
            "PUT",
            f"/v1/content/management/articles/{segment(article_id)}",
            params=params,
            body={"article": article},
        )
        return dict(doc.get("article") or {})

    async def update_message(
        self, service: str, message_id: int, message: dict[str, Any], *, archived: str | None = None
    ) -> dict[str, Any]:
        """PUT the message's changes (a user token is required: spec, Authentication); what
        the spec forbids is refused before anything is sent (`InvalidParametersError` without a
        URL). `service` may hold any character: it is sent as one encoded path segment."""
        self.settings.require_user_token("the message update")
        problems = message_problems(message)
        if problems:
            raise InvalidParametersError(
                "Invalid parameters (refused before sending)", details=problems
            )
        params = {"archived": archived} if archived is not None else {}
        doc = await self._send(
            "PUT",
            f"/v1/messages/{segment(service)}/{segment(message_id)}",
            params=params,
            body={"message": message},
        )
        return dict(doc.get("message") or {})
