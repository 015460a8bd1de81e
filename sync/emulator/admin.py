"""The emulator's own routes under `/_emulator/`: its traffic, its switches, `meta.scripts`, its data.

Not part of the spec: they let a benchmark or a user's own integration test steer a running
emulator from outside its process (the emulator binds loopback only). They are neither counted
nor faulted (`middleware`). `GET`/`DELETE /_emulator/requests` read and reset the traffic counts;
`PATCH /_emulator/settings` switches faults, hard readings and behaviour; `/_emulator/scripts/
{type}` reads or replaces a type's `meta.scripts`; `/_emulator/resources/{type}[/{id}]` creates,
changes, moves or deletes rows as the upstream's editors would; `POST /_emulator/notices` queues
a burst of update notices (one batch of any size with `huge_notice_batches`).
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from sync.emulator.app import EmulatorApp
from sync.emulator.render import resource_obj
from sync.emulator.responses import JSON, Reply, error, json_response

#: The fault switches `PATCH /_emulator/settings` takes, each a number >= 0.
NUMBERS = frozenset(
    {
        "latency",
        "error_rate",
        "rate_429",
        "stall_rate",
        "stall_seconds",
        "drop_rate",
        "stale_rate",
        "webhook_loss_rate",
        "webhook_duplicate_rate",
    }
)


async def _json_body(request: web.Request) -> Any:
    """The request's body as JSON, or a 400."""
    try:
        return orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        raise Reply(error(400, "Bad Request", "the body is not JSON")) from None


