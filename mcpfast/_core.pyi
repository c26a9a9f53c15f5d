"""Typed surface of the compiled core, ``mcpfast._core``.

The pure-Python twin (``mcpfast.core._python``) exposes exactly the same names with the same
behaviour; ``mcpfast.core`` picks one of the two. Everything below is the contract both honour.

JSON model (both implementations): the JSON accepted is RFC 8259 as orjson reads it: no BOM,
no NaN/Infinity, no trailing commas, no lone surrogates, UTF-8 only; a number with a fraction or
an exponent is a float, and one whose magnitude overflows a double is an error; an integer
outside the 64-bit range becomes a float *inside* params/result (as orjson does), but an
``id`` is always kept exact, big integers included. Duplicate keys: the last one wins.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, final

from typing_extensions import Buffer

from mcpfast._errors import FrameTooLarge, JsonRpcError

__version__: Final[str]
build_profile: Final[str]

DEFAULT_MAX_DEPTH: Final[int]
"""Default nesting limit for ``decode``/``scan_reply`` (the top-level object counts as 1)."""
DEFAULT_MAX_LINE: Final[int]
"""Default ``LineFramer`` limit in bytes (4 MiB)."""
DEFAULT_MAX_EVENT: Final[int]
"""Default ``SseDecoder`` limit in bytes (4 MiB)."""

Id = int | str
Kind = Literal["request", "notification", "result", "error"]
EngineTransport = Literal["http", "stdio"]
EngineFamily = Literal["tools_call", "handshake", "session_churn", "sse_streaming", "mixed", "hold", "discover", "tasks", "agents"]
StepOrder = Literal["sequence", "weighted"]
# an ``agents`` step's use: (at: a JSON pointer into its params, the step read, how, the pointer or the expression)
StepUse = tuple[str, int, Literal["pointer", "regex"], str]
NewConnection = Literal["keep", "session", "request"]
Arrivals = Literal["uniform", "poisson"]

@final
class Message:
    """One decoded JSON-RPC message. Immutable; ``params``/``result``/``error`` are parsed lazily.

    Attributes:
        kind: ``"request"``, ``"notification"``, ``"result"`` or ``"error"``.
        id: the id exactly as sent (int of any size, or str); ``None`` for a notification and for
            an error reply whose id is null.
        method: the method name for requests and notifications, else ``None``.
    """

    @property
    def kind(self) -> Kind: ...
    @property
    def id(self) -> Id | None: ...
    @property
    def method(self) -> str | None: ...
    @property
    def params(self) -> dict[str, Any] | list[Any] | None:
        """``params`` parsed on first access (cached); ``None`` when absent."""
    def param(self, key: str, default: Any = None) -> Any:
        """One member of an object ``params``, parsed alone; ``default`` when absent or when params
        is missing or an array. The hot path for routing (``tools/call`` reads ``name`` and
        ``arguments`` only): the rest of params is never turned into Python objects."""
    @property
    def raw_params(self) -> bytes | None:
        """The exact bytes of ``params`` as sent, or ``None`` when absent."""
    @property
    def result(self) -> Any:
        """``result`` parsed on first access (``None`` unless kind is ``"result"``)."""
    @property
    def raw_result(self) -> bytes | None:
        """The exact bytes of ``result``, or ``None`` unless kind is ``"result"``."""
    @property
    def error(self) -> dict[str, Any] | None:
        """The ``error`` object (``code``, ``message``, maybe ``data``), or ``None``."""
    @property
    def raw(self) -> bytes:
        """The exact bytes of the whole message (one element's bytes for a batch element)."""
    def __repr__(self) -> str: ...

def decode(data: bytes | bytearray | memoryview | str, max_depth: int = ...) -> Message | list[Message | JsonRpcError]:
    """Decode and validate one JSON-RPC 2.0 message or batch.

    A JSON object gives a ``Message``. A non-empty JSON array gives a list with one entry per
    element: a ``Message``, or a ``JsonRpcError`` *instance* (not raised) for an element that is
    not a valid message, so that a server can answer every element of a batch.

    Raises:
        JsonRpcError: code -32700 (id ``None``) when ``data`` is not JSON, not UTF-8, or nested
            deeper than ``max_depth``; code -32600 when it is JSON but not a JSON-RPC message
            (wrong ``jsonrpc``, bad id type, ``method`` not a string, both or neither of
            ``result``/``error``, params not structured, an empty batch, a scalar), with ``id``
            set when a valid id could be read.
        ValueError: ``max_depth`` < 1.
    """

def encode_request(id: Id, method: str, params: Any = None) -> bytes:
    """``{"jsonrpc":"2.0","id":…,"method":…,"params":…}``; params omitted when ``None``.

    ``params`` may be bytes holding JSON already encoded: they are spliced in as they are.

    Raises:
        TypeError: an id that is not int/str (bool is not an id), or a value JSON cannot hold.
    """

def encode_notification(method: str, params: Any = None) -> bytes:
    """``{"jsonrpc":"2.0","method":…,"params":…}``; params omitted when ``None``; bytes spliced."""

def encode_result(id: Id, result: Any) -> bytes:
    """``{"jsonrpc":"2.0","id":…,"result":…}``; a bytes ``result`` is spliced without re-parsing.

    The id is written back exactly as received (big integers included). Output is compact and
    on one line: raw CR/LF whitespace in spliced bytes is turned into spaces.

    Raises:
        TypeError: a bad id, or a value JSON cannot hold (non-str dict key, an integer outside
            64 bits, nesting deeper than 254, an unsupported type).
    """

def encode_error(id: Id | None, code: int, message: str, data: Any = None) -> bytes:
    """``{"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…,"data":…}}``; data omitted if None."""

def scan_reply(data: bytes | bytearray | memoryview | str, max_depth: int = ...) -> tuple[Id | None, bool, int | None]:
    """Client fast path: ``(id, is_error, error_code)`` of a reply, building nothing for the result.

    The whole input is still checked to be valid JSON.

    Raises:
        JsonRpcError: -32700 for invalid JSON; -32600 when the message is not a reply
            (a request, a notification, a batch, or a malformed reply).
    """

@final
class LineFramer:
    """Splits a byte stream into newline-delimited messages (stdio framing).

    Lines end at LF; one CR right before the LF is dropped; empty lines are skipped. A line longer
    than ``max_size`` bytes (terminator excluded) is dropped and reported as a ``FrameTooLarge``
    item whose ``size`` is the full line length; framing resumes after its LF.
    """

    def __new__(cls, max_size: int = ...) -> LineFramer: ...
    @property
    def max_size(self) -> int: ...
    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete line (0 while discarding an oversized one)."""
    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes | FrameTooLarge]:
        """Returns the complete lines (without terminator) and oversize reports, in order."""
    def close(self) -> list[bytes | FrameTooLarge]:
        """End of stream: the unterminated last line, if any, as a line or an oversize report."""

@final
class StdioLane:
    """The stdio transport's short way for sync tool calls: ``LineFramer.feed`` that answers
    lines itself.

    Once told which session it answers for (``serve``), ``feed`` answers, in order, the lines
    it can (a ``tools/call`` whose params are the tool's name and arguments alone, with an id
    not in ``in_flight``), calling ``run_tool(name, arguments, version)`` (a result dict, a str
    for a result of one text content, ``(code, message, data)``, or ``None``: not served here).
    The replies are the session machine's bytes for those lines: those the lane does not write
    itself are made by the session machine's ``unencodable_result(id, exc, what)`` (a result
    JSON cannot hold) and ``error_reply(id, code, message, data, what)`` (an error whose data
    JSON cannot hold, say), ``what`` naming the call as its log lines do. The pure-Python core
    answers no line: it frames.
    """

    def __new__(
        cls,
        max_line: int,
        run_tool: Callable[[str, Any, str], dict[str, Any] | str | tuple[int, str, Any] | None],
        unencodable_result: Callable[[int | str, BaseException, str], bytes],
        error_reply: Callable[[int | str, int, str, Any, str], bytes],
    ) -> StdioLane: ...
    def serve(self, version: str, in_flight: Mapping[Any, Any]) -> None:
        """Answer plain ``tools/call`` lines from now on, for a session of ``version`` (one that
        serves ``tools/call`` directly) whose requests in flight are ``in_flight`` (a dict)."""
    def feed(self, data: bytes) -> bytes | tuple[bytes, list[bytes | FrameTooLarge]]:
        """The replies (each line ended by a newline) when every line of ``data`` was answered;
        else ``(replies, rest)``: the replies to the lines before the first one left to the
        session machine, then that line and those after it as ``LineFramer.feed`` gives them."""
    def close(self) -> bytes | tuple[bytes, list[bytes | FrameTooLarge]]:
        """``feed`` at the end of the stream: the unterminated last line (``LineFramer.close``)."""
    @property
    def answered(self) -> int:
        """Lines answered by the lane since it was made."""

@final
class HttpLane:
    """The native HTTP server's short way for plain tool calls of sessions it knows.

    ``feed`` frames a connection's bytes like ``parse_http`` and answers, in order, the requests
    it can (a ``tools/call`` of a session added with ``add_session``, whose ``Host``, ``Accept``,
    ``Content-Type`` and ``Origin`` values were ``learn``-ed and whose ``MCP-Protocol-Version``
    is absent or one of ``versions``), calling ``run_tool(name, arguments, version)`` (a result
    dict, a str for a result of one text content, ``(code, message, data)``, ``None``: not
    served here, or with ``allow_waiting`` a call that waits). The replies it does not write
    itself are the session machine's ``unencodable_result(id, exc, what)`` (a result JSON
    cannot hold) and ``error_reply(id, code, message, data, what)``; ``clock()`` gives the
    ``date`` header line. With ``require_tokens``, it answers only requests whose bearer token
    ``learn_token`` told it of; with ``count_into``, it counts what it answers.
    """

    def __new__(
        cls,
        path: str,
        versions: list[str],
        json_head: bytes,
        run_tool: Callable[[str, Any, str], object],
        unencodable_result: Callable[[int | str, BaseException, str], bytes],
        error_reply: Callable[[int | str, int, str, Any, str], bytes],
        clock: Callable[[], bytes],
        max_head: int,
        max_body: int,
    ) -> HttpLane: ...
    def learn(self, headers: dict[bytes, bytes]) -> None:
        """Remember the ``Host``, ``Accept``, ``Content-Type`` and ``Origin`` values of a request the full path accepted."""
    def add_session(
        self, session_id: str, session: object, in_flight: Mapping[Any, Any], version: str, principal: str | None = None
    ) -> None:
        """Serve sync tool calls of this session (``session.last_seen`` is set on each one), to
        callers whose token's subject is ``principal`` (``None``: no authentication)."""
    def drop_session(self, session_id: str) -> None:
        """Forget a session."""
    def allow_births(
        self,
        defaults: Callable[[], object],
        held: dict[str, Any],
        max_sessions: int,
        idle_timeout: float,
        id_bytes: int,
        opened_head: bytes,
        id_mark: bytes,
        accepted_head: bytes,
        ended_head: bytes,
    ) -> None:
        """Let the lane open sessions itself: answer ``initialize`` with a learned reply while
        ``defaults()`` returns the object it was learned under, and ``notifications/initialized``,
        sync tool calls and an empty ``DELETE`` of the sessions it opened, keeping them (with the
        ``held`` dict's) to ``max_sessions``; an unused one ends after ``idle_timeout`` seconds.
        Ids are ``id_bytes`` random bytes in base64url. ``opened_head`` is an ``initialize``
        reply's head with ``id_mark`` where the id goes; ``accepted_head`` and ``ended_head``
        those of a 202 and of a ``DELETE``'s 200 (each up to its length)."""
    def allow_stateless(self, versions: list[str], serve: Callable[[str, Any, str, int | str], object]) -> None:
        """Answer 2026-07-28 ``tools/call`` requests in ``versions`` whose ``Mcp-Method`` and
        ``Mcp-Name`` agree with the body (no ``Mcp-Param-*`` header) and whose ``_meta`` is the
        version, client capabilities and maybe client info: ``serve(name, arguments, version,
        id)`` returns ``None`` (nothing ran: the full path serves it), ``(status, head, body)``,
        or (with ``allow_waiting``) the answer the server waits for, of a call that waits."""
    def allow_waiting(self, kind: type, adopt: Callable[[Any, Any, bytes], object]) -> None:
        """Serve calls that wait too: ``run_tool`` may return a ``kind`` (an ``async def``
        tool's call still running), which the lane hands to ``adopt(call, session, body)``
        (``session``: ``add_session``'s object, the id of a session the lane opened, or
        ``None`` when it ended meanwhile); what ``adopt`` returns (and what ``serve`` returns
        that is not a reply tuple) is the answer the server waits for (``feed``'s ``waiting``)."""
    def count_waited(self, status: int, seconds: float) -> None:
        """Count a ``tools/call`` handed back waiting, its reply written with ``status``
        ``seconds`` after its request came (nothing without ``count_into``)."""
    def require_tokens(self, max: int = ...) -> None:
        """Answer only requests with a bearer token the full path verified (``learn_token``), at
        most ``max`` held; the lane then opens no session itself."""
    def learn_token(self, authorization: bytes, subject: str, until: float) -> bool:
        """Admit the token of ``authorization`` (exactly ``Bearer <token>``) for ``subject`` until
        the Unix time ``until``: whether it is held."""
    def forget_token(self, authorization: bytes) -> None:
        """Admit the token of ``authorization`` no more."""
    def forget_tokens(self) -> None:
        """Admit no token held so far."""
    @property
    def tokens(self) -> int:
        """Bearer tokens held."""
    def count_into(self, bounds: list[int], cells: Buffer | None = None) -> None:
        """Count what it answers from now on, by label and status, with a histogram of its
        times over ``bounds`` (nanoseconds): in ``cells`` (``tally_cells(bounds)`` zeroed
        64-bit items, e.g. a file's ``mmap`` cast to ``'Q'``) or in its own memory."""
    @staticmethod
    def tally_cells(bounds: list[int]) -> int:
        """The 64-bit cells a tally over ``bounds`` takes."""
    def tally(self) -> tuple[list[tuple[str, int, int]], list[int], list[int], int] | None:
        """``(requests, bounds, buckets, nanos)``: ``(label, status, count)`` per kind of request
        answered, the requests per bucket (not cumulative; the last past every bound) and the sum
        of their times; ``None`` without ``count_into``."""
    @staticmethod
    def read_tally(cells: Buffer) -> tuple[list[tuple[str, int, int]], list[int], list[int], int] | None:
        """``tally()`` of another lane's cells (``None``: no tally there yet)."""
    def learn_initialize(self, requested: str, version: str, result: bytes, tools: bool, defaults: object) -> None:
        """The full path answered an ``initialize`` asking for ``requested`` with ``result`` (the
        encoded result) under the server's ``defaults``: a session of ``version`` that admits
        ``tools/call`` directly if ``tools``."""
    def take(self, session_id: str, now: float) -> tuple[bytes, bool, float] | None:
        """Hand over a session the lane opened, live at ``now``: ``(initialize body,
        initialized, last_seen)``; the lane forgets it."""
    def born_ids(self, now: float) -> list[str]:
        """The ids of the live sessions the lane opened."""
    @property
    def born(self) -> int:
        """Sessions the lane opened and holds."""
    @property
    def sessions(self) -> int: ...
    @property
    def answered(self) -> int: ...
    def feed(
        self, data: bytes, now: float, idle: bool
    ) -> (
        bytes | tuple[bytes | None, list[tuple[str, bytes, dict[bytes, bytes], bytes, bool]], int, int, int, str, tuple[Any, bytes] | None]
    ):
        """The replies alone when every request in ``data`` was answered here and nothing is left
        over; else ``(replies, requests, consumed, status, need, reason, waiting)``:
        ``parse_http``'s answer, the requests answered here taken out and their replies in
        ``replies`` (written first, or ``None``); ``waiting``, ``(answer, target)`` of a call
        that waits (see ``allow_waiting``), comes after ``replies`` and before ``requests``.
        Nothing is answered unless ``idle``; ``now`` goes in ``last_seen``."""

