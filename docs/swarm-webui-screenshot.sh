#!/bin/sh
# Makes docs/swarm-native-webui.png: Locust's web UI during a native-engine tools/call run against
# `mcpfast serve` (all on 127.0.0.1), captured by Debian's headless Chromium.  A doc artifact, not a
# test (the live figures are tested through /stats/requests in tests/loadtests/test_swarm_webui.py).
#
#   sh docs/swarm-webui-screenshot.sh            # from the repo root, after `make install`
#
# Needs /usr/bin/chromium (`apt-get install -y chromium`, done here when missing).
set -eu
PY=${PY:-.venv/bin/python}
OUT=${OUT:-docs/swarm-native-webui.png}
SERVER_PORT=${SERVER_PORT:-8771}
WEB_PORT=${WEB_PORT:-8772}
command -v chromium >/dev/null 2>&1 || apt-get install -y chromium
tmp=$(mktemp -d)
"$PY" -m mcpfast serve --transport http --host 127.0.0.1 --port "$SERVER_PORT" >"$tmp/server.log" 2>&1 &
server=$!
trap 'kill $server $locust 2>/dev/null || true; rm -rf "$tmp"' EXIT
locust=
sleep 1.5
(cd "$tmp" && exec "$OLDPWD/$PY" -m locust -f "$OLDPWD/loadtests/tools_call.py" --autostart -u 16 -r 4 -t 60s \
    --web-host 127.0.0.1 --web-port "$WEB_PORT" --host "http://127.0.0.1:$SERVER_PORT/mcp" \
    --mcp-engine native --mcp-tool stream --mcp-tool-args '{"n": 2, "delay": 0.002}') >"$tmp/locust.log" 2>&1 &
locust=$!
sleep 12  # ramp-up and ten seconds of live figures
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,900 \
    --virtual-time-budget=4000 --screenshot="$OUT" "http://127.0.0.1:$WEB_PORT/?tab=charts" 2>/dev/null
echo "wrote $OUT"
