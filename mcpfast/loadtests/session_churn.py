"""Session churn family: open a session (handshake + one call), close it - DELETE for the share
``--mcp-churn-delete-share`` of sessions, abandon the rest - and again.  Sessions opened/closed per
second are the RPS of ``initialize``/``DELETE``; the counts, the DELETE share and (with
``--mcp-server-pid``) the server's VmRSS per abandoned session go to ``<prefix>_churn.json``.
Over stdio each session is a server process (no DELETE)."""

import locust  # noqa: F401, I001 - first

from locust import task

from mcpfast.loadtests._common import CHURN, McpUser, close_session, open_session


class SessionChurnUser(McpUser):
    native_family = "session_churn"
    auto_initialize = False
    _acc = 0.0

    @task
    def churn(self) -> None:
        if not open_session(self):
            CHURN.failed += 1
            return
        CHURN.opened += 1
        share = float(self.opt("mcp_churn_delete_share"))
        self._acc += share
        delete = self._acc >= 1.0
        if delete:
            self._acc -= 1.0
        if self.session_is_connection:
            pass  # the next open_session() ends this process / closes this SSE stream
        elif not delete:
            close_session(self, delete=False)
            CHURN.abandoned += 1
        elif close_session(self):
            CHURN.deleted += 1
        CHURN.sample()
