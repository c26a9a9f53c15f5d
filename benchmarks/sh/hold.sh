#!/bin/sh
# 10,000 held GET streams against mcpfast serve (demo app + broadcast tool), one Locust process:
# the server's memory per held stream (VmRSS with every stream open minus before the first) and the
# fan-out latency of one notifications/tools/list_changed to every listener.
# Server on core 0 (--max-sessions 10100: room for the trigger session), Locust on core 1. Run under the bench lock:
#   flock /tmp/mcpfast-bench.lock sh benchmarks/sh/hold.sh [STREAMS_PER_USER] [USERS] [SECONDS]
set -eu
cd "$(dirname "$0")/../.."
K=${1:-100}; U=${2:-100}; T=${3:-80}
OUT=bench_results/swarm/hold
PORT=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
MCPFAST_CORE=rust taskset -c 0 .venv/bin/python loadtests/_broadcast_server.py --transport http --host 127.0.0.1 \
  --port "$PORT" --max-sessions 10100 > /tmp/mcpfast-hold-server.log 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do .venv/bin/python -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 0.2)" 2>/dev/null && break; sleep 0.1; done
echo "load average before: $(cat /proc/loadavg)"
MCPFAST_CORE=rust taskset -c 1 .venv/bin/locust -f loadtests/hold.py --headless -u "$U" -r 50 -t "${T}s" \
  --host "http://127.0.0.1:$PORT/mcp" --mcp-engine python --mcp-hold-per-user "$K" \
  --mcp-hold-trigger broadcast --mcp-hold-trigger-every 5 --mcp-server-pid "$SERVER" --mcp-timeout 120 \
  --csv "$OUT/hold-${U}x${K}" --only-summary --stop-timeout 5 > /tmp/mcpfast-hold-locust.log 2>&1 || echo "locust exit $?"
echo "load average after: $(cat /proc/loadavg)"
grep -E "mcpfast hold:|hold:fanout|GET:open" /tmp/mcpfast-hold-locust.log | tail -8
cat "$OUT/hold-${U}x${K}_hold.json"; echo
