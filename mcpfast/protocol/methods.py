"""Method names, the capability each one depends on, and the revision that introduced it."""

from __future__ import annotations

from typing import Final

__all__ = [
    "CLIENT_CAPABILITY_FOR",
    "CLIENT_NOTIFICATIONS",
    "CLIENT_REQUESTS",
    "INTRODUCED_IN",
    "LOG_LEVELS",
    "PAGINATED",
    "REMOVED_IN",
    "RESULT_DEFINITION",
    "SERVER_CAPABILITY_FOR",
    "available",
]

# Client -> server requests.
INITIALIZE: Final = "initialize"
PING: Final = "ping"
SERVER_DISCOVER: Final = "server/discover"
TOOLS_LIST: Final = "tools/list"
TOOLS_CALL: Final = "tools/call"
PROMPTS_LIST: Final = "prompts/list"
PROMPTS_GET: Final = "prompts/get"
RESOURCES_LIST: Final = "resources/list"
RESOURCES_TEMPLATES_LIST: Final = "resources/templates/list"
RESOURCES_READ: Final = "resources/read"
RESOURCES_SUBSCRIBE: Final = "resources/subscribe"
RESOURCES_UNSUBSCRIBE: Final = "resources/unsubscribe"
SUBSCRIPTIONS_LISTEN: Final = "subscriptions/listen"
COMPLETION_COMPLETE: Final = "completion/complete"
LOGGING_SET_LEVEL: Final = "logging/setLevel"
# The tasks extension (io.modelcontextprotocol/tasks, 2026-07-28; tasks/result and tasks/list are gone).
TASKS_GET: Final = "tasks/get"
TASKS_UPDATE: Final = "tasks/update"
TASKS_CANCEL: Final = "tasks/cancel"

# Server -> client requests (handshake era only).
SAMPLING_CREATE_MESSAGE: Final = "sampling/createMessage"
ELICITATION_CREATE: Final = "elicitation/create"
ROOTS_LIST: Final = "roots/list"

# Notifications.
NOTIFICATION_INITIALIZED: Final = "notifications/initialized"
NOTIFICATION_CANCELLED: Final = "notifications/cancelled"
NOTIFICATION_PROGRESS: Final = "notifications/progress"
NOTIFICATION_MESSAGE: Final = "notifications/message"
NOTIFICATION_ROOTS_LIST_CHANGED: Final = "notifications/roots/list_changed"
NOTIFICATION_RESOURCES_UPDATED: Final = "notifications/resources/updated"
NOTIFICATION_RESOURCES_LIST_CHANGED: Final = "notifications/resources/list_changed"
NOTIFICATION_TOOLS_LIST_CHANGED: Final = "notifications/tools/list_changed"
NOTIFICATION_PROMPTS_LIST_CHANGED: Final = "notifications/prompts/list_changed"
NOTIFICATION_ELICITATION_COMPLETE: Final = "notifications/elicitation/complete"
NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"

CLIENT_REQUESTS: Final[frozenset[str]] = frozenset(
    {
        INITIALIZE,
        PING,
        SERVER_DISCOVER,
        TOOLS_LIST,
        TOOLS_CALL,
        PROMPTS_LIST,
        PROMPTS_GET,
        RESOURCES_LIST,
        RESOURCES_TEMPLATES_LIST,
        RESOURCES_READ,
        RESOURCES_SUBSCRIBE,
        RESOURCES_UNSUBSCRIBE,
        SUBSCRIPTIONS_LISTEN,
        COMPLETION_COMPLETE,
        LOGGING_SET_LEVEL,
        TASKS_GET,
        TASKS_UPDATE,
        TASKS_CANCEL,
    }
)
"""Every request a client may send (in some revision); anything else is -32601."""

CLIENT_NOTIFICATIONS: Final[frozenset[str]] = frozenset(
    {NOTIFICATION_INITIALIZED, NOTIFICATION_CANCELLED, NOTIFICATION_PROGRESS, NOTIFICATION_ROOTS_LIST_CHANGED}
)
"""Every notification a client may send (in some revision)."""

