#!/bin/sh
# --mcp-discover for 20 s against @modelcontextprotocol/server-everything (peers/everything, pinned),
# over Streamable HTTP and stdio, native engine; then sse_streaming on its long-running operation.
# Under the bench lock:  flock /tmp/mcpfast-bench.lock sh benchmarks/sh/everything.sh [SECONDS]
set -eu
cd "$(dirname "$0")/../.."
T=${1:-20}
OUT=bench_results/swarm/everything
EV="node --require ./peers/everything/localhost.cjs peers/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
export GZIP_ALLOWED_DOMAINS=127.0.0.1 MCPFAST_CORE=rust
PORT=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PORT=$PORT $EV streamableHttp > /tmp/mcpfast-everything.log 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do .venv/bin/python -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 0.2)" 2>/dev/null && break; sleep 0.1; done
echo "load average before: $(cat /proc/loadavg)"
run() { name=$1; shift; .venv/bin/locust --headless --only-summary --stop-timeout 5 --csv "$OUT/$name" "$@" \
  > "/tmp/mcpfast-everything-$name.log" 2>&1; echo "$name: exit $?"; }
run discover-http -f loadtests/scenario.py -u 8 -r 8 -t "${T}s" --host "http://127.0.0.1:$PORT/mcp" --mcp-discover \
  --mcp-discover-skip trigger-long-running-operation --mcp-engine native
run discover-stdio -f loadtests/scenario.py -u 4 -r 4 -t "${T}s" --mcp-command "$EV stdio" --mcp-discover \
  --mcp-discover-skip trigger-long-running-operation --mcp-engine native
run sse-long-running -f loadtests/sse_streaming.py -u 8 -r 8 -t "${T}s" --host "http://127.0.0.1:$PORT/mcp" \
  --mcp-engine native --mcp-stream-tool trigger-long-running-operation --mcp-stream-args '{"duration": 0.2, "steps": 4}'
echo "load average after: $(cat /proc/loadavg)"
.venv/bin/python - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
for name in ("discover-http", "discover-stdio", "sse-long-running"):
    d = json.loads((out / f"{name}_histograms.json").read_text())
    ok = {h["name"]: h["n"] for h in d["histograms"]}
    bad = {h["name"]: h["n"] for h in d["failed_histograms"]}
    tools = sorted(n for n in ok if n.startswith("tools/call:"))
    print(f"{name}: {sum(ok.values())} ok, {sum(bad.values())} failed, {len(tools)} tools, "
          f"resources/read {ok.get('resources/read', 0)}, duration {d['duration_s']:.1f} s")
    if name.startswith("sse"):
        calls = ok.get("tools/call:trigger-long-running-operation", 0)
        print(f"  calls {calls}, progress:first-event {ok.get('progress:first-event')}, progress:gap {ok.get('progress:gap')} (3 per call: {3 * calls})")
PY
