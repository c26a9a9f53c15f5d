-- wrk script: full MCP session lifecycles, one connection per wrk thread (run with -t N -c N):
-- initialize -> notifications/initialized -> tools/call echo -> DELETE, again and again.
-- wrk's Requests/sec counts all four requests of a lifecycle, like the handshake family's rows.
local state, sid, counter = 0, nil, 0
local accept = "application/json, text/event-stream"
local init = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
  .. '"capabilities":{},"clientInfo":{"name":"wrk","version":"1"}}}'
local initialized = '{"jsonrpc":"2.0","method":"notifications/initialized"}'

request = function()
  if state == 0 then
    return wrk.format("POST", nil, {["Content-Type"] = "application/json", ["Accept"] = accept}, init)
  end
  local h = {["Content-Type"] = "application/json", ["Accept"] = accept, ["Mcp-Session-Id"] = sid,
             ["MCP-Protocol-Version"] = "2025-11-25"}
  if state == 1 then
    return wrk.format("POST", nil, h, initialized)
  elseif state == 2 then
    counter = counter + 1
    return wrk.format("POST", nil, h, '{"jsonrpc":"2.0","id":' .. counter
      .. ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}')
  end
  return wrk.format("DELETE", nil, {["Mcp-Session-Id"] = sid, ["MCP-Protocol-Version"] = "2025-11-25"}, nil)
end

response = function(status, headers, body)
  if state == 0 then
    sid = headers["mcp-session-id"] or headers["Mcp-Session-Id"]
    state = sid and 1 or 0
  else
    state = (state + 1) % 4
  end
end
