"""sync.commands.probe: the table and the JSON `ccsync probe` prints of a profile, and its exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sync.channel.profile import RouteProfile, UpstreamProfile
from sync.commands import probe as probe_module
from sync.core.config import Settings
from tests.support.settings import write_config

PROFILE = UpstreamProfile(
    probed_at="2026-01-01T00:00:00.000Z",
    api_version=None,
    page_size_asked=100,
    page_size_served=None,
    clock_offset=-2.25,
    signing_window=5.0,
    routes={
        "/deals": RouteProfile(
            "/deals",
            sort="honoured",
            sort_desc="honoured",
            filter="honoured",
            etag="304",
            includes={"tags": "linkage", "images": "refused"},
            include_errors={"images": "HTTP 400: bad"},
        ),
        "/malls/{id}/stores": RouteProfile("/malls/{id}/stores", sort="ignored", etag="none"),
    },
)


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A configuration, and a probe that answers `PROFILE` without asking anyone."""

    async def probe(settings: Settings) -> UpstreamProfile:
        assert settings.upstream.base_url == "http://127.0.0.1:1"
        return PROFILE

    monkeypatch.setattr(probe_module, "probe", probe)
    upstream = {"base_url": "http://127.0.0.1:1", "email": "a@x", "password": "pw"}
    return write_config(tmp_path / "sync.toml", upstream=upstream)


def test_the_table_aligns_every_route_and_says_what_cannot_be_used(config: Path) -> None:
    result = CliRunner().invoke(probe_module.probe_command, ["--config", str(config)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "api version: not served (no X-API-Version header); page size asked 100, served 100; "
        "clock offset -2.2 s; signing window 5-10 s",
        "route               sort      -sort     filter[updated_at]  compares  etag  include paths",
        "/deals              honoured  honoured  honoured            unknown   304   images: refused, tags: linkage",
        "/malls/{id}/stores  ignored   unknown   unknown             unknown   none  -",
        "could not use:",
        "  X-API-Version: not served; a change of major version cannot be told",
        "  /deals include=images: HTTP 400: bad; left out of listings",
        "  /malls/{id}/stores: no ETag; polls ask without If-None-Match",
        "  /malls/{id}/stores: sort=updated_at ignored; polled unsorted",
    ]


def test_json_is_the_whole_profile(config: Path) -> None:
    result = CliRunner().invoke(probe_module.probe_command, ["--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert UpstreamProfile.from_json(json.dumps(doc)) == PROFILE


def test_a_configuration_error_exits_2_before_probing(tmp_path: Path) -> None:
    bad = write_config(
        tmp_path / "sync.toml", upstream={"base_url": "ftp://x", "email": "a@x", "password": "p"}
    )
    result = CliRunner().invoke(probe_module.probe_command, ["--config", str(bad)])
    assert result.exit_code == 2
    assert "upstream.base_url: must start with http:// or https://" in result.stderr


def test_the_deletions_feed_row_says_what_it_means(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its filter and ETag are `not probed`, and a note says its sort is on created_at and
    what `unknown` means there (#48)."""
    feed = UpstreamProfile(signing_window=5.0, routes={"/deletions": RouteProfile("/deletions")})

    async def probe(settings: Settings) -> UpstreamProfile:
        return feed

    monkeypatch.setattr(probe_module, "probe", probe)
    upstream = {"base_url": "http://127.0.0.1:1", "email": "a@x", "password": "pw"}
    cfg = write_config(tmp_path / "sync.toml", upstream=upstream)
    result = CliRunner().invoke(probe_module.probe_command, ["--config", str(cfg)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    row = next(line for line in lines if line.startswith("/deletions"))
    assert row.split() == [
        "/deletions",
        "unknown",
        "unknown",
        "not",
        "probed",
        "unknown",
        "not",
        "probed",
        "-",
    ]
    assert (
        "note: /deletions is the deletions feed: its sort, -sort and compares are on created_at (unknown: fewer than two entries to compare"
        in result.stdout
    )
