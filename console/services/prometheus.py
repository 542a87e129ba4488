"""Telemetry from the site's Prometheus (AMD Device Metrics Exporter series).

PrometheusClient speaks the HTTP API (httpx, async): instant queries, range
queries, a bearer token from the environment, a CA bundle; every failure is one
line with the token redacted. PrometheusSource feeds a FleetTelemetry: one
values query per refresh for all its nodes (console/core/dme.py), a layout query
at start, every 30 s and when a node's GPUs change, and node health from the
sample age (scrape time in Prometheus) and from whether Prometheus answers.
"""

from __future__ import annotations

import array
import asyncio
import ipaddress
import itertools
import json
import os
import re
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import httpx

from console.core.dme import (
    LAYOUT_EVERY_S,
    SLOW_EVERY,
    SLOW_FAMILIES,
    TS_TAG,
    VALUE_FAMILIES,
    DmePlan,
    DmeResponseError,
    DmeValues,
    clean_text,
    frame_gpus,
    health_queries,
    health_readings,
    hosts_match,
    layout_query,
    make_plan,
    match_hosts,
    names_match,
    nodes_query,
    parse_health,
    parse_history,
    parse_hosts,
    parse_layout,
    parse_names,
    parse_values,
    prefixes_for,
    short_name,
    unmatched_hosts,
    value_queries,
)
from console.core.health import HealthReading, HealthRules, evaluate
from console.core.model import GpuHealth, GpuStatic, NodeHealth, NodeSnapshot, NodeSpec, PrometheusSpec, TelemetryFrame
from console.services.http_body import BodyTooLarge, read_capped


class FleetHooks(Protocol):
    """What the source needs of FleetTelemetry (it imports this module, not the reverse)."""

    interval: float
    health_rules: HealthRules

    def snapshot(self, node: str) -> NodeSnapshot: ...

    def ingest_health(self, node: str, readings: Iterable[HealthReading], *, notes: tuple[str, ...] = ()) -> None: ...

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
# An answer is read at most this far (a 16k-GPU layout answer is ~5 MB): more is refused
# without holding it, as is JSON nested deeper than Prometheus ever writes (~6 levels).
MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_NESTING = 32
TOTAL_TIMEOUTS = 3  # a whole exchange may take this many client timeouts
_BRACKETS_ONLY = bytes(b for b in range(256) if b not in b"[]{}")  # bytes.translate(None, this)
_DEPTH_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 / -1 as signed bytes
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)


class PrometheusError(Exception):
    """Prometheus could not be asked or did not answer usefully (one line, no secret)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Reply:
    """An HTTP answer read within MAX_BODY_BYTES, not decoded yet."""

    status_code: int
    reason_phrase: str
    body: bytes


def node_host(node: NodeSpec) -> str:
    """The DME hostname label a profile node is matched by."""
    return node.prometheus_host or node.host or node.name


def _nesting(body: bytes) -> int:
    """How deep the JSON's arrays and objects go. Brackets are counted at C speed
    (a few ms for a big answer); only when that count looks too deep are the
    strings, whose brackets do not count, taken out first."""

    def depth(skeleton: bytes) -> int:
        steps = array.array("b", skeleton.translate(None, _BRACKETS_ONLY).translate(_DEPTH_STEP))
        return max(itertools.accumulate(steps), default=0)

    rough = depth(body)
    return rough if rough <= MAX_NESTING else depth(_JSON_STRING.sub(b"", body))


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plaintext_token_warning(spec: PrometheusSpec) -> str | None:
    """One line when a bearer token would cross the network unencrypted: an http://
    url to a host other than this machine's loopback (a tunnel to 127.0.0.1, the
    usual way to reach a site's Prometheus, keeps the token on this machine)."""
    if not spec.token_env:
        return None
    parts = urllib.parse.urlsplit(spec.url)
    if parts.scheme != "http" or _is_loopback(parts.hostname or ""):
        return None
    where = f" in {spec.source}" if spec.source else ""
    return (
        f"warning: [prometheus] url{where} is plain http to {parts.hostname}: the bearer token "
        f"(token_env = {spec.token_env}) is sent unencrypted; use https:// or a tunnel to 127.0.0.1"
    )


_warned: set[tuple[str, str]] = set()


