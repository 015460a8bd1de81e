"""Webhook notices: the `{data: [...]}` bodies the upstream posts, parsed and validated.

The upstream does not sign notices, so they are only hints (see `sync.jobs.incremental.queueworker`); parsing is strict so
that anything off-spec is rejected with a precise reason before it reaches the queue. Unknown
resource types are not errors: they are acknowledged and ignored.

The spec promises no size for a batch, so a body is parsed as it streams in (`BatchReader`): its
notices come out a chunk at a time and memory holds one chunk and the item being read, whatever
the size of the batch (100,000 items: 8 MB of body, under a megabyte held).

A body is refused at the first byte that shows it is no batch, not at its end: the first
non-blank byte must open an object, nesting stops at `MAX_DEPTH` levels, and no token or run of
blanks may pass `MAX_QUIET` bytes (yajl holds a token whole until it ends, so a 50 MB string or
number would otherwise be read to its last byte, and held). A number too long to be an int (over
Python's 4,300 digits) is a 400 naming it, never the parser's own error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# ijson: an incremental JSON parser (C backend, yajl) fed the body chunk by chunk; hand-writing
# one that keeps JSON's every rule (escapes, numbers, nesting) is not worth it, and orjson
# parses only whole documents, which would hold the whole batch (#37).
import ijson
from ijson.common import ObjectBuilder

from sync.model.catalogue import normalize_type

_MAX_ID = 2**63 - 1
#: Containers open at once in a batch: a notice nests four deep (`{data: [{attributes: {`);
#: anything past this is no batch, refused as the level opens rather than at the body's end.
MAX_DEPTH = 32
#: Bytes the parser may take without completing a token: no notice holds a string, a number or
#: a run of blanks this long, and yajl holds a token whole until it ends.
MAX_QUIET = 65536
_BLANKS = b" \t\r\n"
#: The invalid items of one body whose problem is kept word for word; the rest are counted.
KEPT_PROBLEMS = 20


class NoticeError(ValueError):
    """The body is not a notice batch as the spec describes it; the message says why."""


@dataclass(frozen=True)
class WebhookNotice:
    """One item of a notice batch."""

    kind: Literal["update", "deletion"]
    type_name: str | None
    raw_type: str
    resource_id: int
    deletion_id: str | None = None


def _resource_id(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise NoticeError(f"{where}: resource_id must be a positive integer")
    if isinstance(value, str):
        if not value.isascii() or not value.isdigit():
            raise NoticeError(f"{where}: resource_id must be a positive integer")
        digits = value.lstrip("0") or "0"
        if len(digits) > len(str(_MAX_ID)):  # and int() refuses 4,300+ digits
            raise NoticeError(f"{where}: resource_id out of range")
        value = int(digits)
    if not 1 <= value <= _MAX_ID:
        raise NoticeError(f"{where}: resource_id out of range")
    return int(value)


@dataclass
class BatchReader:
    """A notice body parsed as it arrives: `feed` each chunk, take the valid notices it
    completed, then `close`. Raises NoticeError (with the first problem met) for a body that is
    not a batch: not JSON, not an object, `data` not a list; `close` also for a `data` missing,
    empty, or with no valid item. One off-spec item must not cost the valid ones beside it (a 400
    for the whole batch loses them, and repeated 400s get the subscription dropped upstream
    after 5 attempts): its problem is counted (`invalid`) and the first `KEPT_PROBLEMS` kept."""

    items: int = 0
    valid: int = 0
    invalid: int = 0
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._events = ijson.sendable_list()
        self._coro = ijson.basic_parse_coro(self._events, use_float=False)
        self._depth = 0  # containers open outside the item being read
        self._key: str | None = None  # the top-level key whose value comes next
        self._skip = 0  # containers open inside a top-level value other than `data`
        self._in_data = False
        self._seen_data = False
        self._item: ObjectBuilder | None = None
        self._item_depth = 0
        self._opened = False  # the first non-blank byte was seen (and was `{`)
        self._quiet = 0  # bytes fed since the parser last completed a token

    def feed(self, chunk: bytes) -> list[WebhookNotice]:
        """The valid notices completed by `chunk`; NoticeError as soon as it shows the body is
        no batch (see the module docstring)."""
        if not self._opened and (lead := chunk.lstrip(_BLANKS)):
            if lead[:1] != b"{":
                value = lead[:1] in b'"-0123456789[tfn'  # the start of some JSON value
                raise NoticeError(
                    "body must be a JSON object" if value else "body is not valid JSON"
                )
            self._opened = True
        try:
            self._coro.send(chunk)
        except ijson.JSONError:
            raise NoticeError("body is not valid JSON") from None
        except (ValueError, SystemError):
            # A number past Python's int digits (4,300): yajl's C backend wraps the ValueError
            # in a SystemError, the Python backend raises it as is. No id is that long.
            raise NoticeError(
                "body holds a number of over 4,300 digits: no id is so long"
            ) from None
        self._quiet = 0 if self._events else self._quiet + len(chunk)
        if self._quiet > MAX_QUIET:
            raise NoticeError(
                f"body holds a token or a run of blanks of over {MAX_QUIET} bytes: no notice does"
            )
        return self._drain()

    def close(self) -> list[WebhookNotice]:
        """The last notices; NoticeError when the body was not a batch with a valid item."""
        try:
            self._coro.close()
        except ijson.JSONError:
            raise NoticeError("body is not valid JSON") from None
        out = self._drain()
        if not self._seen_data:
            raise NoticeError("`data` must be a list of notices")
        if not self.items:
            raise NoticeError("`data` is empty")
        if not self.valid:
            first = self.problems[0]
            raise NoticeError(first if self.invalid == 1 else f"no valid notice: {first}")
        return out

    def _drain(self) -> list[WebhookNotice]:
        out: list[WebhookNotice] = []
        for event, value in self._events:
            if self._item is not None:  # inside an item: build it
                self._item.event(event, value)
                if event in ("start_map", "start_array"):
                    self._item_depth += 1
                    self._deep(self._item_depth + 2)
                elif event in ("end_map", "end_array"):
                    self._item_depth -= 1
                    if not self._item_depth:
                        self._take(self._item.value, out)
                        self._item = None
            elif self._in_data:  # between the items of `data`
                if event == "end_array":
                    self._in_data = False
                elif event in ("start_map", "start_array"):
                    self._item = ObjectBuilder()
                    self._item.event(event, value)
                    self._item_depth = 1
                else:
                    self._take(value, out)
            elif self._skip:  # inside the value of another top-level key
                if event in ("start_map", "start_array"):
                    self._skip += 1
                    self._deep(self._skip + 1)
                elif event in ("end_map", "end_array"):
                    self._skip -= 1
            elif not self._depth:
                if event != "start_map":
                    raise NoticeError("body must be a JSON object")
                self._depth = 1
            elif event == "map_key":
                self._key = value
            elif event == "end_map":
                self._depth = 0
            elif self._key == "data":
                if event != "start_array":
                    raise NoticeError("`data` must be a list of notices")
                self._in_data = self._seen_data = True
            elif event in ("start_map", "start_array"):
                self._skip = 1
        del self._events[:]
        return out

    @staticmethod
    def _deep(depth: int) -> None:
        if depth > MAX_DEPTH:
            raise NoticeError(f"body nests deeper than {MAX_DEPTH} levels: no batch does")

    def _take(self, item: Any, out: list[WebhookNotice]) -> None:
        where = f"data[{self.items}]"
        self.items += 1
        try:
            out.append(_item(item, where))
        except NoticeError as exc:
            self.invalid += 1
            if len(self.problems) < KEPT_PROBLEMS:
                self.problems.append(str(exc))
            return
        self.valid += 1


def parse_batch(body: bytes) -> tuple[list[WebhookNotice], list[str]]:
    """One whole notice body: its valid items and the problems kept of its invalid ones
    (`BatchReader`, fed at once)."""
    reader = BatchReader()
    out = reader.feed(body)
    out += reader.close()
    return out, reader.problems


def parse_notices(body: bytes) -> list[WebhookNotice]:
    """The valid notices of one body; NoticeError names the problem when there is none."""
    return parse_batch(body)[0]


def _item(item: Any, where: str) -> WebhookNotice:
    """One notice item, or NoticeError naming what is off-spec in it."""
    if not isinstance(item, dict):
        raise NoticeError(f"{where} must be an object")
    kind = item.get("type")
    if kind not in ("updates", "deletions"):
        raise NoticeError(f"{where}.type must be 'updates' or 'deletions'")
    attrs = item.get("attributes")
    if not isinstance(attrs, dict):
        raise NoticeError(f"{where}.attributes is missing")
    raw_type = attrs.get("resource_type")
    if not isinstance(raw_type, str) or not raw_type.strip() or len(raw_type) > 100:
        raise NoticeError(f"{where}: resource_type must be a non-empty string")
    rid = _resource_id(attrs.get("resource_id"), where)
    deletion_id = item.get("id")
    return WebhookNotice(
        kind="update" if kind == "updates" else "deletion",
        type_name=normalize_type(raw_type),
        raw_type=raw_type,
        resource_id=rid,
        deletion_id=str(deletion_id) if isinstance(deletion_id, str | int) else None,
    )
