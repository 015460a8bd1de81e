"""The hard readings of the spec, each switchable: `Hard`, all off by default, and its strict profile.

By default the emulator serves the friendly reading wherever the spec leaves room. Each field of
`Hard` turns on a reading the spec allows and a friendly fake never serves (README, "The
emulator", hard readings); `Hard.strict()` turns every one on (`Emulator(profile="strict")`,
`ccsync emulator --profile strict`). One object is shared by the emulator, its data set and its
app (`emu.hard is emu.data.hard is emu.app.hard`). A field assigned at run time takes effect
with the next request or data set call: the data set builds (or drops) the memberships that
`multi_mall` and `route_memberships` add (`sync.emulator.memberships`) and bumps every type's
version, so no cached selection or page of the other setting is served again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, TypeAlias

#: The page bound of the strict profile (the spec's 100 is "subject to change").
STRICT_PAGE_BOUND = 30
#: The signing window of the strict profile, in seconds (the spec: "within several seconds").
STRICT_SIGNING_WINDOW = 5.0
PROFILES = ("strict",)
#: The most a feed entry waits before it is listed, under `late_feed_entries`, in seconds.
LATE_FEED_SECONDS = 20.0
#: The value of one switch: a boolean, `page_bound`'s integer, `signing_window`'s seconds,
#: `includes_allowed`'s names (or None).
Switch: TypeAlias = bool | int | float | tuple[str, ...] | None


@dataclass
class Hard:
    """The hard readings; every field off (False, 0, None) by default. See the module docstring."""

    #: `Dataset.create` reuses the id most recently deleted of its type, when there is one (the
    #: spec never says ids are not reused; MySQL and Rails reuse them). The new row has fresh
    #: `created_at`/`updated_at`, later than the deletion's feed entry, and an update notice.
    reuse_ids: bool = False
    #: Stores, products, programs, social feeds, press releases and contacts may belong to
    #: several malls: at build (or when switched on) about a third get 1-2 more; a mall's route
    #: lists a row in each of its malls (`Dataset.malls_of`); a store's `mall` names its first
    #: (lowest id) mall. Deleting a row removes it from all its malls.
    multi_mall: bool = False
    #: `mutate_randomly` moves a mall-scoped row to another mall for ~10 % of its updates,
    #: keeping `updated_at`, with no notice and no feed entry (`Dataset.move`; the spec shows no
    #: rule). An explicit `Dataset.move` or the control route's `move` works whatever this is.
    silent_moves: bool = False
    #: Deleting a mall writes one feed entry and one notice, the mall's: rows that were only in
    #: that mall vanish from every listing and `filter[id]` with neither of their own; rows also
    #: in other malls just lose that membership.
    mall_delete_alone: bool = False
    #: The upper bound of `page[size]` (0: the spec's 100): a larger ask is served this many
    #: rows, and `links.first`/`links.last` carry the size served.
    page_bound: int = 0
    #: With `page_bound` set, a `page[size]` above it is a 400 naming `page[size]` instead.
    page_bound_refuse: bool = False
    #: Rows leave a listing while a client walks it: every 3rd request for a page number >= 2 of
    #: a collection, one row of an earlier page leaves the listing (a deal made Private, a
    #: mall-scoped row moved silently to another mall, a row updated so it no longer matches the
    #: filter, else deleted), so later rows shift one place earlier (`Dataset.shifted`).
    shifting_listings: bool = False
    #: `mutate_randomly` also deletes images, tags and groups (~10 % of its operations): feed
    #: entry and notice; owners drop them from their linkage, their `updated_at` untouched.
    sideload_deletions: bool = False
    #: Contacts and deals are tied to malls only by their mall routes: `/malls?include=contacts`
    #: (or `deals`) serves links only; `/malls/{id}/deals` lists an explicit membership kept
    #: per deal (1-3 malls at build, 1-2 for a created deal) instead of the national/local rule.
    route_memberships: bool = False
    #: `/malls?include=<members>` (stores, events, contacts, deals, ...) serves those
    #: relationships with links only and includes nothing for them (valid include names are "not
    #: shown"), instead of linkage or a 400; other includes keep their linkage.
    no_include_linkage: bool = False

    # -- time as evidence (#37) -----------------------------------------------------------------

    #: Deletions feed entries become visible `LATE_FEED_SECONDS` at most (uniformly 0 to that)
    #: after their `created_at`, so out of order (an asynchronous feed writer); notices are
    #: sent at once. `Dataset.due` lists the entries whose time came.
    late_feed_entries: bool = False
    #: `mutate_randomly` makes ~a third of its deletions a deletion followed at once by the
    #: same id created again (`Dataset.recreate`, whatever `reuse_ids`): feed entry, then fresh
    #: stamps later than the entry, so a type poll may write the new row before the deletions
    #: poll reads the entry.
    recreate_before_feed: bool = False
    #: The "current" lists (a mall's press releases and programs) drop a row for a while
    #: (`Dataset.hide`: 2-10 s, ~10 % of `mutate_randomly`'s updates): out of every mall route,
    #: `/malls?include=` linkage and `filter[id]`, with no feed entry and no notice; then listed
    #: again with its old stamp. Switched off, every dropped row is listed again.
    current_lists_drop: bool = False

    # -- the spec's sort rows, include refusals, the signing window, faults on /accounts (#30) --

    #: `sort` is ignored (rows in id order, no error) on the listings whose spec row does not
    #: document it (`spec.SORTED`, `spec.SORTED_IN_MALL`): `/articles`, `/contacts`,
    #: `/ifeatures`, `/job-listings`, `/mall-messages`, `/deletions`, `/malls/{id}/programs`;
    #: related routes (`/articles/{id}/images`, ...) never sort. Filters still apply.
    sort_undocumented_ignored: bool = False
    #: The first segments of the `include` paths the upstream accepts (None: every path it
    #: models); another path is a 400 naming `include`, as JSON:API 1.0 requires for an
    #: include a server does not support. Off (None) in the strict profile, which must stay
    #: mirrorable through include linkage.
    includes_allowed: tuple[str, ...] | None = None
    #: The largest `auth_timestamp` skew accepted, in seconds (0: `auth.SKEW`, 30 s); the spec
    #: says "within several seconds". Outside it, a 401 whose `Date` carries the emulator's clock.
    signing_window: float = 0.0
    #: The switchable faults (`sync.emulator.faults`: 5xx, 429, stalls, drops, latency) also
    #: apply to `/accounts` (creation, login, logout), exempt otherwise.
    account_faults: bool = False
    #: A route the account's channels do not allow answers 404, not 403: the spec does not
    #: show the status of "channel not permitted".
    forbidden_as_not_found: bool = False

    # -- time (#37; `sync.emulator.commits`) ------------------------------------------------------
    #: The data's stamps (`updated_at`, `created_at`, feed entries) are taken 90 s behind the
    #: clock of the `Date` header and of the signature check.
    stamps_behind_date: bool = False
    #: A fifth of random updates is stamped when made and becomes visible (listings,
    #: `filter[id]`, its notice) only 20 s or 60 s later; later stamps are visible at once.
    late_commits: bool = False
    #: Rows sharing the stamp a listing is sorted by come in a new order for every request, and
    #: ~2 % of random operations bulk-update 75 rows of one type (all, for a type of 35 to 75)
    #: under one stamp.
    unstable_ties: bool = False
    #: Stamps issued from then on (`updated_at`, `created_at`, feed entries) have whole seconds
    #: (`.000Z`: the spec's form, a database that keeps seconds): every change of a row within
    #: one second keeps the stamp its first change took, so two versions of a row may share a
    #: stamp, and a copy read before the second change is not older by its stamp.
    whole_second_stamps: bool = False
    #: Stamps are kept below the millisecond they are served at (a PostgreSQL `timestamptz`
    #: behind a Rails app): each served `T` stands for `T` plus 1-999 microseconds, one value
    #: per type and served stamp (so the rows of one bulk statement share it), and date filters
    #: on `updated_at`/`created_at` compare at that full precision: `lte=T` and `lt=T` leave
    #: the rows served at `T` out, `gt=T` and `gte=T` hold them. `mutate_randomly` also makes
    #: bulk updates and bulk deletes of one type under one stamp (`Dataset.bulk_delete`).
    micro_stamps: bool = False
    #: A row created again under its deleted id (`Dataset.recreate`) is stamped up to a second
    #: *before* its deletion entry (0.1-0.99 s: another app server whose clock is behind the
    #: feed's, or a table that keeps whole seconds): the spec fixes neither one clock nor one
    #: precision for the stamps it serves.
    recreated_before_entry: bool = False

    # -- meta.scripts (#30) ----------------------------------------------------------------------
    #: Each type serves its own `meta.scripts` list, which `set_scripts` changes at run time
    #: (`EmulatorApp.changing_scripts`, `--changing-scripts`).
    changing_scripts: bool = False

    # -- deals without store linkage, notice batches of any size (#37) --
    #: Deals serve their `stores` relationship with links only, never linkage, even when
    #: included (and nothing is included for it); stores' `deals` likewise. The malls a deal is
    #: in are then shown only by `/malls/{id}/deals` (its own related route still lists them).
    deals_without_stores: bool = False
    #: A notice delivery carries every notice pending for its subscription in one body, with no
    #: 100-item cap: a burst (`Emulator.notice_burst`, `POST /_emulator/notices`) arrives as one
    #: batch of any size.
    huge_notice_batches: bool = False

    # -- a stock JSON:API framework's habits (Django REST framework JSON:API, #38) ---------------
    #: A page past the last answers 404 "Invalid page." on every listing route (Django's
    #: paginator; page 1 of an empty listing is served, empty), and `links` carry `next` and
    #: `prev` beside `first` and `last`, null at the ends, as the framework serves them.
    past_end_404: bool = False
    #: An include path that repeats a name (`tags.tags`) answers 500, not a 400 (the
    #: framework's prefetch fails on it). Included resources carry the linkage of every
    #: relationship they have (the framework renders `data` for each), so the linkage that path
    #: would have served still arrives; only the rows it alone reaches are not included.
    include_path_500: bool = False
    #: A nested include path through images (`images.tags`) answers 400 naming `include`,
    #: while `images` itself is served (its included images carry their linkage, as above).
    nested_include_400: bool = False
    #: Relationships carry no `links` (one without linkage is left out), resources no
    #: `links.self`.
    no_relationship_links: bool = False
    #: No `X-API-Version` header and no `ETag` (so no 304 either).
    no_version_headers: bool = False

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        object.__setattr__(self, "_changes", self.changes + 1)

    @property
    def changes(self) -> int:
        """How many assignments the switches have seen (the data set's cue to catch up)."""
        count: int = self.__dict__.get("_changes", 0)
        return count

    @classmethod
    def strict(cls) -> Hard:
        """Every hard reading on: a page bound of `STRICT_PAGE_BOUND`, clamped (not refused), a
        signing window of `STRICT_SIGNING_WINDOW`; `includes_allowed` stays None."""
        on: dict[str, Any] = {f.name: True for f in fields(cls) if f.default is False}
        on.update(page_bound_refuse=False, signing_window=STRICT_SIGNING_WINDOW)
        return cls(**on, page_bound=STRICT_PAGE_BOUND)

    @classmethod
    def profile(cls, name: str | None) -> Hard:
        """The switches of a named profile (None: all off)."""
        if name is None:
            return cls()
        if name == "strict":
            return cls.strict()
        raise ValueError(f"unknown profile {name!r} (known: {', '.join(PROFILES)})")

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def checked(self, name: str, value: Any) -> Switch:
        """`value` for the switch `name`, or ValueError: a boolean, an integer >= 0 for
        `page_bound`, seconds >= 0 for `signing_window`, a list of relationship names or None
        for `includes_allowed`."""
        if name not in self.names():
            raise ValueError(f"unknown hard switch {name!r} (known: {', '.join(self.names())})")
        if name == "page_bound":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError("page_bound takes an integer >= 0 (0: the spec's 100)")
            return value
        if name == "signing_window":
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError("signing_window takes seconds >= 0 (0: the default 30)")
            return float(value)
        if name == "includes_allowed":
            if value is None:
                return None
            if not isinstance(value, list | tuple) or not all(
                isinstance(v, str) and v for v in value
            ):
                raise ValueError("includes_allowed takes a list of relationship names, or null")
            return tuple(value)
        if not isinstance(value, bool):
            raise ValueError(f"{name} takes true or false")
        return value

    def update(self, values: dict[str, Any]) -> None:
        """Set several switches at once; nothing is set when any name or value is wrong."""
        checked = {name: self.checked(name, value) for name, value in values.items()}
        for name, value in checked.items():
            setattr(self, name, value)

    def switch_on(self, spec: str) -> None:
        """Apply a command-line `NAME` (on; `page_bound` and `signing_window` take the strict
        values, `includes_allowed` refuses every include) or `NAME=VALUE` (true/false/on/off/1/0,
        the bound, the seconds, or the include names comma-separated, `off` for None)."""
        name, _, raw = spec.partition("=")
        name = name.strip().replace("-", "_")
        if name == "page_bound":
            value: Any = STRICT_PAGE_BOUND if not raw else _int(raw)
        elif name == "signing_window":
            value = STRICT_SIGNING_WINDOW if not raw else _float(raw)
        elif name == "includes_allowed":
            value = _names(raw)
        elif not raw or raw.lower() in ("true", "on", "yes", "1"):
            value = True
        elif raw.lower() in ("false", "off", "no", "0"):
            value = False
        else:
            raise ValueError(f"{name} takes true or false, not {raw!r}")
        self.update({name: value})

    def as_dict(self) -> dict[str, Switch]:
        values: dict[str, Switch] = asdict(self)
        return values

    def on(self) -> list[str]:
        """The names of the switches that are on (set to other than their default)."""
        return [f.name for f in fields(self) if getattr(self, f.name) != f.default]


def _int(raw: str) -> int | str:
    return int(raw) if raw.strip().isdigit() else raw


def _float(raw: str) -> float | str:
    try:
        return float(raw)
    except ValueError:
        return raw


def _names(raw: str) -> tuple[str, ...] | None:
    """`includes_allowed`'s command-line value: names comma-separated; `off` (false, no, none)
    is None, nothing at all is no name (every include refused)."""
    if raw.strip().lower() in ("off", "false", "no", "none"):
        return None
    return tuple(n.strip() for n in raw.split(",") if n.strip())
