"""sync.core.errors: `redact_url`, and the one-line messages each error of the tree builds."""

from __future__ import annotations

import signal

from sync.core.errors import (
    Interrupted,
    InvalidParametersError,
    MirrorError,
    NotFoundError,
    StorageFault,
    SyncError,
    UpstreamError,
    redact_url,
)


def test_redact_url_masks_the_authority_password_and_auth_parameters_only() -> None:
    assert redact_url("https://user:s3cret@h.example:8443/x") == "https://user:***@h.example:8443/x"
    assert (
        redact_url("http://h/deals?auth_id=a%40b&page%5Bsize%5D=100&token=zz")
        == "http://h/deals?auth_id=***&page[size]=100&token=***"
    )
    assert redact_url("http://h/deals") == "http://h/deals"


def test_a_hint_follows_the_message_in_parentheses() -> None:
    assert str(SyncError("mirror missing", hint="run ccsync backfill")) == (
        "mirror missing (run ccsync backfill)"
    )
    assert str(SyncError("plain")) == "plain"


def test_an_upstream_error_names_its_status_and_url() -> None:
    err = NotFoundError("no such deal", url="http://h/deals/9?page=2", status=404)
    assert (err.url, err.status) == ("http://h/deals/9?page=2", 404)
    assert str(err) == "no such deal [404 http://h/deals/9?page=2]"
    # without a status, the bracket is left out (the url is kept on the error)
    assert str(UpstreamError("refused", url="http://h/")) == "refused"


def test_an_upstream_error_with_a_signed_url_keeps_its_closing_bracket() -> None:
    err = NotFoundError("no such deal", url="http://h/deals/9?auth_token=abc", status=404)
    assert err.url == "http://h/deals/9?auth_token=***"
    assert str(err) == "no such deal [404 http://h/deals/9?auth_token=***]"


def test_invalid_parameters_lists_every_detail_on_one_line() -> None:
    err = InvalidParametersError(
        "invalid parameters", details={"title": "too long", "locale": "unknown"}, url="http://m/"
    )
    assert err.status == 422
    assert err.details == {"title": "too long", "locale": "unknown"}
    assert str(err) == "invalid parameters: title: too long; locale: unknown [422 http://m/]"
    assert str(InvalidParametersError("nope", details={})) == "nope"


def test_a_storage_fault_reads_file_cause_fix_and_is_a_mirror_error() -> None:
    fault = StorageFault("disk_full", "/var/m.db", "the disk is full", "free some space")
    assert str(fault) == "/var/m.db: the disk is full; free some space"
    assert (fault.reason, fault.hint) == ("disk_full", "free some space")
    assert isinstance(fault, MirrorError)


def test_interrupted_names_the_signal() -> None:
    err = Interrupted(signal.SIGTERM)
    assert err.signum == signal.SIGTERM
    assert str(err) == "interrupted by SIGTERM"
