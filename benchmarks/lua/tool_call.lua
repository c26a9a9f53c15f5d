-- wrk script: POST tools/call TOOL with ARGS (JSON), one MCP session per wrk thread (run with
-- -tN -cN; the session ids in SIDS, comma-separated, created beforehand), unique ids per
-- request. The independent client of the swarm's truth checks (wrk --latency gives its p50).
local sids = {}
for s in string.gmatch(os.getenv("SIDS") or "", "[^,]+") do
  table.insert(sids, s)
end
local tool = os.getenv("TOOL") or "echo"
local args = os.getenv("ARGS") or "{}"
local assigned = 0

function setup(thread)
  assigned = assigned + 1
  thread:set("sid", sids[(assigned - 1) % #sids + 1])
end

local counter = 0

function init(argv)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["Mcp-Session-Id"] = sid
  wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
end

request = function()
  counter = counter + 1
  local body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"tools/call","params":{"name":"' .. tool .. '","arguments":' .. args .. '}}'
  return wrk.format(nil, nil, nil, body)
end
