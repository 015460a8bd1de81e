"""The emulator's footprint and what it reports: the compact data set (plain resources from
templates, variants in a bounded LRU, revisions after mutations), `--malls`, the memory check of
`--resources`, and the requests it served per route and per second."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from sync.commands import emulator as emulator_cmd
from sync.emulator.dataset import Dataset
from sync.emulator.render import encode_resource, resource_obj
from sync.emulator.server import footprint, max_resources
from tests.support.emulator_client import MakeEmulator, signed


def test_the_plain_form_from_templates_is_the_resource_object() -> None:
    """Every type's template-built encoding decodes to the object `resource_obj` builds."""
    data = Dataset(resources=2000, seed=3)
    for recs in data.by_type.values():
        for rec in list(recs.values())[:50]:
            plain = encode_resource(data, "http://127.0.0.1:1", rec, (), None)
            assert orjson.loads(plain) == resource_obj(data, "http://127.0.0.1:1", rec, (), None)


def test_the_data_set_is_deterministic_per_seed() -> None:
    """Two data sets of one seed hold the same bytes; another seed differs."""
    a, b, c = (Dataset(resources=1500, seed=s) for s in (5, 5, 6))
    for t in a.by_type:
        assert [r.blob for r in a.by_type[t].values()] == [r.blob for r in b.by_type[t].values()]
        assert [r.links for r in a.by_type[t].values()] == [r.links for r in b.by_type[t].values()]
    assert [r.blob for r in a.by_type["deals"].values()] != [
        r.blob for r in c.by_type["deals"].values()
    ]


def test_attributes_write_through_and_mutations_keep_hot_values_in_step() -> None:
    """A change through `Rec.attrs` is written back (blob, hot values, revision); `decoded()`
    is a copy; an update changes the blob and the hot `updated_at`."""
    data = Dataset(resources=600, seed=2)
    deal = data.by_type["deals"][data.order["deals"][0]]
    rev = deal.rev
    deal.attrs.update(visibility="Unlisted")
    assert deal.get("visibility") == "Unlisted" and deal.attrs["visibility"] == "Unlisted"
    assert deal.rev != rev
    deal.decoded()["title"] = "not kept"
    assert deal.attrs["title"] != "not kept"
    deal.enc.clear()  # what code written for per-record encodings did: still harmless
    before, rev = deal.get("updated_at"), deal.rev
    data.update("deals", deal.id, {"title": "Kept", "visibility": "Private"})
    assert deal.attrs["title"] == "Kept" and deal.get("visibility") == "Private"
    assert deal.get("updated_at") == deal.attrs["updated_at"] > before
    assert deal.rev != rev
    assert data.older(deal).attrs["updated_at"] == before  # the lagging replica's copy


def test_the_encoding_cache_keeps_to_its_byte_budget() -> None:
    """Sparse-fieldset encodings go through the LRU, which never holds more than its budget,
    and a changed resource is never served from an older revision's entry."""
    data = Dataset(resources=3000, seed=1)
    data.encodings.budget = 20_000
    fields = ("title",)
    for rid in data.order["deals"]:
        encode_resource(data, "", data.by_type["deals"][rid], (), fields)
    assert 0 < data.encodings.used <= 20_000
    rid = data.order["deals"][-1]
    data.update("deals", rid, {"title": "Fresh"})
    body = orjson.loads(encode_resource(data, "", data.by_type["deals"][rid], (), fields))
    assert body["attributes"] == {"title": "Fresh"}


def test_malls_are_independent_of_resources() -> None:
    """`malls=N` sets the number of malls; the default stays resources // 1000, at least 3."""
    assert len(Dataset(resources=2000, seed=1, malls=40).order["malls"]) == 40
    assert len(Dataset(resources=2000, seed=1).order["malls"]) == 3
    assert len(Dataset(resources=9000, seed=1).order["malls"]) == 9
    data = Dataset(resources=3000, seed=1, malls=200)
    scoped = {data.by_type["stores"][i].mall for i in data.order["stores"]}
    assert len(scoped) > 100  # stores spread over the many malls


def test_cli_takes_malls_and_refuses_what_cannot_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--resources` beyond the memory available is refused with the figures and a way out."""
    monkeypatch.setattr(emulator_cmd, "available_memory", lambda: 2 * 10**9)
    result = CliRunner().invoke(emulator_cmd.emulator_command, ["--resources", "5000000"])
    assert result.exit_code == 2, result.output
    assert "--resources 5,000,000 needs about" in result.output
    assert "2.0 GB available" in result.output
    most = max_resources(2 * 10**9, 256)
    assert f"serve at most {most:,} resources" in result.output
    assert footprint(most, 256) <= 2 * 10**9 < footprint(most + 1000, 256)
    help_text = CliRunner().invoke(emulator_cmd.emulator_command, ["--help"]).output
    assert "--malls" in help_text and "--encoding-cache-mb" in help_text


async def test_requests_are_counted_per_route_and_per_second(make_emulator: MakeEmulator) -> None:
    """`Emulator.requests` and `GET /_emulator/requests` count what was served by route
    pattern (ids replaced) and by second; the emulator's own routes are neither counted nor
    faulted, and `DELETE` resets the counts."""
    async with make_emulator(resources=600, seed=3, malls=5) as emu, signed(emu) as api:
        malls = emu.ids("malls")
        assert len(malls) == 5
        emu.requests.reset()
        for mall in malls[:3]:
            status, _, _ = await api.get(f"/malls/{mall}/stores")
            assert status == 200
        assert (await api.get("/deals"))[0] == 200
        assert (await api.get(f"/deals/{emu.ids('deals')[0]}"))[0] == 200
        assert (await api.get("/nothing-here"))[0] == 404
        routes = emu.requests.routes
        assert routes["/malls/{id}/stores"] == 3
        assert routes["/deals"] == 1 and routes["/deals/{id}"] == 1
        assert routes["(no route)"] == 1
        assert emu.requests.total == 6
        assert sum(emu.requests.per_second().values()) == 6
        assert emu.requests.peak("/malls/{id}/stores") >= 1
        emu.faults.error_rate = 1.0  # every API request fails; the counts are still served
        async with api.http.get(f"{emu.base_url}/_emulator/requests") as r:
            assert r.status == 200
            doc: dict[str, Any] = await r.json()
        assert doc["total"] == 6 and doc["routes"]["/malls/{id}/stores"] == 3
        assert sum(s["total"] for s in doc["seconds"]) == 6
        assert all(set(s) == {"second", "total", "routes"} for s in doc["seconds"])
        async with api.http.delete(f"{emu.base_url}/_emulator/requests") as r:
            assert r.status == 204
        assert emu.requests.total == 0 and not emu.requests.routes