def parse_http(
    data: bytes, max_head: int = 65536, max_body: int = 4194304
) -> tuple[list[tuple[str, bytes, dict[bytes, bytes], bytes, bool]], int, int, int, str]:
    """Frame the complete HTTP/1.x requests at the start of ``data``: ``(requests, consumed, status, need, reason)``.

    Each request is ``(method, target, headers, body, keep_alive)`` (chunked bodies decoded);
    ``status`` 0: the rest is incomplete (``need``: its whole length once its head is known),
    100: the same and that request expects ``100 Continue``, else the HTTP status (400, 413,
    414, 417, 431, 501) refusing the request at ``consumed``, with ``reason``: answer, then close.
    """

def auth_param(www_authenticate: bytes, name: str) -> str | None:
    """The value of parameter ``name`` (matched without case) in a ``WWW-Authenticate`` value:
    ``name=token`` or ``name="quoted string"`` with backslash escapes undone, e.g. RFC 9728's
    ``resource_metadata``; None when absent or unterminated."""

def refusal(status: int, www_authenticate: bytes | None, retry_after: bytes | None, now_unix: float) -> tuple[str, float | None]:
    """A refused request as a client reports it: ``(reason, wait)``, e.g. ``("http 401
    invalid_token", None)`` or ``("http 429 rate limited (Retry-After 2 s)", 2.0)``; ``wait`` is
    the seconds ``Retry-After`` asks for (delta-seconds or an IMF-fixdate against ``now_unix``,
    at most 300), None without a valid one."""

