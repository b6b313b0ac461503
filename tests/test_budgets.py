"""Budgets of calls and cost (policy/budgets.py, chain/budgets.py): read from policy files, counted in calendar
periods, enforced by a running hub before the call is sent, told by explain and recorded by the audit.

The hubs here are in-process, mounting the counting server (tests/servers/counting.py) over streamable HTTP,
with the SDK's client; across replicas on a real Redis: test_cluster_budgets.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from mcp_hub.chain.budgets import BudgetCounter, over_budget, period
from mcp_hub.errors import ConfigError
from mcp_hub.policy import Target, explain, parse_policies
from mcp_hub.policy.budgets import CompiledBudget
from mcp_hub.policy.principal import Principal
from tests.harness.cached import cached_hub, text

pytestmark = pytest.mark.anyio

POLICY = """
[principals]
alice = "metered"
bob = "unmetered"
carol = "careful"
dave = "team"

[profiles.metered]
default = "allow"
budgets = [{ calls = 2, per = "day" }]

[profiles.unmetered]
default = "allow"
extends = ["metered"]
budgets = []                      # none: not those of the profile it extends

[profiles.careful]
default = "allow"
budgets = [{ calls = 1, per = "hour" }]
[[profiles.careful.rules]]
id = "ask-first"
effect = "confirm"
tools = ["up/lookup"]

[profiles.team]
default = "allow"
budgets = [{ cost = 10, per = "month", scope = "shared" }]
[[profiles.team.rules]]
id = "pricey"
effect = "allow"
tools = ["up/lookup"]
cost = 4
[[profiles.team.rules]]
id = "kept"
effect = "allow"
tools = ["up/lookup"]
cache = "60s"

[budgets.principals]
dave = [{ calls = 50, per = "hour" }]

