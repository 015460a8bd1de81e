"""`ccsync articles update` and `ccsync messages update`: the management API's write operations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from sync.commands.wiring import config_option, fail_cleanly, run_async, settings_from
from sync.core.config import Settings
from sync.core.errors import ConfigError
from sync.core.sections import ManagementSettings
from sync.management.client import ManagementClient
from sync.management.fields import load_update


def _management(settings: Settings) -> ManagementSettings:
    if settings.management is None:
        raise ConfigError(
            "[management] is not configured; add the section (see config.example.toml)"
        )
    return settings.management


def _show(record: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(record, indent=2, sort_keys=True))
        return
    for key, value in record.items():
        shown = (
            value
            if isinstance(value, str | int | float | bool) or value is None
            else json.dumps(value)
        )
        click.echo(f"{key:<22} {shown}")


file_option = click.option(
    "--file",
    "file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="JSON file with the fields to send (validated before sending).",
)
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print the updated record as JSON."
)


@click.group("articles")
def articles_group() -> None:
    """CMS articles of the management API v1."""


@articles_group.command("update")
@click.argument("article_id", type=click.IntRange(min=1))
@file_option
@click.option("--dry-run", is_flag=True, help="Validate upstream (dry_run=true) without saving.")
@json_option
@config_option
@fail_cleanly
def articles_update(
    article_id: int, file: Path, dry_run: bool, as_json: bool, config_path: Path | None
) -> None:
    """Update article ARTICLE_ID from a JSON file (PUT /v1/content/management/articles/ID)."""
    settings = settings_from(config_path)
    management = _management(settings)
    article = load_update(file, "article")

    async def go() -> dict[str, Any]:
        async with ManagementClient(management) as client:
            return await client.update_article(article_id, article, dry_run=dry_run)

    record = run_async(go())
    if dry_run and not as_json:
        click.echo("dry run: nothing was saved; the service would store:")
    _show(record, as_json)


@click.group("messages")
def messages_group() -> None:
    """Messages of the management API v1."""


@messages_group.command("update")
@click.argument("service")
@click.argument("message_id", type=click.IntRange(min=1))
@file_option
@click.option(
    "--archived",
    type=click.Choice(["true", "false"]),
    default=None,
    help="Archive or unarchive it.",
)
@json_option
@config_option
@fail_cleanly
def messages_update(
    service: str,
    message_id: int,
    file: Path,
    archived: str | None,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """Update message MESSAGE_ID of SERVICE from a JSON file (PUT /v1/messages/SERVICE/ID)."""
    settings = settings_from(config_path)
    management = _management(settings)
    management.require_user_token("the message update")
    message = load_update(file, "message")

    async def go() -> dict[str, Any]:
        async with ManagementClient(management) as client:
            return await client.update_message(service, message_id, message, archived=archived)

    _show(run_async(go()), as_json)
