-- wrk script: POST tools/call echo on an existing session (SID env var), unique ids per request.
local sid = os.getenv("SID")
local counter = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Mcp-Session-Id"] = sid
wrk.headers["MCP-Protocol-Version"] = "2025-11-25"

request = function()
  counter = counter + 1
  local body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'
  return wrk.format(nil, nil, nil, body)
end
