#!/bin/bash
# usage: benchmarks/sh/engine.sh [ROUNDS] [SECONDS]
# The native engine (rust/mcpfast-engine, driven by its examples/engine_bench.rs) against
# 1. the in-repo minimal Rust responder (examples/mock_server.rs): calls per engine-thread CPU second;
# 2. `mcpfast serve --transport http` (native runner), interleaved with wrk (benchmarks/lua/echo.lua)
#    in the same run: tools/call/s, 32 sessions vs 32 wrk connections;
# 3. 10,000 concurrent sessions in one engine: the generator's RSS.
# Servers on core 0, generators on core 1. Run it under: flock /tmp/mcpfast-bench.lock
set -euo pipefail
ROUNDS=${1:-3}; SECS=${2:-10}
cd "$(dirname "$0")/../.."
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
. benchmarks/sh/lib.sh
serve_http "$PORT" /tmp/bench_engine_srv.log --max-sessions 100000
SID=$(mcp_session "$PORT")
# 32 more sessions for the wrk variant with one session per connection (as the engine has)
SIDS=""
for i in $(seq 32); do
  S=$(mcp_session "$PORT")
  SIDS="$SIDS,$S"
done
for r in $(seq "$ROUNDS"); do
  W=$(SID=$SID taskset -c 1 wrk -t1 -c32 -d"${SECS}s" -s benchmarks/lua/echo.lua "http://127.0.0.1:$PORT/mcp")
  echo "wrk 1-session round=$r $(echo "$W" | grep -E 'Requests/sec|Non-2xx|Socket errors' | tr -s ' ' | tr '\n' ';')"
  W=$(SIDS=$SIDS TOOL=echo ARGS='{"text":"hello"}' taskset -c 1 wrk -t32 -c32 -d"${SECS}s" -s benchmarks/lua/tool_call.lua "http://127.0.0.1:$PORT/mcp")
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
