"""A small OpenAI-compatible server for tests: streams exactly the output tokens a request asks for.

`/v1/chat/completions` and `/v1/completions` answer with `max_completion_tokens` (or
`max_tokens`) output tokens, each one word of WORDS, streamed as Server-Sent Events one token a
chunk with a short pause between tokens, the final usage chunk when
`stream_options.include_usage` asks for it, then `[DONE]`; `/v1/models` lists the model. Every
completion request is recorded (prompt, max tokens, arrival time) for the test to compare with
what it sent. Served by uvicorn in a thread on a loopback port, as tests/support/server.py serves
the app.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from tests.support.net import free_port

# Output words: plain lowercase words, each one token of the test tokenizer
# (tests/support/hf_tokenizer.py adds them to its vocabulary). Streamed with a space before
# every word but the first, so the joined text re-tokenizes to one token per chunk.
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")
DEFAULT_MAX_TOKENS = 16  # when a request names no limit


@dataclass(frozen=True)
class Seen:
    """One completion request as the server received it."""

    path: str
    model: str | None
    prompt: str
    max_tokens: int | None
    stream: bool
    received_ns: int  # time.time_ns() when the request arrived


@dataclass
class StreamServer:
    """The running server: its base URL and the requests it has served."""

    url: str
    model: str
    requests: list[Seen] = field(default_factory=list)


def output_words(n: int) -> list[str]:
    """The n chunks of text the server streams for n output tokens."""
    return [(" " if i else "") + WORDS[i % len(WORDS)] for i in range(n)]


def _prompt(path: str, body: dict) -> str:
    """The prompt text: the chat messages' text contents joined by spaces, or `prompt`."""
    if path.endswith("/chat/completions"):
        texts: list[str] = []
        for message in body.get("messages") or []:
            content = message.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts += [p.get("text", "") for p in content if p.get("type") == "text"]
        return " ".join(texts)
    prompt = body.get("prompt", "")
    return " ".join(prompt) if isinstance(prompt, list) else str(prompt)


def _max_tokens(body: dict) -> int | None:
    value = body.get("max_completion_tokens", body.get("max_tokens"))
    return int(value) if value is not None else None


def create_app(
    server: StreamServer, *, token_delay_s: float, count_tokens: Callable[[str], int]
) -> FastAPI:
    """The app: the completion routes and /v1/models, recording into server.requests."""
    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": server.model, "object": "model"}]}

    async def complete(request: Request) -> object:
        body = await request.json()
        path = request.url.path
        chat = path.endswith("/chat/completions")
        limit = _max_tokens(body)
        prompt = _prompt(path, body)
        stream = bool(body.get("stream"))
        server.requests.append(Seen(path, body.get("model"), prompt, limit, stream, time.time_ns()))
        words = output_words(DEFAULT_MAX_TOKENS if limit is None else limit)
        usage = {
            "prompt_tokens": count_tokens(prompt),
            "completion_tokens": len(words),
            "total_tokens": count_tokens(prompt) + len(words),
        }
        rid = f"cmpl-{uuid.uuid4().hex}"
        model = body.get("model") or server.model
        if not stream:
            await asyncio.sleep(token_delay_s * len(words))
            text = "".join(words)
            choice = (
                {"index": 0, "message": {"role": "assistant", "content": text}}
                if chat
                else {"index": 0, "text": text}
            )
            return JSONResponse(
                {
                    "id": rid,
                    "object": "chat.completion" if chat else "text_completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [choice | {"finish_reason": "length"}],
                    "usage": usage,
                }
            )
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events = _events(chat, rid, model, words, usage if include_usage else None, token_delay_s)
        return StreamingResponse(events, media_type="text/event-stream")

    app.post("/v1/chat/completions")(complete)
    app.post("/v1/completions")(complete)
    return app


async def _events(
    chat: bool, rid: str, model: str, words: list[str], usage: dict | None, delay: float
) -> AsyncIterator[str]:
    """The SSE stream: a role chunk (chat), one chunk per token, the finish chunk, usage, DONE."""
    kind = "chat.completion.chunk" if chat else "text_completion"
    created = int(time.time())

    def chunk(choices: list[dict], **extra) -> str:
        body = {"id": rid, "object": kind, "created": created, "model": model, "choices": choices}
        return f"data: {json.dumps(body | extra)}\n\n"

    def choice(text: str | None, finish: str | None = None) -> dict:
        if chat:
            delta = {} if text is None else {"content": text}
            return {"index": 0, "delta": delta, "finish_reason": finish}
        return {"index": 0, "text": text or "", "finish_reason": finish}

    if chat:
        yield chunk([{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}])
    for word in words:
        await asyncio.sleep(delay)
        yield chunk([choice(word)])
    yield chunk([choice(None, "length")])
    if usage is not None:
        yield chunk([], usage=usage)
    yield "data: [DONE]\n\n"


@contextmanager
def serving(
    *,
    model: str = "stub-model",
    token_delay_s: float = 0.001,
    count_tokens: Callable[[str], int] = lambda text: len(text.split()),
) -> Iterator[StreamServer]:
    """Run the server on a free loopback port until the block ends; `count_tokens` gives the
    usage chunk's prompt_tokens (pass the test tokenizer's count)."""
    port = free_port()
    server = StreamServer(f"http://127.0.0.1:{port}", model)
    app = create_app(server, token_delay_s=token_delay_s, count_tokens=count_tokens)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    runner = uvicorn.Server(config)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not runner.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the OpenAI stub did not start")
        time.sleep(0.02)
    try:
        yield server
    finally:
        runner.should_exit = True
        thread.join(timeout=30)
