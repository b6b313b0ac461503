"""The console's dashboard data: the hub's own OpenTelemetry metrics, read in-process into rings (series.py).

`Dashboard` adds a metric reader of its own to the hub's telemetry (`Telemetry.add_reader`: delta
temporality, latency buckets of `series.BOUNDARIES`), and every `TICK` seconds, on the event loop, collects
what the instruments gathered since the last look and adds it to the current `SLOT`'s cells:

- `mcp.server.operation.duration` of calls (tools/call, prompts/get, resources/read): calls, errors
  (outcome error or tool_error), latency, for the hub, the mount, the tool, the principal and the principal's
  tool; the request's `mcp_hub.decision` (denied, confirmed, declined, rate_limited, over_budget, cached...)
  and `mcp_hub.guard` (blocked, redacted, flagged) as decisions of the same series;
- `mcp_hub.upstream.state` (the state each mount was seen in) and `mcp_hub.upstream.restarts` (restarts
  since the last look), per mount.

Nothing is added to the call path beyond what the metrics already cost: the instruments record, and the
collection happens here, on its own schedule. With `[cluster]`, each replica writes its current slot (and the
one it just finished) to Redis, a hash per slot keyed by replica, kept an hour; `view()` then sums every
replica's cells, and says how many replicas wrote in the last `SLOT` seconds. Without Redis (or while it is
down) the view is this replica's own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from mcp_hub.cluster import KEY_PREFIX, TIMEOUT, errors
from mcp_hub.observe.series import BOUNDARIES, ERROR_OUTCOMES, SLOT, SLOTS, Key, Rings, sparse

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricsData

    from mcp_hub.cluster import Cluster
    from mcp_hub.observe.otel import Telemetry

logger = logging.getLogger("mcp_hub.dashboard")

TICK = 2.0
"""Seconds between two collections: how soon a call shows on the console's charts."""

