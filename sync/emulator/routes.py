"""The emulator's route table: which handler answers which method and path.

Specific routes come before the generic `/{collection}/...` ones, which they would otherwise be
taken for: the management API's, the emulator's own `/_emulator/` routes, accounts, webhooks.
"""

from __future__ import annotations

from aiohttp import web

from sync.emulator.accounts import AccountRoutes
from sync.emulator.admin import AdminRoutes
from sync.emulator.app import EmulatorApp
from sync.emulator.hours import HoursRoutes
from sync.emulator.listings import Listings
from sync.emulator.management import Management
from sync.emulator.middleware import OWN_PREFIX, gate
from sync.emulator.responses import replies
from sync.emulator.subscriptions import WebhookRoutes


def make_app(emu: EmulatorApp, management: Management | None = None) -> web.Application:
    """The aiohttp application serving the spec's routes (and the management API's, if given)."""
    app = web.Application(middlewares=[gate(emu), replies])
    if management is not None:
        management.routes(app)  # before the generic /{collection}/... routes below
    admin = AdminRoutes(emu)
    accounts = AccountRoutes(emu)
    hooks = WebhookRoutes(emu)
    listings = Listings(emu, HoursRoutes(emu))
    r = app.router
    r.add_get(f"{OWN_PREFIX}requests", admin.traffic)  # before /{collection}/{id}
    r.add_delete(f"{OWN_PREFIX}requests", admin.traffic)
    r.add_get(f"{OWN_PREFIX}settings", admin.settings)
    r.add_patch(f"{OWN_PREFIX}settings", admin.settings)
    r.add_get(f"{OWN_PREFIX}scripts/{{type}}", admin.scripts)
    r.add_put(f"{OWN_PREFIX}scripts/{{type}}", admin.scripts)
    r.add_post(f"{OWN_PREFIX}notices", admin.notices)
    r.add_post(f"{OWN_PREFIX}resources/{{type}}", admin.control)
    r.add_patch(f"{OWN_PREFIX}resources/{{type}}/{{id}}", admin.control)
    r.add_delete(f"{OWN_PREFIX}resources/{{type}}/{{id}}", admin.control)
    r.add_post("/accounts", accounts.create_account)
    r.add_post("/accounts/login", accounts.login)
    r.add_delete("/accounts/logout", accounts.logout)
    r.add_post("/webhooks", hooks.create_webhook)
    r.add_get("/webhooks", hooks.list_webhooks)
    r.add_delete("/webhooks/{id}", hooks.delete_webhook)
    r.add_get("/{collection}", listings.collection)
    r.add_get("/{collection}/{id}", listings.single)
    r.add_get("/{collection}/{id}/{rel}", listings.related_route)
    return app