SERVER_CAPABILITY_FOR: Final[dict[str, str]] = {
    TOOLS_LIST: "tools",
    TOOLS_CALL: "tools",
    PROMPTS_LIST: "prompts",
    PROMPTS_GET: "prompts",
    RESOURCES_LIST: "resources",
    RESOURCES_TEMPLATES_LIST: "resources",
    RESOURCES_READ: "resources",
    RESOURCES_SUBSCRIBE: "resources",
    RESOURCES_UNSUBSCRIBE: "resources",
    COMPLETION_COMPLETE: "completions",
    LOGGING_SET_LEVEL: "logging",
    NOTIFICATION_MESSAGE: "logging",
    NOTIFICATION_RESOURCES_UPDATED: "resources",
    NOTIFICATION_RESOURCES_LIST_CHANGED: "resources",
    NOTIFICATION_TOOLS_LIST_CHANGED: "tools",
    NOTIFICATION_PROMPTS_LIST_CHANGED: "prompts",
}
"""Server capability a method needs: client calls to undeclared ones get -32601, and the server
must not send notifications for a capability it did not declare."""

CLIENT_CAPABILITY_FOR: Final[dict[str, str]] = {
    SAMPLING_CREATE_MESSAGE: "sampling",
    ELICITATION_CREATE: "elicitation",
    ROOTS_LIST: "roots",
}
"""Client capability a server-to-client request needs."""

PAGINATED: Final[frozenset[str]] = frozenset({TOOLS_LIST, PROMPTS_LIST, RESOURCES_LIST, RESOURCES_TEMPLATES_LIST})

INTRODUCED_IN: Final[dict[str, str]] = {
    ELICITATION_CREATE: "2025-06-18",
    NOTIFICATION_ELICITATION_COMPLETE: "2025-11-25",
    SERVER_DISCOVER: "2026-07-28",
    SUBSCRIPTIONS_LISTEN: "2026-07-28",
    TASKS_GET: "2026-07-28",
    TASKS_UPDATE: "2026-07-28",
    TASKS_CANCEL: "2026-07-28",
}
"""Methods that do not exist before a revision (all others exist from 2024-11-05)."""

REMOVED_IN: Final[dict[str, str]] = {
    INITIALIZE: "2026-07-28",
    PING: "2026-07-28",
    LOGGING_SET_LEVEL: "2026-07-28",
    RESOURCES_SUBSCRIBE: "2026-07-28",
    RESOURCES_UNSUBSCRIBE: "2026-07-28",
    NOTIFICATION_INITIALIZED: "2026-07-28",
    NOTIFICATION_ROOTS_LIST_CHANGED: "2026-07-28",
    NOTIFICATION_ELICITATION_COMPLETE: "2026-07-28",
}

RESULT_DEFINITION: Final[dict[str, str]] = {
    INITIALIZE: "InitializeResult",
    PING: "EmptyResult",
    SERVER_DISCOVER: "DiscoverResult",
    TOOLS_LIST: "ListToolsResult",
    TOOLS_CALL: "CallToolResult",
    PROMPTS_LIST: "ListPromptsResult",
    PROMPTS_GET: "GetPromptResult",
    RESOURCES_LIST: "ListResourcesResult",
    RESOURCES_TEMPLATES_LIST: "ListResourceTemplatesResult",
    RESOURCES_READ: "ReadResourceResult",
    RESOURCES_SUBSCRIBE: "EmptyResult",
    RESOURCES_UNSUBSCRIBE: "EmptyResult",
    COMPLETION_COMPLETE: "CompleteResult",
    LOGGING_SET_LEVEL: "EmptyResult",
    SUBSCRIPTIONS_LISTEN: "SubscriptionsListenResult",
    SAMPLING_CREATE_MESSAGE: "CreateMessageResult",
    ELICITATION_CREATE: "ElicitResult",
    ROOTS_LIST: "ListRootsResult",
}
"""Schema definition of each method's result (used by ``protocol.schema.validate_result``)."""

LOG_LEVELS: Final[tuple[str, ...]] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""RFC 5424 severities, least severe first (index = rank)."""


def available(method: str, version: str) -> bool:
    """Whether ``method`` exists in protocol revision ``version``."""
    since = INTRODUCED_IN.get(method)
    if since is not None and version < since:
        return False
    until = REMOVED_IN.get(method)
    return until is None or version < until
