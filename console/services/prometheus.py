"""Telemetry from the site's Prometheus (AMD Device Metrics Exporter series).

PrometheusClient speaks the HTTP API (httpx, async): instant queries, range
queries, a bearer token from the environment, a CA bundle; every failure is one
line with the token redacted. PrometheusSource feeds a FleetTelemetry: one
values query per refresh for all its nodes (console/core/dme.py), a layout query
at start, every 30 s and when a node's GPUs change, and node health from the
sample age (scrape time in Prometheus) and from whether Prometheus answers.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import httpx

from console.core.dme import (
    LAYOUT_EVERY_S,
    SLOW_EVERY,
    SLOW_FAMILIES,
    TS_TAG,
    VALUE_FAMILIES,
    DmeResponseError,
    DmeValues,
    frame_gpus,
    hosts_query,
    layout_query,
    match_hosts,
    parse_history,
    parse_hosts,
    parse_layout,
    parse_values,
    unmatched_hosts,
    value_queries,
)
from console.core.model import GpuStatic, NodeHealth, NodeSnapshot, NodeSpec, PrometheusSpec, TelemetryFrame


class FleetHooks(Protocol):
    """What the source needs of FleetTelemetry (it imports this module, not the reverse)."""

    interval: float

    def snapshot(self, node: str) -> NodeSnapshot: ...

    def ingest(
        self,
        node: str,
        frame: TelemetryFrame,
        *,
        static: tuple[GpuStatic, ...],
        source: str,
        interval: float,
        sample_at: float,
    ) -> None: ...

    def set_node_health(self, node: str, health: NodeHealth, error: str | None) -> None: ...

    def backfill(
        self, node: str, history: dict[int, list[tuple[float, dict]]], static: tuple[GpuStatic, ...]
    ) -> int: ...


REDACTED = "***"
_NODES_PER_SLICE = 32  # nodes updated between two yields to the event loop
# With nodes on screen (watch), the refreshes in between two sweeps of the whole fleet ask the
# values of those nodes only (and every node's newest scrape time, for its health): a 16k-GPU
# fleet's values are ~100k series, ~0.5 s of the console's CPU to decode, per refresh.
SWEEP_EVERY = 5


class PrometheusError(Exception):
    """Prometheus could not be asked or did not answer usefully (one line, no secret)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def node_host(node: NodeSpec) -> str:
    """The DME hostname label a profile node is matched by."""
    return node.prometheus_host or node.host or node.name


