"""The OpenAI-compatible HTTP API of `vllm serve` (and its /health, /metrics, /tokenize)."""

import asyncio
import email.utils
import json
import os
import random
import zlib

from .constants import FINGERPRINT, VERSION
from .engine import Request
from .http_server import HttpServer, dumps
from .prefix_cache import block_keys, check_salt, prompt_units

METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HTTP_ROUTES = {
    "/health": ("GET",),
    "/ping": ("GET", "POST"),
    "/version": ("GET",),
    "/v1/models": ("GET",),
    "/metrics": ("GET",),
    "/load": ("GET",),
    "/tokenize": ("POST",),
    "/v1/completions": ("POST",),
    "/v1/chat/completions": ("POST",),
    "/reset_prefix_cache": ("POST",),  # a dev route: VLLM_SERVER_DEV_MODE=1 only, as in vLLM
}


class BadRequest(Exception):
    def __init__(self, message, status=400, kind="BadRequestError", param=None):
        Exception.__init__(self, message)
        self.status = status
        self.body = {"error": {"message": message, "type": kind, "param": param, "code": status}}


def count_text_tokens(text):
    text = str(text or "")
    return max(len(text.split()), (len(text) + 3) // 4) if text else 0


def prompt_tokens_of(prompt):
    if isinstance(prompt, str):
        return max(1, count_text_tokens(prompt))
    if isinstance(prompt, list) and prompt:
        if all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            return len(prompt)
        if len(prompt) == 1:
            return prompt_tokens_of(prompt[0])
        raise BadRequest("Batched prompts are not simulated by rocm-console's vLLM simulator.")
    raise BadRequest("prompt: Field required; a string or a list of token ids")


def chat_tokens_of(messages):
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: Field required; a non-empty list")
    n = 1
    for msg in messages:
        if not isinstance(msg, dict):
            raise BadRequest("messages: each message must be an object")
        content = msg.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        n += 4 + count_text_tokens(content)
    return n + 3


class OpenAIServer(HttpServer):
    """The routes of `vllm serve` that the simulator answers."""

    # -- routes

    async def dispatch(self, writer, ctx, headers, body, keep):
        method, target = ctx[1], ctx[2]
        path = target.split("?", 1)[0]
        sim = self.sim
        dev_only = path == "/reset_prefix_cache" and os.environ.get("VLLM_SERVER_DEV_MODE") not in ("1", "true")
        if path not in HTTP_ROUTES or dev_only:
            return await self._send(writer, ctx, 404, {"detail": "Not Found"}, keep=keep)
        if method not in HTTP_ROUTES[path]:
            return await self._send(
                writer,
                ctx,
                405,
                {"detail": "Method Not Allowed"},
                keep=keep,
                extra=("allow: " + ", ".join(HTTP_ROUTES[path]),),
            )
        # as vLLM: --api-key, else VLLM_API_KEY from the environment; /health, /metrics, /version stay open
        api_key = sim.args.api_key or os.environ.get("VLLM_API_KEY")
        if api_key and path.startswith("/v1/"):
            if headers.get("authorization", "") != "Bearer " + api_key:
                return await self._send(writer, ctx, 401, {"error": "Unauthorized"}, keep=keep)
        if path in ("/health", "/ping"):
            return await self._send(writer, ctx, 503 if sim.engine.dead else 200, b"", None, keep)
        if path == "/version":
            return await self._send(writer, ctx, 200, {"version": VERSION}, keep=keep)
        if path == "/v1/models":
            return await self._send(writer, ctx, 200, sim.models_json(), keep=keep)
        if path == "/metrics":
            text = "" if sim.args.disable_log_stats else sim.metrics.render()
            return await self._send(writer, ctx, 200, text.encode("utf-8"), METRICS_TYPE, keep)
        if path == "/reset_prefix_cache":
            busy = bool(sim.engine.running or sim.engine.waiting)  # vLLM refuses while blocks are held
            if not busy and sim.engine.prefix_cache is not None:
                sim.engine.prefix_cache.reset()
            return await self._send(writer, ctx, 200, {"success": not busy}, keep=keep)
        if path == "/load":
            load = len(sim.engine.running) + len(sim.engine.waiting)
            return await self._send(writer, ctx, 200, {"server_load": load}, keep=keep)
        try:
            data = self._json(body)
            if path == "/tokenize":
                return await self._send(writer, ctx, 200, self._tokenize(data), keep=keep)
            return await self.generate(writer, ctx, data, path == "/v1/chat/completions", keep)
        except BadRequest as exc:
            return await self._send(writer, ctx, exc.status, exc.body, keep=keep)
        except (TypeError, ValueError, AttributeError) as exc:  # a field of the wrong type
            exc = BadRequest("Invalid request: %s" % exc)
            return await self._send(writer, ctx, exc.status, exc.body, keep=keep)

    @staticmethod
    def _json(body):
        try:
            data = json.loads(body.decode("utf-8")) if body else None
        except (ValueError, UnicodeError) as exc:
            raise BadRequest("JSON decode error: %s" % exc) from None
        if not isinstance(data, dict):
            raise BadRequest("The request body must be a JSON object")
        return data

    def _tokenize(self, data):
        if "messages" in data:
            n = chat_tokens_of(data["messages"])
            seed = json.dumps(data["messages"], sort_keys=True)
        else:
            n = prompt_tokens_of(data.get("prompt"))
            seed = json.dumps(data.get("prompt"))
        rng = random.Random(zlib.crc32(seed.encode("utf-8")))
        return {
            "count": n,
            "max_model_len": self.sim.max_model_len,
            "tokens": [rng.randrange(100, 150000) for _ in range(n)],
            "token_strs": None,
        }

    def _check_model(self, data):
        model = data.get("model")
        if model is not None and model not in self.sim.served:
            raise BadRequest("The model `%s` does not exist." % model, 404, "NotFoundError", "model")

    async def generate(self, writer, ctx, data, chat, keep):
        sim = self.sim
        self._check_model(data)
        if sim.engine.dead:
            raise BadRequest(
                "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                500,
                "InternalServerError",
            )
        limit = sim.max_model_len
        if chat:
            prompt_tokens = chat_tokens_of(data.get("messages"))
            seed_text = json.dumps(data.get("messages"), sort_keys=True)
            max_tokens = data.get("max_completion_tokens")
            if max_tokens is None:
                max_tokens = data.get("max_tokens")
        else:
            prompt_tokens = prompt_tokens_of(data.get("prompt"))
            seed_text = json.dumps(data.get("prompt"))
            max_tokens = data.get("max_tokens", 16)
            if max_tokens is None:
                max_tokens = 16
        salt_error = check_salt(data.get("cache_salt"))
        if salt_error is not None:
            raise BadRequest(salt_error, param="cache_salt")
        n = data.get("n", 1)
        if n not in (1, None):
            raise BadRequest("n > 1 is not simulated by rocm-console's vLLM simulator.")
        if prompt_tokens > limit:
            raise BadRequest(
                "This model's maximum context length is %d tokens. However, your request has %d "
                "input tokens. Please reduce the length of the input messages." % (limit, prompt_tokens)
            )
        if max_tokens is None:
            max_tokens = limit - prompt_tokens
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise BadRequest("max_tokens must be at least 1, got %s." % (max_tokens,), param="max_tokens")
        if prompt_tokens + max_tokens > limit:
            raise BadRequest(
                "'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum "
                "context length is %d tokens and your request has %d input tokens (%d > %d - %d)."
                % (max_tokens, limit, prompt_tokens, max_tokens, limit, prompt_tokens),
                param="max_tokens",
            )
        seed = zlib.crc32(seed_text.encode("utf-8")) ^ int(data.get("seed") or 0)
        target, finish = max_tokens, "length"
        if not data.get("ignore_eos"):
            natural = max(24 + seed % 480, int(data.get("min_tokens") or 0))
            if natural < max_tokens:
                target, finish = natural, "stop"
        stream = bool(data.get("stream"))
        options = data.get("stream_options") or {}
        req = Request(chat, prompt_tokens, max_tokens, target, finish, stream, seed, asyncio.get_event_loop())
        units = json.dumps(data.get("messages"), sort_keys=True).split() if chat else prompt_units(data.get("prompt"))
        req.prefix_keys = block_keys(units, sim.engine.block_size, data.get("cache_salt"))
        sim.engine.submit(req)
        if stream:
            return await self._stream(
                writer, ctx, req, keep, bool(options.get("include_usage")), bool(options.get("continuous_usage_stats"))
            )
        reason = await req.done
        if reason in ("abort", "error"):
            raise BadRequest(
                "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                500,
                "InternalServerError",
            )
        text = "".join(req.texts)
        usage = {
            "prompt_tokens": req.prompt_tokens,
            "total_tokens": req.prompt_tokens + req.generated,
            "completion_tokens": req.generated,
            "prompt_tokens_details": None,
        }
        model = sim.served[0]
        if chat:
            body = {
                "id": req.rid,
                "object": "chat.completion",
                "created": req.created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": text,
                            "refusal": None,
                            "annotations": None,
                            "audio": None,
                            "function_call": None,
                            "tool_calls": [],
                            "reasoning_content": None,
                        },
                        "logprobs": None,
                        "finish_reason": reason,
                        "stop_reason": None,
                        "token_ids": None,
                    }
                ],
                "service_tier": None,
                "system_fingerprint": None,
                "usage": usage,
                "prompt_logprobs": None,
                "prompt_token_ids": None,
                "kv_transfer_params": None,
            }
        else:
            if data.get("echo") and isinstance(data.get("prompt"), str):
                text = data["prompt"] + text
            body = {
                "id": req.rid,
                "object": "text_completion",
                "created": req.created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "text": text,
                        "logprobs": None,
                        "finish_reason": reason,
                        "stop_reason": None,
                        "token_ids": None,
                        "prompt_logprobs": None,
                        "prompt_token_ids": None,
                    }
                ],
                "service_tier": None,
                "system_fingerprint": None,
                "usage": usage,
                "kv_transfer_params": None,
            }
        return await self._send(writer, ctx, 200, body, keep=keep)

    async def _stream(self, writer, ctx, req, keep, include_usage, continuous):
        http11 = ctx[3] == "1.1"
        lines = [
            "HTTP/1.1 200 OK",
            "date: " + email.utils.formatdate(usegmt=True),
            "server: uvicorn",
            "content-type: text/event-stream; charset=utf-8",
        ]
        lines.append("transfer-encoding: chunked" if http11 else "connection: close")
        self._access(ctx, 200)
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        model = self.sim.served[0]
        obj = "chat.completion.chunk" if req.chat else "text_completion"

        def send(payload):
            data = b"data: " + payload + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data) if http11 else data)

        def usage():
            return {
                "prompt_tokens": req.prompt_tokens,
                "total_tokens": req.prompt_tokens + req.generated,
                "completion_tokens": req.generated,
            }

        def chunk(choices, **after):
            """One streamed chunk: its header, the choices, then `after` in order (vLLM's key order)."""
            out = {"id": req.rid, "object": obj, "created": req.created, "model": model, "choices": choices}
            out.update(after)
            return out

        try:
            if req.chat:
                role = {
                    "index": 0,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
                send(dumps(chunk([role], prompt_token_ids=None, prompt_text=None)))
            while True:
                text, fin = await req.events.get()
                if writer.is_closing():
                    raise ConnectionResetError("client went away")
                if text is None:  # aborted, or the engine died
                    return False
                if req.chat:
                    choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": fin}
                else:
                    choice = {
                        "index": 0,
                        "text": text,
                        "logprobs": None,
                        "finish_reason": fin,
                        "stop_reason": None,
                        "prompt_token_ids": None,
                    }
                if fin or not req.chat:
                    choice["stop_reason"] = None
                choice["token_ids"] = None
                send(dumps(chunk([choice], usage=usage()) if continuous else chunk([choice])))
                await writer.drain()
                if fin:
                    break
            if include_usage:
                send(dumps(chunk([], usage=usage(), system_fingerprint=FINGERPRINT)))
            send(b"[DONE]")
            if http11:
                writer.write(b"0\r\n\r\n")
            await writer.drain()
        except (ConnectionError, OSError):
            self.sim.engine.abort(req)
            return False
        return keep and http11
