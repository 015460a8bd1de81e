"""The generator: a deterministic data set from a seed, and each new row a mutation creates.

`Generator(rows, seed)` draws from one `random.Random(seed)`: `build` makes every resource type of
the spec with realistic attributes, consistent relationships (a store's mall exists, a job
listing's store exists) and one mall per mall-scoped resource; `generate` makes one more row of a
type (`Dataset.create`). Tests and benchmarks rely on the exact rows a seed gives, so the order
of the draws is part of the contract: a change here changes every seed's data set.

Generated timestamps lie in 2025, deterministically (not tied to now) and always in the past, so
a client's cursor never starts ahead of the changes made while serving.
"""

from __future__ import annotations

import random
from typing import Any

from sync.emulator.records import Rec
from sync.emulator.rows import Rows
from sync.emulator.spec import DAYS, JOB_META, MALL_SCOPED, TYPES
from sync.emulator.stamps import relative
from sync.model.stamps import iso_ms

#: Share of the data set per type (malls are sized separately).
WEIGHTS: dict[str, int] = {
    "stores": 15,
    "deals": 15,
    "products": 10,
    "events": 8,
    "articles": 8,
    "job_listings": 6,
    "images": 12,
    "mall_messages": 4,
    "press_releases": 4,
    "ifeatures": 3,
    "contacts": 3,
    "tags": 3,
    "programs": 2,
    "social_feeds": 2,
    "groups": 1,
}
#: The words of generated names and texts.
WORDS = [
    "summer",
    "spring",
    "autumn",
    "winter",
    "grand",
    "city",
    "harbor",
    "market",
    "plaza",
    "central",
    "north",
    "south",
    "east",
    "west",
    "fashion",
    "shoes",
    "coffee",
    "books",
    "garden",
    "kids",
    "sport",
    "beauty",
    "home",
    "tech",
    "music",
    "art",
    "family",
    "open",
    "festival",
    "sale",
    "deal",
    "weekend",
    "night",
    "morning",
    "fresh",
    "local",
    "style",
    "outlet",
    "galleria",
]


