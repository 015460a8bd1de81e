"""The emulator's data: a deterministic generated data set and the mutations applied to it.

`Dataset(resources=N, seed=S)` builds every resource type of the spec with realistic attributes,
consistent relationships (a store's mall exists, a job listing's store exists) and one mall per
mall-scoped resource (several, and an explicit set for deals, under the hard readings of
`sync.emulator.hard`; see `sync.emulator.memberships`). Mutations (create, update, delete) keep
`updated_at` strictly increasing per resource (millisecond precision, several updates within one
second possible), append to the deletions feed, and notify listeners (the webhooks). An edited or deleted image/tag/group leaves
its owners' `updated_at` alone unless `touch_owners` is set (like Rails `touch: true`): the spec
does not promise it, so the emulator serves the hard case by default. `silent_update` changes a
resource's content (attributes, links, a mall-scoped row's mall) without touching its
`updated_at` and without a notice, as a legacy bulk SQL update does; `silent_rate` makes that
share of `mutate_randomly`'s updates silent.

Memory and speed: a resource is a compact `records.Rec` (its attributes held as the JSON bytes
it is served with); a page is assembled by joining bytes (`encodings`). Every mutation bumps the
type's version, which invalidates the query caches and the ETags, and the record's revision,
which retires its cached encodings.
"""

from __future__ import annotations

import random
import time
from bisect import bisect_left, insort
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sync.emulator import memberships
from sync.emulator.encodings import Encodings, Templates
from sync.emulator.hard import Hard
from sync.emulator.records import Owners, Rec, next_revision
from sync.model.columns import NULLABLE

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
MALL_SCOPED = frozenset(
    {
        "stores",
        "products",
        "programs",
        "social_feeds",
        "press_releases",
        "events",
        "ifeatures",
        "mall_messages",
        "contacts",
        "job_listings",
    }
)
#: Relationships served per type (spec table); the modelled ones carry linkage when included.
RELATIONSHIPS: dict[str, tuple[str, ...]] = {
    "articles": ("variants", "images", "malls", "products", "tags"),
    "images": ("tags",),
    "malls": (
        "accounts",
        "articles",
        "contacts",
        "deals",
        "events",
        "groups",
        "ifeatures",
        "images",
        "job_listings",
        "mall_messages",
        "press_releases",
        "products",
        "programs",
        "retailers",
        "sites",
        "social_feeds",
        "stores",
        "theaters",
        "redeemables",
        "company",
        "location",
    ),
    "products": ("images", "stores", "tags", "articles", "brand", "retailer"),
    "tags": ("tags",),
    "contacts": (),
    "deals": (
        "images",
        "tags",
        "stores",
        "external_mapping_for_stores",
        "external_mapping_for_retailers",
        "locations",
        "retailer",
    ),
    "stores": (
        "products",
        "deals",
        "job_listings",
        "social_feeds",
        "contacts",
        "images",
        "tags",
        "groups",
        "keywords",
        "external_mapping_for_stores",
        "showtimes",
        "retailer",
        "location",
        "mall",
    ),
    "deletions": (),
    "events": ("images", "groups", "tags", "mall"),
    "groups": (),
    "ifeatures": ("mall",),
    "job_listings": ("images", "store"),
    "mall_messages": ("mall",),
    "press_releases": ("mall",),
    "programs": (),
    "social_feeds": (),
    "webhooks": (),
}
TO_ONE = frozenset({"mall", "store", "retailer", "location", "company", "brand"})
TARGET = {"mall": "malls", "store": "stores", "job_listings": "job_listings"}
#: Relationships whose linkage one side owns and the other serves as the inverse: (type, name)
#: -> (owner type, owner's relationship). A change of the owner's links changes the inverse
#: linkage without touching the other side's `updated_at`.
INVERSE: dict[tuple[str, str], tuple[str, str]] = {
    ("stores", "products"): ("products", "stores"),
    ("stores", "deals"): ("deals", "stores"),
    ("stores", "job_listings"): ("job_listings", "store"),
    ("products", "articles"): ("articles", "products"),
    ("malls", "articles"): ("articles", "malls"),
}
#: Members with no collection route of their own: listed only as `/malls/{id}/<type>`.
PER_MALL_ONLY = frozenset({"stores", "products", "programs", "social_feeds", "press_releases"})
#: A mall's relationships that name its members: the mall-scoped types listed under
#: `/malls/{id}/...`, and its deals (`Dataset.mall_deals`).
MALL_MEMBERS = MALL_SCOPED | {"deals"}
#: Relationships whose linkage the emulator models (owned in `Rec.links`, an inverse, or a
#: mall's members); the spec's other relationships (variants, brand, retailer, keywords, ...,
#: whose types' fields are "not shown") are served with links only and refused in `include=`.
MODELLED: dict[str, frozenset[str]] = {
    "articles": frozenset({"images", "malls", "products", "tags"}),
    "images": frozenset({"tags"}),
    "tags": frozenset({"tags"}),
    "products": frozenset({"images", "stores", "tags", "articles"}),
    "deals": frozenset({"images", "tags", "stores"}),
    "stores": frozenset(
        {"products", "deals", "job_listings", "social_feeds", "contacts", "images", "tags"}
        | {"groups", "mall"}
    ),
    "events": frozenset({"images", "groups", "tags", "mall"}),
    "ifeatures": frozenset({"mall"}),
    "job_listings": frozenset({"images", "store"}),
    "mall_messages": frozenset({"mall"}),
    "press_releases": frozenset({"mall"}),
    "malls": frozenset(
        {"images", "articles", "contacts", "deals", "events", "ifeatures", "job_listings"}
        | {"mall_messages", "press_releases", "products", "programs", "social_feeds", "stores"}
    ),
}
DEPRECATED_FIELDS = [
    "is_active",
    "is_apply_online",
    "manager_name",
    "fax_number",
    "email",
    "salary",
    "required_experience",
    "key_responsibilities",
    "special_information",
]
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
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


