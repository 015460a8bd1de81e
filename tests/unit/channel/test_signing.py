"""sync.channel.signing: `Credentials` before and after login, the padded timestamp, the learned skew."""

from __future__ import annotations

import pytest

from sync.channel.signing import Credentials, sign
from sync.core.redact import redact_text


def test_no_params_before_login_and_each_login_is_a_new_generation() -> None:
    creds = Credentials("a@b.c", clock=lambda: 5.9)
    assert not creds.has_token and creds.generation == 0
    with pytest.raises(AssertionError, match="login first"):
        creds.params()
    creds.set_token("u1-session-token-1")
    creds.set_token("u1-session-token-2")
    assert creds.has_token and creds.generation == 2
    # the timestamp is truncated and zero-padded to ten digits; the newest token signs
    assert creds.params() == {
        "auth_id": "a@b.c",
        "auth_timestamp": "0000000005",
        "auth_token": sign("u1-session-token-2", 5),
    }
    assert redact_text("t=u1-session-token-1 u1-session-token-2") == "t=*** ***"


def test_skew_moves_only_the_signed_timestamp() -> None:
    creds = Credentials("a@b.c", clock=lambda: 1_700_000_000.0)
    creds.set_token("tok-skew-u1")
    assert creds.params(skew=-30)["auth_timestamp"] == "1699999970"
    assert creds.params(skew=-30)["auth_token"] == sign("tok-skew-u1", 1_699_999_970)
    assert creds.offset == 0.0


@pytest.mark.parametrize(
    ("header", "offset"),
    [
        (None, 0.0),
        ("", 0.0),
        ("not a date", 0.0),
        ("Tue, 14 Nov 2023 22:13:21 GMT", 0.0),  # 1 s: within the header's resolution
        ("Tue, 14 Nov 2023 22:11:20 GMT", -120.0),  # the upstream 2 minutes behind
    ],
)
def test_learn_offset_from_the_date_header(header: str | None, offset: float) -> None:
    creds = Credentials("a@b.c", clock=lambda: 1_700_000_000.0)  # 2023-11-14T22:13:20Z
    creds.learn_offset(header)
    assert creds.offset == offset
