"""host.llm and host.decide for async runs: llm.py's request, answer reading, key redaction and
decision matching (its pure parts), with the chat completion POSTed over httpx on the event loop.

The LLM endpoint is the operator's one, the same for every call: each event loop keeps one client, and
its connections stay open between calls. A call to a provider over TLS then skips the TCP and TLS
handshakes, a round trip or three of the wait every host.llm and host.decide used to pay."""

from __future__ import annotations

import asyncio

import httpx

from plugins_app.runtime.web.chain import HostError
from plugins_app.services.execution.async_host_bridge import async_member
from plugins_app.services.execution.host_bridge import HostCall
from plugins_app.services.host import llm as sync_llm
from plugins_app.services.host.async_fetch import system_trust
from plugins_app.services.host.llm import MAX_RESPONSE_BYTES
from plugins_app.services.per_loop import PerLoop

ERROR_BYTES = 64 * 1024   # of an error answer, read for its message (as llm.py reads it)
# Connections kept open to the endpoint between calls; more calls at once open more, closed after.
KEPT_CONNECTIONS = 32
KEPT_SECONDS = 30.0


def _new_client(loop: asyncio.AbstractEventLoop) -> httpx.AsyncClient:
    """A loop's client (its connections belong to the loop). The environment's proxies are honoured,
    as urllib's opener honours them for the sync call, and the system's trust store is urllib's too; a
    redirect is not followed (an answer of its own: "answered HTTP 3xx")."""
    return httpx.AsyncClient(trust_env=True, follow_redirects=False, verify=system_trust(),
                             limits=httpx.Limits(max_connections=None, max_keepalive_connections=KEPT_CONNECTIONS,
                                                 keepalive_expiry=KEPT_SECONDS))


_clients: PerLoop[httpx.AsyncClient] = PerLoop(_new_client)


async def complete_async(messages: list[dict], options: dict | None = None, *, member_name: str = "llm") -> str:
    """llm.complete, awaited: the assistant's text, with the provider's key redacted."""
    redactor = sync_llm.key_redactor()
    try:
        return redactor.text(await _complete(messages, options, member_name))
    except HostError as exc:
        raise HostError(redactor.text(str(exc))) from None


async def _complete(messages: list[dict], options: dict | None, member_name: str) -> str:
    url, body, headers = sync_llm.chat_request(messages, options, member_name)
    limit = sync_llm.time_limit()
    try:
        async with asyncio.timeout(limit):
            client = _clients.get()
            request = client.build_request("POST", url, content=body, headers=headers, timeout=limit)
            del request.headers["Accept-Encoding"]   # identity, as urllib asks: the cap counts bytes as sent
            response = await client.send(request, stream=True)
            try:
                raw = await _read(response, MAX_RESPONSE_BYTES + 1 if response.is_success else ERROR_BYTES)
            finally:
                await response.aclose()
    except TimeoutError as exc:
        raise sync_llm.unreachable(exc if str(exc) else TimeoutError("timed out"), member_name) from None
    except (httpx.HTTPError, OSError, ValueError) as exc:
        raise sync_llm.unreachable(exc, member_name) from None
    if not response.is_success:
        raise sync_llm.answered_with(response.status_code, sync_llm.error_detail(raw, response.reason_phrase),
                                     member_name)
    return sync_llm.chat_content(raw, member_name)


async def _read(response: httpx.Response, limit: int) -> bytes:
    """At most `limit` bytes of the body (a longer answer is cut, and then is no chat completion)."""
    chunks: list[bytes] = []
    total = 0
    async for chunk in response.aiter_raw():
        chunks.append(chunk)
        total += len(chunk)
        if total >= limit:
            break
    return b"".join(chunks)[:limit]


@async_member("llm")
async def llm(call: HostCall, args: list) -> str:
    messages, options = sync_llm.parse_llm_args(args)
    return await complete_async(messages, options)


@async_member("decide")
async def decide(call: HostCall, args: list) -> str:
    messages, options = sync_llm.decide_prompt(args)
    return sync_llm.decided(await complete_async(messages, dict(sync_llm.DECIDE_OPTIONS), member_name="decide"),
                            options)
