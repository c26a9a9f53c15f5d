# Sourced by the shell runners here: start a pinned `mcpfast serve --transport http`, open sessions.
# serve_http PORT LOG [ARGS...]: the server on core 0 in the background (SPID), stopped on exit,
# waited for until it answers.
serve_http() {
  local port=$1 log=$2; shift 2
  taskset -c 0 .venv/bin/mcpfast serve --transport http --port "$port" "$@" > "$log" 2>&1 &
  SPID=$!
  trap 'kill $SPID 2>/dev/null; wait $SPID 2>/dev/null || true' EXIT
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
}

H=(-H "Content-Type: application/json" -H "Accept: application/json, text/event-stream")

# mcp_session PORT: initialize + notifications/initialized; prints the session id.
mcp_session() {
  local url="http://127.0.0.1:$1/mcp" sid
  sid=$(curl -s -D - -o /dev/null "${H[@]}" -X POST "$url" \
    -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wrk","version":"1"}}}' \
    | grep -i '^mcp-session-id:' | cut -d' ' -f2 | tr -d '\r')
  curl -s "${H[@]}" -H "Mcp-Session-Id: $sid" -X POST "$url" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  echo "$sid"
}