def frame_lines(messages: Sequence[bytes]) -> bytes:
    """Join messages into one newline-terminated write (each message followed by ``\\n``)."""

@final
class SseEvent:
    """One dispatched server-sent event."""

    @property
    def event(self) -> str:
        """The event type (``"message"`` when the block had no ``event`` field)."""
    @property
    def data(self) -> str:
        """The data lines joined with ``\\n``."""
    @property
    def id(self) -> str:
        """The last event id at dispatch time (``""`` if none was ever set)."""
    @property
    def retry(self) -> int | None:
        """The ``retry`` value given in this event's block, if any."""
    def __repr__(self) -> str: ...

@final
class SseEncoder:
    """Encodes server-sent events (``text/event-stream``)."""

    def __init__(self) -> None: ...
    def encode(self, data: str | bytes, id: str | None = None, event: str | None = None, retry: int | None = None) -> bytes:
        """One event: ``id:``, ``event:``, ``retry:`` then one ``data:`` line per line of data.

        Raises:
            ValueError: an id or event name containing CR, LF (or NUL for the id), a negative retry.
        """
    def encode_many(self, events: Sequence[tuple[str | bytes, str | None]]) -> bytes:
        """Many ``(data, id)`` events in one buffer (one FFI crossing for a burst)."""
    def comment(self, text: str = "") -> bytes:
        """A comment line (``: text``), used as a keep-alive; no event is dispatched."""
    def retry(self, ms: int) -> bytes:
        """A block setting only the reconnection time."""

