"""``Server``: the decorator API (tools, resources, prompts, completion) on top of the session machine.

The session machine decides what is allowed and when; this module turns registered Python functions
into MCP results. Protocol errors are raised as ``McpError``; tool failures become
``isError`` results so the model can see them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from types import UnionType
from typing import Any, Final, Literal, NamedTuple, TypeAlias, TypeGuard, TypeVar, Union, get_args, get_origin, get_type_hints

import orjson

from mcpfast._version import __version__
from mcpfast.protocol import methods as m
from mcpfast.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, McpError, resource_not_found_code
from mcpfast.protocol.meta import TASKS_EXTENSION
from mcpfast.protocol.schema import known_fields
from mcpfast.protocol.versions import V2025_06_18, supports
from mcpfast.sansio import InboundRequest, NotificationReceived, ServerSession
from mcpfast.sansio.mrtr import InputRequired, StateSealer, input_required_result
from mcpfast.sansio.rules import DEFAULT_PAGE_SIZE, completion_result, input_errors_are_tool_errors, paginate
from mcpfast.server import inline
from mcpfast.server._typeschema import function_schema, type_schema
from mcpfast.server._validate import ArgumentValidator, SchemaValidator, schema_validator
from mcpfast.server.connection import Connection, Routes
from mcpfast.server.content import ToolResult, text_result
from mcpfast.server.context import Context
from mcpfast.server.tasks import TASK_SUPPORT, Tasks, _Run, negotiated, tasks_required
from mcpfast.server.types import JSONObject, JSONValue, PlainOutcome, RouteResult, UserFunction, UserFunctionT
from mcpfast.server.uri_template import UriTemplate, is_template
from mcpfast.store.tasks import TaskStore

__all__ = ["PendingCall", "PlainOutcome", "Server", "SessionDefaults"]

logger = logging.getLogger("mcpfast.server")
_TOOLS_CALL: Final = m.TOOLS_CALL

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
_CONTENT_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})

_Subject = TypeVar("_Subject")
Finish: TypeAlias = Callable[[_Subject, object, str], JSONObject]
"""``finish(subject, value, version)``: a handler's value shaped as the result of its request
(``subject``: what was called, e.g. the tool)."""
Failed: TypeAlias = Callable[[_Subject, Exception], JSONObject]
"""``failed(subject, exc)``: the result of a handler that raised (a tool's ``isError`` result)."""
CompletionValue: TypeAlias = JSONObject | Iterable[object] | None
"""What a completion handler returns: the values (each made a str), or a full ``{"completion": ...}``."""
CompletionHandler: TypeAlias = Callable[[JSONObject, JSONObject, JSONValue], CompletionValue | Awaitable[CompletionValue]]
"""``fn(ref, argument, context arguments)`` (see ``Server.completion``)."""


class _Callable:
    """A registered function: how to call it and which parameter wants the Context.

    ``inline`` is true for a plain sync function: it runs right in the read loop, with no task.
    An ``async def`` is driven in the read loop too, up to its first wait (then a task finishes
    it: ``mcpfast.server.inline``); a sync function registered with ``blocking=True`` runs in
    the server's thread pool (from a task that awaits it).
    """

    __slots__ = ("blocking", "context_param", "fn", "inline", "is_async", "name_set", "names", "schema")

    def __init__(self, fn: UserFunction, *, describe: bool = True, blocking: bool = False) -> None:
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)
        if blocking and self.is_async:
            raise ValueError(f"{getattr(fn, '__qualname__', fn)!r}: blocking=True is for sync functions (an async def must not block)")
        self.blocking = blocking
        self.inline = not self.is_async and not blocking
        hints = get_type_hints(fn, include_extras=True)
        self.context_param = next((n for n, t in hints.items() if n != "return" and _is_context(t)), None)
        skip = frozenset({self.context_param}) if self.context_param else frozenset()
        if describe:
            self.schema, self.names = function_schema(fn, skip)
        else:
            self.schema, self.names = {}, [n for n in inspect.signature(fn).parameters if n not in skip]
        self.name_set = frozenset(self.names)

    def kwargs(self, args: JSONObject, ctx: Context | None) -> dict[str, object]:
        """The keyword arguments of one call: the known arguments, and the Context if wanted."""
        if self.context_param is None:
            if args.keys() <= self.name_set:
                return args
            return {n: args[n] for n in self.names if n in args}
        kwargs = {n: args[n] for n in self.names if n in args}
        kwargs[self.context_param] = ctx
        return kwargs

    async def call(self, args: JSONObject, ctx: Context | None, executor: concurrent.futures.Executor | None = None) -> object:
        """Call the function however it must run: awaited, in a worker thread, or inline."""
        kwargs = self.kwargs(args, ctx)
        if self.is_async:
            return await self.fn(**kwargs)
        if self.blocking:
            # The worker sees the caller's context variables, as asyncio.to_thread does.
            run = functools.partial(contextvars.copy_context().run, self.fn, **kwargs)
            return await asyncio.get_running_loop().run_in_executor(executor, run)
        return self.fn(**kwargs)


def _is_context(hint: object) -> bool:
    if hint is Context:
        return True
    return get_origin(hint) in (Union, UnionType) and Context in get_args(hint)


class _Tool:
    __slots__ = (
        "callable", "check", "defer_task", "definition", "output_schema", "output_validator", "plain", "plain_async", "task",
        "validator", "wrap_output",
    )  # fmt: skip

    def __init__(
        self, callable_: _Callable, definition: JSONObject, output_schema: JSONObject | None, wrap: bool,
        task: str | None = None, defer_task: bool = False,
    ) -> None:  # fmt: skip
        self.callable = callable_
        self.task = task  # taskSupport: None (never a task), "optional" or "required"
        self.defer_task = defer_task
        self.definition = definition
        self.output_schema = output_schema
        self.wrap_output = wrap
        self.validator = ArgumentValidator(definition["inputSchema"])
        self.check = self.validator.check
        self.output_validator: SchemaValidator | None = schema_validator(output_schema) if output_schema is not None else None
        # Decided once here: a plain sync function with no Context, no task and no output schema
        # is called straight from tools/call (``Server._tools_call``), the hottest method.
        self.plain = callable_.inline and callable_.context_param is None and task is None and output_schema is None
        # The same for an ``async def`` (``Server._call_plain_async``).
        self.plain_async = callable_.is_async and callable_.context_param is None and task is None and output_schema is None


def _argument_problem(tool: _Tool, args: object) -> str | None:
    """What is wrong with a tool call's arguments (``None``: nothing)."""
    check = tool.check
    if check is not None and type(args) is dict and check(args):
        return None  # the compiled check passed: jsonschema is not needed
    return tool.validator.problem(args) if isinstance(args, dict) else "arguments must be an object"


