#!/bin/bash
# usage: benchmarks/sh/http_wrk.sh RUNNER PORT [CONNECTIONS] [DURATION]
# Server pinned to core 0, wrk to core 1. Prints wrk's summary.
set -euo pipefail
RUNNER=$1; PORT=$2; CONNS=${3:-32}; DUR=${4:-10s}
cd "$(dirname "$0")/../.."
. benchmarks/sh/lib.sh
serve_http "$PORT" "/tmp/bench_srv_$PORT.log" --runner "$RUNNER"
SID=$(mcp_session "$PORT")
# check one call
curl -s "${H[@]}" -H "Mcp-Session-Id: $SID" -X POST "http://127.0.0.1:$PORT/mcp" \
  -d '{"jsonrpc":"2.0","id":-1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'; echo
SID=$SID /usr/bin/time -f "wrk cpu: %U user %S sys %e wall" taskset -c 1 wrk -t1 -c"$CONNS" -d"$DUR" --latency -s benchmarks/lua/echo.lua "http://127.0.0.1:$PORT/mcp"