[budgets.groups]
eng = [{ cost = 100, per = "day" }]
"""


def _audit(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- the policy side: pure --------------------------------------------------------------------------------------


def test_a_decision_carries_the_budgets_that_apply_and_what_the_call_costs() -> None:
    policy = parse_policies({"p.toml": POLICY})
    lookup = Target("tool", "up", "lookup", {})
    alice = policy.decide("alice", lookup)
    assert [b.id for b in alice.budgets] == ["budget:profile:metered:calls/day"] and alice.cost == 1
    assert policy.decide("bob", lookup).budgets == ()  # `budgets = []` drops what it would inherit
    dave = policy.decide(Principal("dave", groups=["eng", "ops"]), lookup)
    assert dave.cost == 4  # the highest cost of the matching rules
    assert [b.id for b in dave.budgets] == [
        "budget:profile:team:cost/month",
        "budget:principal:dave:calls/hour",
        "budget:group:eng:cost/day",
    ]
    assert [b.shared for b in dave.budgets] == [True, False, True]
    assert policy.decide("dave", Target("tool", "up", "write", {})).cost == 1  # no rule says: 1
    assert policy.decide("alice", Target("resource", "up", "count://a")).budgets == ()  # tool calls only


@pytest.mark.parametrize(
    ("text", "key", "says"),
    [
        ('budgets = [{ calls = 3, per = "week" }]', "profiles.p.budgets[0].per", 'use "hour", "day" or "month"'),
        ('budgets = [{ calls = 3, cost = 4, per = "day" }]', "profiles.p.budgets[0]", "calls or cost"),
        ('budgets = [{ per = "day" }]', "profiles.p.budgets[0]", "neither calls nor cost"),
        ('budgets = [{ calls = 0, per = "day" }]', "profiles.p.budgets[0].calls", "use a deny rule"),
        ('budgets = [{ calls = "3", per = "day" }]', "profiles.p.budgets[0].calls", "remove the quotes"),
        ("budgets = [{ calls = 3 }]", "profiles.p.budgets[0].per", "missing required key 'per'"),
        ('budgets = [{ calls = 3, per = "day", scop = "shared" }]', "profiles.p.budgets[0].scop", "'scope'"),
        ('budgets = [{ calls = 3, per = "day" }, { calls = 5, per = "day" }]', "profiles.p.budgets[1]", "keep one"),
        ('budgets = { calls = 3, per = "day" }', "profiles.p.budgets", "must be an array"),
        ('[[profiles.p.rules]]\neffect = "deny"\ntools = ["a/b"]\ncost = 2', "profiles.p.rules[0].cost", "remove cost"),
        ('[[profiles.p.rules]]\neffect = "allow"\nresources = ["a/*"]\ncost = 2', "profiles.p.rules[0].cost", "tools"),
        (
            '[budgets.principals]\nx = [{ calls = 3, per = "day", scope = "shared" }]',
            "budgets.principals.x[0].scope",
            "",
        ),
        ('[budgets.principals]\n"*" = [{ calls = 3, per = "day" }]', 'budgets.principals."*"', "belong in a profile"),
        ('[budgets.groupz]\neng = [{ calls = 3, per = "day" }]', "budgets.groupz", "did you mean 'groups'"),
        ('[[budgets]]\ncalls = 3\nper = "day"', "budgets", "[budgets.principals]"),
    ],
)
def test_a_malformed_budget_names_the_file_the_key_and_the_fix(text: str, key: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_policies({"budgets.toml": '[principals]\nx = "p"\n[profiles.p]\n' + text + "\n"})
    assert caught.value.file == "budgets.toml" and caught.value.key == key and "line " in caught.value.reason
    assert says in caught.value.reason


def test_a_principal_s_budgets_are_set_in_one_file() -> None:
    budgets = '[budgets.principals]\nx = [{ calls = 3, per = "day" }]\n'
    with pytest.raises(ConfigError, match=r"already set in a\.toml; keep them in one file") as caught:
        parse_policies({"a.toml": '[principals]\nx = "p"\n[profiles.p]\n' + budgets, "b.toml": budgets})
    assert caught.value.file == "b.toml"


def test_periods_are_calendar_ones_in_utc() -> None:
    now = datetime(2026, 12, 31, 23, 59, 30, tzinfo=UTC)
    assert period("hour", now) == ("2026-12-31T23", datetime(2027, 1, 1, tzinfo=UTC))
    assert period("day", now) == ("2026-12-31", datetime(2027, 1, 1, tzinfo=UTC))
    assert period("month", now) == ("2026-12", datetime(2027, 1, 1, tzinfo=UTC))
    assert period("month", datetime(2027, 2, 10, tzinfo=UTC)) == ("2027-02", datetime(2027, 3, 1, tzinfo=UTC))


# -- the counter, in memory --------------------------------------------------------------------------------------


async def test_a_refused_charge_is_given_back_so_what_fits_still_fits() -> None:
    """10 cost a month: 4 + 4 fit; 4 more would not (nothing of it stays counted); 2 still fit, exactly."""
    clock = [datetime(2026, 12, 5, 10, tzinfo=UTC).timestamp()]
    counter = BudgetCounter(clock=lambda: clock[0])
    cost = CompiledBudget("profile", "team", "cost", 10, "month", shared=False)
    calls = CompiledBudget("profile", "team", "calls", 3, "day", shared=False)
    charged = [await counter.charge((calls, cost), "dave", 4) for _ in range(3)]
    assert [c.over is None for c in charged] == [True, True, False]
    over = charged[2].over
    assert over is not None and over.budget == "budget:profile:team:cost/month"
    assert "8 used and this call costs 4" in str(over) and "renews at 2027-01-01 00:00 UTC (in 26 d 14 h)" in str(over)
    assert [u.used for u in await counter.usage((calls, cost), "dave")] == [2, 8]  # the calls budget gave back too
    assert (await counter.charge((calls, cost), "dave", 2)).over is None
    assert (await counter.charge((calls, cost), "dave", 0)).over is not None  # 3 calls a day: the 4th is refused
    assert [u.left for u in await counter.usage((calls, cost), "dave")] == [0, 0]
    assert [u.used for u in await counter.usage((calls, cost), "erin")] == [0, 0]  # each principal its own
    clock[0] = datetime(2026, 12, 6, tzinfo=UTC).timestamp()  # a new day: the calls budget renewed, not the cost one
    assert [u.used for u in await counter.usage((calls, cost), "dave")] == [0, 10]


async def test_a_shared_budget_is_one_count_for_everyone_it_applies_to() -> None:
    counter = BudgetCounter()
    group = CompiledBudget("group", "eng", "calls", 2, "day", shared=True)
    results = [await counter.charge((group,), who, 1) for who in ("ann", "ben", "cat")]
    assert [r.over is None for r in results] == [True, True, False]


# -- a running hub -----------------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_over_budget_the_call_is_not_sent_and_the_error_names_the_budget(tmp_path: Path) -> None:
    async with cached_hub(tmp_path, policy=POLICY) as setup, setup.connect("alice") as alice:
        results = [await alice.call_tool("up_lookup", {"n": n}) for n in range(3)]
        assert [r.is_error for r in results] == [False, False, True]
        refusal = text(results[2])
        assert "budget:profile:metered:calls/day" in refusal and "2 calls per day" in refusal
        assert "renews at " in refusal and " 00:00 UTC (in " in refusal
        assert setup.served[("tool", "lookup")] == 2  # the third never reached the server
        assert setup.hub.budgets is not None
        usage = await setup.hub.budgets.usage(setup.hub.policy().budgets_for("alice"), "alice")
        told = explain(setup.hub.policy(), "alice", Target("tool", "up", "lookup", {}), usage=usage)
        assert "Budget budget:profile:metered:calls/day: 2 calls per day" in told and "2 used, 0 left" in told
        async with setup.connect("bob") as bob:  # `budgets = []`: bob is not counted
            assert not any([(await bob.call_tool("up_lookup", {"n": n})).is_error for n in range(3)])
    lines = _audit(setup.audit)
    refused = [line for line in lines if line["outcome"] == "over_budget"]
    assert len(refused) == 1 and refused[0]["principal"] == "alice"
    assert refused[0]["rule"] == "budget:profile:metered:calls/day" and "renews at" in refused[0]["reason"]
    assert refused[0]["cost"] is None
    assert [line["cost"] for line in lines if line["outcome"] == "allowed"] == [1] * 5


@pytest.mark.slow
async def test_a_cost_budget_counts_each_call_s_cost_and_the_cache_costs_nothing(tmp_path: Path) -> None:
    """dave's team has 10 cost a month, lookup costs 4: a repeated call is answered from the cache, uncounted; the
    third call that reaches the server would make 12, and is refused; write costs 1 and still fits twice."""
    async with cached_hub(tmp_path, policy=POLICY) as setup, setup.connect("dave") as dave:
        first = await dave.call_tool("up_lookup", {"n": 1})
        again = await dave.call_tool("up_lookup", {"n": 1})
        second = await dave.call_tool("up_lookup", {"n": 2})
        third = await dave.call_tool("up_lookup", {"n": 3})
        writes = [await dave.call_tool("up_write", {"n": n}) for n in range(3)]
    assert [r.is_error for r in (first, again, second, third)] == [False, False, False, True]
    assert text(again) == text(first) and "8 used and this call costs 4" in text(third)
    assert [r.is_error for r in writes] == [False, False, True]
    assert setup.served[("tool", "lookup")] == 2 and setup.served[("tool", "write")] == 2
    outcomes = [(line["outcome"], line["cost"]) for line in _audit(setup.audit)]
    assert outcomes == [
        ("allowed", 4),
        ("cached", None),
        ("allowed", 4),
        ("over_budget", None),
        ("allowed", 1),
        ("allowed", 1),
        ("over_budget", None),
    ]


@pytest.mark.slow
async def test_a_declined_confirmation_costs_nothing_and_nobody_is_asked_over_budget(tmp_path: Path) -> None:
    asked: list[str] = []
    answer = {"confirm": False}

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content=dict(answer))

    async with (
        cached_hub(tmp_path, policy=POLICY) as setup,
        setup.connect("carol", "legacy", elicitation_callback=person) as carol,
    ):
        declined = await carol.call_tool("up_lookup", {"n": 1})
        answer["confirm"] = True
        confirmed = await carol.call_tool("up_lookup", {"n": 2})
        over = await carol.call_tool("up_lookup", {"n": 3})
    assert [r.is_error for r in (declined, confirmed, over)] == [True, False, True]
    assert "budget:profile:careful:calls/hour" in text(over) and len(asked) == 2  # not asked the third time
    assert setup.served[("tool", "lookup")] == 1
    assert [line["outcome"] for line in _audit(setup.audit)] == ["declined", "confirmed", "over_budget"]


def test_over_budget_is_a_json_rpc_error_with_the_budget_and_its_renewal() -> None:
    budget = CompiledBudget("principal", "ci", "calls", 5, "hour", shared=False)
    now = datetime(2026, 12, 5, 10, 20, tzinfo=UTC)
    error = over_budget(budget, 5, 1, period("hour", now)[1], now).to_mcp()
    assert isinstance(error, MCPError) and error.code == -32029
    assert error.data == {
        "budget": "budget:principal:ci:calls/hour",
        "renewsAt": "2026-12-05T11:00:00Z",
        "retryAfter": 2400.0,
    }
    assert error.message.endswith("it renews at 2026-12-05 11:00 UTC (in 40 min)")
