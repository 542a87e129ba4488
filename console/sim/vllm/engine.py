"""The scheduler model: continuous batching, one engine step at a time, KV blocks and preemption."""

import asyncio
import collections
import random
import time
import uuid

from .constants import VOCAB
from .prefix_cache import PrefixCache


class Request:
    def __init__(self, chat, prompt_tokens, max_tokens, target, finish, stream, seed, loop):
        self.rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:16]
        self.chat = chat
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.target = target
        self.finish = finish
        self.stream = stream
        self.rng = random.Random(seed)
        self.created = int(time.time())
        self.arrival = self.scheduled = self.first_token = self.last_token = None
        self.prefill_left = prompt_tokens
        self.kv = 0
        self.blocks = 0
        self.generated = 0
        self.preemptions = 0
        self.state = "new"
        self.reason = None
        self.texts = []
        self.prefix_keys = []  # chained block keys of the prompt (prefix_cache.py), set by the API
        self.cached = 0  # prompt tokens found in the prefix cache at admission
        self.events = asyncio.Queue() if stream else None
        self.done = loop.create_future()

    def next_text(self):
        if self.generated == 1 and not self.chat:
            return self.rng.choice(VOCAB).lstrip(" ") or "The"
        return self.rng.choice(VOCAB)


class Engine:
    """A continuous-batching scheduler whose steps take the time the model profile says."""

    def __init__(self, prof, args, num_blocks, block_size):
        self.prof = prof
        self.max_seqs = args.max_num_seqs
        self.max_batched = args.max_num_batched_tokens
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.free_blocks = num_blocks
        self.waiting = collections.deque()
        self.running = []
        self.wake = asyncio.Event()
        self.rng = random.Random(20251121)
        self.metrics = None
        self.dead = False
        self.window_prompt = 0
        self.window_generation = 0
        # V1 caches prefixes unless --no-enable-prefix-caching
        self.prefix_cache = (
            PrefixCache(block_size, num_blocks) if getattr(args, "enable_prefix_caching", None) is not False else None
        )

    def kv_usage(self):
        if self.num_blocks <= 0:
            return 0.0
        return (self.num_blocks - self.free_blocks) / float(self.num_blocks)

    def _blocks(self, tokens):
        return -(-tokens // self.block_size)

    def submit(self, req):
        if self.prefix_cache is not None and req.prefix_keys:
            # the cached blocks skip prefill (their KV is there); the last prompt token is always computed
            found = self.prefix_cache.match(req.prefix_keys) * self.block_size
            req.cached = max(0, min(found, req.prompt_tokens - 1))
            req.prefill_left = req.prompt_tokens - req.cached
            req.kv = req.cached
        req.arrival = asyncio.get_event_loop().time()
        req.state = "waiting"
        self.waiting.append(req)
        self.wake.set()

    def abort(self, req, reason="abort"):
        if req.state in ("waiting", "running"):
            self._finish(req, reason, asyncio.get_event_loop().time())

    def kill(self):
        """The engine died: every request ends with an error."""
        self.dead = True
        for req in list(self.running) + list(self.waiting):
            self.abort(req, "error")

    def _preempt(self, req):
        self.running.remove(req)
        self.free_blocks += req.blocks
        req.blocks = req.kv = 0
        req.prefill_left = req.prompt_tokens + req.generated
        req.preemptions += 1
        req.state = "waiting"
        self.metrics.preemptions.inc()
        self.waiting.appendleft(req)

    def _grow(self, req, tokens):
        need = self._blocks(tokens) - req.blocks
        while need > self.free_blocks:
            victim = self.running[-1]
            self._preempt(victim)
            if victim is req:
                return False
        if need > 0:
            self.free_blocks -= need
            req.blocks += need
        return True

    def _schedule(self, now):
        budget = self.max_batched
        preempted = self.metrics.preemptions.labels().value
        plan = []
        n_decode = n_prefill = ctx = 0
        for req in list(self.running):
            if req.state != "running":
                continue  # preempted while growing an older request
            if budget <= 0:
                break
            n = min(req.prefill_left, budget) if req.prefill_left > 0 else 1
            if not self._grow(req, req.kv + n):
                continue
            req.kv += n
            if req.prefill_left > 0:
                req.prefill_left -= n
                plan.append((req, True))
                n_prefill += n
            else:
                plan.append((req, False))
                n_decode += 1
                ctx += req.kv
            budget -= n
        if self.metrics.preemptions.labels().value != preempted:
            return plan, n_decode, n_prefill, ctx  # like V1: no new admissions in a step that preempted
        while self.waiting and budget > 0 and len(self.running) < self.max_seqs:
            req = self.waiting[0]
            n = min(req.prefill_left, budget)
            need = self._blocks(req.kv + n) - req.blocks
            if need > self.free_blocks:
                break
            self.waiting.popleft()
            self.free_blocks -= need
            req.blocks += need
            req.kv += n
            req.prefill_left -= n
            req.state = "running"
            if req.scheduled is None:
                req.scheduled = now
            self.running.append(req)
            plan.append((req, True))
            n_prefill += n
            budget -= n
        return plan, n_decode, n_prefill, ctx

    async def run(self):
        loop = asyncio.get_event_loop()
        while True:
            if not self.running and not self.waiting:
                self.wake.clear()
                await self.wake.wait()
                continue
            plan, n_decode, n_prefill, ctx = self._schedule(loop.time())
            if not plan:
                self.wake.clear()
                await self.wake.wait()
                continue
            dt = self.prof.step_time(n_decode, n_prefill, ctx) * (0.95 + 0.1 * self.rng.random())
            await asyncio.sleep(dt)
            now = loop.time()
            self.metrics.iteration.observe(n_decode + n_prefill)
            for req, prefill in plan:
                if req.state != "running" or (prefill and req.prefill_left > 0):
                    continue
                self._emit(req, now)

    def _emit(self, req, now):
        m = self.metrics
        first = req.generated == 0
        req.generated += 1
        text = req.next_text()
        m.generation_tokens.inc()
        self.window_generation += 1
        if first:
            req.first_token = now
            m.ttft.observe(now - req.arrival)
            m.prompt_tokens.inc(req.prompt_tokens)
            m.prefix_queries.inc(req.prompt_tokens)
            m.prefix_hits.inc(req.cached)
            if self.prefix_cache is not None and req.prefix_keys:
                self.prefix_cache.insert(req.prefix_keys)  # computed now: the next request may share it
            self.window_prompt += req.prompt_tokens
        else:
            m.itl.observe(now - req.last_token)
        req.last_token = now
        fin = req.finish if req.generated >= req.target else None
        req.texts.append(text)
        if req.stream:
            req.events.put_nowait((text, fin))
        if fin:
            self._finish(req, fin, now)

    def _finish(self, req, reason, now):
        if req.state == "running":
            self.running.remove(req)
            self.free_blocks += req.blocks
            req.blocks = 0
        elif req.state == "waiting":
            self.waiting.remove(req)
        req.state = "done"
        req.reason = reason
        m = self.metrics
        m.success.labels(finished_reason=reason).inc()
        if reason in ("stop", "length"):
            scheduled = req.scheduled if req.scheduled is not None else now
            first = req.first_token if req.first_token is not None else now
            m.e2e.observe(now - req.arrival)
            m.queue.observe(scheduled - req.arrival)
            m.inference.observe(now - scheduled)
            m.prefill.observe(first - scheduled)
            m.decode.observe(now - first)
            m.req_prompt.observe(req.prompt_tokens)
            m.req_generation.observe(req.generated)
            m.max_gen.observe(req.max_tokens)
            m.params_n.observe(1)
            m.params_max_tokens.observe(req.max_tokens)
            m.req_preemptions.observe(req.preemptions)
            if req.generated > 1:
                m.tpot.observe((now - first) / (req.generated - 1))
        elif req.stream:
            req.events.put_nowait((None, reason))
        if not req.done.done():
            req.done.set_result(reason)
