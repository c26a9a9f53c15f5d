#!/usr/bin/env bash
# Old and new mcpfast-load against the in-repo Rust mock responder (examples/mock_server.rs):
# the server is not the bottleneck, so the figures are the generator's own. Mock on core 0,
# generator on core 1, order alternating per round; one summary line per run (rate, p50/p99 µs,
# generator CPU share of its core in the window) with the load average.
#   flock /tmp/mcpfast-bench.lock bench_results/swarm/load_front/ab_mock.sh OLD_BIN NEW_BIN [ROUNDS]
set -euo pipefail
old=$1 new=$2 rounds=${3:-5}
root=$(cd "$(dirname "$0")/../../.." && pwd)
mock="$root/target/release/examples/mock_server"
port=18720
taskset -c 0 "$mock" --port $port & mpid=$!
trap 'kill $mpid' EXIT
sleep 0.5
url=http://127.0.0.1:$port/mcp
summ() {
  python3 -c '
import json, sys
label, mode = sys.argv[1], sys.argv[2]
s = json.loads(sys.stdin.read().splitlines()[-1])
key = {"calls": "calls_per_second", "handshakes": "handshakes_per_second", "churn": "cycles_per_second"}[mode]
lat = s["latency_us"].get("tools/call" if mode == "calls" else "initialize", {})
g = s["generator_cpu"]
share = g.get("window_share_of_one_core", g["share_of_one_core"])
p50, p99, fails = lat.get("p50"), lat.get("p99"), s["failures"]["total"]
print(f"{mode:10s} {label:4s} {s[key]:>10,.0f}/s p50 {p50} p99 {p99} gen {share} failures {fails}", end=" ")
' "$1" "$2"
  echo "load $(cut -d" " -f1 /proc/loadavg)"
}
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for mode in calls handshakes churn; do
    for label in $order; do
      bin=$old; [ "$label" = new ] && bin=$new
      case $mode in
        calls) args="--sessions 32 --duration 4 --warmup 1" ;;
        handshakes) args="--connections 32 --duration 4 --warmup 1" ;;
        churn) args="--cycles 60000 --connections 32 --report-every 15000" ;;
      esac
      echo -n "round $r "
      taskset -c 1 "$bin" $mode --url $url $args 2>/dev/null | summ $label $mode
    done
  done
done
