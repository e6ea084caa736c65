"""The reservation arithmetic of propagated limits, one rule per test: what a child takes out
of its parent, what comes back, and what every level up is charged."""

from __future__ import annotations

from hookmesh.a2a import Limits, Spent
from hookmesh.middleware.builtin.propagated_limits import Pool


def test_take_spends_one_call_and_refuses_at_zero() -> None:
    pool = Pool(2, 2)
    assert pool.take() and pool.take()
    assert not pool.take()
    assert (pool.left, pool.used_calls) == (0, 2)  # the refused take counts nothing


def test_take_without_a_limit_only_counts() -> None:
    pool = Pool(None, None)
    assert all(pool.take() for _ in range(3))
    assert (pool.left, pool.used_calls) == (None, 3)


def test_reserve_takes_the_cap_out_of_the_parent_at_once() -> None:
    top = Pool(10, 10)
    child = top.reserve(4)
    assert (child.left, child.reserved, top.left) == (4, 4, 6)
    assert child.parent is top


def test_reserve_takes_at_most_what_is_left() -> None:
    top = Pool(3, 3)
    child = top.reserve(5)
    assert (child.left, child.reserved, top.left) == (3, 3, 0)
    assert top.reserve(1).left == 0  # nothing left: an empty reservation


def test_reserve_without_a_cap_takes_everything_left() -> None:
    top = Pool(7, 7)
    child = top.reserve(None)
    assert (child.left, top.left) == (7, 0)


def test_reserve_under_no_limit_keeps_the_childs_cap() -> None:
    top = Pool(None, None)
    assert top.reserve(4).left == 4
    assert top.reserve(None).left is None
    assert top.left is None


def test_release_gives_the_unused_calls_back_and_counts_the_used() -> None:
    top = Pool(10, 10)
    child = top.reserve(4)
    assert child.take()
    child.release()
    assert (top.left, top.used_calls) == (9, 1)
    assert (child.left, child.used_calls) == (0, 0)  # released twice gives nothing twice
    child.release()
    assert (top.left, top.used_calls) == (9, 1)


def test_release_under_no_parent_limit_counts_only() -> None:
    top = Pool(None, None)
    child = top.reserve(3)
    assert child.take()
    child.release()
    assert (top.left, top.used_calls) == (None, 1)


def test_a_nested_pool_keeps_the_tightest_deadline_and_the_prices() -> None:
    top = Pool(None, None, deadline=100.0, prices=(1.0, 2.0))
    assert top.nest(Limits(deadline=50.0)).deadline == 50.0
    assert top.nest(Limits(deadline=150.0)).deadline == 100.0
    assert top.nest(Limits()).deadline == 100.0
    assert Pool(None, None).nest(Limits(deadline=7.0)).deadline == 7.0
    assert Pool(None, None).nest(Limits()).deadline is None
    assert top.nest(Limits()).prices == (1.0, 2.0)


def test_a_nested_pool_has_its_own_token_and_cost_limits() -> None:
    top = Pool(None, None, tokens=1000, cost=5.0)
    child = top.nest(Limits(tokens=300, cost_usd=1.0))
    assert (child.tokens, child.cost) == (300, 1.0)
    assert (child.tokens_left(), child.cost_left()) == (300, 1.0)
    tight = top.nest(Limits(tokens=3000, cost_usd=9.0))
    assert (tight.tokens_left(), tight.cost_left()) == (1000, 5.0)  # the tightest level


def test_nothing_left_to_spend_reads_none_without_limits() -> None:
    pool = Pool(None, None).nest(Limits())
    assert (pool.tokens_left(), pool.cost_left()) == (None, None)


def test_charge_reaches_every_level_up() -> None:
    top = Pool(None, None, tokens=1000, cost=2.0)
    middle = top.nest(Limits())
    child = middle.nest(Limits(tokens=100))
    child.charge(40, 0.5)
    assert (top.tokens, top.cost, top.used_tokens, top.used_cost) == (960, 1.5, 40, 0.5)
    assert (middle.tokens, middle.cost, middle.used_tokens) == (None, None, 40)
    assert (child.tokens, child.used_tokens, child.used_cost) == (60, 40, 0.5)


def test_charge_usage_prices_input_and_output_apart() -> None:
    pool = Pool(None, None, cost=10.0, prices=(2.0, 6.0))
    pool.charge_usage(1_000_000, 500_000)
    assert pool.used_tokens == 1_500_000
    assert pool.used_cost == 5.0  # 2 + 3 dollars: both exact in binary, compared exactly
    assert pool.cost == 5.0


def test_settle_with_a_report_keeps_what_the_remote_agent_spent() -> None:
    top = Pool(10, 10, tokens=1000)
    child = top.reserve(5)
    child.settle(Spent(tool_calls=2, tokens=300, cost_usd=0.25))
    assert (top.left, top.used_calls, top.tokens, top.used_cost) == (8, 2, 700, 0.25)


def test_settle_never_counts_more_than_was_reserved() -> None:
    top = Pool(10, 10)
    child = top.reserve(3)
    child.settle(Spent(tool_calls=9, tokens=0, cost_usd=0.0))
    assert (top.left, top.used_calls) == (7, 3)


def test_settle_without_a_report_counts_the_one_call() -> None:
    top = Pool(10, 10)
    top.reserve(4).settle(None)
    assert (top.left, top.used_calls) == (9, 1)


def test_settle_under_no_limit_counts_the_report() -> None:
    top = Pool(None, None)
    top.reserve(None).settle(Spent(tool_calls=6, tokens=10, cost_usd=0.0))
    assert (top.left, top.used_calls, top.used_tokens) == (None, 6, 10)
    top.reserve(None).settle(None)
    assert top.used_calls == 7


def test_remaining_and_spent_read_the_pool() -> None:
    top = Pool(10, 10, tokens=500, cost=3.0, deadline=42.0)
    child = top.nest(Limits(tool_calls=4, tokens=100))
    assert child.take()
    child.charge(30, 1.0)
    assert child.remaining() == Limits(tool_calls=3, tokens=70, cost_usd=2.0, deadline=42.0)
    assert child.spent() == Spent(tool_calls=1, tokens=30, cost_usd=1.0)
