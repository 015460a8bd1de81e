"""sync.core.redact: which registered values, callback paths and credential members are masked."""

from __future__ import annotations

from sync.core.redact import MIN_CHARS, redact_text, register


def test_values_shorter_than_min_chars_are_not_registered() -> None:
    short = "q7" + "z" * (MIN_CHARS - 3)  # MIN_CHARS - 1 characters
    long = "q8" + "z" * (MIN_CHARS - 2)  # exactly MIN_CHARS
    register(short)
    register(long)
    register(None)
    register("")
    assert redact_text(f"a {short} b {long} c") == f"a {short} b *** c"


def test_numeric_webhook_ids_are_kept_other_segments_masked() -> None:
    assert redact_text("DELETE /webhooks/123?x") == "DELETE /webhooks/123?x"
    assert redact_text("GET /webhooks/123/") == "GET /webhooks/123/"
    assert redact_text("POST /webhooks/12ab") == "POST /webhooks/***"
    assert redact_text("POST /webhooks/abc/more") == "POST /webhooks/***/more"


def test_credential_members_are_masked_even_with_escaped_quotes() -> None:
    text = '{"bearer_token": "a\\"b", "client_token":"c", "secret": "d", "name": "e"}'
    assert redact_text(text) == (
        '{"bearer_token": "***", "client_token":"***", "secret": "***", "name": "e"}'
    )


def test_auth_parameters_are_masked_ordinary_ones_kept() -> None:
    assert redact_text("x?authentication_token=t0&page=3&password=p") == (
        "x?authentication_token=***&page=3&password=***"
    )
    # a word ending in "token" is not the parameter
    assert redact_text("mytoken=keep") == "mytoken=keep"


def test_a_secret_holding_a_shorter_one_is_masked_whole() -> None:
    """Registered in either order, `token-9x` inside `u9-session-token-9x` does not leave
    `u9-session-` showing: the longer secret is masked first."""
    register("token-9x")
    register("u9-session-token-9x")
    assert redact_text("t=u9-session-token-9x and token-9x") == "t=*** and ***"
