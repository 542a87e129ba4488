"""One benchmark request: streamed completions or chat, SSE parsing, timings."""

import codecs
import collections
import json
import os
import time

from .bench_args import BENCH_REQ_SRC
from .bench_http import BenchHttpError
from .bench_output import BenchFatal, in_request_func, python_exception_text, request_where
from .failures import tb_frame


class BenchInput(object):
    def __init__(
        self,
        prompt,
        api_url,
        prompt_len,
        output_len,
        model,
        model_name=None,
        logprobs=None,
        extra_headers=None,
        extra_body=None,
        ignore_eos=False,
        request_id=None,
        chat=False,
    ):
        self.prompt = prompt
        self.api_url = api_url
        self.prompt_len = prompt_len
        self.output_len = output_len
        self.model = model
        self.model_name = model_name
        self.logprobs = logprobs
        self.extra_headers = extra_headers
        self.extra_body = extra_body
        self.ignore_eos = ignore_eos
        self.request_id = request_id
        self.chat = chat

    def replace(self, **changes):
        new = BenchInput.__new__(BenchInput)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new


class BenchOutput(object):
    def __init__(self):
        self.generated_text = ""
        self.success = False
        self.latency = 0.0
        self.output_tokens = 0
        self.ttft = 0.0
        self.itl = []
        self.tpot = 0.0
        self.prompt_len = 0
        self.error = ""
        self.start_time = 0.0
        self.client_queue_time = 0.0


class SseHandler(object):
    """vllm.benchmarks.lib.endpoint_request_func.StreamedResponseHandler."""

    def __init__(self):
        self.buffer = ""
        self.decoder = codecs.getincrementaldecoder("utf-8")()

    def add_chunk(self, chunk_bytes):
        self.buffer += self.decoder.decode(chunk_bytes)
        messages = []
        while "\n\n" in self.buffer:
            message, self.buffer = self.buffer.split("\n\n", 1)
            message = message.strip()
            if message:
                messages.append(message)
        if self.buffer.startswith("data: "):
            content = self.buffer[len("data: ") :].strip()
            if content == "[DONE]":
                messages.append(self.buffer.strip())
                self.buffer = ""
            elif content:
                try:
                    json.loads(content)
                    messages.append(self.buffer.strip())
                    self.buffer = ""
                except ValueError:
                    pass
        return messages


def _validate_api_url(inp):
    suffix = "chat/completions" if inp.chat else "completions"
    if inp.api_url.endswith(suffix):
        return
    name = "OpenAI Chat Completions API" if inp.chat else "OpenAI Completions API"
    func = "async_request_openai_chat_completions" if inp.chat else "async_request_openai_completions"
    raise BenchFatal(
        in_request_func()
        + tb_frame(
            BENCH_REQ_SRC, 390 if inp.chat else 205, func, '_validate_api_url(api_url, "%s", "%s")' % (name, suffix)
        )
        + tb_frame(
            BENCH_REQ_SRC,
            127,
            "_validate_api_url",
            'raise ValueError(f"{api_name} URL must end with one of: {expected_suffixes}.")',
        ),
        "ValueError: %s URL must end with one of: {'%s'}." % (name, suffix),
    )


async def bench_request(inp, http, pbar=None):
    """async_request_openai_completions / async_request_openai_chat_completions."""
    _validate_api_url(inp)
    chat = inp.chat
    payload = collections.OrderedDict()
    payload["model"] = inp.model_name if inp.model_name else inp.model
    if chat:
        payload["messages"] = [{"role": "user", "content": [{"type": "text", "text": inp.prompt}]}]
        payload["max_completion_tokens"] = inp.output_len
    else:
        payload["prompt"] = inp.prompt
        payload["repetition_penalty"] = 1.0
        payload["max_tokens"] = inp.output_len
        payload["logprobs"] = inp.logprobs
    payload["stream"] = True
    payload["stream_options"] = {"include_usage": True}
    if inp.ignore_eos:
        payload["ignore_eos"] = inp.ignore_eos
    if inp.extra_body:
        payload.update(inp.extra_body)
    headers = collections.OrderedDict([("Content-Type", "application/json")])
    if os.environ.get("OPENAI_API_KEY"):
        headers["Authorization"] = "Bearer " + os.environ["OPENAI_API_KEY"]
    if inp.extra_headers:
        headers.update(inp.extra_headers)
    if inp.request_id:
        headers["x-request-id"] = inp.request_id
    body = json.dumps(payload).encode("utf-8")

    out = BenchOutput()
    out.prompt_len = inp.prompt_len
    st = time.perf_counter()
    out.start_time = st
    state = {"first": False, "recent": st, "text": []}
    handler = SseHandler()

    def on_data(chunk_bytes):
        chunk_bytes = chunk_bytes.strip()
        if not chunk_bytes:
            return
        for message in handler.add_chunk(chunk_bytes):
            if message.startswith(":"):
                continue
            chunk = message[len("data: ") :] if message.startswith("data: ") else message
            if chunk == "[DONE]":
                continue
            timestamp = time.perf_counter()
            data = json.loads(chunk)
            choices = data.get("choices")
            if choices:
                if chat:
                    text = choices[0]["delta"].get("content")
                else:
                    text = choices[0].get("text")
                    timestamp = time.perf_counter()
                if not state["first"]:
                    state["first"] = True
                    out.ttft = timestamp - st
                else:
                    out.itl.append(timestamp - state["recent"])
                state["recent"] = timestamp
                state["text"].append(text or "")
            else:
                usage = data.get("usage")
                if usage:
                    out.output_tokens = usage.get("completion_tokens")
                    if usage.get("prompt_tokens") is not None:
                        out.prompt_len = usage.get("prompt_tokens")

    try:
        status, reason, _ = await http.request("POST", inp.api_url, headers, body, on_data)
        if status == 200:
            if state["first"]:
                out.success = True
            else:
                out.success = False
                out.error = "Never received a valid chunk to calculate TTFT.This response will be marked as failed!"
            out.generated_text = "".join(state["text"])
            out.latency = state["recent"] - st
        else:
            out.error = reason or ""
            out.success = False
    except BenchHttpError as exc:
        out.success = False
        out.error = exc.text(request_where(chat, False), request_where(chat, True))
    except Exception as exc:  # e.g. a JSON decode error in the stream
        out.success = False
        out.error = python_exception_text(exc, request_where(chat, True))
    if pbar is not None:
        pbar.update(1)
    return out