CALLS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The requests the dashboard counts as calls (lists, pings and the handshake are not)."""

_KEY = KEY_PREFIX + "dashboard:"


@dataclass(frozen=True, slots=True)
class View:
    """What the console draws from: the rings (this replica's, or every replica's summed), the last slot, and how
    many replicas are in it."""

    rings: Rings
    last: int
    replicas: int
    shared: bool
    """Summed over the replicas that share Redis."""


def _reader() -> InMemoryMetricReader:
    """A reader that hands over what each collection measured since the one before (delta temporality), latencies in
    the buckets of `series.BOUNDARIES`."""
    from opentelemetry.sdk.metrics import Counter, Histogram, ObservableCounter, ObservableGauge, UpDownCounter
    from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation

    delta, cumulative = AggregationTemporality.DELTA, AggregationTemporality.CUMULATIVE
    return InMemoryMetricReader(
        preferred_temporality={
            Counter: delta,
            Histogram: delta,
            ObservableCounter: delta,
            UpDownCounter: cumulative,
            ObservableGauge: cumulative,
        },
        preferred_aggregation={Histogram: ExplicitBucketHistogramAggregation(boundaries=BOUNDARIES)},
    )


class Dashboard:
    """The rings of this hub, fed from its metrics; shared with the other replicas through `cluster`."""

    def __init__(
        self, telemetry: Telemetry, cluster: Cluster | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.rings = Rings()
        self.cluster = cluster
        self.changed = anyio.Event()
        """Set (and replaced) at each collection: the console's live pages redraw."""
        self.generation = 0
        """Counts the collections: a page drawn in one is the same until the next (the console keeps it)."""
        self._clock = clock
        self._reader = _reader()
        telemetry.add_reader(self._reader)
        self._published = -1
        self._settled = Rings()
        """Every replica's cells of slots no replica writes to any more, as read from Redis (each read once)."""

    def now(self) -> int:
        return int(self._clock() // SLOT)

    # -- collecting ----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Collect every `TICK` seconds (and publish, with a cluster) until cancelled. The OpenTelemetry SDK's part
        of a collection runs in a worker thread (as an exporter's does), so that the event loop serving calls is
        not held for it; what it read is added to the rings on the loop."""
        while True:
            await anyio.sleep(TICK)
            await self.tick()

    async def tick(self) -> None:
        """One collection, and, with a cluster whose Redis answers, this replica's slots published."""
        self.add(await anyio.to_thread.run_sync(self.read))
        if self.cluster is not None and self.cluster.up:
            await self._publish()

    def collect(self) -> None:
        """Read and add what the instruments measured since the last collection, now (in the caller's thread)."""
        self.add(self.read())

    def read(self) -> MetricsData | None:
        """What the instruments measured since the last collection (any thread)."""
        try:
            return self._reader.get_metrics_data()
        except Exception:  # a reader not (or no longer) registered with a provider: nothing to read
            logger.debug("dashboard: nothing collected", exc_info=True)
            return None

    def add(self, data: MetricsData | None) -> None:
        """Add what `read` returned to the current slot (on the event loop: the console reads the rings there)."""
        if data is not None:
            self.feed(data, self.now())
        self.generation += 1
        changed, self.changed = self.changed, anyio.Event()
        changed.set()

    def feed(self, data: MetricsData, slot: int) -> None:
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name == "mcp.server.operation.duration":
                        for point in metric.data.data_points:
                            self._calls(slot, point.attributes or {}, point)
                    elif metric.name == "mcp_hub.upstream.state":
                        for point in metric.data.data_points:
                            attributes = point.attributes or {}
                            mount, state = attributes.get("mcp_hub.mount"), attributes.get("mcp_hub.state")
                            if isinstance(mount, str) and isinstance(state, str):
                                self.rings.cell(slot, ("mount", mount)).states.add(state)
                    elif metric.name == "mcp_hub.upstream.restarts":
                        for point in metric.data.data_points:
                            mount = (point.attributes or {}).get("mcp_hub.mount")
                            if isinstance(mount, str) and point.value > 0:
                                cell = self.rings.cell(slot, ("mount", mount))
                                cell.restarts += int(point.value)
                                cell.states.add("restarting")  # it went down and came back, however quickly

    def _calls(self, slot: int, attributes: Mapping[str, Any], point: Any) -> None:
        if attributes.get("mcp.method.name") not in CALLS or not point.count:
            return
        mount = attributes.get("mcp_hub.mount")
        tool = attributes.get("gen_ai.tool.name")
        principal = attributes.get("mcp_hub.principal")
        keys: list[Key] = [("hub",)]
        if isinstance(mount, str):
            keys.append(("mount", mount))
        if isinstance(tool, str):
            keys.append(("tool", tool))
        if isinstance(principal, str):
            keys.append(("principal", principal))
            if isinstance(tool, str):
                keys.append(("principal_tool", principal, tool))
        errors = attributes.get("mcp_hub.outcome") in ERROR_OUTCOMES
        failure = str(attributes.get("error.type") or "")
        # a guard that blocked is the verdict too: counted once
        decided = {str(v) for v in (attributes.get("mcp_hub.decision"), attributes.get("mcp_hub.guard")) if v}
        buckets = sparse(point.bucket_counts)
        for key in keys:
            cell = self.rings.cell(slot, key)
            cell.record(point.count, point.sum, buckets, errors)
            for kind in decided:
                cell.decisions[kind] = cell.decisions.get(kind, 0) + point.count
            if errors and failure:
                cell.failures[failure] = cell.failures.get(failure, 0) + point.count

    # -- sharing -------------------------------------------------------------------------------------

    async def _publish(self) -> None:
        assert self.cluster is not None
        now = self.now()
        slots = [now] if self._published in (now, -1) else [self._published, now]
        try:
            with anyio.fail_after(TIMEOUT):
                async with self.cluster.client.pipeline(transaction=False) as pipe:
                    for slot in slots:
                        pipe.hset(f"{_KEY}{slot}", self.cluster.replica, orjson.dumps(self.rings.slot_json(slot)))
                        pipe.expire(f"{_KEY}{slot}", SLOT * (SLOTS + 6))
                    await pipe.execute()
        except errors() as exc:
            self.cluster.failed(exc)
            return
        self._published = now

    async def view(self) -> View:
        """The rings to draw: every replica's summed (with a cluster whose Redis answers), else this one's."""
        now = self.now()
        cluster = self.cluster
        if cluster is None or not cluster.up:
            return View(self.rings, now, 1, False)
        settled_until = now - 2  # no replica writes to these slots any more
        settled = set(self._settled)
        wanted = [s for s in range(now - SLOTS + 1, now + 1) if s > settled_until or s not in settled]
        try:
            with anyio.fail_after(2 * TIMEOUT):
                async with cluster.client.pipeline(transaction=False) as pipe:
                    for slot in wanted:
                        pipe.hgetall(f"{_KEY}{slot}")
                    answers = await pipe.execute()
        except errors() as exc:
            cluster.failed(exc)
            return View(self.rings, now, 1, False)
        recent = Rings()
        seen: set[str] = set()
        for slot, answer in zip(wanted, answers, strict=True):
            into = self._settled if slot <= settled_until else recent
            into.cell(slot, ("hub",))  # the slot is known (read), even if no replica measured anything in it
            for replica, payload in (answer or {}).items():
                try:
                    into.merge_json(slot, orjson.loads(payload))
                except orjson.JSONDecodeError:
                    continue
                if slot >= now - 1:
                    seen.add(replica.decode() if isinstance(replica, bytes) else str(replica))
        self._settled.prune(now - SLOTS + 1)
        seen.add(cluster.replica)
        return View(Rings.overlaid(self._settled, recent), now, len(seen), True)
