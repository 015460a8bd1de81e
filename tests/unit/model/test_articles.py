"""sync.model.articles: the read-only fields of Article agree with the spec's table and the docs."""

from __future__ import annotations

import re

from sync.model.articles import ARTICLE_READ_ONLY
from tests.support.paths import ROOT

#: The rows of the spec's Article table (management-api-v1.md) whose Notes say "read-only", in
#: the table's order (copied here: the spec lives outside the repository).
SPEC_READ_ONLY = (
    "id",
    "customer_id",
    "sorting_priority",  # "currently read-only"
    "image",  # "read-only object"
    "url",
    "publication_status",
    "created_at",
    "updated_at",
    "archived_at",
)


def test_the_read_only_fields_are_the_spec_s_in_its_order() -> None:
    assert ARTICLE_READ_ONLY == SPEC_READ_ONLY
    assert len(set(ARTICLE_READ_ONLY)) == len(ARTICLE_READ_ONLY)


def test_docs_management_api_names_the_same_fields() -> None:
    text = (ROOT / "docs" / "management-api.md").read_text(encoding="utf-8")
    sentence = text.split("read-only fields (", 1)[1].split(")", 1)[0]
    assert tuple(re.findall(r"`([a-z_]+)`", sentence)) == ARTICLE_READ_ONLY
