"""The management API v1's Article as the spec's field table gives it: what the client must never
send in an update and the emulator refuses (`read-only`), shared so that the two cannot differ."""

from __future__ import annotations

#: The fields of Article the spec marks read-only, in its table's order.
ARTICLE_READ_ONLY: tuple[str, ...] = (
    "id",
    "customer_id",
    "sorting_priority",
    "image",
    "url",
    "publication_status",
    "created_at",
    "updated_at",
    "archived_at",
)
