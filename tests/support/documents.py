"""Hostile JSON for the fuzz tests: any JSON value, and JSON:API documents that bend every
rule the parser relies on (a strategy shared by the receiver, hostile and listing suites)."""

from __future__ import annotations

from hypothesis import strategies as st

#: Any JSON value, nested a few levels deep.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)

#: A page's `links`: missing, any value, or `last` in any form.
links = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "last": st.one_of(
                json_values,
                st.text(max_size=30),
                st.text(max_size=12).map(lambda n: f"http://x/deals?page%5Bnumber%5D={n}"),
                st.fixed_dictionaries({"href": st.text(max_size=30)}),
            )
        },
    ),
)
objects = st.dictionaries(st.text(max_size=8), json_values, max_size=5)
resources = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"id": st.one_of(st.integers(0, 10**6).map(str), json_values)},
        optional={
            "type": st.sampled_from(["deals", "images", "tags", "stores", "x"]),
            "attributes": st.one_of(objects, json_values),
            "meta": st.one_of(objects, json_values),
            "relationships": st.one_of(
                st.dictionaries(
                    st.sampled_from(["images", "tags", "mall", "x"]),
                    st.one_of(json_values, st.fixed_dictionaries({"data": json_values})),
                    max_size=3,
                ),
                json_values,
            ),
        },
    ),
)
documents = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"data": st.one_of(st.lists(resources, max_size=4), json_values)},
        optional={
            "included": st.one_of(st.lists(resources, max_size=3), json_values),
            "links": links,
            "meta": st.one_of(
                objects, st.fixed_dictionaries({"scripts": json_values}), json_values
            ),
        },
    ),
)
