#!/bin/bash
# usage: bench_results/http/run.sh RUNNER PORT [CONNECTIONS] [DURATION]
# Server pinned to core 0, wrk to core 1. Prints wrk's summary.
set -euo pipefail
RUNNER=$1; PORT=$2; CONNS=${3:-32}; DUR=${4:-10s}
cd "$(dirname "$0")/../.."
taskset -c 0 .venv/bin/mcpfast serve --transport http --runner "$RUNNER" --port "$PORT" > /tmp/bench_srv_$PORT.log 2>&1 &
SPID=$!
trap 'kill $SPID 2>/dev/null; wait $SPID 2>/dev/null || true' EXIT
for i in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done
H=(-H "Content-Type: application/json" -H "Accept: application/json, text/event-stream")
SID=$(curl -s -D - -o /dev/null "${H[@]}" -X POST "http://127.0.0.1:$PORT/mcp" \
  -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wrk","version":"1"}}}' \
  | grep -i '^mcp-session-id:' | cut -d' ' -f2 | tr -d '\r')
curl -s "${H[@]}" -H "Mcp-Session-Id: $SID" -X POST "http://127.0.0.1:$PORT/mcp" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
# check one call
curl -s "${H[@]}" -H "Mcp-Session-Id: $SID" -X POST "http://127.0.0.1:$PORT/mcp" \
  -d '{"jsonrpc":"2.0","id":-1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'; echo
SID=$SID /usr/bin/time -f "wrk cpu: %U user %S sys %e wall" taskset -c 1 wrk -t1 -c"$CONNS" -d"$DUR" --latency -s bench_results/http/echo.lua "http://127.0.0.1:$PORT/mcp"
