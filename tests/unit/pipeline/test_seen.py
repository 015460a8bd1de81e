"""sync.pipeline.seen: the compact version form, packed keys, and trimming batches by the memo."""

from __future__ import annotations

from sync.model import catalogue
from sync.pipeline.batches import Staged
from sync.pipeline.seen import Seen, SeenTable, compact

V = "2026-01-01T00:00:00.000Z"


def test_compact_packs_only_canonical_width_ascii_stamps_and_is_exact() -> None:
    packed = compact(V)
    assert packed == int.from_bytes(V.encode()) and packed.to_bytes(24, "big").decode() == V
    assert compact("2026-01-01T00:00:00.001Z") != packed
    assert compact("2026-01-01T00:00:00Z") == "2026-01-01T00:00:00Z"  # another width: as is
    assert compact("é" * 24) == "é" * 24  # not ASCII: as is
    assert compact(b"digest") == b"digest"


def test_keys_pack_type_and_id_and_refuse_what_cannot_be_packed() -> None:
    images = list(catalogue.TYPES).index("images")
    assert Seen.key("images", 3) == (3 << 5) | images
    assert Seen.key("images", 3) != Seen.key("tags", 3)
    assert Seen.key("nonsense", 3) is None
    assert Seen.key("images", -1) is None and Seen.key("images", 1 << 57) is None
    assert Seen.key("images", (1 << 57) - 1) is not None


def test_leave_out_drops_written_copies_of_included_batches_and_remember_learns_them() -> None:
    seen = Seen(100)
    listed = Staged("deals", ids=[1], rows=[(1,)])  # no versions: never trimmed
    images = Staged("images", ids=[10, 11], rows=[(10,), (11,)], versions=[V, V])
    seen.leave_out([listed, images])  # an empty memo trims nothing
    assert images.ids == [10, 11]
    seen.remember([listed, images])
    assert len(seen) == 2 and seen.version_of("deals", 1) is None
    again = Staged(
        "images", ids=[10, 11], rows=[(10,), (11,)], versions=[V, "2026-02-01T00:00:00.000Z"]
    )
    seen.leave_out([Staged("deals", ids=[1], rows=[(1,)]), again])
    assert again.ids == [11] and again.rows == [(11,)]
    seen.add("nonsense", [1], [V])  # a type outside the catalogue is never held
    assert len(seen) == 2


def test_a_table_memo_made_from_a_dict_over_its_limit_keeps_half_of_it() -> None:
    seen = Seen(100)
    seen.add("images", range(10), [V] * 10)
    table = SeenTable.holding(seen, 4)
    assert len(table) == 2  # over its limit: the lowest keys forgotten down to half
    assert table.versions_of("images", range(10)) == {8: V, 9: V}
    assert table.form(V) == V  # the table keeps versions as they came
