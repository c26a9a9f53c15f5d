"""``Context``: what a handler can do while it runs (progress, logs, requests to the client)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, NoReturn, TypeVar, TypeVarTuple

from mcpfast.protocol import methods as m
from mcpfast.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY, McpError
from mcpfast.protocol.schema import SchemaError, validate_result
from mcpfast.sansio import InboundRequest
from mcpfast.sansio.mrtr import InputRequired
from mcpfast.server.types import JSONObject, JSONValue

if TYPE_CHECKING:
    from mcpfast.server.connection import Connection

__all__ = ["Context"]

_T = TypeVar("_T")
_Args = TypeVarTuple("_Args")


class Context:
    """Handed to a handler that declares a parameter annotated ``Context``.

    Progress and log calls are synchronous (they only queue a message, so sync handlers can
    use them too); requests to the client are coroutines that wait for its answer.

    Under 2026-07-28 (stateless) there are no server-to-client requests: the first time a
    handler asks for input, the call ends with an ``InputRequiredResult``; the client answers
    and retries, the handler runs again from the start, and this time the same question (the
    n-th one asked) returns the client's answer. Handlers must therefore ask their questions
    in a deterministic order and keep side effects after them.

    Attributes:
        request: the request being served (id, method, version, client capabilities).
        resumed: (2026) this round carried a ``requestState`` and the server verified its seal
            (a forged or expired one never reaches the handler: the request gets -32602).
    """

    __slots__ = ("_asked", "_conn", "_loop", "_responses", "_start_task", "_thread", "request", "resumed")

    def __init__(self, conn: Connection, request: InboundRequest, responses: JSONObject | None = None, *, resumed: bool = False) -> None:
        self._conn = conn
        self.request = request
        self._responses = responses or {}
        self.resumed = resumed  # (2026) this round carried a requestState whose seal the server verified
        self._asked = 0
        self._start_task: Callable[[], Awaitable[str]] | None = None  # set when this call may become a task
        # A blocking=True handler runs in a worker thread: its progress/log calls are handed
        # to the event loop's thread (the session machine is not thread-safe).
        self._thread = threading.get_ident()
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    def _on_loop(self, fn: Callable[[*_Args], _T], *args: *_Args) -> _T:
        """Run ``fn(*args)`` on the event loop's thread and return its value (or raise its error)."""
        if threading.get_ident() == self._thread or self._loop is None:
            return fn(*args)
        done: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn(*args))
            except BaseException as exc:  # handed back to the worker thread
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return done.result(timeout=30)

    @property
    def request_id(self) -> int | str:
        """The id of the request being served."""
        return self.request.id

    @property
    def version(self) -> str:
        """The protocol version governing this request."""
        return self.request.version

    @property
    def client_capabilities(self) -> JSONObject:
        """The client capabilities that apply to this request."""
        return self.request.client_capabilities

    async def start_task(self) -> str | None:
        """(tasks extension) Answer the request with a ``CreateTaskResult`` now; the rest runs as the task.

        For a tool registered with ``task=`` and ``defer_task=True``: questions asked before
        this call are plain MRTR rounds of the request. Returns the task id, or ``None`` when
        the call cannot become a task (the client did not declare the extension, an older
        revision): the handler then simply goes on as a plain request.

        Raises:
            McpError: the task limits are reached (the request gets the error).
        """
        if self._start_task is None:
            return None
        task_id: str = await self._start_task()
        return task_id

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> bool:
        """Send a progress notification if the client asked for progress on this request.

        Returns:
            Whether a notification was sent (not when no token was given or the request ended).

        Raises:
            ValueError: ``progress`` is not greater than the previous value.
        """
        return self._on_loop(self._conn.session.progress, self.request.id, progress, total, message)

    def log(self, level: str, data: JSONValue, logger: str | None = None) -> bool:
        """Send ``notifications/message`` at ``level`` if the client's level lets it through.

        Returns:
            Whether a notification was sent.
        """
        return self._on_loop(self._log, level, data, logger)

    def _log(self, level: str, data: JSONValue, logger: str | None) -> bool:
        return self._conn.session.log(level, data, logger, request_id=self.request.id)

    def debug(self, data: JSONValue, logger: str | None = None) -> bool:
        """``log("debug", ...)``."""
        return self.log("debug", data, logger)

    def info(self, data: JSONValue, logger: str | None = None) -> bool:
        """``log("info", ...)``."""
        return self.log("info", data, logger)

    def warning(self, data: JSONValue, logger: str | None = None) -> bool:
        """``log("warning", ...)``."""
        return self.log("warning", data, logger)

    def error(self, data: JSONValue, logger: str | None = None) -> bool:
        """``log("error", ...)``."""
        return self.log("error", data, logger)

    async def send_request(
        self, method: str, params: JSONObject | None = None, timeout: float | None = None, *, key: str | None = None
    ) -> JSONValue:
        """Send a request to the client and wait for its result.

        ``key`` (2026 only): the ``inputRequests`` key it is asked under; by default the n-th
        question of a capability is ``<capability>-<n>``.

        Raises:
            CapabilityError: the client did not declare the capability the method needs.
            LifecycleError: the handshake is not complete, or this is a stateless request.
            McpError: the client answered with an error.
            TimeoutError: no answer in time (the request is cancelled at the client).
            InputRequired: (stateless only) the answer is not known yet; the server turns it
                into an ``InputRequiredResult``.
        """
        if self.request.stateless:
            return self._input(method, params, key)
        return await self._conn.request_client(method, params, related=self.request.id, timeout=timeout)

    async def ask(self, requests: Mapping[str, tuple[str, JSONObject | None]], timeout: float | None = None) -> JSONObject:
        """Several requests to the client, by key: ``{key: (method, params)}`` -> ``{key: result}``.

        2026: the ones not answered yet are asked for together, in one ``InputRequiredResult``
        under these keys (a retry that left some out is asked for those again). Handshake era:
        sent to the client one after another.

        Raises:
            McpError: -32021 when the client did not declare a capability one of them needs.
        """
        if not self.request.stateless:
            return {key: await self.send_request(method, params, timeout) for key, (method, params) in requests.items()}
        embedded = {key: self._embedded(method, params) for key, (method, params) in requests.items()}  # every one checked
        missing = {key: request for key, request in embedded.items() if key not in self._responses}
        if missing:
            raise InputRequired(missing)
        return {key: self._answer(key, method) for key, (method, _params) in requests.items()}

    def _answer(self, key: str, method: str) -> JSONValue:
        """The client's answer under ``key``, checked against the result schema of ``method``.

        Raises:
            McpError: -32602 when it is not such a result (e.g. a number for an ``ElicitResult``).
        """
        answer = self._responses[key]
        try:
            validate_result(answer, method, self.request.version)
        except SchemaError as exc:
            raise McpError(INVALID_PARAMS, f"inputResponses[{key!r}] does not answer {method}: {exc.errors[0]}") from None
        return answer

    def _embedded(self, method: str, params: JSONObject | None) -> JSONObject:
        """The request as it goes in ``inputRequests`` (checked against the client's capabilities)."""
        needed = m.CLIENT_CAPABILITY_FOR.get(method)
        if needed is None:
            raise McpError(MISSING_REQUIRED_CLIENT_CAPABILITY, f"{method} cannot be embedded in an input-required result")
        if needed not in self.request.client_capabilities:
            raise McpError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"this request needs the client capability {needed!r}",
                {"requiredCapabilities": {needed: {}}},
            )
        request: JSONObject = {"method": method}
        if params is not None:
            request["params"] = params
        return request

    def _input(self, method: str, params: JSONObject | None, key: str | None) -> JSONValue:
        request = self._embedded(method, params)
        if key is None:
            key = f"{m.CLIENT_CAPABILITY_FOR[method]}-{self._asked}"  # known: _embedded checked it
            self._asked += 1
        if key in self._responses:
            return self._answer(key, method)
        raise InputRequired(key, request)

    async def sample(
        self,
        messages: str | list[JSONObject],
        *,
        max_tokens: int = 100,
        system_prompt: str | None = None,
        temperature: float | None = None,
        timeout: float | None = None,
        key: str | None = None,
        **extra: JSONValue,
    ) -> JSONObject:
        """Ask the client's LLM for a message (``sampling/createMessage``).

        Args:
            messages: a user prompt, or ``SamplingMessage`` dicts.
            max_tokens: ``maxTokens``.
            system_prompt: ``systemPrompt``.
            temperature: ``temperature``.
            timeout: seconds to wait (the server default when ``None``).
            key: (2026) the ``inputRequests`` key (see ``send_request``).
            **extra: other request fields, passed as given.

        Returns:
            The ``CreateMessageResult``.
        """
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        params: JSONObject = {"messages": messages, "maxTokens": max_tokens, **extra}
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        if temperature is not None:
            params["temperature"] = temperature
        return await self.send_request(m.SAMPLING_CREATE_MESSAGE, params, timeout, key=key)

    async def elicit(
        self, message: str, requested_schema: JSONObject, timeout: float | None = None, *, key: str | None = None
    ) -> JSONObject:
        """Ask the user for structured input (``elicitation/create``, form mode).

        ``key``: (2026) the ``inputRequests`` key (see ``send_request``).

        Returns:
            The ``ElicitResult`` (``action`` and maybe ``content``).
        """
        params = {"message": message, "requestedSchema": requested_schema}
        return await self.send_request(m.ELICITATION_CREATE, params, timeout, key=key)

    async def elicit_url(self, message: str, url: str, *, elicitation_id: str | None = None, timeout: float | None = None) -> JSONObject:
        """Ask the user to complete an interaction at ``url`` (``elicitation/create``, URL mode).

        2025-11-25 sessions whose client declared ``elicitation.url``. The result's ``action``
        says whether the user accepted to go there; when the interaction is done, tell the
        client with ``Server.notify_elicitation_complete(elicitation_id)``.

        Raises:
            CapabilityError: the version or the client has no URL-mode elicitation.
            McpError: a stateless (2026) request (its URL elicitations carry no id to complete).
        """
        if self.request.stateless:
            raise McpError(MISSING_REQUIRED_CLIENT_CAPABILITY, "URL-mode elicitation with completion needs a 2025-11-25 session")
        params = {"mode": "url", "message": message, "url": url, "elicitationId": elicitation_id or uuid.uuid4().hex}
        return await self.send_request(m.ELICITATION_CREATE, params, timeout)

    def url_elicitation_required(self, message: str, url: str, *, elicitation_id: str | None = None) -> NoReturn:
        """End this request with -32042 (URLElicitationRequired) naming one URL elicitation.

        The client opens the URL and may retry the request once the server sent
        ``notifications/elicitation/complete`` (``Server.notify_elicitation_complete``).

        Raises:
            McpError: always: the -32042 error (or -32021/-32601 when the session cannot use
                URL-mode elicitation).
        """
        if self.request.stateless:
            raise McpError(MISSING_REQUIRED_CLIENT_CAPABILITY, "-32042 is retired in 2026-07-28")
        item = {"mode": "url", "message": message, "url": url, "elicitationId": elicitation_id or uuid.uuid4().hex}
        raise self._on_loop(self._conn.session.url_elicitation_required, [item])

    async def list_roots(self, timeout: float | None = None, *, key: str | None = None) -> list[JSONObject]:
        """The client's roots (``roots/list``); ``key``: (2026) the ``inputRequests`` key."""
        result = await self.send_request(m.ROOTS_LIST, None, timeout, key=key)
        roots = result.get("roots") if isinstance(result, dict) else None
        if not isinstance(roots, list):
            raise McpError(INTERNAL_ERROR, "the client answered roots/list without a roots array")
        return roots

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep``; here so handlers need no asyncio import for pacing progress."""
        await asyncio.sleep(seconds)