class Generator:
    """Makes rows into `rows` from one seeded generator."""

    def __init__(self, rows: Rows, seed: int) -> None:
        self.rows = rows
        self.rng = random.Random(seed)
        self.epoch = 1_735_689_600.0 + seed % 1000  # 2025-01-01

    def words(self, n: int) -> str:
        return " ".join(self.rng.choices(WORDS, k=n)).title()

    def build(self, n: int, malls: int | None) -> None:
        if malls is None:
            malls = max(3, n // 1000)
        rest = max(n - malls, 0)
        counts = {t: max(2, rest * WEIGHTS[t] // sum(WEIGHTS.values())) for t in TYPES}
        for _ in range(malls):
            self.rows.add(self.generate("malls", None))
        first = ("tags", "images", "groups", "stores")
        for t in first:
            for _ in range(counts[t]):
                self.rows.add(self.generate(t, self.pick_mall(t)))
        for t in TYPES:
            if t in first:
                continue
            for _ in range(counts[t]):
                self.rows.add(self.generate(t, self.pick_mall(t)))
        # A store's contacts and social feeds are its mall's, generated after the stores.
        for sid in self.rows.order["stores"]:
            store = self.rows.by_type["stores"][sid]
            self.rows.unindex(store)
            store.set_links(self.store_members(store.mall))
            self.rows.index(store)

    def pick_mall(self, type_name: str) -> int | None:
        if type_name not in MALL_SCOPED:
            return None
        return self.rng.choice(self.rows.order["malls"])

    def stamp_pair(self) -> tuple[str, str]:
        created = self.epoch + self.rng.uniform(0, 300 * 86400)
        updated = created + self.rng.uniform(0, 30 * 86400)
        return iso_ms(created), iso_ms(updated)

    def store_members(self, mall: int | None) -> dict[str, list[int]]:
        """A store's contacts and social feeds: a few of its mall's."""
        out: dict[str, list[int]] = {}
        for t, k in (("contacts", 2), ("social_feeds", 1)):
            pool = self.rows.by_mall.get((t, mall), []) if mall is not None else []
            n = self.rng.randint(0, k)
            out[t] = sorted({self.rng.choice(pool) for _ in range(n)}) if pool else []
        return out

    def sample(self, type_name: str, k: int) -> list[int]:
        pool = self.rows.order[type_name]
        if not pool:
            return []
        return sorted({self.rng.choice(pool) for _ in range(self.rng.randint(0, k))})

    def generate(
        self, t: str, mall: int | None, attrs: dict[str, Any] | None = None, rid: int | None = None
    ) -> Rec:
        if rid is None:  # else an id reused (`Hard.reuse_ids`)
            rid = self.rows.next_id[t]
            self.rows.next_id[t] += 1
        r, w = self.rng, self.words
        created, updated = self.stamp_pair()
        base = self.epoch + r.uniform(0, 360 * 86400)
        slug = f"{w(2).lower().replace(' ', '-')}-{rid}"
        a: dict[str, Any]
        links: dict[str, Any] = {}
        meta = None
        if t == "malls":
            name = f"{w(2)} Mall"
            a = {
                "name": name,
                "sort_name": name.lower(),
                "seo_slug": slug,
                "nick_name": w(1),
                "address": f"{r.randint(1, 999)} {w(1)} Street",
                "city": w(1),
                "state": "CA",
                "zip": f"{r.randint(90000, 96199)}",
                "country_code": "US",
                "phone": f"555-{r.randint(1000, 9999)}",
                "email": f"info{rid}@mall.example",
                "url": f"https://mall{rid}.example",
                "hours_text": "Mon-Sat 10-9, Sun 11-6",
                "description": w(12),
                "guest_services_description": w(6),
                "distance": None,
                "latitude": round(r.uniform(32, 42), 6),
                "longitude": round(r.uniform(-124, -114), 6),
                "exclude_national_deals": r.random() < 0.1,
            }
            links["images"] = self.sample("images", 2)
        elif t == "articles":
            a = {
                "title": w(4),
                "subtitle": w(3),
                "short_title": w(2),
                "author": w(2),
                "attribution": w(2),
                "teaser": w(8),
                "seo_slug": slug,
                "content": w(40),
                "feature_location": r.choice(["home", "sidebar", "news"]),
                "status": "live",
                "is_active": r.random() < 0.9,
                "display_order": r.randint(0, 50),
                "display_at": relative(base),
                "end_at": relative(base + 60 * 86400),
                "trending_expired_at": None if r.random() < 0.5 else iso_ms(base + 7 * 86400),
            }
            links.update(
                images=self.sample("images", 2),
                tags=self.sample("tags", 3),
                malls=self.sample("malls", 2),
                products=self.sample("products", 2),
            )
        elif t == "images":
            a = {
                "url": f"https://img.example/{rid}/{{size}}.jpg",
                "alt_text": w(3),
                "size_parameter": "{size}",
            }
            links["tags"] = self.sample("tags", 1)
        elif t == "tags":
            a = {"name": w(1).lower()}
            links["tags"] = self.sample("tags", 1)  # a tag's related tags (none at first)
        elif t == "groups":
            a = {"name": w(2)}
        elif t == "products":
            a = {
                "name": w(3),
                "seo_slug": slug,
                "description": w(10),
                "price": f"{r.uniform(5, 500):.2f}",
            }
            links.update(
                images=self.sample("images", 2),
                tags=self.sample("tags", 2),
                stores=self.sample("stores", 1),
            )
        elif t == "contacts":
            a = {
                "name": w(2),
                "title": r.choice(["Manager", "Marketing", "Security"]),
                "email": f"contact{rid}@mall.example",
                "phone": f"555-{r.randint(1000, 9999)}",
            }
        elif t == "deals":
            store = (
                self.rng.choice(self.rows.order["stores"]) if self.rows.order["stores"] else None
            )
            sname = self.rows.by_type["stores"][store].get("name") if store else None
            a = {
                "sales_type": r.choice(["sale", "coupon", "event"]),
                "title": w(4),
                "seo_slug": slug,
                "retailer_name": w(1),
                "retailer_sort_name": w(1).lower(),
                "external_url": f"https://shop.example/deal/{rid}",
                "description": w(15),
                "fine_print_description": w(6),
                "end_at_text": "Ends soon",
                "store_name": sname,
                "store_sort_name": sname.lower() if sname else None,
                "display_at": relative(base),
                "start_at": relative(base),
                "end_at": relative(base + 14 * 86400),
                "is_local": r.random() < 0.7,
                "is_featured": r.random() < 0.2,
                "is_active": True,
                "status": "live",
                "visibility": r.choice(["Public", "Public", "Unlisted", "Private"]),
            }
            links.update(
                images=self.sample("images", 2),
                tags=self.sample("tags", 2),
                stores=[store] if store else [],
            )
        elif t == "stores":
            a = {
                "name": w(2),
                "sort_name": w(1).lower(),
                "seo_slug": slug,
                "email": f"store{rid}@shop.example",
                "address": f"Unit {r.randint(1, 300)}",
                "city": w(1),
                "state": "CA",
                "zip": "90210",
                "phone": f"555-{r.randint(1000, 9999)}",
                "mall_name": None,
                "tenant_location": f"L{r.randint(1, 3)}-{r.randint(1, 200)}",
                "tenant_location_map_key": f"k{rid}",
                "hours": "<p>10am - 9pm</p>",
                "description": w(12),
                "url": f"https://store{rid}.example",
                "url_text": "Visit",
                "page_url": f"/stores/{slug}",
                "retailer_url": f"https://retailer{rid}.example",
                "opening_text": "",
                "now_open_text": "Now open" if r.random() < 0.1 else "",
                "fax": None,
                "open_at": None,
                "close_at": None,
                "distance": None,
                "is_featured": r.random() < 0.1,
                "exclude_national_deals": False,
                "is_verified": r.random() < 0.8,
                "latitude": round(r.uniform(32, 42), 6),
                "longitude": round(r.uniform(-124, -114), 6),
                "retailer_id": r.randint(1, 5000),
                "opening_date": iso_ms(base),
                "structured_hours": [
                    {
                        "type": d.title(),
                        "hours": {"opens_at": "10:00", "closes_at": "21:00"},
                        "period": d,
                    }
                    for d in DAYS
                ],
            }
            if mall is not None:
                a["mall_name"] = self.rows.by_type["malls"][mall].get("name")
            links.update(
                images=self.sample("images", 2),
                tags=self.sample("tags", 2),
                groups=self.sample("groups", 1),
                mall=mall,
                **self.store_members(mall),
            )
        elif t == "events":
            a = {
                "title": w(3),
                "short_text": w(5),
                "description": w(20),
                "seo_slug": slug,
                "end_at_text": "",
                "link_url": f"https://events.example/{rid}",
                "link_text": "More",
                "location": w(2),
                "date_text": "This weekend",
                "start_at": relative(base),
                "end_at": relative(base + 2 * 86400),
                "display_at": relative(base - 7 * 86400),
                "pin_order": r.randint(0, 10),
                "is_events_page": True,
                "is_active": r.random() < 0.9,
                "is_featured": r.random() < 0.2,
            }
            links.update(
                images=self.sample("images", 1),
                groups=self.sample("groups", 1),
                tags=self.sample("tags", 2),
                mall=mall,
            )
        elif t == "ifeatures":
            a = {
                "seo_slug": slug,
                "headline": w(4),
                "sub_heading": w(3),
                "tag_line": w(4),
                "description": w(10),
                "url": f"https://mall.example/if/{rid}",
                "pin_order": r.randint(0, 5),
                "start_at": relative(base),
                "end_at": relative(base + 30 * 86400),
                "is_static": False,
                "is_headline": r.random() < 0.2,
                "is_new_window": r.random() < 0.5,
            }
            links["mall"] = mall
        elif t == "job_listings":
            store = self.rng.choice(self.rows.order["stores"])
            mall = self.rows.by_type["stores"][store].mall
            a = {
                "title": w(2),
                "seo_slug": slug,
                "store_name": self.rows.by_type["stores"][store].get("name"),
                "experience": "1 year",
                "how_to_apply": "Apply online",
                "application_url": f"https://jobs.example/{rid}",
                "description": w(15),
                "manager_name": w(2),
                "fax_number": "",
                "email": f"jobs{rid}@shop.example",
                "salary": f"${r.randint(15, 40)}/h",
                "start_date_text": "ASAP",
                "hours_per_week": str(r.choice([20, 30, 40])),
                "number_of_openings": str(r.randint(1, 5)),
                "key_responsibilities": w(6),
                "required_experience": w(4),
                "special_information": "",
                "is_full_time": r.random() < 0.5,
                "is_apply_online": True,
                "display_at": relative(base),
                "end_at": relative(base + 30 * 86400),
            }
            links.update(images=self.sample("images", 1), store=store)
            meta = JOB_META
        elif t == "mall_messages":
            a = {
                "description": w(10),
                "message_type": "operational",
                "start_at": relative(base),
                "end_at": relative(base + 3 * 86400),
            }
            links["mall"] = mall
        elif t == "press_releases":
            a = {
                "name": w(3),
                "seo_slug": slug,
                "headline": w(5),
                "tag_line": w(4),
                "content": w(30),
                "phone": f"555-{r.randint(1000, 9999)}",
                "email": f"press{rid}@mall.example",
                "external_url": f"https://press.example/{rid}",
                "pr_type": r.choice(["news", "event"]),
                "is_active": True,
                "display_at": relative(base),
            }
            links["mall"] = mall
        elif t == "programs":
            a = {
                "name": w(2),
                "program_type": r.choice(["loyalty", "rewards"]),
                "properties": {"points": r.randint(0, 100), "tier": r.choice(["gold", "silver"])},
            }
        elif t == "social_feeds":
            a = {
                "social_network_id": r.randint(1, 5),
                "sociable_id": r.randint(1, 1000),
                "sociable_type": "Mall",
                "name": w(1),
                "is_active": r.choice([True, False, None]),
                "properties": {"handle": f"@{w(1).lower()}{rid}"},
            }
        else:
            raise ValueError(t)
        if t not in ("tags", "groups"):
            a["created_at"], a["updated_at"] = created, updated
        if attrs:
            a.update(attrs)
        return Rec(t, rid, a, mall, links, meta)
