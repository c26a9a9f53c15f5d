#!/bin/bash
# usage: bench_results/swarm/engine/run.sh [ROUNDS] [SECONDS]
# The native engine (rust/mcpfast-engine, driven by its examples/engine_bench.rs) against
# 1. the in-repo minimal Rust responder (examples/mock_server.rs): calls per engine-thread CPU second;
# 2. `mcpfast serve --transport http` (native runner), interleaved with wrk (bench_results/http/echo.lua)
#    in the same run: tools/call/s, 32 sessions vs 32 wrk connections;
# 3. 10,000 concurrent sessions in one engine: the generator's RSS.
# Servers on core 0, generators on core 1. Run it under: flock /tmp/mcpfast-bench.lock
set -euo pipefail
ROUNDS=${1:-3}; SECS=${2:-10}
cd "$(dirname "$0")/../../.."
cargo build --release --quiet -p mcpfast-engine --examples
BENCH=target/release/examples/engine_bench
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "## engine vs the minimal Rust responder"
taskset -c 0 target/release/examples/mock_server --port 18650 > /dev/null 2>&1 &
MPID=$!
sleep 0.5
for r in $(seq "$ROUNDS"); do
  for users in 32 64; do
    echo "mock users=$users round=$r $(taskset -c 1 $BENCH '{"url":"http://127.0.0.1:18650/mcp"}' $users "$SECS" 1)"
  done
done
kill $MPID; wait $MPID 2>/dev/null || true

echo "## engine vs wrk against mcpfast serve --transport http"
PORT=18651
taskset -c 0 .venv/bin/mcpfast serve --transport http --port $PORT --max-sessions 100000 > /tmp/bench_engine_srv.log 2>&1 &
SPID=$!
trap 'kill $SPID 2>/dev/null; wait $SPID 2>/dev/null || true' EXIT
for i in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done
H=(-H "Content-Type: application/json" -H "Accept: application/json, text/event-stream")
SID=$(curl -s -D - -o /dev/null "${H[@]}" -X POST "http://127.0.0.1:$PORT/mcp" \
  -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wrk","version":"1"}}}' \
  | grep -i '^mcp-session-id:' | cut -d' ' -f2 | tr -d '\r')
curl -s "${H[@]}" -H "Mcp-Session-Id: $SID" -X POST "http://127.0.0.1:$PORT/mcp" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
# 32 more sessions for the wrk variant with one session per connection (as the engine has)
SIDS=""
for i in $(seq 32); do
  S=$(curl -s -D - -o /dev/null "${H[@]}" -X POST "http://127.0.0.1:$PORT/mcp" \
    -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wrk","version":"1"}}}' \
    | grep -i '^mcp-session-id:' | cut -d' ' -f2 | tr -d '\r')
  curl -s "${H[@]}" -H "Mcp-Session-Id: $S" -X POST "http://127.0.0.1:$PORT/mcp" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  SIDS="$SIDS,$S"
done
for r in $(seq "$ROUNDS"); do
  W=$(SID=$SID taskset -c 1 wrk -t1 -c32 -d"${SECS}s" -s bench_results/http/echo.lua "http://127.0.0.1:$PORT/mcp")
  echo "wrk 1-session round=$r $(echo "$W" | grep -E 'Requests/sec|Non-2xx|Socket errors' | tr -s ' ' | tr '\n' ';')"
  W=$(SIDS=$SIDS TOOL=echo ARGS='{"text":"hello"}' taskset -c 1 wrk -t32 -c32 -d"${SECS}s" -s bench_results/swarm/native/tool_call.lua "http://127.0.0.1:$PORT/mcp")
  echo "wrk 32-sessions round=$r $(echo "$W" | grep -E 'Requests/sec|Non-2xx|Socket errors' | tr -s ' ' | tr '\n' ';')"
  echo "engine round=$r $(taskset -c 1 $BENCH "{\"url\":\"http://127.0.0.1:$PORT/mcp\",\"arguments\":{\"text\":\"hello\"}}" 32 "$SECS" 1)"
done
kill $SPID; wait $SPID 2>/dev/null || true

echo "## 10,000 concurrent sessions in one engine (RSS of the generator process)"
taskset -c 0 target/release/examples/mock_server --port 18654 > /dev/null 2>&1 &
MPID=$!
sleep 0.5
echo "sessions=10000 $(taskset -c 1 $BENCH '{"url":"http://127.0.0.1:18654/mcp","max_sessions":20000}' 10000 "$SECS" 5)"
kill $MPID; wait $MPID 2>/dev/null || true
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
