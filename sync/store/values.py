"""Misfit values of a page: refused and coerced values logged, recorded and counted.

Staging (`sync.pipeline.staging`) leaves out a row whose value does not fit its declared type
(the mirror keeps its last good copy) and converts a value that fits losslessly. Inside the
page's transaction, the writer logs each, records them in `_sync_refusals` and `_sync_coercions`
(`BookkeepingMixin.record_values`, shown by `ccsync status`), tells the daemon's metrics, and
forgets the refusals of rows a later page writes cleanly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sync.core.logs import get_logger
from sync.pipeline.batches import Staged
from sync.store.bookkeeping import BookkeepingMixin

_log = get_logger("sync.store")

#: Told (type, "refused" or "coerced", how many) of each page's misfit values.
OnValues = Callable[[str, str, int], None]


class ValueNotes:
    """What this process knows of misfit values: refused ids per type, coercions logged."""

    def __init__(self, book: BookkeepingMixin) -> None:
        self._book = book
        #: Ids per type that `_sync_refusals` holds or held (None until looked up; never
        #: shrunk, so a rolled-back page cannot make it forget one).
        self._refused_ids: dict[str, set[int]] | None = None
        #: (type, attribute) pairs whose coercions this process has logged at info level.
        self._coercions_logged: set[tuple[str, str]] = set()
        self.on_values: OnValues | None = None

    def note(self, batches: Sequence[Staged]) -> None:
        """Log, record and count the batches' refused and coerced values, and forget the
        refusals of rows written now."""
        for b in batches:
            for rid, attribute, value, problem in b.refused:
                _log.error(
                    "mirror.value_refused",
                    type=b.type,
                    id=rid,
                    attribute=attribute,
                    value=value,
                    problem=problem,
                    fix="the row keeps its last good copy; report the value to the upstream",
                )
            self._log_coerced(b)
            if self._refused_ids is None:
                self._refused_ids = self._book.refused_ids()
            if b.refused or b.coerced:
                self._book.record_values(b.type, b.refused, b.coerced)
                self._refused_ids.setdefault(b.type, set()).update(r[0] for r in b.refused)
                if self.on_values is not None:
                    for outcome, n in (("refused", len(b.refused)), ("coerced", len(b.coerced))):
                        if n:
                            self.on_values(b.type, outcome, n)
            held = self._refused_ids.get(b.type)
            if held and b.ids:  # a set intersection a page: nothing to do on a clean mirror
                again = held.intersection(b.ids)
                if again:
                    self._book.forget_refusals(b.type, sorted(again))

    def _log_coerced(self, b: Staged) -> None:
        """One line per attribute: at info the first time, then at debug (a systematic misfit
        would otherwise log on every page)."""
        per: dict[str, list[tuple[int, str, str]]] = {}
        for item in b.coerced:
            per.setdefault(item[1], []).append(item)
        for attribute, items in sorted(per.items()):
            first = (b.type, attribute) not in self._coercions_logged
            self._coercions_logged.add((b.type, attribute))
            (_log.info if first else _log.debug)(
                "mirror.values_coerced",
                type=b.type,
                attribute=attribute,
                count=len(items),
                id=items[0][0],
                value=items[0][2],
                hint="converted losslessly to the declared type; counted in ccsync status",
            )
