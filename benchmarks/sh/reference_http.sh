#!/usr/bin/env bash
# Every loadtests/ family over HTTP against the reference server, one run per protocol revision
# (2025-11-25 Streamable HTTP, 2026-07-28 stateless, 2024-11-05 HTTP+SSE), 10 users, 10 s each.
# Usage (from the repository root, venv active): bash benchmarks/sh/reference_http.sh
set -euo pipefail
cd "$(dirname "$0")/../../bench_results/swarm/reference_http"  # results (and the logs) beside the README
PORT=$(python -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
timeout 180 python -m mcpfast serve --transport http --host 127.0.0.1 --port "$PORT" > server.log 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
sleep 2
for v in 2025-11-25 2026-07-28 2024-11-05; do
  timeout 60 python -m locust -f ../../../loadtests/ --headless -u 10 -r 10 -t 10s \
    --host "http://127.0.0.1:$PORT/mcp" --mcp-protocol-version "$v" \
    --csv "run-$v" --only-summary --stop-timeout 3 --exit-code-on-error 0 > "run-$v.log" 2>&1
  echo "$v: locust exit $?"
done
python - <<'PY'
import csv, json
lines = ["# Every family over HTTP against `mcpfast serve --transport http`", "",
         "Made by `bash benchmarks/sh/reference_http.sh` (10 users, 10 s, all of `loadtests/`).", ""]
for v in ("2025-11-25", "2026-07-28", "2024-11-05"):
    hist = json.load(open(f"run-{v}_histograms.json"))
    failed = sum(h["summary"]["count"] for h in hist["failed_histograms"])
    lines += [f"## {v}", "", f"failures: {failed}; histograms complete: {hist['complete']}", "",
              "| name | requests | p50 µs | p99 µs |", "|---|---:|---:|---:|"]
    for h in sorted(hist["histograms"], key=lambda h: h["name"]):
        s = h["summary"]
        lines.append(f"| {h['name']} | {s['count']} | {s['p50']} | {s['p99']} |")
    lines.append("")
open("README.md", "w").write("\n".join(lines))
PY