class AdminRoutes:
    """Handlers of the `/_emulator/` routes over `emu`."""

    def __init__(self, emu: EmulatorApp) -> None:
        self.emu = emu

    async def traffic(self, request: web.Request) -> web.StreamResponse:
        """`GET /_emulator/requests`: requests served per route and per second; `DELETE`
        resets the counts."""
        emu = self.emu
        if request.method == "DELETE":
            emu.traffic.reset()
            return web.Response(status=204)
        return json_response(emu.traffic.as_json())

    async def settings(self, request: web.Request) -> web.StreamResponse:
        """`PATCH /_emulator/settings`: switch faults and behaviour of a running emulator from
        outside its process (`{"latency": 0.05, "mall_includes": true}`, the hard readings as
        `{"hard": {"multi_mall": true, "page_bound": 30}}`); answers them all. The benchmarks
        backfill fast, then measure the daemon under latency."""
        emu = self.emu
        if request.method == "PATCH":
            body = await _json_body(request)
            if not isinstance(body, dict):
                return error(400, "Bad Request", "the body must be a JSON object")
            hard = body.get("hard", {})
            if not isinstance(hard, dict):
                return error(400, "Bad Request", "hard must be an object of switch: value")
            try:
                emu.hard.update(hard)
            except ValueError as exc:
                return error(400, "Bad Request", str(exc))
            if hard:
                emu.data.sync_hard()
                emu.pages.clear()  # cached pages were answered under the other setting
                if emu.hard.changing_scripts != emu.changing_scripts:
                    emu.changing_scripts = emu.hard.changing_scripts
            for key, value in body.items():
                if key == "hard":
                    continue
                if key == "mall_includes" and isinstance(value, bool):
                    emu.mall_includes = value
                elif key == "changing_scripts" and isinstance(value, bool):
                    emu.changing_scripts = value
                elif key in NUMBERS and isinstance(value, int | float) and value >= 0:
                    setattr(emu.faults, key, float(value))
                else:
                    return error(400, "Bad Request", f"unknown setting or bad value: {key}")
        now: dict[str, Any] = {k: getattr(emu.faults, k) for k in sorted(NUMBERS)}
        now["mall_includes"] = emu.mall_includes
        now["hard"] = emu.hard.as_dict()
        now["changing_scripts"] = emu.changing_scripts
        return json_response(now)

    async def scripts(self, request: web.Request) -> web.StreamResponse:
        """`/_emulator/scripts/{type}`: `GET` the `meta.scripts` the type's responses carry,
        `PUT` a JSON array to serve instead from now on (`set_scripts`)."""
        emu = self.emu
        type_name = request.match_info["type"].replace("-", "_")
        if type_name not in emu.data.by_type:
            return error(404, "Not Found", f"no resource type {type_name!r}")
        if request.method == "PUT":
            body = await _json_body(request)
            if not isinstance(body, list):
                return error(400, "Bad Request", "the body must be a JSON array")
            emu.set_scripts(type_name, body)
        return web.Response(body=emu.scripts_of(type_name), headers={"Content-Type": JSON})

    async def notices(self, request: web.Request) -> web.StreamResponse:
        """`POST /_emulator/notices` with `{"type": "deals", "count": 100000}`: that many update
        notices of the type's rows (in turn) for every subscription to it (`Dispatcher.burst`);
        202 with how many subscriptions got them."""
        emu = self.emu
        body = await _json_body(request)
        if not isinstance(body, dict):
            return error(400, "Bad Request", "the body must be a JSON object")
        type_name, count = body.get("type"), body.get("count")
        if not isinstance(type_name, str) or type_name not in emu.data.by_type:
            return error(404, "Not Found", f"no resource type {type_name!r}")
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 10**7:
            return error(400, "Bad Request", "count must be an integer from 1 to 10000000")
        ids = sorted(emu.data.by_type[type_name])
        subs = emu.dispatcher.burst(type_name, ids, count) if ids else 0
        return json_response({"subscriptions": subs, "count": count}, 202)

    async def control(self, request: web.Request) -> web.StreamResponse:
        """`/_emulator/resources/{type}[/{id}]`: change the data set of a running emulator from
        outside its process, as the upstream's own editors would (notices, the deletions feed
        and `updated_at` follow as for any mutation): `POST` creates (body `{"attributes":
        {...}, "mall_id": 7}`, both optional), `PATCH` updates (`{"attributes": {...}}`, or
        `{"silent": true, ...}` to keep `updated_at` and send no notice, or `{"move": {"from": 3,
        "to": 5}}` to move a mall-scoped row silently: `Dataset.move`), `DELETE` deletes. For
        users' own integration tests; the emulator binds loopback only."""
        emu = self.emu
        type_name = request.match_info["type"].replace("-", "_")
        if type_name not in emu.data.by_type or type_name == "deletions":
            return error(404, "Not Found", f"no resource type {type_name!r}")
        raw_id = request.match_info.get("id")
        rid: int | None = None
        if raw_id is not None:
            if not raw_id.isdigit() or int(raw_id) not in emu.data.by_type[type_name]:
                return error(404, "Not Found", f"no {type_name} {raw_id}")
            rid = int(raw_id)
        body: dict[str, Any] = {}
        if request.method in ("POST", "PATCH") and request.can_read_body:
            parsed = await _json_body(request)
            if not isinstance(parsed, dict):
                return error(400, "Bad Request", "the body must be a JSON object")
            body = parsed
        attrs = body.get("attributes")
        if attrs is not None and not isinstance(attrs, dict):
            return error(400, "Bad Request", "attributes must be an object")
        if request.method == "POST" and rid is None:
            mall = body.get("mall_id")
            if mall is not None and (
                not str(mall).isdigit() or int(mall) not in emu.data.by_type["malls"]
            ):
                return error(422, "Unprocessable Entity", f"no mall {mall}")
            try:
                rec = emu.data.create(type_name, attrs, int(mall) if mall is not None else None)
            except KeyError:
                return error(422, "Unprocessable Entity", f"{type_name} cannot be created")
            status, rid = 201, rec.id
        elif request.method == "PATCH" and rid is not None and "move" in body:
            move = body["move"]
            if not isinstance(move, dict) or not all(
                isinstance(move.get(k), int) and not isinstance(move.get(k), bool)
                for k in ("from", "to")
            ):
                return error(400, "Bad Request", 'move must be {"from": mall id, "to": mall id}')
            try:
                emu.data.move(type_name, rid, move["from"], move["to"])
            except ValueError as exc:
                return error(422, "Unprocessable Entity", str(exc))
            status = 200
        elif request.method == "PATCH" and rid is not None:
            if body.get("silent"):
                emu.data.silent_update(type_name, rid, attrs, None, None)
            else:
                emu.data.update(type_name, rid, attrs)
            status = 200
        elif request.method == "DELETE" and rid is not None:
            emu.data.delete(type_name, rid)
            return web.Response(status=204)
        else:
            return error(405, "Method Not Allowed", f"{request.method} {request.path}")
        doc = {"data": resource_obj(emu.data, emu.base, emu.data.by_type[type_name][rid], (), None)}
        return json_response(doc, status)