def warn_plaintext_token(spec: PrometheusSpec | None, say: Callable[[str], object]) -> None:
    """plaintext_token_warning, said once per process for a given url and variable."""
    line = plaintext_token_warning(spec) if spec is not None else None
    if line and spec is not None and (spec.url, spec.token_env or "") not in _warned:
        _warned.add((spec.url, spec.token_env or ""))
        say(line)


class PrometheusClient:
    def __init__(
        self,
        spec: PrometheusSpec,
        *,
        environ: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        max_body: int = MAX_BODY_BYTES,
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
        self.warning = plaintext_token_warning(spec)
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
        self.max_body = max_body
        self.decode_cpu_s = 0.0  # CPU spent decoding answers (tests/perf/fleet_scale.py reports it)

    def redact(self, text: str) -> str:
        return text.replace(self.token, REDACTED) if self.token else text

    def describe(self) -> str:
        auth = f", bearer token from ${self.spec.token_env}" if self.spec.token_env else ""
        return f"{self.url}{auth}"

    async def query(self, expr: str, budget: list[int] | None = None) -> object:
        return self.decode(await self._send("/api/v1/query", {"query": expr}, budget))

    async def label_values(self, label: str, match: str, budget: list[int] | None = None) -> object:
        """/api/v1/label/LABEL/values for the series ``match`` selects (an index look-up)."""
        path = f"/api/v1/label/{label}/values"
        return self.decode(await self._send(path, {"match[]": match}, budget, method="GET"))

    async def query_all(self, exprs: Mapping[str, str]) -> dict[str, object]:
        """Several instant queries at once (Prometheus evaluates them in parallel)."""
        return {tag: self.decode(reply) for tag, reply in (await self.fetch_all(exprs)).items()}

    async def query_range_all(
        self, exprs: Mapping[str, str], start: float, end: float, step: float
    ) -> dict[str, object]:
        budget = [self.max_body * 2]
        data = {tag: self._range_data(e, start, end, step) for tag, e in exprs.items()}
        replies = await _all_or_none([self._send("/api/v1/query_range", d, budget) for d in data.values()])
        return {tag: self.decode(reply) for tag, reply in zip(exprs, replies)}

    @staticmethod
    def _range_data(expr: str, start: float, end: float, step: float) -> dict[str, str]:
        return {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{max(step, 0.001):g}"}

    async def query_range(self, expr: str, start: float, end: float, step: float) -> object:
        return await self._post("/api/v1/query_range", self._range_data(expr, start, end, step))

    async def fetch_all(self, exprs: Mapping[str, str]) -> dict[str, Reply]:
        """Several instant queries at once, answers not decoded yet (decode() them one by one:
        a big fleet's family is ~15 MB of Python objects once decoded, and only one at a time
        needs to exist)."""
        budget = [self.max_body * 2]  # the answers of one batch together, as well as each
        replies = await _all_or_none([self._send("/api/v1/query", {"query": e}, budget) for e in exprs.values()])
        return dict(zip(exprs, replies))

    async def _post(self, path: str, data: dict[str, str]) -> object:
        return self.decode(await self._send(path, data))

    async def _send(
        self, path: str, data: dict[str, str], budget: list[int] | None = None, *, method: str = "POST"
    ) -> Reply:
        if self.config_error:
            raise PrometheusError(self.config_error)
        where = f"prometheus {self.url}"
        # httpx's timeout is per phase (connect, each read): a slow answer that keeps coming
        # is waited for. The whole exchange has a bound too, or a server that drips a
        # byte at a time would hold every refresh.
        whole = TOTAL_TIMEOUTS * self.timeout
        try:
            return await asyncio.wait_for(self._exchange(path, data, budget, method), whole)
        except asyncio.TimeoutError:
            raise PrometheusError(f"{where}: no whole answer within {whole:g} s") from None
        except httpx.ConnectError as exc:
            raise PrometheusError(f"{where}: {_connect_reason(exc)}") from None
        except httpx.TimeoutException:
            raise PrometheusError(f"{where}: no answer within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise PrometheusError(self.redact(f"{where}: {type(exc).__name__}: {clean_text(exc, 200)}")) from None

    async def _exchange(self, path: str, data: dict[str, str], budget: list[int] | None, method: str) -> Reply:
        where = f"prometheus {self.url}"
        if method == "GET":  # the label-values API takes no form body
            request = self._http.build_request("GET", self.url + path, params=data)
        else:
            request = self._http.build_request("POST", self.url + path, data=data)
        reply = await self._http.send(request, stream=True)
        try:
            if reply.status_code in (401, 403):
                hint = f" (check ${self.spec.token_env})" if self.spec.token_env else " (set token_env in [prometheus])"
                raise PrometheusError(f"{where}: HTTP {reply.status_code} {reply.reason_phrase}{hint}")
            limit = self.max_body
            too_big = f"{where}: HTTP {reply.status_code}, an answer over {limit / 2**20:g} MiB (not read further)"
            try:
                body = await read_capped(reply, limit, budget)
            except BodyTooLarge as exc:
                if exc.together:
                    raise PrometheusError(
                        f"{where}: answers over {self.max_body * 2 / 2**20:g} MiB together (not read further)"
                    ) from None
                raise PrometheusError(too_big) from None
            return Reply(reply.status_code, clean_text(reply.reason_phrase, 60), body)
        finally:
            await reply.aclose()

    def decode(self, reply: Reply) -> object:
        where = f"prometheus {self.url}"
        t0 = time.thread_time()
        try:
            if _nesting(reply.body) > MAX_NESTING:
                raise RecursionError
            payload = json.loads(reply.body)
        except (ValueError, RecursionError) as exc:
            if reply.status_code >= 400:  # a proxy's error page: its status says it
                raise PrometheusError(f"{where}: HTTP {reply.status_code} {reply.reason_phrase}") from None
            why = "not JSON" if reply.body.strip() else "an empty answer"
            if isinstance(exc, RecursionError):  # the C parser's own limit, had the count missed it
                why = f"JSON nested deeper than {MAX_NESTING} levels"
            elif "digits" in str(exc):
                why = "a number too long to read"
            raise PrometheusError(f"{where}: HTTP {reply.status_code}, not a Prometheus API answer ({why})") from None
        finally:
            self.decode_cpu_s += time.thread_time() - t0
        if reply.status_code >= 400 and not (isinstance(payload, dict) and payload.get("status") == "error"):
            raise PrometheusError(f"{where}: HTTP {reply.status_code} {reply.reason_phrase}")
        return payload

    async def aclose(self) -> None:
        await self._http.aclose()


async def _all_or_none(coros: list) -> list:
    """Like gather, but the first failure cancels the others (no answer is read on for
    nothing, no error is left unretrieved) and is raised."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in tasks:
        error = None if task.cancelled() else task.exception()
        if error is not None:
            raise error
    return [task.result() for task in tasks]


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
        self._hosts = sorted(set(self.wanted.values()))
        self.plan = DmePlan(prefixes_for(spec.metric_prefix))  # what Prometheus holds, learnt at each layout
        self._slow_fields = tuple(VALUE_FAMILIES[tag][0] for tag in sorted(SLOW_FAMILIES))
        self._slow_values: dict[str, dict[int, dict[str, float | None]]] = {}  # host -> gpu -> field -> value
        self._slow_due = 0  # refreshes until the slow families are asked again
        self.watched: tuple[str, ...] = ()  # hosts on screen: refreshed every time (watch)
        self._focus_queries: dict[str, str] = {}
        self._plan_queries()
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
        # GPU health from DME's health families: one query every [health] interval (not every
        # refresh), mapped per physical GPU into the fleet's trackers (docs/prometheus.md)
        self._health_at = -1e18
        self.health_reads = 0
        self.health_error: str | None = None  # why the last health query failed (telemetry goes on)
        self.source_text = _source_text(self.client, spec)

    def _plan_queries(self) -> None:
        """The value queries for the current plan (again when a layout changes it)."""
        self._value_queries = value_queries(self.label, self._hosts, plan=self.plan)
        self._fast_queries = value_queries(self.label, self._hosts, slow=False, plan=self.plan)
        self._ts_query = self._value_queries[TS_TAG]  # every host's newest scrape
        self._focus_queries = self._focus_for(self.watched)

    def _focus_for(self, hosts: Sequence[str]) -> dict[str, str]:
        if not hosts:
            return {}
        queries = value_queries(self.label, list(hosts), slow=True, plan=self.plan)
        queries[TS_TAG] = self._ts_query
        return queries

    def watch(self, nodes: Sequence[str]) -> None:
        """The nodes on screen: their values every refresh, the others' at every sweep."""
        hosts = tuple(sorted({self.wanted[n] for n in nodes if n in self.wanted}))
        if hosts == self.watched:
            return
        self.watched = hosts
        self._focus_queries = self._focus_for(hosts)

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
                detail = clean_text(f"{type(exc).__name__}: {exc}", 200)
                self.last_error = self.client.redact(f"prometheus {self.client.url}: source failed: {detail}")
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
            if not host_values.gpus and not sweep:
                continue  # between sweeps, a node off screen: only its scrape time came
            # (at a sweep a node without values still gets its rows: a site may export only
            # families the console does not read; its GPUs then show N/A, not "connecting")
            if static is None:
                relayout = True  # a node that appeared since the last layout
                continue
            if host_values.gpus and (
                len(host_values.gpus) != len(static) or static[-1].index < max(host_values.gpus, default=-1)
            ):
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
        interval = self.fleet.health_rules.interval
        if interval > 0 and now - self._health_at >= interval and self.layout:
            self._health_at = now
            await self.refresh_health(now)

    async def refresh_health(self, now: float) -> None:
        """DME's health families of every node, two queries: a reading per physical GPU into
        the fleet's health trackers (the path an agent's health line takes). A failure costs
        this health reading only."""
        try:
            payloads = await self.client.query_all(health_queries(self.label, self._hosts, self.plan.prefixes))
            parsed = parse_health(payloads, self.label, self.plan.prefixes)
        except (PrometheusError, DmeResponseError) as exc:
            reason = exc.reason if isinstance(exc, PrometheusError) else f"prometheus {self.client.url}: {exc}"
            self.health_error = self.client.redact(f"health: {reason}")
            return
        self.health_error = None
        self.health_reads += 1
        for node, host in self.matched.items():
            gpus, static = parsed.get(host), self.layout.get(node)
            if gpus and static:
                readings = health_readings(static, gpus, now)
                if readings:
                    self.fleet.ingest_health(node, readings)

    async def _parse(self, replies: dict[str, Reply]) -> dict[str, DmeValues]:
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
        plan, layout = await read_layout(self.client, self.spec, self._hosts)
        self.matched = match_hosts(self.wanted, layout)
        self.layout = {node: layout[host] for node, host in self.matched.items()}
        self._layout_at = now
        if plan != self.plan:
            self.plan = plan
            self._plan_queries()

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
        queries = value_queries(self.label, [host], plan=self.plan)
        del queries[TS_TAG]  # the charts take the values' own times
        try:
            history = parse_history(await self.client.query_range_all(queries, end - window_s, end, step))
        except (PrometheusError, DmeResponseError) as exc:
            self.history_error = self.client.redact(str(exc))
            return 0
        return self.fleet.backfill(node, history, static)

    async def discover(self) -> list[str]:
        """Every hostname with DME series in Prometheus."""
        match = hosts_match(self.label, prefixes_for(self.spec.metric_prefix))
        return sorted(clean_text(h) for h in parse_names(await self.client.label_values(self.label, match)))

    async def aclose(self) -> None:
        await self.client.aclose()


# ---------------------------------------------------------------- the layout


async def read_layout(
    client: PrometheusClient, spec: PrometheusSpec, hosts: Sequence[str]
) -> tuple[DmePlan, dict[str, tuple[GpuStatic, ...]]]:
    """What Prometheus holds for these hosts -> the plan, and each host's GPUs.

    Sent together: the metric names present (index only), the hosts with
    gpu_nodes_total, every GPU's identity and VRAM from gpu_total_vram. Then, only
    for profile hosts found in neither, their identity from every GPU family (a
    site that does not export gpu_total_vram, or a host that is simply down)."""
    label, prefixes = spec.hostname_label, prefixes_for(spec.metric_prefix)
    budget = [client.max_body * 2]  # the layout's answers together, as each
    names, nodes, gpus = await _all_or_none(
        [
            client.label_values("__name__", names_match(label, hosts, prefixes), budget),
            client.query(nodes_query(label, hosts, prefixes), budget),
            client.query(layout_query(label, hosts, prefixes), budget),
        ]
    )
    found_names = parse_names(names)
    with_nodes = set(parse_hosts(nodes, label))
    layout = parse_layout(gpus, label)
    with_vram = set(layout)
    seen = {short_name(h) for h in (*layout, *with_nodes)}
    missing = sorted({h for h in hosts if short_name(h) not in seen})
    if missing or with_nodes - set(layout):  # hosts whose GPUs gpu_total_vram does not give
        query = layout_query(label, missing, prefixes, every_family=True)
        if with_nodes - set(layout):
            exact = layout_query(label, sorted(with_nodes - set(layout)), prefixes, every_family=True, exact=True)
            query = f"{query} or {exact}" if missing else exact
        for host, rows in parse_layout(await client.query(query, budget), label, with_vram=False).items():
            layout.setdefault(host, rows)
    # each host's scrape time from its cheapest family: gpu_nodes_total, gpu_total_vram, else any
    ts_family = {
        h: "gpu_nodes_total" if h in with_nodes else "gpu_total_vram" if h in with_vram else "*" for h in layout
    }
    partitioned = any(g.compute_partition not in (None, "SPX") for rows in layout.values() for g in rows)
    return make_plan(found_names, spec.metric_prefix, ts_family, partitioned), layout


# ---------------------------------------------------------------- one-shot (`rocm-console status`)


def _source_text(client: PrometheusClient, spec: PrometheusSpec) -> str:
    return f"prometheus {client.url}" + (f", scrape {spec.scrape_interval:g}s" if spec.scrape_interval else "")


def _failure(client: PrometheusClient, exc: BaseException) -> str:
    """Any failure of a one-shot read as one line naming Prometheus (never a traceback)."""
    if isinstance(exc, PrometheusError):
        return client.redact(exc.reason)
    if isinstance(exc, DmeResponseError):
        return client.redact(f"prometheus {client.url}: {exc}")
    detail = clean_text(f"{type(exc).__name__}: {exc}", 200)
    return client.redact(f"prometheus {client.url}: unusable answer ({detail})")


async def collect_prometheus_status(
    spec: PrometheusSpec,
    nodes: Sequence[NodeSpec],
    *,
    timeout: float = 20.0,
    client: PrometheusClient | None = None,
    clock: Callable[[], float] = time.time,
    health: HealthRules | None = None,
) -> list[NodeSnapshot]:
    """One snapshot per node: the layout, then the values of every node at once; with
    ``health`` (the profile's rules) each physical GPU's DME health families too, judged
    into ``gpu_health`` (one reading: the rules on growth and throttle share need a history)."""
    client = client or PrometheusClient(spec, timeout=timeout)
    label = spec.hostname_label
    wanted = {n.name: node_host(n) for n in nodes}
    hosts = sorted(set(wanted.values()))

    async def read() -> tuple[dict[str, tuple[GpuStatic, ...]], dict[str, DmeValues], dict]:
        plan, layout = await read_layout(client, spec, hosts)
        queries = value_queries(label, hosts, plan=plan)
        if health is not None:
            queries.update({f"health:{k}": q for k, q in health_queries(label, hosts, plan.prefixes).items()})
        payloads = await client.query_all(queries)
        asked = {k: payloads.pop(k) for k in list(payloads) if k.startswith("health:")}
        return layout, parse_values(payloads, label), parse_health(asked, label, plan.prefixes) if asked else {}

    try:
        layout, values, healths = await asyncio.wait_for(read(), timeout)
    except asyncio.TimeoutError:
        reason = f"prometheus {client.url}: no answer within {timeout:g} s"
        return [NodeSnapshot(n.name, NodeHealth.DOWN, error=f"{n.name}: {reason}") for n in nodes]
    except Exception as exc:  # noqa: BLE001 - whatever came back, each node gets one line
        reason = _failure(client, exc)
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
                gpu_health=tuple(
                    GpuHealth(r.gpu, evaluate([r], health), r, None)
                    for r in health_readings(static, healths.get(host) or {}, now)
                )
                if health is not None and host is not None
                else (),
            )
        )
    return out


async def discover_hosts(
    spec: PrometheusSpec, nodes: Sequence[NodeSpec], *, timeout: float = 20.0, client: PrometheusClient | None = None
) -> list[str]:
    """Hostnames with DME series in Prometheus that no profile node matches. Raises PrometheusError."""
    client = client or PrometheusClient(spec, timeout=timeout)
    try:
        match = hosts_match(spec.hostname_label, prefixes_for(spec.metric_prefix))
        payload = await asyncio.wait_for(client.label_values(spec.hostname_label, match), timeout)
        found = sorted(clean_text(h) for h in parse_names(payload))
    except asyncio.TimeoutError:
        raise PrometheusError(f"prometheus {client.url}: no answer within {timeout:g} s") from None
    except PrometheusError:
        raise
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        raise PrometheusError(_failure(client, exc)) from None
    finally:
        await client.aclose()
    return unmatched_hosts([node_host(n) for n in nodes], found)