def _refused_arguments(tool: _Tool, name: str, arguments: JSONObject, version: str) -> JSONObject | tuple[int, str, JSONValue] | None:
    """The answer to a plain call whose compiled check failed: the tool error or the -32602 the
    version wants, or ``None`` when the arguments are fine after all (jsonschema's word)."""
    problem = _argument_problem(tool, arguments)
    if problem is None:
        return None
    if input_errors_are_tool_errors(version):
        return _invalid_arguments(name, problem)
    return (INVALID_PARAMS, f"invalid arguments for tool {name}: {problem}", None)


def _invalid_arguments(name: str, problem: str) -> JSONObject:
    """Invalid arguments as a tool error result (the versions where ``input_errors_are_tool_errors``)."""
    return {"content": [{"type": "text", "text": f"invalid arguments for tool {name}: {problem}"}], "isError": True}


class _Resource:
    __slots__ = ("callable", "definition", "mime_type", "template")

    def __init__(self, callable_: _Callable, definition: JSONObject, template: UriTemplate | None) -> None:
        self.callable = callable_
        self.definition = definition
        self.mime_type: str | None = definition.get("mimeType")
        self.template = template


class _Prompt:
    __slots__ = ("callable", "definition", "required")

    def __init__(self, callable_: _Callable, definition: JSONObject, required: frozenset[str]) -> None:
        self.callable = callable_
        self.definition = definition
        self.required = required


"""What a plain ``tools/call`` run without a session machine answers (``Server.run_plain_tool``):
the result; a str, the text of a result of one text content (``text_result``); or
``(code, message, data)``, a JSON-RPC error."""


class PendingCall:
    """A plain ``tools/call`` of an ``async def`` tool that waits (``Server.run_tool_inline``):
    its ``outcome()`` once it has finished.

    ``listen(fn)`` calls ``fn(call)`` in the step of the tool that finishes it (no loop turn
    more), or at once when it has finished; ``cancel()`` stops the tool (a client gone, a
    session ended): its outcome is then ``CancelledError``.
    """

    __slots__ = ("_listener", "_outcome", "_server", "_tool", "_version", "running")

    def __init__(self, server: Server, tool: _Tool, version: str, running: inline.InlineTask[object]) -> None:
        self._server = server
        self._tool = tool
        self._version = version
        self.running = running
        """The tool's coroutine, driven on from the loop."""
        self._outcome: PlainOutcome | BaseException | None = None
        self._listener: Callable[[PendingCall], object] | None = None
        running.when_done(PendingCall._finished, self)

    def _finished(self, value: object, exc: BaseException | None) -> None:
        """``inline.Done``: the outcome as ``run_plain_tool`` would have answered it."""
        if isinstance(exc, asyncio.CancelledError):
            self._outcome = exc
        else:
            self._outcome = self._server._plain_outcome(self._tool, self._version, value, exc)
        listener, self._listener = self._listener, None
        if listener is not None:
            listener(self)

    def done(self) -> bool:
        return self._outcome is not None

    def cancelled(self) -> bool:
        return isinstance(self._outcome, asyncio.CancelledError)

    def cancel(self) -> bool:
        """Stop the tool; ``False`` once it has finished."""
        return self.running.cancel()

    def listen(self, fn: Callable[[PendingCall], object]) -> None:
        """``fn(self)`` once it has finished (now, if it has); one listener at a time."""
        if self._outcome is not None:
            fn(self)
        else:
            self._listener = fn

    def outcome(self) -> PlainOutcome:
        """The result, its text, or ``(code, message, data)``, as ``run_plain_tool`` returns them.

        Raises:
            asyncio.InvalidStateError: it has not finished.
            asyncio.CancelledError: it was cancelled.
        """
        outcome = self._outcome
        if outcome is None:
            raise asyncio.InvalidStateError("the tool has not finished")
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


class SessionDefaults(NamedTuple):
    """What a server's new session machines are made from (``Server.session_defaults``)."""

    key: tuple[object, ...]
    """What they were built from: a new object is made when it changes."""
    server_info: JSONObject
    capabilities: JSONObject
    instructions: str | None
    stateless_capabilities: JSONObject | None
    """The 2026 era's, when they differ (``Server.stateless_capabilities``)."""
    serves_listen: bool