@final
class SseDecoder:
    """Incremental ``text/event-stream`` parser following the WHATWG rules.

    Accepts CR, LF and CRLF line ends (a CRLF may be split across chunks), a leading UTF-8 BOM,
    comments, ``id`` (ignored when it contains NUL) and ``retry`` (ASCII digits only) fields,
    multi-line data, and events split across chunks at any byte. Text is decoded as UTF-8 with
    replacement. An event block whose lines (terminators excluded) exceed ``max_event_size``
    bytes in total is dropped and reported as a ``FrameTooLarge`` item at the blank line that
    ends it; fields read before the limit was crossed keep their effect on the stream state.
    """

    def __new__(cls, max_event_size: int = ...) -> SseDecoder: ...
    @property
    def last_event_id(self) -> str: ...
    @property
    def retry(self) -> int | None:
        """The latest reconnection time the stream set, in milliseconds."""
    def feed(self, data: bytes | bytearray | memoryview) -> list[SseEvent | FrameTooLarge]: ...
    def close(self) -> list[SseEvent | FrameTooLarge]:
        """End of stream: a pending incomplete event is discarded (WHATWG); an oversized one is reported."""

@final
class DrainRow:
    """One drained window of one (request_type, name) of the native engine."""

    @property
    def request_type(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def num_requests(self) -> int: ...
    @property
    def num_failures(self) -> int: ...
    @property
    def total_ms(self) -> float: ...
    @property
    def min_ms(self) -> float | None: ...
    @property
    def max_ms(self) -> float: ...
    @property
    def content_length(self) -> int: ...
    @property
    def buckets(self) -> list[tuple[int, int]]:
        """(latency µs, count): the window's HDR buckets, every request."""
    @property
    def per_second(self) -> list[tuple[int, int, int]]:
        """(epoch second of completion, requests, failures)."""
    @property
    def last_ts(self) -> float:
        """Wall-clock epoch seconds of the window's last completion."""
    @property
    def errors(self) -> list[tuple[str, int]]:
        """(failure reason, count)."""
    @property
    def failed_buckets(self) -> list[tuple[int, int]]:
        """The buckets of the failed requests only (a subset of ``buckets``)."""
    @property
    def failed_by_reason(self) -> list[tuple[str, list[tuple[int, int]]]]:
        """(failure reason, its failed requests' buckets): ``failed_buckets`` split by reason."""
    @property
    def service_buckets(self) -> list[tuple[int, int]]:
        """Open model: µs from the actual send to the end (else empty)."""
    @property
    def lag_buckets(self) -> list[tuple[int, int]]:
        """Open model: µs of send lag, actual minus intended send time (else empty)."""
    def __new__(
        cls,
        request_type: str,
        name: str,
        num_requests: int,
        num_failures: int,
        total_ms: float,
        min_ms: float | None,
        max_ms: float,
        content_length: int,
        buckets: list[tuple[int, int]],
        per_second: list[tuple[int, int, int]],
        last_ts: float,
        errors: list[tuple[str, int]],
        failed_buckets: list[tuple[int, int]] | None = None,
        service_buckets: list[tuple[int, int]] | None = None,
        lag_buckets: list[tuple[int, int]] | None = None,
        failed_by_reason: list[tuple[str, list[tuple[int, int]]]] | None = None,
    ) -> DrainRow: ...

@final
class MixItem:
    """One entry of ``EngineConfig.mix``: a tool (``tools/call`` with ``arguments``) or any other
    method with its ``params``, picked by ``weight`` among the entries; ``stream`` sends a
    tools/call with a progress token and times its events as ``sse_streaming`` does. For the
    ``agents`` family an entry is a step: ``label`` names it in the failures of the steps that
    read its result, and ``uses`` are its values taken from earlier steps' results,
    ``(at, step, "pointer" | "regex", expression)``: the value at JSON pointer ``at`` of its params
    replaced by a JSON pointer into step ``step``'s ``structuredContent``, or a regular
    expression's first group on its text.

    Raises:
        ValueError: neither or both of ``tool`` and ``method``, ``arguments`` with a method,
            ``params`` with a tool, a negative weight, or a use that reads neither by pointer
            nor by regex.
        TypeError: ``arguments`` or ``params`` holds a value JSON cannot carry.
    """

    def __new__(
        cls,
        *,
        tool: str | None = None,
        arguments: dict[str, Any] | None = None,
        method: str | None = None,
        params: dict[str, Any] | None = None,
        weight: int = 1,
        stream: bool = False,
        label: str | None = None,
        uses: list[StepUse] | None = None,
    ) -> MixItem: ...
    @property
    def tool(self) -> str | None: ...
    @property
    def arguments(self) -> dict[str, Any] | None:
        """A copy of the arguments given."""
    @property
    def method(self) -> str | None: ...
    @property
    def params(self) -> dict[str, Any] | None:
        """A copy of the params given."""
    @property
    def weight(self) -> int: ...
    @property
    def stream(self) -> bool: ...
    @property
    def label(self) -> str | None: ...
    @property
    def uses(self) -> list[tuple[str, int, str, str]]: ...

@final
class EngineConfig:
    """The native engine's config: typed keyword arguments, checked when it is made.

    Each argument is a field of the engine's config (the table in rust/mcpfast-engine/README.md);
    one left out, or None, keeps the engine's default, so the defaults live in the engine alone.
    The properties read the config back with the defaults filled in (``request_type`` resolved
    by transport, dicts as copies, ``mix`` as a tuple).

    Raises:
        ValueError: a bad value; the message names the field (``engine config: threads: must be
            in 1..=256, got 0``).
        TypeError: a value of the wrong type, or a dict holding a value JSON cannot carry.
    """

    def __new__(
        cls,
        *,
        transport: EngineTransport | None = None,
        url: str | None = None,
        headers: dict[str, str] | None = None,
        bearer_tokens: list[str] | None = None,
        ca_files: list[str] | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
        insecure: bool | None = None,
        connect_to: list[str] | None = None,
        new_connection: NewConnection | None = None,
        cookies: bool | None = None,
        retry_after: bool | None = None,
        command: list[str] | None = None,
        inflight_per_process: int | None = None,
        family: EngineFamily | None = None,
        protocol_version: str | None = None,
        client_capabilities: dict[str, Any] | None = None,
        tool: str | None = None,
        arguments: dict[str, Any] | None = None,
        mix: list[MixItem] | None = None,
        stream_tool: str | None = None,
        stream_arguments: dict[str, Any] | None = None,
        churn_delete_share: float | None = None,
        threads: int | None = None,
        rate: float | None = None,
        arrivals: Arrivals | None = None,
        worker_index: int | None = None,
        worker_count: int | None = None,
        max_inflight: int | None = None,
        timeout_s: float | None = None,
        max_reply_bytes: int | None = None,
        max_sessions: int | None = None,
        request_type: str | None = None,
        seed: int | None = None,
        handshake_call: bool | None = None,
        cycle_latency: bool | None = None,
        iterations: int | None = None,
        progress_every: int | None = None,
        hold_delete: bool | None = None,
        late_after_s: float | None = None,
        hold_stream: bool | None = None,
        hold_streams: int | None = None,
        hold_trigger: str | None = None,
        hold_trigger_every_s: float | None = None,
        hold_clock: str | None = None,
        tasks_cancel_share: float | None = None,
        source_addresses: list[str] | None = None,
        agent_order: StepOrder | None = None,
        agent_steps: tuple[int, int] | None = None,
        think: str | None = None,
        idle: str | None = None,
        agent_list_tools: bool | None = None,
        agent_hold_stream: float | None = None,
        agent_abandon: float | None = None,
    ) -> EngineConfig: ...
    @property
    def transport(self) -> EngineTransport: ...
    @property
    def url(self) -> str | None: ...
    @property
    def headers(self) -> dict[str, str]: ...
    @property
    def bearer_tokens(self) -> list[str]: ...
    @property
    def ca_files(self) -> list[str]: ...
    @property
    def client_cert(self) -> str | None: ...
    @property
    def client_key(self) -> str | None: ...
    @property
    def insecure(self) -> bool: ...
    @property
    def connect_to(self) -> list[str]: ...
    @property
    def new_connection(self) -> NewConnection: ...
    @property
    def cookies(self) -> bool: ...
    @property
    def retry_after(self) -> bool: ...
    @property
    def command(self) -> list[str]: ...
    @property
    def inflight_per_process(self) -> int: ...
    @property
    def family(self) -> EngineFamily: ...
    @property
    def protocol_version(self) -> str: ...
    @property
    def client_capabilities(self) -> dict[str, Any]: ...
    @property
    def tool(self) -> str: ...
    @property
    def arguments(self) -> dict[str, Any]: ...
    @property
    def mix(self) -> tuple[MixItem, ...]: ...
    @property
    def stream_tool(self) -> str: ...
    @property
    def stream_arguments(self) -> dict[str, Any]: ...
    @property
    def churn_delete_share(self) -> float: ...
    @property
    def threads(self) -> int: ...
    @property
    def rate(self) -> float | None: ...
    @property
    def arrivals(self) -> Arrivals: ...
    @property
    def worker_index(self) -> int: ...
    @property
    def worker_count(self) -> int: ...
    @property
    def max_inflight(self) -> int: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def max_reply_bytes(self) -> int: ...
    @property
    def max_sessions(self) -> int: ...
    @property
    def request_type(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def handshake_call(self) -> bool: ...
    @property
    def cycle_latency(self) -> bool: ...
    @property
    def iterations(self) -> int | None: ...
    @property
    def progress_every(self) -> int | None: ...
    @property
    def hold_delete(self) -> bool: ...
    @property
    def late_after_s(self) -> float: ...
    @property
    def hold_stream(self) -> bool: ...
    @property
    def hold_streams(self) -> int: ...
    @property
    def hold_trigger(self) -> str | None: ...
    @property
    def hold_trigger_every_s(self) -> float: ...
    @property
    def hold_clock(self) -> str | None: ...
    @property
    def tasks_cancel_share(self) -> float: ...
    @property
    def source_addresses(self) -> list[str]: ...
    @property
    def agent_order(self) -> StepOrder: ...
    @property
    def agent_steps(self) -> tuple[int, int]: ...
    @property
    def think(self) -> str: ...
    @property
    def idle(self) -> str | None: ...
    @property
    def agent_list_tools(self) -> bool: ...
    @property
    def agent_hold_stream(self) -> float: ...
    @property
    def agent_abandon(self) -> float: ...

@final
class NativeEngine:
    """The native load engine (rust/mcpfast-engine).

    Construction reads the config's TLS files and resolves its host (ValueError naming the
    field) and starts nothing; ``start()`` spawns the engine's OS threads (call it after any
    fork). Every call but ``stop`` returns in microseconds; ``stop`` releases the GIL while it
    joins.
    """

    def __new__(cls, config: EngineConfig) -> NativeEngine: ...
    @staticmethod
    def raise_open_files_limit(needed: int) -> int:
        """Lift this process's open-file limit for ``needed`` descriptors (the soft limit to the
        hard one, the hard one where the OS allows); returns the limit in force. OSError naming
        the limit and the number needed when it stays below."""
    def port_capacity(self) -> int | None:
        """Connections that can be open at once before the ephemeral ports run out (the ports of
        ``net.ipv4.ip_local_port_range`` for each source address and server address); None when
        the range cannot be read."""
    def source_count(self) -> int:
        """The local addresses new connections bind to, in turn (0: the kernel picks one)."""
    def start(self) -> None: ...
    def set_users(self, n: int) -> None:
        """Target concurrency: HTTP sessions (one keep-alive connection each), stdio processes,
        or ``agents``."""
    def set_rate(self, rate: float | None = None) -> None:
        """Open model at ``rate`` arrivals/s for this engine, a schedule of its own from now (the
        arrivals queued for the previous rate and not yet sent are dropped); None: closed model."""
    def set_bearer_tokens(self, tokens: list[str]) -> None:
        """Replace the bearer tokens while running (a refreshed access token): users send the
        new ones from their next request on; ValueError for an empty list or a bad token."""
    def drain(self) -> list[DrainRow]:
        """The per-thread windows since the last drain, merged: one row per (request_type, name)."""
    def histograms(self) -> list[tuple[str, str, list[tuple[int, int]]]]:
        """Cumulative µs histograms since start or reset(): successes under the name, failures
        under ``name + " (failed)"``."""
    def reset(self) -> None: ...
    def fanout(self) -> dict[str, Any]:
        """``hold`` with streams: ``triggers`` (fan-out rounds this engine's trigger began) and
        ``rounds``, ``[(round, µs)]`` from the trigger's send to the last held stream's arrival, for
        every round that reached all of this engine's held streams."""
    def stop(self, grace_s: float = 2.0) -> None:
        """Stop sending, let in-flight requests finish within ``grace_s``, close, join. Idempotent."""
    def events(self) -> list[tuple[str, str]]:
        """Urgent events since the last call: child_exited, connect_error, fatal, limit, ..."""
    def fileno(self) -> int:
        """A descriptor readable when events() has something (for gevent's wait_read)."""
    def status(self) -> dict[str, int | float]:
        """users, sessions_open (``agents``: agents in a session), inflight, threads, cpu_s,
        sent, completed, late, dropped, behind (open model: arrivals the engine's own pacer
        queued more than 10 ms late), established, reinitialized, iterations, held (``hold``:
        sessions held, or with ``hold_streams`` the GET streams open), agents (``agents``: agents
        running), queued (open model: arrivals waiting for a session), connects."""

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_EVENT",
    "DEFAULT_MAX_LINE",
    "DrainRow",
    "EngineConfig",
    "FrameTooLarge",
    "HttpLane",
    "JsonRpcError",
    "LineFramer",
    "Message",
    "MixItem",
    "NativeEngine",
    "SseDecoder",
    "SseEncoder",
    "SseEvent",
    "StdioLane",
    "auth_param",
    "build_profile",
    "decode",
    "encode_error",
    "encode_notification",
    "encode_request",
    "encode_result",
    "frame_lines",
    "parse_http",
    "refusal",
    "scan_reply",
]
