from __future__ import annotations

from outbox.web.connection_limits import ConnectionBook, connection_ceiling


def test_a_peer_at_its_bound_pushes_out_only_its_own_longest_waiting_connection() -> None:
    book: ConnectionBook[str] = ConnectionBook(per_peer=2, total=10)
    assert book.admit("a1", "A") == (True, None)
    assert book.admit("b1", "B") == (True, None)
    assert book.admit("a2", "A") == (True, None)
    assert book.admit("a3", "A") == (True, "a1")  # not b1: another peer's
    assert book.held_by("A") == 2
    assert book.held_by("B") == 1


def test_connections_being_served_never_give_way() -> None:
    book: ConnectionBook[str] = ConnectionBook(per_peer=2, total=10)
    book.admit("a1", "A")
    book.admit("a2", "A")
    book.head_complete("a1")
    assert book.admit("a3", "A") == (True, "a2")
    book.head_complete("a3")
    assert book.admit("a4", "A") == (False, None)  # both in a request: refused
    assert book.held_by("A") == 2


def test_at_the_total_the_longest_waiting_connection_of_anyone_gives_way() -> None:
    book: ConnectionBook[str] = ConnectionBook(per_peer=5, total=3)
    book.admit("a1", "A")
    book.admit("b1", "B")
    book.admit("c1", "C")
    book.head_complete("a1")
    assert book.admit("d1", "D") == (True, "b1")
    assert len(book) == 3
    assert book.held_by("B") == 0


def test_a_kept_connection_waits_again_as_the_newest() -> None:
    book: ConnectionBook[str] = ConnectionBook(per_peer=5, total=2)
    book.admit("a1", "A")
    book.admit("a2", "A")
    book.head_complete("a1")
    book.waiting("a1")  # answered, kept alive: now newer than a2
    assert book.admit("a3", "A") == (True, "a2")


def test_leaving_frees_the_place_and_is_idempotent() -> None:
    book: ConnectionBook[str] = ConnectionBook(per_peer=1, total=1)
    book.admit("a1", "A")
    book.leave("a1")
    book.leave("a1")
    book.waiting("a1")  # a connection gone is not put back
    assert len(book) == 0
    assert book.admit("b1", "B") == (True, None)


def test_the_ceiling_stays_below_the_file_limit() -> None:
    assert 1 <= connection_ceiling(10**9) < 10**9
    assert connection_ceiling(5) == 5