class Server:
    """An MCP server: register tools, resources and prompts with decorators, then serve.

    Args:
        name: ``serverInfo.name``.
        version: ``serverInfo.version``.
        title: ``serverInfo.title`` (2025-06-18+).
        instructions: ``instructions`` returned by ``initialize``/``server/discover``.
        page_size: items per page of the list methods.
        request_timeout: seconds to wait for the client's answer to a server-to-client request.
        subscribe: offer ``resources.subscribe``.
        logging: offer the ``logging`` capability.
        validate_output: check ``structuredContent`` against the tool's ``outputSchema``.
        blocking_workers: threads of the pool that runs handlers registered with
            ``blocking=True`` (created on first use).
        task_ttl: (tasks extension) seconds a task is kept from its creation; a handler still
            running then is cancelled.
        task_poll_interval: seconds suggested to clients between ``tasks/get`` polls.
        max_tasks: tasks kept at once by the server, finished ones until their TTL passes
            (more are refused with -32600).
        max_tasks_per_session: unfinished tasks at once for one session (a stdio connection,
            or an HTTP principal; unauthenticated HTTP callers share one count).
        task_store: where tasks live (``mcpfast.store.tasks``; this process's memory by default).
        lifespan: ``lifespan(server)``, an async context manager entered once when the
            server starts serving (``start``) and left when it stops (``stop``); what it
            yields is ``lifespan_state``. The transports call ``start``/``stop``.

    Example::

        app = Server("demo")

        @app.tool()
        def add(a: float, b: float) -> float:
            \"\"\"Add two numbers.\"\"\"
            return a + b
    """

    def __init__(
        self,
        name: str,
        version: str = __version__,
        *,
        title: str | None = None,
        instructions: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        request_timeout: float = 60.0,
        subscribe: bool = True,
        logging: bool = True,
        validate_output: bool = True,
        blocking_workers: int = 8,
        task_ttl: float = 600.0,
        task_poll_interval: float = 0.5,
        max_tasks: int = 10_000,
        max_tasks_per_session: int = 100,
        task_store: TaskStore | None = None,
        lifespan: Callable[[Server], AbstractAsyncContextManager[object]] | None = None,
    ) -> None:
        self.name = name
        self.version = version
        self.title = title
        self.instructions = instructions
        self.page_size = page_size
        self.request_timeout = request_timeout
        self.offer_subscribe = subscribe
        self.offer_logging = logging
        self.validate_output = validate_output
        self.blocking_workers = blocking_workers
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._roots_changed: Callable[[Connection], object] | None = None
        self._tools: dict[str, _Tool] = {}
        self._task_tools: set[str] = set()  # names of the tools registered with task=
        self._resources: dict[str, _Resource] = {}
        self._templates: list[_Resource] = []
        self._prompts: dict[str, _Prompt] = {}
        self._completion: CompletionHandler | None = None
        self.sealer = StateSealer()
        self.tasks = Tasks(
            task_store, ttl=task_ttl, poll_interval=task_poll_interval, max_tasks=max_tasks,
            max_tasks_per_session=max_tasks_per_session,
        )  # fmt: skip
        self._list_cache: dict[tuple[str, str], list[JSONObject]] = {}
        self._connections: set[Connection] = set()
        self.lifespan = lifespan
        self.lifespan_state: Any = None
        """What the lifespan yielded (``None`` before ``start`` or without a lifespan): the application's
        own object (``Any``: its handlers use it as the type they know it has)."""
        self._lifespan_exit: contextlib.AsyncExitStack | None = None
        self._starts = 0
        self.transports: set[Literal["stdio", "http"]] = set()
        """The transports that started this server (``start(transport=)``) since it was last stopped."""
        self._session_shared: SessionDefaults | None = None
        self._session_sources: list[Callable[[], object]] = []
        self._tools_call_route = self._tools_call  # one bound method: the lane checks the route is still it
        self.routes = Routes(
            {
                m.TOOLS_LIST: self._tools_list,
                m.TOOLS_CALL: self._tools_call_route,
                m.RESOURCES_LIST: self._resources_list,
                m.RESOURCES_TEMPLATES_LIST: self._templates_list,
                m.RESOURCES_READ: self._resources_read,
                m.RESOURCES_SUBSCRIBE: self._subscribe,
                m.RESOURCES_UNSUBSCRIBE: self._unsubscribe,
                m.PROMPTS_LIST: self._prompts_list,
                m.PROMPTS_GET: self._prompts_get,
                m.COMPLETION_COMPLETE: self._complete,
                m.TASKS_GET: self._tasks_method,
                m.TASKS_UPDATE: self._tasks_method,
                m.TASKS_CANCEL: self._tasks_method,
            }
        )
        """What serves each method the session machine admits (``Connection`` dispatches through it;
        a method without a route is answered -32601)."""

    # ------------------------------------------------------------ registration

    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: JSONObject | None = None,
        structured_output: bool | None = None,
        input_schema: JSONObject | None = None,
        output_schema: JSONObject | None = None,
        icons: list[JSONObject] | None = None,
        meta: JSONObject | None = None,
        blocking: bool = False,
        task: bool | str = False,
        defer_task: bool = False,
    ) -> Callable[[UserFunctionT], UserFunctionT]:
        """Register a sync or async function as a tool.

        The ``inputSchema`` comes from the parameter type hints (or ``input_schema``). A typed
        return (other than ``str``, content blocks or ``ToolResult``) gives an ``outputSchema``
        and a ``structuredContent`` result; a non-object type is wrapped as ``{"result": ...}``.

        Args:
            name: tool name (default: the function name); 1-128 of ``[A-Za-z0-9_.-]``.
            title: display name.
            description: description (default: the docstring).
            annotations: ``ToolAnnotations`` (``readOnlyHint``...).
            structured_output: force (True) or turn off (False) structured output.
            input_schema: an explicit ``inputSchema`` used verbatim (arguments then reach the
                function by parameter name).
            output_schema: an explicit ``outputSchema`` (then the return value is the
                ``structuredContent`` as is).
            icons: ``icons`` (2025-11-25+).
            meta: ``_meta`` of the tool.
            blocking: the (sync) function blocks (I/O, sleeps, heavy CPU): run it in the
                server's thread pool instead of inline on the event loop. Plain sync tools run
                inline, which is the fastest path but stalls every other request while they run.
            task: (tasks extension, 2026-07-28) the tool may run as a task: ``True`` or
                ``"optional"`` (a client that did not declare the extension gets a plain
                result), ``"required"`` (such a client gets -32021). A task's handler runs in
                an asyncio task of its own; ``tasks/cancel`` cancels it.
            defer_task: the call becomes a task only when the handler awaits
                ``Context.start_task()`` (questions before that are plain MRTR rounds); by
                default it becomes one before the handler starts.

        Raises:
            ValueError: an invalid or duplicate name, ``blocking=True`` on an ``async def``, or
                an unknown ``task`` value.
            TypeError: a parameter or return type with no JSON Schema.
        """

        support = "optional" if task is True else (task or None)
        if support is not None and support not in TASK_SUPPORT:
            raise ValueError(f"task must be True, False, 'optional' or 'required', not {task!r}")
        if defer_task and support is None:
            raise ValueError("defer_task=True needs task=")

        def register(fn: UserFunctionT) -> UserFunctionT:
            tool_name = name or fn.__name__
            if not _TOOL_NAME.match(tool_name):
                raise ValueError(f"invalid tool name {tool_name!r}: use 1-128 of A-Z a-z 0-9 _ . -")
            if tool_name in self._tools:
                raise ValueError(f"tool {tool_name!r} is already registered")
            callable_ = _Callable(fn, describe=input_schema is None, blocking=blocking)
            if defer_task and callable_.context_param is None:
                raise ValueError(f"tool {tool_name!r}: defer_task=True needs a Context parameter (it calls ctx.start_task())")
            definition: JSONObject = {"name": tool_name}
            if title is not None:
                definition["title"] = title
            doc = description if description is not None else inspect.getdoc(fn)
            if doc:
                definition["description"] = doc
            definition["inputSchema"] = input_schema if input_schema is not None else callable_.schema
            out_schema, wrap = output_schema, False
            if out_schema is None and structured_output is not False:
                out_schema, wrap = _output_schema(fn, forced=bool(structured_output))
            if out_schema is not None:
                definition["outputSchema"] = out_schema
            if annotations is not None:
                definition["annotations"] = annotations
            if icons is not None:
                definition["icons"] = icons
            if meta is not None:
                definition["_meta"] = meta
            self._tools[tool_name] = _Tool(callable_, definition, out_schema, wrap, support, defer_task)
            if support is not None:
                self._task_tools.add(tool_name)
            self._list_cache.clear()
            return fn

        return register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: JSONObject | None = None,
        icons: list[JSONObject] | None = None,
        blocking: bool = False,
    ) -> Callable[[UserFunctionT], UserFunctionT]:
        """Register a resource (a fixed URI) or a resource template (an RFC 6570 URI template).

        A template's variables are passed to the function by name. The function returns
        ``str`` (text), ``bytes`` (blob), a contents dict or a list of contents dicts.
        ``blocking=True`` runs a sync function in the thread pool (see ``tool``).

        Raises:
            ValueError: a duplicate URI or an unsupported template expression.
        """

        def register(fn: UserFunctionT) -> UserFunctionT:
            callable_ = _Callable(fn, describe=False, blocking=blocking)
            definition: JSONObject = {"name": name or fn.__name__}
            if title is not None:
                definition["title"] = title
            doc = description if description is not None else inspect.getdoc(fn)
            if doc:
                definition["description"] = doc
            if mime_type is not None:
                definition["mimeType"] = mime_type
            if annotations is not None:
                definition["annotations"] = annotations
            if icons is not None:
                definition["icons"] = icons
            if is_template(uri):
                template = UriTemplate(uri)
                missing = set(callable_.names) - set(template.variables)
                if missing:
                    raise ValueError(f"{fn.__qualname__} parameters {sorted(missing)} are not variables of {uri!r}")
                self._templates.append(_Resource(callable_, {"uriTemplate": uri, **definition}, template))
            else:
                if uri in self._resources:
                    raise ValueError(f"resource {uri!r} is already registered")
                if size is not None:
                    definition["size"] = size
                self._resources[uri] = _Resource(callable_, {"uri": uri, **definition}, None)
            self._list_cache.clear()
            return fn

        return register

    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        arguments: dict[str, str] | None = None,
        icons: list[JSONObject] | None = None,
        blocking: bool = False,
    ) -> Callable[[UserFunctionT], UserFunctionT]:
        """Register a prompt; its parameters (all strings) are the prompt's arguments.

        The function returns ``str`` (one user message), a message dict, a content block, a
        list of those, or a full ``GetPromptResult`` dict (with ``messages``).

        Args:
            name: prompt name (default: the function name).
            title: display name.
            description: description (default: the docstring).
            arguments: descriptions of the arguments, by name.
            icons: ``icons`` (2025-11-25+).
            blocking: run a sync function in the thread pool (see ``tool``).

        Raises:
            ValueError: a duplicate name.
        """

        def register(fn: UserFunctionT) -> UserFunctionT:
            prompt_name = name or fn.__name__
            if prompt_name in self._prompts:
                raise ValueError(f"prompt {prompt_name!r} is already registered")
            callable_ = _Callable(fn, describe=False, blocking=blocking)
            params = inspect.signature(fn).parameters
            args: list[JSONObject] = []
            required = set()
            for arg in callable_.names:
                entry: JSONObject = {"name": arg}
                if arguments and arg in arguments:
                    entry["description"] = arguments[arg]
                is_required = params[arg].default is inspect.Parameter.empty
                entry["required"] = is_required
                if is_required:
                    required.add(arg)
                args.append(entry)
            definition: JSONObject = {"name": prompt_name}
            if title is not None:
                definition["title"] = title
            doc = description if description is not None else inspect.getdoc(fn)
            if doc:
                definition["description"] = doc
            if args:
                definition["arguments"] = args
            if icons is not None:
                definition["icons"] = icons
            self._prompts[prompt_name] = _Prompt(callable_, definition, frozenset(required))
            self._list_cache.clear()
            return fn

        return register

    def completion(self) -> Callable[[UserFunctionT], UserFunctionT]:
        """Register the ``completion/complete`` handler.

        It is called as ``fn(ref, argument, context)`` with the request's ``ref`` and
        ``argument`` dicts and ``context.arguments`` (or ``None``), sync or async, and returns
        a list of strings (cut to 100) or a full ``{"completion": ...}`` dict.
        """

        def register(fn: UserFunctionT) -> UserFunctionT:
            self._completion = fn
            return fn

        return register

    # ---------------------------------------------------------------- lifespan

    async def start(self, *, transport: Literal["stdio", "http"] | None = None) -> None:
        """Enter the lifespan (if any) before serving; a nested ``start`` only counts.

        Every transport serving this server calls it (stdio around its session, HTTP at
        startup), so one process enters the lifespan once however many transports share it.
        ``transport``: which one calls (``transports`` keeps them; in-process use names none).

        Raises:
            Exception: what the lifespan raised on entry (the server must not serve then).
        """
        if transport is not None:
            self.transports.add(transport)
        self._starts += 1
        if self._starts > 1 or self.lifespan is None:
            return
        stack = contextlib.AsyncExitStack()
        try:
            self.lifespan_state = await stack.enter_async_context(self.lifespan(self))
        except BaseException:
            self._starts -= 1
            raise
        self._lifespan_exit = stack

    async def stop(self) -> None:
        """Leave the lifespan when the last ``start`` is matched (a ``stop`` without one does nothing)."""
        if self._starts == 0:
            return
        self._starts -= 1
        if self._starts == 0:
            self.transports.clear()  # a later start names its own
        if self._starts == 0 and self._lifespan_exit is not None:
            stack, self._lifespan_exit = self._lifespan_exit, None
            try:
                await stack.aclose()
            finally:
                self.lifespan_state = None

    # ----------------------------------------------------------------- sessions

    def capabilities(self) -> JSONObject:
        """The server capabilities this registry offers."""
        caps: JSONObject = {}
        if self._tools:
            caps["tools"] = {"listChanged": True}
        if self._resources or self._templates:
            caps["resources"] = {"subscribe": self.offer_subscribe, "listChanged": True}
        if self._prompts:
            caps["prompts"] = {"listChanged": True}
        if self._prompts or self._templates or self._completion is not None:
            caps["completions"] = {}
        if self.offer_logging:
            caps["logging"] = {}
        if self._task_tools:
            caps["extensions"] = {TASKS_EXTENSION: {}}
        return caps

    def server_info(self) -> JSONObject:
        """The ``Implementation`` object of this server."""
        info: JSONObject = {"name": self.name, "version": self.version}
        if self.title is not None:
            info["title"] = self.title
        return info

    def session_defaults(self) -> SessionDefaults:
        """What every new session machine is made from: the same object until something that
        an ``initialize`` reply holds changes (name, version, title, instructions, the kinds
        of things offered), then a new one. Sessions share its ``server_info`` and
        ``capabilities`` dicts (the session machine copies before it changes anything): an idle
        session holds no copy of its own."""
        key = (
            self.name,
            self.version,
            self.title,
            self.instructions,
            bool(self._tools),
            bool(self._resources or self._templates),
            bool(self._prompts),
            self._completion is not None,
            self.offer_logging,
            self.offer_subscribe,
            bool(self._task_tools),
        )
        shared = self._session_shared
        if shared is None or shared.key != key:
            shared = self._session_shared = SessionDefaults(
                key, self.server_info(), self.capabilities(), self.instructions, self.stateless_capabilities(), self.serves_listen
            )
        return shared

    def stateless_capabilities(self) -> JSONObject | None:
        """The capabilities of the 2026 era when they differ from ``capabilities()`` (``None``:
        the same; a server of ours declares one set)."""
        return None

    serves_listen: bool = True
    """Whether 2026 ``subscriptions/listen`` is served (an adapted app may not)."""

    def new_session(self, *, records: bool = True) -> ServerSession:
        """A fresh session machine declaring this server's capabilities (``records``: see ``ServerSession``)."""
        shared = self.session_defaults()
        return ServerSession(
            shared.server_info,
            shared.capabilities,
            instructions=shared.instructions,
            records=records,
            stateless_capabilities=shared.stateless_capabilities,
            serves_listen=shared.serves_listen,
        )

    def add_session_source(self, bring_in: Callable[[], object]) -> None:
        """Register a transport that holds sessions without a connection (the native HTTP lane
        opens sessions that never needed one): ``bring_in()`` gives each of them its
        connection, and is called before the server speaks to every session."""
        self._session_sources.append(bring_in)

    def _bring_in(self) -> None:
        for bring_in in self._session_sources:
            bring_in()

    def connect(self, *, records: bool = True) -> Connection:
        """A ``Connection`` (session machine + task runner) for one transport connection.

        ``records=False`` for a transport that writes the session machine's bytes in order and reads no
        ``Outgoing`` records (stdio): its session keeps only the bytes.
        """
        conn = Connection(
            self.new_session(records=records),
            self.routes,
            request_timeout=self.request_timeout,
            on_notification=self._notified,
            on_close=self._connections.discard,
        )
        self._connections.add(conn)
        return conn

    def _notified(self, conn: Connection, event: NotificationReceived) -> None:
        if event.method == m.NOTIFICATION_ROOTS_LIST_CHANGED and self._roots_changed is not None:
            conn.run_hook(self._roots_changed, "roots/list_changed")

    def connections(self) -> list[Connection]:
        """The open connections, as a list of their own (to send each session something)."""
        self._bring_in()
        return list(self._connections)

    def notify_resource_updated(self, uri: str) -> int:
        """Send ``notifications/resources/updated`` to every session subscribed to ``uri``.

        Returns:
            How many sessions were notified.
        """
        sent = 0
        for conn in list(self._connections):
            sent += conn.session.notify(m.NOTIFICATION_RESOURCES_UPDATED, {"uri": uri})
        return sent

    def notify_elicitation_complete(self, elicitation_id: str) -> int:
        """Send ``notifications/elicitation/complete`` to the session that started that URL elicitation.

        Returns:
            How many sessions were notified (0 for an unknown or already completed id).
        """
        return sum(conn.session.elicitation_complete(elicitation_id) for conn in list(self._connections))

    def tool_definition(self, name: object) -> JSONObject | None:
        """The ``Tool`` definition ``tools/list`` gives for ``name`` (``None``: no such tool)."""
        tool = self._tools.get(name) if isinstance(name, str) else None
        return tool.definition if tool is not None else None

    def remove_tool(self, name: str) -> bool:
        """Stop offering tool ``name`` (``tools/list`` no longer lists it, calls get -32602).

        Returns whether it was there. Tell clients with ``notify_list_changed("tools")``.
        """
        found = self._tools.pop(name, None) is not None
        if found:
            self._task_tools.discard(name)
            self._list_cache.clear()
        return found

    def remove_prompt(self, name: str) -> bool:
        """Stop offering prompt ``name``; returns whether it was there (then ``notify_list_changed("prompts")``)."""
        found = self._prompts.pop(name, None) is not None
        if found:
            self._list_cache.clear()
        return found

    def notify_list_changed(self, kind: str) -> int:
        """Send ``notifications/<kind>/list_changed`` (kind: tools, resources or prompts) to all sessions."""
        self._bring_in()
        sent = 0
        for conn in list(self._connections):
            sent += conn.session.notify(f"notifications/{kind}/list_changed")
        return sent

    # ----------------------------------------------------------------- dispatch

    def handle(self, request: InboundRequest, conn: Connection) -> RouteResult:
        """Serve one request the session machine admitted, as far as it can go without waiting.

        Returns:
            The result (a dict) when the request was served right away (plain sync handlers,
            the list methods...), or an awaitable of the result when work must wait (an
            ``async def`` handler, a ``blocking=True`` one in the thread pool, a client request).

        Raises:
            McpError: the JSON-RPC error to answer with.
        """
        return self.routes[request.method](request, conn)

    async def dispatch(self, request: InboundRequest, conn: Connection) -> JSONObject:
        """Serve one request the session machine admitted; returns the result (``handle``, awaited).

        Raises:
            McpError: the JSON-RPC error to answer with.
        """
        outcome = self.handle(request, conn)
        if type(outcome) is dict or not inspect.isawaitable(outcome):
            return outcome
        return await outcome

    def on_roots_changed(self) -> Callable[[UserFunctionT], UserFunctionT]:
        """Register the handler of ``notifications/roots/list_changed`` (handshake-era clients).

        It is called as ``fn(conn)`` (sync, or ``async def`` run in a task of that connection)
        with the ``Connection`` whose client sent the notification; ``await conn.list_roots()``
        fetches the new roots. Errors are logged. 2026-07-28 has no such notification (roots
        travel inside ``InputRequiredResult`` rounds there).
        """

        def register(fn: UserFunctionT) -> UserFunctionT:
            self._roots_changed = fn
            return fn

        return register

    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        """The thread pool of ``blocking=True`` handlers (created on first use)."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(self.blocking_workers, thread_name_prefix="mcpfast-blocking")
        return self._executor

    def _run(
        self,
        callable_: _Callable,
        args: JSONObject,
        ctx: Context | None,
        binding: str,
        finish: Finish[_Subject],
        subject: _Subject,
        version: str,
        failed: Failed[_Subject] | None = None,
    ) -> RouteResult:
        """Call a handler and shape its value: the result at once for a plain sync one (inline,
        no task), else an awaitable of it.

        ``finish(subject, value, version)`` makes the result; what a handler that raised
        answers is ``_failure``'s.
        """
        if callable_.inline:
            try:
                if ctx is None and args.keys() <= callable_.name_set:  # the usual case: the arguments as they came
                    value = callable_.fn(**args)
                else:
                    value = callable_.fn(**callable_.kwargs(args, ctx))
            except Exception as exc:
                return self._failure(exc, ctx, binding, subject, failed)
            return finish(subject, value, version)
        if callable_.is_async:
            return self._run_async(callable_, args, ctx, binding, finish, subject, version, failed)
        running = callable_.call(args, ctx, self.executor())
        return _later(running, lambda value: finish(subject, value, version), lambda exc: self._failure(exc, ctx, binding, subject, failed))

    async def _run_async(
        self,
        callable_: _Callable,
        args: JSONObject,
        ctx: Context | None,
        binding: str,
        finish: Finish[_Subject],
        subject: _Subject,
        version: str,
        failed: Failed[_Subject] | None,
    ) -> JSONObject:
        """``_run`` of an ``async def``: its call, failure and result in one coroutine (the
        connection drives it inline up to its first wait)."""
        try:
            value = await callable_.fn(**callable_.kwargs(args, ctx))
        except Exception as exc:
            return self._failure(exc, ctx, binding, subject, failed)
        return finish(subject, value, version)

    def _failure(self, exc: Exception, ctx: Context | None, binding: str, subject: _Subject, failed: Failed[_Subject] | None) -> JSONObject:
        """A handler raised: a question it asked (2026 MRTR) is an ``InputRequiredResult``; an
        ``McpError`` is raised on (the JSON-RPC error), as is anything else unless ``failed``
        makes it a result (``failed(subject, exc)``: a tool's ``isError`` result)."""
        if isinstance(exc, InputRequired):
            return self._input_required(ctx, exc, binding)
        if failed is None or isinstance(exc, McpError):
            raise exc
        return failed(subject, exc)

    def _listing(self, kind: str, version: str, definition: str, items: list[JSONObject]) -> list[JSONObject]:
        key = (kind, version)
        cached = self._list_cache.get(key)
        if cached is None:
            cached = self._list_cache[key] = [_shape(item, version, definition) for item in items]
        return cached

    def _page(self, request: InboundRequest, kind: str, definition: str, items: list[JSONObject]) -> JSONObject:
        listing = self._listing(kind, request.version, definition, items)
        cursor = request.params.get("cursor") if request.raw_params is not None else None
        page, next_cursor = paginate(listing, cursor, self.page_size)
        result: JSONObject = {kind: list(page)}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        return result

    def _context(self, conn: Connection, request: InboundRequest, callable_: _Callable, binding: str) -> Context | None:
        if callable_.context_param is None:
            return None
        if not request.stateless:
            return Context(conn, request)
        # A 2026 retry: answers of earlier rounds come sealed in requestState, this round's in
        # inputResponses.
        params = request.params
        responses: JSONObject = {}
        resumed = "requestState" in params
        if resumed:
            responses.update(self.sealer.open(binding, params["requestState"]))  # -32602 when forged
        if "inputResponses" in params:
            given = params["inputResponses"]
            if not isinstance(given, dict):  # null included: an absent round is sent without the member
                raise McpError(INVALID_PARAMS, "inputResponses must be an object")
            responses.update(given)
        return Context(conn, request, responses, resumed=resumed)

    def _input_required(self, ctx: Context | None, need: InputRequired, binding: str) -> JSONObject:
        assert ctx is not None
        return input_required_result(need.requests, self.sealer.seal(binding, ctx._responses))

    def _tools_list(self, request: InboundRequest, conn: Connection) -> JSONObject:
        return self._page(request, "tools", "Tool", [t.definition for t in self._tools.values()])

    def _tools_call(self, request: InboundRequest, conn: Connection) -> RouteResult:
        params = request.params
        name = params.get("name")
        if not isinstance(name, str):
            raise McpError(INVALID_PARAMS, "tools/call needs a string name")
        tool = self._tools.get(name)
        if tool is None:
            raise McpError(INVALID_PARAMS, f"unknown tool: {name}")
        args = params.get("arguments")
        if args is None:
            args = {}
        problem = _argument_problem(tool, args)
        if problem is not None:
            if input_errors_are_tool_errors(request.version):
                return _invalid_arguments(name, problem)
            raise McpError(INVALID_PARAMS, f"invalid arguments for tool {name}: {problem}")
        if tool.task is not None:
            if negotiated(request):
                return self._tools_call_task(tool, args, request, conn)
            if tool.task == "required":
                if request.stateless:
                    raise tasks_required(f"tool {name}")
                raise McpError(INVALID_PARAMS, f"tool {name} runs only as a task ({TASKS_EXTENSION}, 2026-07-28)")
        callable_ = tool.callable
        if args.keys() <= callable_.name_set:
            if tool.plain:
                value = self._call_plain(tool, args, request.version)
                # a str here is exactly a str (_call_plain): mypy does not narrow the else of type() is
                return text_result(value) if type(value) is str else value  # type: ignore[return-value]
            if tool.plain_async:
                return self._call_plain_async(tool, args, request.version)
        if callable_.context_param is None:
            ctx = None
            binding = ""
        else:
            binding = f"tools/call:{name}"
            ctx = self._context(conn, request, callable_, binding)
        # A tool failure is a result the model can see (_tool_failed), not a protocol error.
        return self._run(callable_, args, ctx, binding, self._tool_result, tool, request.version, self._tool_failed)

    def _call_plain(self, tool: _Tool, args: JSONObject, version: str) -> JSONObject | str:
        """``_run`` without its two calls (the handler's and the shaping's), worth 8% of a
        request: the same call, the same failure (``_failure``), the same result; but a str
        the tool returned comes back as it is, the text of a result of one text content
        (``text_result``), for the caller that encodes it without the dict."""
        try:
            value = tool.callable.fn(**args)
        except Exception as exc:
            return self._failure(exc, None, "", tool, self._tool_failed)
        if type(value) is str:
            return value
        return self._tool_result(tool, value, version)

    async def _call_plain_async(self, tool: _Tool, args: JSONObject, version: str) -> JSONObject:
        """``_call_plain`` of an ``async def``: ``_run``'s call, failure and result, in one
        coroutine rather than three (the function's, ``_Callable.call``'s and ``_later``'s)."""
        try:
            value = await tool.callable.fn(**args)
        except Exception as exc:
            return self._failure(exc, None, "", tool, self._tool_failed)
        if type(value) is str:
            return text_result(value)
        return self._tool_result(tool, value, version)

    def run_plain_tool(self, name: str, arguments: JSONValue, version: str) -> PlainOutcome | None:
        """Serve a handshake-era ``tools/call`` of a plain sync tool without a session machine
        step, as the native HTTP server's lane does for a session with nothing in flight.

        Returns the result; or a str, the result ``text_result`` makes of it (one text
        content); or ``(code, message, data)``, the JSON-RPC error ``tools/call``
        answers; or ``None`` when the call is not one of those (another tool, arguments the
        function does not take, tools/call served by another route): nothing ran, and the
        session machine serves it.
        """
        return self._run_plain(name, arguments, version, False)  # type: ignore[return-value]  # never a PendingCall

    def run_tool_inline(self, name: str, arguments: JSONValue, version: str) -> PlainOutcome | PendingCall | None:
        """``run_plain_tool`` for a plain ``async def`` tool too: the coroutine is run here, to
        its first wait (``mcpfast.server.inline``).

        Returns what ``run_plain_tool`` returns, for a sync tool and for an ``async def`` that
        finished without waiting; a ``PendingCall`` when it waits (its outcome, of the same
        shapes, comes later); ``None`` when nothing ran (not a plain tool call).
        """
        return self._run_plain(name, arguments, version, True)

    def _run_plain(self, name: str, arguments: JSONValue, version: str, run_async: bool) -> PlainOutcome | PendingCall | None:
        """``run_tool_inline``, and ``run_plain_tool`` when not ``run_async``."""
        tool = self._tools.get(name)
        if tool is None or self.routes.get(_TOOLS_CALL) is not self._tools_call_route:
            return None
        plain = tool.plain
        if not plain and not (run_async and tool.plain_async):
            return None
        if arguments is None:
            arguments = {}
        elif type(arguments) is not dict or not arguments.keys() <= tool.callable.name_set:
            return None
        try:
            check = tool.check
            if check is None or not check(arguments):  # the compiled check failed: say why
                refused = _refused_arguments(tool, name, arguments, version)
                if refused is not None:
                    return refused
            if plain:
                return self._call_plain(tool, arguments, version)
        except McpError as exc:
            return (exc.code, exc.message, exc.data)
        except Exception:
            logger.exception("handler for %s failed", _TOOLS_CALL)
            return (INTERNAL_ERROR, "internal error", None)
        try:
            running = inline.start(tool.callable.fn(**arguments))
        except Exception as exc:  # the call itself failed (an argument it cannot take): the tool's failure
            return self._plain_outcome(tool, version, None, exc)
        finished = running.finished()
        if finished is None:
            return PendingCall(self, tool, version, running)
        value = finished[0]
        if type(value) is str:  # the usual case, answered as _plain_outcome would
            return value
        return self._plain_outcome(tool, version, value, finished[1])

    def _plain_outcome(self, tool: _Tool, version: str, value: object, exc: BaseException | None) -> PlainOutcome:
        """What a plain ``async def`` tool's outcome answers, as ``run_plain_tool`` answers a sync one's."""
        try:
            if exc is None:
                if type(value) is str:
                    return value
                return self._tool_result(tool, value, version)
            if isinstance(exc, Exception):
                return self._failure(exc, None, "", tool, self._tool_failed)
        except McpError as error:
            return (error.code, error.message, error.data)
        except Exception:
            logger.exception("handler for %s failed", _TOOLS_CALL)
        # (a CancelledError the tool raised of its own: its bug, answered as one)
        return (INTERNAL_ERROR, "internal error", None)

    async def _tools_call_task(self, tool: _Tool, args: JSONObject, request: InboundRequest, conn: Connection) -> JSONObject:
        """A tools/call that may become a task (the client declared the extension)."""
        callable_ = tool.callable
        name = tool.definition["name"]
        binding = f"tools/call:{name}"
        given: JSONObject = {}  # answers this request carries (MRTR rounds before the task)
        resumed = False
        if callable_.context_param is not None:
            first = self._context(conn, request, callable_, binding)  # -32602 for a forged requestState
            assert first is not None
            given, resumed = first._responses, first.resumed
        tasks = self.tasks
        executor = self.executor() if callable_.blocking else None

        async def invoke(run: _Run, answers: JSONObject) -> object:
            ctx = None
            if callable_.context_param is not None:
                ctx = Context(conn, request, {**given, **answers}, resumed=resumed)
                ctx._start_task = functools.partial(tasks.start, run)
            return await callable_.call(args, ctx, executor)

        def ask(answers: JSONObject, need: InputRequired) -> JSONObject:
            return input_required_result(need.requests, self.sealer.seal(binding, {**given, **answers}))

        return await tasks.run(
            tasks.owner_of(conn), not tool.defer_task, invoke,
            functools.partial(self._tool_result, tool, version=request.version), functools.partial(self._tool_failed, tool), ask,
        )  # fmt: skip

    def _tasks_method(self, request: InboundRequest, conn: Connection) -> RouteResult:
        """``tasks/get``, ``tasks/update`` and ``tasks/cancel`` (-32021 unless the request declares the extension)."""
        if not negotiated(request):
            raise tasks_required(request.method)
        params = request.params
        if not isinstance(params, dict):
            raise McpError(INVALID_PARAMS, f"{request.method} needs params")
        owner = self.tasks.owner_of(conn)
        if request.method == m.TASKS_GET:
            return self.tasks.get(owner, params)
        if request.method == m.TASKS_UPDATE:
            return self.tasks.update(owner, params)
        return self.tasks.cancel(owner, params)

    @staticmethod
    def _tool_failed(tool: _Tool, exc: Exception) -> JSONObject:
        logger.info("tool %s failed: %r", tool.definition["name"], exc)
        return {"content": [{"type": "text", "text": str(exc) or type(exc).__name__}], "isError": True}

    def _tool_result(self, tool: _Tool, value: object, version: str) -> JSONObject:
        if type(value) is str and tool.output_schema is None:
            return text_result(value)
        if isinstance(value, ToolResult):
            result: JSONObject = {"content": value.content}
            if value.structured is not None and supports(version, V2025_06_18):
                result["structuredContent"] = value.structured
            if value.is_error:
                result["isError"] = True
            if value.meta is not None:
                result["_meta"] = value.meta
            return result
        if tool.output_schema is not None:
            data = _jsonify(value)
            structured = {"result": data} if tool.wrap_output else data
            if self.validate_output and tool.output_validator is not None:
                error = next(iter(tool.output_validator.iter_errors(structured)), None)
                if error is not None:
                    raise McpError(
                        INTERNAL_ERROR,
                        f"tool {tool.definition['name']} returned output that does not match its outputSchema: {error.message}",
                    )
            text = orjson.dumps(structured).decode()
            result = {"content": [{"type": "text", "text": text}]}
            if supports(version, V2025_06_18):
                result["structuredContent"] = structured
            return result
        return {"content": _content(value)}

    def _resources_list(self, request: InboundRequest, conn: Connection) -> JSONObject:
        return self._page(request, "resources", "Resource", [r.definition for r in self._resources.values()])

    def _templates_list(self, request: InboundRequest, conn: Connection) -> JSONObject:
        return self._page(request, "resourceTemplates", "ResourceTemplate", [t.definition for t in self._templates])

    def _find_resource(self, uri: object, version: str) -> tuple[_Resource, dict[str, str]]:
        if not isinstance(uri, str):
            raise McpError(INVALID_PARAMS, "uri must be a string")
        resource = self._resources.get(uri)
        if resource is not None:
            return resource, {}
        for template in self._templates:
            assert template.template is not None
            variables = template.template.match(uri)
            if variables is not None:
                return template, variables
        raise McpError(resource_not_found_code(version), "Resource not found", {"uri": uri})

    def _resources_read(self, request: InboundRequest, conn: Connection) -> RouteResult:
        uri = request.params.get("uri")
        resource, variables = self._find_resource(uri, request.version)
        assert isinstance(uri, str)
        binding = f"resources/read:{uri}"
        ctx = self._context(conn, request, resource.callable, binding)
        return self._run(resource.callable, variables, ctx, binding, _resource_result, (uri, resource.mime_type), request.version)

    def _subscribe(self, request: InboundRequest, conn: Connection) -> JSONObject:
        uri = request.params.get("uri")
        self._find_resource(uri, request.version)
        assert isinstance(uri, str)  # _find_resource refused any other
        conn.session.subscribe(uri)
        return {}

    def _unsubscribe(self, request: InboundRequest, conn: Connection) -> JSONObject:
        uri = request.params.get("uri")
        if not isinstance(uri, str):
            raise McpError(INVALID_PARAMS, "uri must be a string")
        conn.session.unsubscribe(uri)
        return {}

    def _prompts_list(self, request: InboundRequest, conn: Connection) -> JSONObject:
        return self._page(request, "prompts", "Prompt", [p.definition for p in self._prompts.values()])

    def _prompts_get(self, request: InboundRequest, conn: Connection) -> RouteResult:
        params = request.params
        name = params.get("name")
        prompt = self._prompts.get(name) if isinstance(name, str) else None
        if prompt is None:
            raise McpError(INVALID_PARAMS, f"unknown prompt: {name}")
        args = params.get("arguments") or {}
        if not isinstance(args, dict) or not all(isinstance(v, str) for v in args.values()):
            raise McpError(INVALID_PARAMS, "prompt arguments must be an object of strings")
        missing = prompt.required - args.keys()
        if missing:
            raise McpError(INVALID_PARAMS, f"missing required arguments: {', '.join(sorted(missing))}")
        binding = f"prompts/get:{name}"
        ctx = self._context(conn, request, prompt.callable, binding)
        return self._run(prompt.callable, args, ctx, binding, _prompt_result, prompt, request.version)

    def _complete(self, request: InboundRequest, conn: Connection) -> RouteResult:
        params = request.params
        ref = params.get("ref")
        argument = params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise McpError(INVALID_PARAMS, "completion/complete needs ref and argument objects")
        if not isinstance(argument.get("name"), str) or not isinstance(argument.get("value"), str):
            raise McpError(INVALID_PARAMS, "argument needs string name and value")
        kind = ref.get("type")
        if kind == "ref/prompt":
            prompt = self._prompts.get(ref.get("name"))  # type: ignore[arg-type]  # a name that is no str finds no prompt
            if prompt is None:
                raise McpError(INVALID_PARAMS, f"unknown prompt: {ref.get('name')}")
        elif kind == "ref/resource":
            uri = ref.get("uri")
            if uri not in self._resources and not any(t.definition["uriTemplate"] == uri for t in self._templates):
                raise McpError(INVALID_PARAMS, f"unknown resource or template: {uri}")
        else:
            raise McpError(INVALID_PARAMS, f"unknown ref type: {kind}")
        if self._completion is None:
            return completion_result([])
        context = params.get("context")
        context_args = context.get("arguments") if isinstance(context, dict) else None
        value = self._completion(ref, argument, context_args)
        if inspect.isawaitable(value):
            return _completion_later(value)
        return _completion_value(value)


async def _later(
    running: Awaitable[object], done: Callable[[object], JSONObject], failure: Callable[[Exception], JSONObject]
) -> JSONObject:
    """A handler that must wait, awaited: ``done(value)``, or ``failure(exc)`` if it raised."""
    try:
        value = await running
    except Exception as exc:  # CancelledError is a BaseException: it is not caught here
        return failure(exc)
    return done(value)


async def _completion_later(value: Awaitable[CompletionValue]) -> JSONObject:
    return _completion_value(await value)


def _completion_value(value: CompletionValue) -> JSONObject:
    if isinstance(value, dict) and "completion" in value:
        return value
    return completion_result([str(v) for v in value or ()])


def _resource_result(subject: tuple[str, str | None], value: object, version: str) -> JSONObject:
    uri, mime_type = subject
    return {"contents": _contents(value, uri, mime_type)}


def _prompt_result(prompt: _Prompt, value: object, version: str) -> JSONObject:
    if isinstance(value, dict) and "messages" in value:
        return value
    result: JSONObject = {"messages": _messages(value)}
    if "description" in prompt.definition:
        result["description"] = prompt.definition["description"]
    return result


# ------------------------------------------------------------------- helpers


def _shape(item: JSONObject, version: str, definition: str) -> JSONObject:
    # Fields added in later revisions are dropped for older clients (their schemas are the list).
    fields = known_fields(version, definition)
    if not fields or all(k in fields for k in item):
        shaped = item
    else:
        shaped = {k: v for k, v in item.items() if k in fields}
    if definition == "Prompt" and "arguments" in shaped:
        arg_fields = known_fields(version, "PromptArgument")
        shaped = dict(shaped)
        shaped["arguments"] = [{k: v for k, v in a.items() if k in arg_fields} for a in shaped["arguments"]]
    return shaped


def _output_schema(fn: UserFunction, *, forced: bool) -> tuple[JSONObject | None, bool]:
    hints = get_type_hints(fn, include_extras=True)
    if "return" not in hints:
        return None, False
    ret = hints["return"]
    if ret in (None, type(None), str, ToolResult, Any) or (ret is str and not forced):
        return None, False
    try:
        schema = type_schema(ret)
    except TypeError:
        if forced:
            raise
        return None, False
    if not forced and schema.get("additionalProperties", {}) == {} and "properties" not in schema and schema.get("type") == "object":
        # A bare dict says nothing about the output (and is how content blocks are typed).
        return None, False
    if schema.get("type") == "object":
        return schema, False
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}, True