#: Previous copies kept for the lagging-replica fault.
PREVIOUS_LIMIT = 20_000


def iso_ms(ts: float) -> str:
    dt = datetime.fromtimestamp(ts, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def relative(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


#: Every job listing's `meta` (one shared object: the encoding templates rely on it).
JOB_META: dict[str, Any] = {"deprecated_fields": list(DEPRECATED_FIELDS)}
#: Malls whose deal lists (`Dataset.mall_deals`) are kept between requests.
MALL_DEALS_KEPT = 64
#: Share of `mutate_randomly`'s operations that `Hard.sideload_deletions` makes deletions of
#: images, tags or groups, and of its updates that `Hard.silent_moves` makes moves.
HARD_SHARE = 0.1


Listener = Callable[[str, str, int, str | None], None]  # (kind, type, id, deletion id)


class Dataset:
    """All resources by type, with ordered id indexes and the mutation API."""

    def __init__(
        self,
        resources: int = 500,
        seed: int = 1,
        clock: Callable[[], float] = time.time,
        *,
        malls: int | None = None,
        hard: Hard | None = None,
    ) -> None:
        self.seed = seed
        self.clock = clock
        self.rng = random.Random(seed)
        self.by_type: dict[str, dict[int, Rec]] = {t: {} for t in [*WEIGHTS, "malls", "deletions"]}
        self.order: dict[str, list[int]] = {t: [] for t in self.by_type}
        self.by_mall: dict[tuple[str, int], list[int]] = {}
        # (type, id) -> the (type, id) of every resource whose links name it (inverse linkage).
        self.owners = Owners()
        # `mall_deals`: national deals and local deals by mall, per generation; a few malls'
        # merged lists (a national deal is in every mall's list: one list per mall at 1M
        # resources and 1,000 malls would hold ~45 M ids).
        self._deal_parts: tuple[int, list[int], dict[int, list[int]]] | None = None
        self._mall_deals: OrderedDict[int, tuple[int, list[int]]] = OrderedDict()
        # Encoded variants other than the plain one, bounded (`encodings.Encodings`).
        self.encodings = Encodings()
        self.templates = Templates()
        self.version: dict[str, int] = dict.fromkeys(self.by_type, 0)
        self.next_id: dict[str, int] = dict.fromkeys(self.by_type, 1)
        self.listeners: list[Listener] = []
        self._last_stamp = 0.0
        # Whether editing or deleting an image/tag/group also touches its owners (Rails
        # `touch: true`). The spec does not promise it, so by default owners keep their
        # `updated_at` (the hard case: only a sideload refresh sees such a change).
        self.touch_owners = False
        # Serve absolute stamps in several ISO 8601 forms of the same instant (`--stamp-forms`).
        self.stamp_forms = False
        # The copy each changed resource had before its last change: what a lagging replica
        # upstream would still serve (`Faults.stale_rate`). Bounded; oldest dropped first.
        self.previous: dict[tuple[str, int], Rec] = {}
        # Whether deletions are listed in the deletions feed (off: an upstream whose feed
        # lost entries, so only a reconcile's listing can find them).
        self.feed_deletions = True
        # Share of `mutate_randomly`'s updates made silently (`silent_update`, `--silent-rate`).
        self.silent_rate = 0.0
        # Generated timestamps lie in 2025, deterministically (not tied to now) and always in
        # the past, so a client's cursor never starts ahead of the changes made while serving.
        self.epoch = 1_735_689_600.0 + seed % 1000  # 2025-01-01
        # The hard readings (`sync.emulator.hard`), shared with the app. What they need held
        # is held only while they are on: the malls of rows with more than `Rec.mall`
        # (`memberships`), the deleted ids per type (`reuse_ids`).
        self.hard = hard if hard is not None else Hard()
        self.memberships: dict[tuple[str, int], tuple[int, ...]] = {}
        self.freed: dict[str, list[int]] = {}
        self.shifted = 0  # rows that left a listing being walked (`shifting_listings`)
        self.shift_asks = 0  # requests for a page >= 2 seen under `shifting_listings`
        # Draws of the hard readings at run time (a created deal's malls, the row that leaves
        # a listing, ...), apart from `rng` so the generated data stay the same.
        self.hard_rng = random.Random(f"{seed}:hard")
        self._hard_seen = -1
        self._built = {"multi_mall": False, "route_memberships": False}
        self._build(max(resources, 50), malls)
        self.sync_hard()

    # -- generation ----------------------------------------------------------------------------

    def _words(self, n: int) -> str:
        return " ".join(self.rng.choices(WORDS, k=n)).title()

    def _build(self, n: int, malls: int | None) -> None:
        if malls is None:
            malls = max(3, n // 1000)
        rest = max(n - malls, 0)
        counts = {t: max(2, rest * w // sum(WEIGHTS.values())) for t, w in WEIGHTS.items()}
        for _ in range(malls):
            self._add(self._generate("malls", None))
        first = ("tags", "images", "groups", "stores")
        for t in first:
            for _ in range(counts[t]):
                self._add(self._generate(t, self._pick_mall(t)))
        for t in WEIGHTS:
            if t in first:
                continue
            for _ in range(counts[t]):
                self._add(self._generate(t, self._pick_mall(t)))
        # A store's contacts and social feeds are its mall's, generated after the stores.
        for sid in self.order["stores"]:
            store = self.by_type["stores"][sid]
            self._unindex(store)
            store.set_links(self._store_members(store.mall))
            self._index(store)

    def _pick_mall(self, type_name: str) -> int | None:
        if type_name not in MALL_SCOPED:
            return None
        return self.rng.choice(self.order["malls"])

    def _stamp_pair(self) -> tuple[str, str]:
        created = self.epoch + self.rng.uniform(0, 300 * 86400)
        updated = created + self.rng.uniform(0, 30 * 86400)
        return iso_ms(created), iso_ms(updated)

    def _store_members(self, mall: int | None) -> dict[str, list[int]]:
        """A store's contacts and social feeds: a few of its mall's."""
        out: dict[str, list[int]] = {}
        for t, k in (("contacts", 2), ("social_feeds", 1)):
            pool = self.by_mall.get((t, mall), []) if mall is not None else []
            n = self.rng.randint(0, k)
            out[t] = sorted({self.rng.choice(pool) for _ in range(n)}) if pool else []
        return out

    def _sample(self, type_name: str, k: int) -> list[int]:
        pool = self.order[type_name]
        if not pool:
            return []
        return sorted({self.rng.choice(pool) for _ in range(self.rng.randint(0, k))})

    def _generate(
        self, t: str, mall: int | None, attrs: dict[str, Any] | None = None, rid: int | None = None
    ) -> Rec:
        if rid is None:  # else an id reused (`Hard.reuse_ids`)
            rid = self.next_id[t]
            self.next_id[t] += 1
        r, w = self.rng, self._words
        created, updated = self._stamp_pair()
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
            links["images"] = self._sample("images", 2)
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
                images=self._sample("images", 2),
                tags=self._sample("tags", 3),
                malls=self._sample("malls", 2),
                products=self._sample("products", 2),
            )
        elif t == "images":
            a = {
                "url": f"https://img.example/{rid}/{{size}}.jpg",
                "alt_text": w(3),
                "size_parameter": "{size}",
            }
            links["tags"] = self._sample("tags", 1)
        elif t == "tags":
            a = {"name": w(1).lower()}
            links["tags"] = self._sample("tags", 1)  # a tag's related tags (none at first)
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
                images=self._sample("images", 2),
                tags=self._sample("tags", 2),
                stores=self._sample("stores", 1),
            )
        elif t == "contacts":
            a = {
                "name": w(2),
                "title": r.choice(["Manager", "Marketing", "Security"]),
                "email": f"contact{rid}@mall.example",
                "phone": f"555-{r.randint(1000, 9999)}",
            }
        elif t == "deals":
            store = self.rng.choice(self.order["stores"]) if self.order["stores"] else None
            sname = self.by_type["stores"][store].get("name") if store else None
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
                images=self._sample("images", 2),
                tags=self._sample("tags", 2),
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
                a["mall_name"] = self.by_type["malls"][mall].get("name")
            links.update(
                images=self._sample("images", 2),
                tags=self._sample("tags", 2),
                groups=self._sample("groups", 1),
                mall=mall,
                **self._store_members(mall),
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
                images=self._sample("images", 1),
                groups=self._sample("groups", 1),
                tags=self._sample("tags", 2),
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
            store = self.rng.choice(self.order["stores"])
            mall = self.by_type["stores"][store].mall
            a = {
                "title": w(2),
                "seo_slug": slug,
                "store_name": self.by_type["stores"][store].get("name"),
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
            links.update(images=self._sample("images", 1), store=store)
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

    # -- indexes -------------------------------------------------------------------------------

    def _index(self, rec: Rec) -> None:
        """Record `rec` as an owner of every resource its links name (the inverse index)."""
        owner = (rec.type, rec.id)
        for name, value in rec.link_items():
            target = TARGET.get(name, name)
            for i in value if isinstance(value, tuple) else () if value is None else (value,):
                self.owners.add((target, i), owner)

    def _unindex(self, rec: Rec) -> None:
        owner = (rec.type, rec.id)
        for name, value in rec.link_items():
            target = TARGET.get(name, name)
            for i in value if isinstance(value, tuple) else () if value is None else (value,):
                self.owners.discard((target, i), owner)

    def _add(self, rec: Rec) -> None:
        self.by_type[rec.type][rec.id] = rec
        insort(self.order[rec.type], rec.id)
        if rec.mall is not None:
            insort(self.by_mall.setdefault((rec.type, rec.mall), []), rec.id)
        self._index(rec)
        self.version[rec.type] += 1

    def _remove(self, rec: Rec) -> None:
        del self.by_type[rec.type][rec.id]
        lst = self.order[rec.type]
        del lst[bisect_left(lst, rec.id)]
        if self.memberships and (rec.type, rec.id) in self.memberships:
            memberships.forget(self, rec)  # it leaves every mall it was in
        elif rec.mall is not None:
            ml = self.by_mall[(rec.type, rec.mall)]
            del ml[bisect_left(ml, rec.id)]
        self._unindex(rec)
        self.version[rec.type] += 1

    def _revise(self, rec: Rec) -> None:
        """A new revision of `rec`: its cached encodings are never served again."""
        rec.rev = next_revision()

    def set_attrs(self, rec: Rec, attrs: dict[str, Any]) -> None:
        """Merge `attrs` into `rec`'s attributes (no stamp, version or notice: see `touch`)."""
        merged = rec.decoded()
        merged.update(attrs)
        rec.set_attrs(merged)
        self._revise(rec)

    def set_links(self, rec: Rec, links: dict[str, Any]) -> None:
        """Replace some of `rec`'s owned linkage, keeping the inverse index in step."""
        self._unindex(rec)
        rec.set_links(links)
        self._index(rec)
        self._revise(rec)

    def inverse(self, type_name: str, rid: int, owner_type: str) -> list[int]:
        """Ids of the `owner_type` resources whose links name (`type_name`, `rid`)."""
        return self.owners.of_type((type_name, rid), owner_type)

    def linkage(self, rec: Rec, name: str) -> list[int] | int | None:
        """The ids `rec`'s relationship `name` holds now: owned, inverse or mall members."""
        if rec.type == "malls" and name in MALL_MEMBERS:
            return list(self.ids(name, rec.id))
        inverse = INVERSE.get((rec.type, name))
        if inverse is not None:
            return self.inverse(rec.type, rec.id, inverse[0])
        value = rec.link(name)
        return (
            list(value) if isinstance(value, tuple) else value if isinstance(value, int) else None
        )

    def _deals_by_scope(self) -> tuple[list[int], dict[int, list[int]]]:
        """This generation's national deals, and local deals by the malls of their stores."""
        parts = self._deal_parts
        if parts is not None and parts[0] == self.generation:
            return parts[1], parts[2]
        stores = self.by_type["stores"]
        deals = self.by_type["deals"]
        national: list[int] = []
        local: dict[int, list[int]] = {}
        for did in self.order["deals"]:
            deal = deals[did]
            if not deal.get("is_local"):
                national.append(did)
                continue
            malls = {s.mall for sid in deal.link("stores") or () if (s := stores.get(sid))}
            if self.memberships:  # `Hard.multi_mall`: a store's other malls list its deals too
                held = self.memberships
                malls.update(
                    m for sid in deal.link("stores") or () for m in held.get(("stores", sid), ())
                )
            for mall in malls:
                if mall is not None:
                    local.setdefault(mall, []).append(did)
        self._deal_parts = (self.generation, national, local)
        return national, local

    def mall_deals(self, mall: int) -> list[int]:
        """`GET /malls/{id}/deals`: the mall's local deals (a store of the deal is in the mall)
        and, unless the mall sets `exclude_national_deals`, every national deal (`is_local`
        false). A few malls' lists are kept per data generation."""
        cached = self._mall_deals.get(mall)
        if cached is not None and cached[0] == self.generation:
            self._mall_deals.move_to_end(mall)
            return cached[1]
        national, local = self._deals_by_scope()
        rec = self.by_type["malls"].get(mall)
        own = local.get(mall, [])
        out = sorted(national + own) if rec and not rec.get("exclude_national_deals") else own
        self._mall_deals[mall] = (self.generation, out)
        self._mall_deals.move_to_end(mall)
        while len(self._mall_deals) > MALL_DEALS_KEPT:
            self._mall_deals.popitem(last=False)
        return out

    @property
    def generation(self) -> int:
        """A number that changes whenever any type's version does (versions only grow)."""
        return sum(self.version.values())

    def ids(self, type_name: str, mall: int | None = None) -> list[int]:
        """Ids in order (a shared list: do not mutate)."""
        if mall is None:
            return self.order[type_name]
        self.sync_hard()
        if type_name == "deals" and not self.hard.route_memberships:
            return self.mall_deals(mall)
        return self.by_mall.get((type_name, mall), [])

    # -- hard readings -------------------------------------------------------------------------

    def sync_hard(self) -> None:
        """Catch up with switches assigned since the last call: build or drop the memberships
        of `multi_mall` and `route_memberships`; every type's version moves, so nothing
        selected or cached under the other setting is served again."""
        hard = self.hard
        if hard.changes == self._hard_seen:
            return
        self._hard_seen = hard.changes
        if hard.multi_mall != self._built["multi_mall"]:
            self._built["multi_mall"] = hard.multi_mall
            if hard.multi_mall:
                memberships.build_multi_mall(self)
            else:
                memberships.drop_multi_mall(self)
        if hard.route_memberships != self._built["route_memberships"]:
            self._built["route_memberships"] = hard.route_memberships
            if hard.route_memberships:
                memberships.build_deal_malls(self)
            else:
                memberships.drop_deal_malls(self)
        for type_name in self.version:
            self.version[type_name] += 1

    def malls_of(self, type_name: str, rid: int) -> list[int]:
        """The sorted ids of the malls whose `/malls/{id}/<type>` route lists the row (several
        under `multi_mall`; a deal's: by `route_memberships` or the national/local rule)."""
        self.sync_hard()
        return memberships.malls_of(self, type_name, rid)

    def move(self, type_name: str, rid: int, from_mall: int, to_mall: int) -> Rec:
        """Move a mall-scoped row (or, under `route_memberships`, a deal) from one of its malls
        to another, keeping `updated_at`, with no notice and no feed entry (the spec shows no
        rule; see `Hard.silent_moves`). ValueError when the move is not possible."""
        self.sync_hard()
        rec = self.by_type[type_name][rid]
        memberships.move(self, rec, from_mall, to_mall)
        self._untouched(rec)
        self.version["malls"] += 1  # a mall's members change
        return rec

    def _random_move(self, rng: random.Random, type_name: str) -> tuple[str, int] | None:
        """One silent move (`Hard.silent_moves`) of a row of `type_name` if it can be moved,
        else of another movable type."""
        movable = [*memberships.MOVABLE, *(["deals"] if self.hard.route_memberships else [])]
        t = type_name if type_name in movable else rng.choice(movable)
        if not self.order[t]:
            return None
        rid = rng.choice(self.order[t])
        current = self.malls_of(t, rid)
        others = [m for m in self.order["malls"] if m not in current]
        if not current or not others:
            return None
        self.move(t, rid, rng.choice(current), rng.choice(others))
        return t, rid

    # -- mutations -----------------------------------------------------------------------------

    def now(self) -> float:
        return self.clock()

    def _fresh_stamp(self, previous: str | None) -> str:
        """A new updated_at: now, but strictly after the previous one and the last issued."""
        ts = max(self.now(), self._last_stamp + 0.001)
        stamp = iso_ms(ts)
        if previous is not None and stamp <= previous:
            prev = datetime.strptime(previous, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
            ts = prev.timestamp() + 0.001
            stamp = iso_ms(ts)
        self._last_stamp = ts
        return stamp

    def _notify(self, kind: str, type_name: str, rid: int, deletion: str | None = None) -> None:
        for listener in list(self.listeners):
            listener(kind, type_name, rid, deletion)

    def create(
        self, type_name: str, attrs: dict[str, Any] | None = None, mall: int | None = None
    ) -> Rec:
        if type_name not in WEIGHTS and type_name != "malls":
            raise KeyError(type_name)
        if mall is None:
            mall = self._pick_mall(type_name)
        self.sync_hard()
        freed = self.freed.get(type_name) if self.hard.reuse_ids else None
        rid = freed.pop() if freed else None
        if rid is not None:
            self.previous.pop((type_name, rid), None)  # the deleted row's copy is not this one's
        rec = self._generate(type_name, mall, attrs, rid)
        current = rec.decoded()
        if "created_at" in current:
            stamp = self._fresh_stamp(None)
            rec.set_attrs({**current, "created_at": stamp, "updated_at": stamp})
        self._revise(rec)
        self._add(rec)
        if type_name == "deals" and self.hard.route_memberships:
            memberships.give_deal_malls(self, rec, self.hard_rng, 2)
        self._notify("update", type_name, rec.id)
        return rec

    def null_first(self, rows: int = 100) -> None:
        """Serve null for every nullable attribute (spec: "or null", "nullable") on the first
        `rows` rows of each type (a whole first backfill page): the hard case for a client
        that would type its columns from the first values it sees. Stamps are left alone."""
        for type_name, names in NULLABLE.items():
            for rid in self.order[type_name][:rows]:
                self.set_attrs(self.by_type[type_name][rid], dict.fromkeys(names))
            self.version[type_name] += 1

    def remember(self, rec: Rec) -> None:
        """Keep `rec`'s current copy as its previous one (before a change)."""
        self.previous.pop((rec.type, rec.id), None)
        self.previous[(rec.type, rec.id)] = rec.copy()  # shares the immutable blob and links
        if len(self.previous) > PREVIOUS_LIMIT:
            del self.previous[next(iter(self.previous))]

    def older(self, rec: Rec) -> Rec:
        """The copy of `rec` before its last change (itself when none is kept)."""
        return self.previous.get((rec.type, rec.id), rec)

    def touch(self, rec: Rec, attrs: dict[str, Any] | None = None) -> None:
        self.remember(rec)
        merged = rec.decoded()
        if attrs:
            merged.update(attrs)
        if "updated_at" in merged:
            merged["updated_at"] = self._fresh_stamp(merged["updated_at"])
        rec.set_attrs(merged)
        self._revise(rec)
        self.version[rec.type] += 1

    def update(self, type_name: str, rid: int, attrs: dict[str, Any] | None = None) -> Rec:
        rec = self.by_type[type_name][rid]
        if attrs is None:
            current = rec.decoded()
            key = next(
                (k for k in ("title", "name", "description", "headline") if k in current), None
            )
            attrs = {key: self._words(3)} if key else {}
        self.touch(rec, attrs)
        self._notify("update", type_name, rid)
        if type_name in ("images", "tags", "groups"):
            for owner_type, owner_id in sorted(self.owners.get((type_name, rid), ())):
                owner = self.by_type[owner_type].get(owner_id)
                if owner is None:
                    continue
                if self.touch_owners:
                    self.touch(owner)
                    self._notify("update", owner_type, owner_id)
                else:
                    self.version[owner_type] += 1  # pages that include it change; stamps do not
        return rec

    def silent_update(
        self,
        type_name: str,
        rid: int,
        attrs: dict[str, Any] | None = None,
        links: dict[str, Any] | None = None,
        mall: int | None = None,
    ) -> Rec:
        """Change `rid`'s attributes, linkage (rel name -> ids, or an id for a to-one) or mall,
        keeping its `updated_at` and sending no notice (a legacy bulk SQL update). Pages that
        include a changed image, tag or group change with it, their owners' stamps do not."""
        rec = self.by_type[type_name][rid]
        if attrs:
            if "updated_at" in attrs or "created_at" in attrs:
                raise ValueError("a silent update keeps the stamps")
            rec.attrs.update(attrs)
        if mall is not None and self.memberships and (type_name, rid) in self.memberships:
            if rec.mall is not None and mall != rec.mall:  # a multi-mall row: its first is replaced
                others = [m for m in self.memberships[(type_name, rid)] if m != rec.mall]
                memberships.set_malls(self, rec, [*others, mall])
                self.version["malls"] += 1
            mall = None
        self._unindex(rec)
        changed: dict[str, Any] = {}
        for name, value in (links or {}).items():
            changed[name] = list(value) if isinstance(value, list) else value
            target = TARGET.get(name, name)
            if target in self.version:
                self.version[target] += 1  # their inverse linkage changes with it
        if mall is not None and rec.mall is not None and mall != rec.mall:
            old_list = self.by_mall[(type_name, rec.mall)]
            del old_list[bisect_left(old_list, rid)]
            insort(self.by_mall.setdefault((type_name, mall), []), rid)
            rec.mall = mall
            if "mall" in rec.links:
                changed["mall"] = mall
            self.version["malls"] += 1  # a mall's members change
        if changed:
            rec.set_links(changed)  # `rec.links` is a copy: linkage changes go through here
        self._index(rec)
        self._untouched(rec)
        if type_name in ("images", "tags", "groups"):
            for owner_type, _ in self.owners.get((type_name, rid), ()):
                self.version[owner_type] += 1  # pages that include it change; stamps do not
        return rec

    def silent_change(self, rng: random.Random) -> tuple[str, int] | None:
        """One random silent update (`silent_update`): an attribute, a to-many link list, a
        sideloaded row's attribute, or a "current" press release or program moved to another
        mall's list. Returns (type, id) changed, or None when nothing could be."""
        kind = rng.choice(("attrs", "links", "sideload", "mall"))
        if kind == "sideload":
            t = rng.choice(("images", "tags", "groups"))
        elif kind == "mall":
            t = rng.choice(("press_releases", "programs"))
        elif kind == "links":
            t = rng.choice(("articles", "deals", "events", "products", "stores", "malls"))
        else:
            t = rng.choice([x for x in WEIGHTS if x not in ("images", "tags", "groups")])
        if not self.order[t]:
            return None
        rid = rng.choice(self.order[t])
        rec = self.by_type[t][rid]
        if kind == "mall":
            others = [m for m in self.order["malls"] if m != rec.mall]
            if not others:
                return None
            self.silent_update(t, rid, mall=rng.choice(others))
        elif kind == "links":
            names = [n for n in ("images", "tags", "groups") if n in rec.links]
            if not names:
                return None
            name = rng.choice(names)
            self.silent_update(t, rid, links={name: self._sample(name, 3)})
        else:
            key = next(
                (
                    k
                    for k in ("title", "name", "description", "headline", "alt_text")
                    if k in rec.attrs
                ),
                None,
            )
            if key is None:
                return None
            self.silent_update(t, rid, attrs={key: f"{self._words(3)} (silent)"})
        return t, rid

    def _untouched(self, rec: Rec) -> None:
        """A change to `rec`'s linkage that leaves its `updated_at` as it was."""
        self.previous.pop((rec.type, rec.id), None)  # its older copy would now be newer
        self._revise(rec)
        self.version[rec.type] += 1

    def delete(self, type_name: str, rid: int) -> Rec:
        """Delete a resource (and a mall's resources); returns the deletions entry."""
        self.sync_hard()
        rec = self.by_type[type_name][rid]
        if type_name == "malls":
            self._empty_mall(rid)
        self._drop(rec)
        stamp = self._fresh_stamp(None)
        did = self.next_id["deletions"]
        self.next_id["deletions"] += 1
        entry = Rec(
            "deletions",
            did,
            {
                "resource_id": rid,
                "resource_type": type_name,
                "created_at": stamp,
                "updated_at": stamp,
            },
        )
        if self.feed_deletions:
            self._add(entry)
        self._notify("deletion", type_name, rid, str(did))
        return entry

    def _empty_mall(self, mall: int) -> None:
        """Before `mall` is deleted: a row also in other malls leaves it; a row only in it is
        deleted (with its feed entry and notice) or, under `Hard.mall_delete_alone`, vanishes
        without either; a deal of `route_memberships` leaves it."""
        alone = self.hard.mall_delete_alone
        for child_type in sorted(MALL_SCOPED):
            for child in list(self.by_mall.get((child_type, mall), [])):
                rec = self.by_type[child_type][child]
                if self.memberships and (child_type, child) in self.memberships:
                    memberships.leave(self, rec, mall)
                    self._untouched(rec)
                elif alone:
                    self._drop(rec)
                else:
                    self.delete(child_type, child)
        for deal in list(self.by_mall.get(("deals", mall), [])):
            memberships.leave(self, self.by_type["deals"][deal], mall)
            self._untouched(self.by_type["deals"][deal])

    def _drop(self, rec: Rec) -> None:
        """Take `rec` out of the data set and out of its owners' to-many linkage (no feed entry,
        no notice of its own)."""
        type_name, rid = rec.type, rec.id
        self._remove(rec)
        self.freed.setdefault(type_name, []).append(rid)  # `Hard.reuse_ids` takes it back
        # Owners' to-many links drop the deleted resource (a join row deleted with it); their
        # `updated_at` moves only with `touch_owners` (the spec does not promise it).
        for owner_type, owner_id in sorted(self.owners.pop((type_name, rid), set())):
            owner = self.by_type[owner_type].get(owner_id)
            if owner is None:
                continue
            dropped = {
                name: [i for i in value if i != rid]
                for name, value in owner.link_items()
                if TARGET.get(name, name) == type_name and isinstance(value, tuple) and rid in value
            }
            if not dropped:
                continue
            owner.set_links(dropped)  # the target's index entry is gone already
            if self.touch_owners:
                self.touch(owner)
                self._notify("update", owner_type, owner_id)
            else:
                self._untouched(owner)

    def mutate_randomly(self, n: int, rng_seed: int) -> list[tuple[str, str, str]]:
        rng = random.Random(rng_seed)
        done: list[tuple[str, str, str]] = []
        types = [t for t in WEIGHTS if t not in ("images", "tags", "groups")]
        hard = self.hard
        for _ in range(n):
            if hard.sideload_deletions and rng.random() < HARD_SHARE:
                side = rng.choice(("images", "tags", "groups"))
                if len(self.order[side]) >= 3:
                    rid = rng.choice(self.order[side])
                    self.delete(side, rid)
                    done.append(("delete", side, str(rid)))
                    continue
            t = rng.choice(types)
            op = rng.choices(("update", "create", "delete"), weights=(60, 25, 15))[0]
            ids = self.order[t]
            if op == "create" or len(ids) < 3:
                done.append(("create", t, str(self.create(t).id)))
            elif op == "update" and hard.silent_moves and rng.random() < HARD_SHARE:
                moved = self._random_move(rng, t)
                if moved is not None:
                    done.append(("move", moved[0], str(moved[1])))
            elif op == "update" and self.silent_rate and rng.random() < self.silent_rate:
                changed = self.silent_change(rng)
                if changed is not None:
                    done.append(("silent", changed[0], str(changed[1])))
            elif op == "update":
                rid = rng.choice(ids)
                self.update(t, rid)
                done.append(("update", t, str(rid)))
            else:
                rid = rng.choice(ids)
                self.delete(t, rid)
                done.append(("delete", t, str(rid)))
        return done

    # -- hours ---------------------------------------------------------------------------------

    def hours(self, mall: int, start: date, end: date) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        d = start
        while d <= end and len(out) < 400:
            weekday = DAYS[d.weekday()]
            special = (d.toordinal() + mall) % 29 == 0
            text = (
                "Closed"
                if special
                else ("11:00 AM - 6:00 PM" if weekday == "sunday" else "10:00 AM - 9:00 PM")
            )
            out.append(
                {
                    "id": d.isoformat(),
                    "type": "hours",
                    "attributes": {
                        "date": d.isoformat(),
                        "day": weekday.title(),
                        "hours_text": text,
                        "description": "Holiday" if special else "",
                    },
                }
            )
            d += timedelta(days=1)
        return out

    def current_hours(self, mall: int) -> dict[str, Any]:
        now = datetime.fromtimestamp(self.now(), tz=UTC)
        today = self.hours(mall, now.date(), now.date())[0]["attributes"]
        closed = today["hours_text"] == "Closed"
        sunday = today["day"] == "Sunday"
        opens, closes = ("11:00", "18:00") if sunday else ("10:00", "21:00")
        is_open = not closed and opens <= now.strftime("%H:%M") < closes
        return {
            "data": {
                "mall_id": mall,
                "date": today["date"],
                "is_open": is_open,
                "opens_at": None if closed else opens,
                "closes_at": None if closed else closes,
                "hours_text": today["hours_text"],
            }
        }


def all_types() -> Iterable[str]:
    return [*WEIGHTS, "malls"]
