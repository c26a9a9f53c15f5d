-- wrk script: POST tools/call TOOL with ARGS (JSON) on an existing session (SID), unique ids per
-- request; the independent client of the swarm's truth checks (wrk --latency gives its p50).
local sid = os.getenv("SID")
local tool = os.getenv("TOOL") or "echo"
local args = os.getenv("ARGS") or "{}"
local counter = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Mcp-Session-Id"] = sid
wrk.headers["MCP-Protocol-Version"] = "2025-11-25"

request = function()
  counter = counter + 1
  local body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"tools/call","params":{"name":"' .. tool .. '","arguments":' .. args .. '}}'
  return wrk.format(nil, nil, nil, body)
end