def _jsonify(value: object) -> JSONValue:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _is_block(value: object) -> TypeGuard[JSONObject]:
    return isinstance(value, dict) and value.get("type") in _CONTENT_TYPES


def _content(value: object) -> list[JSONObject]:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if _is_block(value):
        return [value]
    if isinstance(value, list | tuple) and value and all(_is_block(v) or isinstance(v, str) for v in value):
        return [v if _is_block(v) else {"type": "text", "text": v} for v in value]
    return [{"type": "text", "text": orjson.dumps(_jsonify(value)).decode()}]


def _contents(value: object, uri: str, mime_type: str | None) -> list[JSONObject]:
    if isinstance(value, str):
        return [{"uri": uri, "mimeType": mime_type or "text/plain", "text": value}]
    if isinstance(value, bytes | bytearray):
        import base64

        return [{"uri": uri, "mimeType": mime_type or "application/octet-stream", "blob": base64.b64encode(value).decode()}]
    if isinstance(value, dict):
        return [{"uri": uri, **value}]
    if isinstance(value, list):
        return [{"uri": uri, **v} if "uri" not in v else v for v in value]
    raise McpError(INTERNAL_ERROR, f"resource handler returned {type(value).__name__}, not str, bytes or contents")


def _messages(value: object) -> list[JSONObject]:
    items = value if isinstance(value, list) else [value]
    out: list[JSONObject] = []
    for item in items:
        if isinstance(item, str):
            out.append({"role": "user", "content": {"type": "text", "text": item}})
        elif isinstance(item, dict) and "role" in item:
            out.append(item)
        elif _is_block(item):
            out.append({"role": "user", "content": item})
        else:
            raise McpError(INTERNAL_ERROR, f"prompt returned {type(item).__name__}, not a message")
    return out
