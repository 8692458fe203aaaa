"""Session listing pages (issue 18, "Listings that say they are complete"): the cursor is a
position in the newest-first order, filters count what they leave out, and a listing a
source cut short always says more may follow."""

from __future__ import annotations

import pytest

from agent_link_core.directory import MAX_CURSOR_DEPTH, decode_cursor, encode_cursor, listing_depth, page_of
from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Session


def sessions(n: int) -> list[Session]:
    return [Session(f"t:s{i:03d}", "t", f"s{i:03d}", last_activity_ms=10_000 - i, loaded=i % 2 == 0) for i in range(n)]


def walk(items: list[Session], limit: int, filters: list, cut: bool = False) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        page = page_of(items, decode_cursor(cursor, "t"), limit, filters, cut=cut)
        pages.append([s.id for s in page.sessions])
        cursor = page.next_cursor
        assert page.has_more == (cursor is not None)
        if cursor is None:
            return pages


def test_pages_walk_every_session_once_newest_first() -> None:
    items = sessions(7)
    assert walk(items, 3, []) == [["s000", "s001", "s002"], ["s003", "s004", "s005"], ["s006"]]
    first = page_of(items, None, 7, [], cut=False)
    assert first.first and not first.has_more and first.next_cursor is None


def test_a_session_that_becomes_active_is_not_shown_twice() -> None:
    items = sessions(6)
    page = page_of(items, None, 3, [], cut=False)
    items[1] = Session("t:s001", "t", "s001", last_activity_ms=99_999)  # active again since
    rest = page_of(items, decode_cursor(page.next_cursor, "t"), 3, [], cut=False)
    assert [s.id for s in rest.sessions] == ["s003", "s004", "s005"]


def test_filters_count_what_they_leave_out_and_still_move_on() -> None:
    items = sessions(10)
    page = page_of(items, None, 2, [("loaded", lambda s: bool(s.loaded))], cut=False)
    assert [s.id for s in page.sessions] == ["s000", "s002"] and page.filtered_out == {"loaded": 1}
    assert walk(items, 2, [("loaded", lambda s: bool(s.loaded))]) == [["s000", "s002"], ["s004", "s006"], ["s008"]]
    none = page_of(items, None, 5, [("none", lambda s: False)], cut=False)
    assert none.sessions == [] and none.filtered_out == {"none": 10} and not none.has_more


def test_a_listing_a_source_cut_short_says_more_may_follow() -> None:
    items = sessions(4)
    page = page_of(items, None, 10, [("none", lambda s: False)], cut=True)
    assert page.sessions == [] and page.has_more and page.next_cursor is not None
    assert decode_cursor(page.next_cursor, "t")[0] == 4
    assert listing_depth(decode_cursor(page.next_cursor, "t"), 10) == 204


@pytest.mark.parametrize("bad", ["abc", "400", "e30", "eyJ2IjoxfQ", encode_cursor(MAX_CURSOR_DEPTH + 1, sessions(1)[0]),
                                 "x" * 1001, "W10"])
def test_a_cursor_it_did_not_give_is_refused(bad: str) -> None:
    with pytest.raises(AgentLinkError) as caught:
        decode_cursor(bad, "list_agents")
    assert caught.value.code == "invalid_arguments"
    assert [e["path"] for e in caught.value.details["errors"]] == ["cursor"]


def test_sessions_as_recent_as_each_other_keep_the_harness_order_across_pages() -> None:
    items = [Session(f"t:{name}", "t", name, last_activity_ms=5) for name in ("zeta", "alpha", "mid")]
    assert walk(items, 1, []) == [["zeta"], ["alpha"], ["mid"]]
    older = sessions(4)
    first = page_of(older, None, 2, [], cut=False)
    rest = page_of(older[:1] + older[2:], decode_cursor(first.next_cursor, "t"), 5, [], cut=False)  # s001 went away
    assert [s.id for s in rest.sessions] == ["s002", "s003"]
