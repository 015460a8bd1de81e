"""sync.management.session: the context and credential headers, and what each answer's status means."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from sync.core.errors import BadResponseError, InvalidParametersError, NotFoundError, UpstreamError
from sync.core.sections import ManagementSettings
from sync.management.session import ManagementSession

URL = "https://m.example/v1/x"


def _settings(**kw: Any) -> ManagementSettings:
    base: dict[str, Any] = {"base_url": "https://m.example", "product": "p", "loyalty_club": "c"}
    return ManagementSettings(**{**base, **kw})


@dataclass
class _Answer:
    """What `_answer` reads of a transport's response."""

    status: int
    body: bytes


def _answer(status: int, body: bytes) -> Any:
    session = ManagementSession(_settings(client_token="client-tok"))
    return session._answer(_Answer(status, body), URL)  # type: ignore[arg-type]


def test_headers_carry_context_and_whichever_credentials_are_set() -> None:
    both = ManagementSession(
        _settings(customer="acme", bearer_token="user-tok", client_token="client-tok")
    )
    assert both.headers("de") == {
        "Accept": "application/json",
        "X-User-Agent": "sync",
        "X-Product-Name": "p",
        "X-Loyalty-Club-Slug": "c",
        "X-Customer": "acme",
        "Authorization": "Bearer user-tok",
        "X-Client-Authorization": "client-tok",
        "X-Locale": "de",
    }
    client_only = ManagementSession(_settings(client_token="client-tok")).headers()
    assert "Authorization" not in client_only and "X-Customer" not in client_only
    assert "X-Locale" not in client_only


def test_a_success_is_its_json_body_an_empty_body_an_empty_object() -> None:
    assert _answer(200, b'{"article": {"id": 3}}') == {"article": {"id": 3}}
    assert _answer(204, b"") == {}


def test_each_error_status_becomes_its_error() -> None:
    with pytest.raises(NotFoundError) as nf:
        _answer(404, b'{"error": "Article not found"}')
    assert str(nf.value) == f"Article not found [404 {URL}]"
    with pytest.raises(NotFoundError, match=r"^Record not found"):
        _answer(404, b"[]")
    with pytest.raises(InvalidParametersError) as ip:
        _answer(422, b'{"error": "Invalid", "details": {"title": ["blank"]}}')
    assert ip.value.details == {"title": ["blank"]} and ip.value.status == 422
    with pytest.raises(UpstreamError) as denied:
        _answer(403, b"{}")
    assert denied.value.status == 403
    assert denied.value.hint == (
        "check [management] bearer_token / client_token and the product and club"
    )
    with pytest.raises(UpstreamError, match=r"^request rejected: \{'e': 1\}"):
        _answer(409, b'{"e": 1}')
    with pytest.raises(BadResponseError, match="a body that is not JSON"):
        _answer(200, b"<html>")
