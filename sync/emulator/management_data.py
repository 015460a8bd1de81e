"""The management emulator's seed documents: press releases, articles, messages, as the spec shows them.

Every field of the spec's Press Release, Article and Message (with its channels, template and
sending) is present, with values that are deterministic for a seed. `Management` holds them and
serves them; new ones (a press release added by the `shift_at_page` hard case, a channel's
template) come from here too.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from sync.model.stamps import iso_ms

LOCALES = ("en", "de")
PRODUCT = "loyalty"
#: The stamp of every seed document (2025-01-01).
SEED_STAMP = iso_ms(1_735_689_600.0)


def file_obj(url: str, stamp: str, identifier: str | None = None) -> dict[str, Any]:
    f: dict[str, Any] = {
        "url": url,
        "mime_type": "image/jpeg",
        "created_at": stamp,
        "updated_at": stamp,
        "image_details": {"width": 1200, "height": 800},
    }
    if identifier:
        f["identifier"] = identifier
    return f


def press_release(i: int, rng: random.Random, stamp: str = SEED_STAMP) -> dict[str, Any]:
    return {
        "id": i,
        "title": {loc: f"{loc.upper()} press release {i}" for loc in LOCALES},
        "slug": {loc: f"{loc}-press-{i}" for loc in LOCALES},
        "teaser": {loc: f"{loc} teaser {rng.randint(1, 999)}" for loc in LOCALES},
        "body": {loc: f"{loc} body of {i}" for loc in LOCALES},
        "headline": {loc: f"{loc} headline {i}" for loc in LOCALES},
        "published_at": iso_ms(1_735_689_600.0 + i * 3600),
        "attachments": [file_obj(f"https://files.example/pr/{i}/a.pdf", stamp, "attachment")],
        "image": file_obj(f"https://files.example/pr/{i}/image.jpg", stamp),
        "url": f"/press/{i}",
        "category_ids": sorted({rng.randint(1, 8) for _ in range(rng.randint(0, 3))}),
    }


def article(i: int, stamp: str = SEED_STAMP) -> dict[str, Any]:
    return {
        "id": i,
        "customer_id": 1,
        "locales": list(LOCALES),
        "products": [PRODUCT],
        "status": "published",
        "visible_since": None,
        "visible_until": None,
        "visible_in_list": True,
        "topic_relevant_until": None,
        "sorting_priority": 0,
        "title": {loc: f"Article {i} ({loc})" for loc in LOCALES},
        "slug": {loc: f"article-{i}" for loc in LOCALES},
        "teaser": {loc: None for loc in LOCALES},
        "body": {loc: f"Body {i}" for loc in LOCALES},
        "headline": {loc: None for loc in LOCALES},
        "published_at": stamp,
        "image": file_obj(f"https://files.example/a/{i}.jpg", stamp),
        "url": f"/articles/{i}",
        "prototype_id": None,
        "publication_status": "published",
        "external_master": "",
        "us_legacy_data": None,
        "tag_ids": [1],
        "category_ids": [2],
        "created_at": stamp,
        "updated_at": stamp,
        "archived_at": None,
    }


def message(i: int, stamp: str = SEED_STAMP) -> dict[str, Any]:
    return {
        "id": i,
        "name": f"Message {i}",
        "shorten_urls": False,
        "track_in_shortener": False,
        "marketing": None,
        "campaign_id": 1,
        "channels": [
            {
                "type": "sms",
                "include_footer": True,
                "sender": {"from_email": "club@example.com", "from_name": "Club"},
                "template": {
                    "id": i,
                    "type": "plain",
                    "content": {
                        "language": "en",
                        "body": "Hi {{first_name}}",
                        "footer": "Stop: reply STOP",
                    },
                    "translations": [],
                    "wrapper_id": 1,
                    "merge_properties": ["first_name"],
                    "thumbnail_url": "https://files.example/t.png",
                },
            }
        ],
        "created_at": stamp,
        "updated_at": stamp,
        "archived_at": None,
        "updated_by": str(uuid.UUID(int=i)),
        "sending_status_type": "draft",
        "sending": {
            "id": i,
            "created_at": stamp,
            "updated_at": stamp,
            "scheduled_at": stamp,
            "scheduled_by": str(uuid.UUID(int=i)),
            "reporting_id": i,
            "transmitted_at": stamp,
            "status": "draft",
            "status_type": "draft",
            "audience_id": 1,
            "recipients_count": 0,
            "dispatches_count": 0,
            "members_count": 0,
            "scheduled_with": {"type": "immediate"},
            "channels_preference": "sms",
        },
    }


def template(template_id: int) -> dict[str, Any]:
    """An empty template, for a channel that replaces none."""
    return {
        "id": template_id,
        "type": "plain",
        "content": {"language": LOCALES[0], "body": "", "footer": ""},
        "translations": [],
        "wrapper_id": 1,
        "merge_properties": [],
        "thumbnail_url": "https://files.example/t.png",
    }