class PrometheusClient:
    def __init__(
        self,
        spec: PrometheusSpec,
        *,
        environ: Mapping[str, str] | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.spec = spec
        self.url = spec.url.rstrip("/")
        environ = os.environ if environ is None else environ
        self.token = environ.get(spec.token_env) if spec.token_env else None
        # A missing token is said at every query (the nodes show it), not raised here.
        self.config_error: str | None = None
        if spec.token_env and not self.token:
            self.config_error = (
                f"prometheus: ${spec.token_env} (token_env in {spec.source or 'the profile'}) is not set"
            )
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        verify: ssl.SSLContext | bool = True
        if spec.ca_file:
            try:
                verify = ssl.create_default_context(cafile=os.path.expanduser(spec.ca_file))
            except (OSError, ssl.SSLError) as exc:
                self.config_error = f"prometheus: ca_file {spec.ca_file}: {getattr(exc, 'strerror', None) or exc}"
        self._http = httpx.AsyncClient(headers=headers, verify=verify, timeout=timeout, trust_env=False)
        self.timeout = timeout
        self.decode_cpu_s = 0.0  # CPU spent decoding answers (tests/perf/fleet_scale.py reports it)

    def redact(self, text: str) -> str:
        return text.replace(self.token, REDACTED) if self.token else text

    def describe(self) -> str:
        auth = f", bearer token from ${self.spec.token_env}" if self.spec.token_env else ""
        return f"{self.url}{auth}"

    async def query(self, expr: str) -> object:
        return await self._post("/api/v1/query", {"query": expr})

    async def query_all(self, exprs: Mapping[str, str]) -> dict[str, object]:
        """Several instant queries at once (Prometheus evaluates them in parallel)."""
        return {tag: self.decode(reply) for tag, reply in (await self.fetch_all(exprs)).items()}

    async def query_range_all(
        self, exprs: Mapping[str, str], start: float, end: float, step: float
    ) -> dict[str, object]:
        answers = await asyncio.gather(*(self.query_range(e, start, end, step) for e in exprs.values()))
        return dict(zip(exprs, answers))

    async def query_range(self, expr: str, start: float, end: float, step: float) -> object:
        data = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{max(step, 0.001):g}"}
        return await self._post("/api/v1/query_range", data)

    async def fetch_all(self, exprs: Mapping[str, str]) -> dict[str, httpx.Response]:
        """Several instant queries at once, answers not decoded yet (decode() them one by one:
        a big fleet's family is ~15 MB of Python objects once decoded, and only one at a time
        needs to exist)."""
        replies = await asyncio.gather(*(self._send("/api/v1/query", {"query": e}) for e in exprs.values()))
        return dict(zip(exprs, replies))

    async def _post(self, path: str, data: dict[str, str]) -> object:
        return self.decode(await self._send(path, data))

    async def _send(self, path: str, data: dict[str, str]) -> httpx.Response:
        if self.config_error:
            raise PrometheusError(self.config_error)
        where = f"prometheus {self.url}"
        try:
            reply = await self._http.post(self.url + path, data=data)
        except httpx.ConnectError as exc:
            raise PrometheusError(f"{where}: {_connect_reason(exc)}") from None
        except httpx.TimeoutException:
            raise PrometheusError(f"{where}: no answer within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise PrometheusError(self.redact(f"{where}: {type(exc).__name__}: {exc}")) from None
        if reply.status_code in (401, 403):
            hint = f" (check ${self.spec.token_env})" if self.spec.token_env else " (set token_env in [prometheus])"
            raise PrometheusError(f"{where}: HTTP {reply.status_code} {reply.reason_phrase}{hint}")
        return reply

    def decode(self, reply: httpx.Response) -> object:
        where = f"prometheus {self.url}"
        t0 = time.thread_time()
        try:
            payload = reply.json()
        except ValueError:
            raise PrometheusError(f"{where}: HTTP {reply.status_code}, not a Prometheus API answer") from None
        finally:
            self.decode_cpu_s += time.thread_time() - t0
        if reply.status_code >= 400 and not (isinstance(payload, dict) and payload.get("status") == "error"):
            raise PrometheusError(f"{where}: HTTP {reply.status_code} {reply.reason_phrase}")
        return payload

    async def aclose(self) -> None:
        await self._http.aclose()


def _connect_reason(exc: Exception) -> str:
    cause: BaseException | None = exc
    for _ in range(8):  # httpx wraps httpcore wraps anyio's OSError wraps the socket's error
        if cause is None:
            break
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        cause = cause.__cause__ or cause.__context__
    text = str(exc) or type(exc).__name__
    lowered = text.lower()
    if "refused" in lowered:
        return "connection refused"
    if "name or service not known" in lowered or "nodename nor servname" in lowered:
        return "unknown host"
    if "certificate" in lowered:
        return f"TLS: {text}"
    return text


# ---------------------------------------------------------------- the fleet source


class PrometheusSource:
    """Feeds the Prometheus-backed nodes of a FleetTelemetry."""

    def __init__(
        self,
        fleet: FleetHooks,
        spec: PrometheusSpec,
        nodes: Sequence[NodeSpec],
        *,
        client: PrometheusClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.fleet = fleet
        self.spec = spec
        self.client = client or PrometheusClient(spec)
        self.clock = clock
        self.label = spec.hostname_label
        self.wanted = {n.name: node_host(n) for n in nodes}
        hosts = sorted(set(self.wanted.values()))
        self._value_queries = value_queries(self.label, hosts)
        self._fast_queries = value_queries(self.label, hosts, slow=False)
        self._slow_fields = tuple(VALUE_FAMILIES[tag][0] for tag in sorted(SLOW_FAMILIES))
        self._slow_values: dict[str, dict[int, dict[str, float | None]]] = {}  # host -> gpu -> field -> value
        self._slow_due = 0  # refreshes until the slow families are asked again
        self._layout_query = layout_query(self.label, hosts)
        self._ts_query = self._value_queries[TS_TAG]  # every host's newest scrape
        self.watched: tuple[str, ...] = ()  # hosts on screen: refreshed every time (watch)
        self._focus_queries: dict[str, str] = {}
        self._sweep_due = 0  # refreshes until the next sweep of the whole fleet
        self._scraped: dict[str, float] = {}  # node -> newest scrape time seen (health of unswept nodes)
        self.sweeps = 0
        self.matched: dict[str, str] = {}  # node -> hostname label value
        self.layout: dict[str, tuple[GpuStatic, ...]] = {}  # by node
        self._layout_at = -1e18
        self._seq: dict[str, int] = {}
        self._last_ts: dict[str, float] = {}
        self.last_ok: float | None = None
        self.last_error: str | None = None
        self.refreshes = 0
        self.apply_cpu_s = 0.0  # CPU spent parsing values and updating the fleet (perf figures)
        self.history_error: str | None = None  # why the last load_history got nothing
        self.source_text = _source_text(self.client, spec)

    def watch(self, nodes: Sequence[str]) -> None:
        """The nodes on screen: their values every refresh, the others' at every sweep."""
        hosts = tuple(sorted({self.wanted[n] for n in nodes if n in self.wanted}))
        if hosts == self.watched:
            return
        self.watched = hosts
        if hosts:
            queries = value_queries(self.label, list(hosts), slow=True)
            queries[TS_TAG] = self._ts_query
            self._focus_queries = queries
        else:
            self._focus_queries = {}

    # Sample age over these = stale, then down (the scrape interval is a floor for both).
    def stale_after(self) -> float:
        return max(3.0, 3 * (self.spec.scrape_interval or 0), 3 * self.fleet.interval)

    def down_after(self) -> float:
        return max(10.0, 10 * (self.spec.scrape_interval or 0), 10 * self.fleet.interval)

    async def run(self) -> None:
        """Refresh at the fleet's interval until cancelled."""
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            try:
                await self.refresh()
            except Exception as exc:  # noqa: BLE001 - a bug here must not freeze every node silently
                self.last_error = self.client.redact(f"prometheus source failed: {type(exc).__name__}: {exc}")
                self._judge(self.clock(), failed=True)
            next_at += self.fleet.interval
            now = loop.time()
            if next_at <= now:  # a slow Prometheus: skip missed ticks, do not pile up
                next_at = now + self.fleet.interval
            await asyncio.sleep(next_at - now)

    async def refresh(self) -> None:
        now = self.clock()
        try:
            if now - self._layout_at >= LAYOUT_EVERY_S:
                await self._refresh_layout(now)
            sweep = not self._focus_queries or self._sweep_due <= 0
            if sweep:
                self._sweep_due = SWEEP_EVERY - 1
                self.sweeps += 1
                slow = self._slow_due <= 0
                replies = await self.client.fetch_all(self._value_queries if slow else self._fast_queries)
            else:
                self._sweep_due -= 1
                replies = await self.client.fetch_all(self._focus_queries)
            values = await self._parse(replies)
            t0 = time.thread_time()
            if sweep:
                self._carry_slow(values, slow)
        except (PrometheusError, DmeResponseError) as exc:
            reason = exc.reason if isinstance(exc, PrometheusError) else f"prometheus {self.client.url}: {exc}"
            self.last_error = self.client.redact(reason)
            self._judge(self.clock(), failed=True)
            return
        self.last_ok, self.last_error = now, None
        self.refreshes += 1
        known = set(self.matched.values())
        if any(h not in known for h in values):  # a host that came up since the last layout
            self.matched = match_hosts(self.wanted, known | set(values))
        relayout = False
        for n, (node, host) in enumerate(self.matched.items()):
            if n and n % _NODES_PER_SLICE == 0:
                # Let a key press in between: a big fleet's update is ~100 ms of CPU.
                self.apply_cpu_s += time.thread_time() - t0
                await asyncio.sleep(0)
                t0 = time.thread_time()
            host_values = values.get(host)
            static = self.layout.get(node)
            if host_values is None or host_values.sample_ts is None:
                continue
            self._scraped[node] = host_values.sample_ts
            if not host_values.gpus:
                continue  # between sweeps, a node off screen: only its scrape time came
            if static is None:
                relayout = True  # a node that appeared since the last layout
                continue
            if len(host_values.gpus) != len(static) or static[-1].index < max(host_values.gpus, default=-1):
                relayout = True  # a partition switch: its GPUs changed
            if self._last_ts.get(node) == host_values.sample_ts:
                continue  # no new scrape since the last refresh
            self._last_ts[node] = host_values.sample_ts
            seq = self._seq[node] = self._seq.get(node, -1) + 1
            frame = TelemetryFrame(ts=host_values.sample_ts, seq=seq, gpus=frame_gpus(static, host_values.gpus))
            self.fleet.ingest(
                node,
                frame,
                static=static,
                source=self.source_text,
                interval=self.spec.scrape_interval or self.fleet.interval,
                sample_at=host_values.sample_ts,
            )
        if relayout:  # again at the next refresh, at most every 5 s
            self._layout_at = min(self._layout_at, now - LAYOUT_EVERY_S + 5.0)
        self._judge(self.clock(), failed=False)
        self.apply_cpu_s += time.thread_time() - t0

    async def _parse(self, replies: dict[str, httpx.Response]) -> dict[str, DmeValues]:
        """Decode and parse_values one family at a time, yielding in between (a key press
        waits for one family, not the whole fleet's), each answer dropped once read."""
        values: dict[str, DmeValues] = {}
        for tag in list(replies):
            payload = self.client.decode(replies.pop(tag))
            await asyncio.sleep(0)
            t0 = time.thread_time()
            parsed = parse_values({tag: payload}, self.label)
            del payload  # before the next family is decoded
            for host, got in parsed.items():
                have = values.get(host)
                if have is None:
                    values[host] = got
                    continue
                if got.sample_ts is not None:
                    values[host] = have = DmeValues(got.sample_ts, have.gpus)
                for gpu, fields in got.gpus.items():
                    mine = have.gpus.get(gpu)
                    if mine is None:
                        have.gpus[gpu] = fields
                    else:
                        mine.update(fields)
            self.apply_cpu_s += time.thread_time() - t0
            await asyncio.sleep(0)
        return values

    def _carry_slow(self, values: dict, slow: bool) -> None:
        """Keep the slow families' answers; put the last ones into a refresh without them."""
        if slow:
            self._slow_due = SLOW_EVERY - 1
            fields = self._slow_fields
            self._slow_values = {
                host: {gpu: {f: got[f] for f in fields if f in got} for gpu, got in v.gpus.items()}
                for host, v in values.items()
            }
            return
        self._slow_due -= 1
        for host, v in values.items():
            kept = self._slow_values.get(host)
            if kept:
                for gpu, got in v.gpus.items():
                    old = kept.get(gpu)
                    if old:
                        got.update(old)

    async def _refresh_layout(self, now: float) -> None:
        layout = parse_layout(await self.client.query(self._layout_query), self.label)
        self.matched = match_hosts(self.wanted, layout)
        self.layout = {node: layout[host] for node, host in self.matched.items()}
        self._layout_at = now

    def _judge(self, now: float, *, failed: bool) -> None:
        stale_after, down_after = self.stale_after(), self.down_after()
        for node in self.wanted:
            snap = self.fleet.snapshot(node)
            last = self._scraped.get(node, snap.last_sample_ts)
            if last is None:
                if failed:
                    self.fleet.set_node_health(node, NodeHealth.DOWN, f"{node}: {self.last_error}")
                elif self.refreshes:
                    host = self.wanted[node]
                    reason = f'{node}: no DME series with {self.label}="{host}" in Prometheus'
                    self.fleet.set_node_health(node, NodeHealth.DOWN, reason)
                continue
            age = now - last
            if age <= stale_after:
                # A failed refresh with a recent sample changes nothing yet: one
                # slow answer should not flash the whole fleet stale.
                if not failed:
                    self.fleet.set_node_health(node, NodeHealth.LIVE, None)
                continue
            why = self.last_error if failed else f"no new DME sample in Prometheus for {age:.0f} s"
            health = NodeHealth.DOWN if age > down_after else NodeHealth.STALE
            self.fleet.set_node_health(node, health, f"{node}: {why}")

    async def load_history(self, node: str, window_s: float) -> int:
        """Fill a node's charts from query_range (the last window_s at the refresh
        step); returns how many samples came. Failures leave the charts as they are."""
        host = self.matched.get(node)
        static = self.layout.get(node)
        if host is None or static is None:
            return 0
        end = self.clock()
        step = max(self.fleet.interval, self.spec.scrape_interval or 0)
        queries = value_queries(self.label, [host])
        try:
            history = parse_history(await self.client.query_range_all(queries, end - window_s, end, step))
        except (PrometheusError, DmeResponseError) as exc:
            self.history_error = self.client.redact(str(exc))
            return 0
        return self.fleet.backfill(node, history, static)

    async def discover(self) -> list[str]:
        """Every hostname with DME series in Prometheus."""
        return parse_hosts(await self.client.query(hosts_query(self.label)), self.label)

    async def aclose(self) -> None:
        await self.client.aclose()


# ---------------------------------------------------------------- one-shot (`rocm-console status`)


def _source_text(client: PrometheusClient, spec: PrometheusSpec) -> str:
    return f"prometheus {client.url}" + (f", scrape {spec.scrape_interval:g}s" if spec.scrape_interval else "")


async def collect_prometheus_status(
    spec: PrometheusSpec,
    nodes: Sequence[NodeSpec],
    *,
    timeout: float = 20.0,
    client: PrometheusClient | None = None,
    clock: Callable[[], float] = time.time,
) -> list[NodeSnapshot]:
    """One snapshot per node from two instant queries for all of them."""
    client = client or PrometheusClient(spec, timeout=timeout)
    label = spec.hostname_label
    wanted = {n.name: node_host(n) for n in nodes}
    hosts = sorted(set(wanted.values()))
    try:
        layout_payload, values_payload = await asyncio.wait_for(
            asyncio.gather(client.query(layout_query(label, hosts)), client.query_all(value_queries(label, hosts))),
            timeout,
        )
        layout = parse_layout(layout_payload, label)
        values = parse_values(values_payload, label)
    except asyncio.TimeoutError:
        reason = f"prometheus {client.url}: no answer within {timeout:g} s"
        return [NodeSnapshot(n.name, NodeHealth.DOWN, error=f"{n.name}: {reason}") for n in nodes]
    except (PrometheusError, DmeResponseError) as exc:
        reason = client.redact(exc.reason if isinstance(exc, PrometheusError) else f"prometheus {client.url}: {exc}")
        return [NodeSnapshot(n.name, NodeHealth.DOWN, error=f"{n.name}: {reason}") for n in nodes]
    finally:
        await client.aclose()
    matched = match_hosts(wanted, set(layout) | set(values))
    source = _source_text(client, spec)
    stale_after = max(3.0, 3 * (spec.scrape_interval or 0))
    now = clock()
    out = []
    for node in nodes:
        host = matched.get(node.name)
        static = layout.get(host) if host else None
        got = values.get(host) if host else None
        if static is None or got is None or got.sample_ts is None:
            reason = f'{node.name}: no DME series with {label}="{wanted[node.name]}" in Prometheus'
            out.append(NodeSnapshot(node.name, NodeHealth.DOWN, error=reason, source=source))
            continue
        age = now - got.sample_ts
        stale = age > stale_after
        out.append(
            NodeSnapshot(
                node.name,
                NodeHealth.STALE if stale else NodeHealth.LIVE,
                error=f"{node.name}: the newest DME sample is {age:.0f} s old" if stale else None,
                source=source,
                last_sample_ts=got.sample_ts,
                static=static,
                latest=TelemetryFrame(ts=got.sample_ts, seq=0, gpus=frame_gpus(static, got.gpus)),
                interval=spec.scrape_interval or 1.0,
            )
        )
    return out


async def discover_hosts(
    spec: PrometheusSpec, nodes: Sequence[NodeSpec], *, timeout: float = 20.0, client: PrometheusClient | None = None
) -> list[str]:
    """Hostnames with DME series in Prometheus that no profile node matches. Raises PrometheusError."""
    client = client or PrometheusClient(spec, timeout=timeout)
    try:
        payload = await asyncio.wait_for(client.query(hosts_query(spec.hostname_label)), timeout)
        found = parse_hosts(payload, spec.hostname_label)
    except asyncio.TimeoutError:
        raise PrometheusError(f"prometheus {client.url}: no answer within {timeout:g} s") from None
    except DmeResponseError as exc:
        raise PrometheusError(f"prometheus {client.url}: {exc}") from None
    finally:
        await client.aclose()
    return unmatched_hosts([node_host(n) for n in nodes], found)
