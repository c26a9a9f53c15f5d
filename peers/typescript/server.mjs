// The demo app of `mcpfast serve` (mcpfast/server/demo.py) on the official MCP TypeScript SDK.
//
//   node peers/typescript/server.mjs --host 127.0.0.1 --port 8002              Streamable HTTP at /mcp
//   node peers/typescript/server.mjs --host 127.0.0.1 --port 8002 --json-response
//   node peers/typescript/server.mjs --transport stdio
//
// Same tools with the same argument names and results: echo(text), add(a, b) (structured
// {"sum": ...}), stream(n = 3, delay = 0) (one notifications/progress per step, "step i of n",
// when the call carries a progress token; then "streamed n steps"), the demo://readme resource,
// the demo://greeting/{name} template and the summarise prompt.
//
// HTTP: stateful Streamable HTTP with one McpServer + StreamableHTTPServerTransport per session
// (the SDK's pattern), on node:http; POST opens a session with initialize, GET opens the
// standalone SSE stream, DELETE ends the session. The transport answers every POST in one mode:
// SSE (the SDK default, the only mode that carries the stream tool's progress notifications) or,
// with --json-response, JSON (request-scoped notifications are then dropped).

import { randomUUID } from "node:crypto";
import { createServer } from "node:http";

import { McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const MAX_BODY = 4 * 1024 * 1024;
const READ_ONLY = { readOnlyHint: true, idempotentHint: true };

function parseArgs(argv) {
  const args = { transport: "http", host: "127.0.0.1", port: 8002, jsonResponse: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--transport") args.transport = value();
    else if (a === "--host") args.host = value();
    else if (a === "--port") args.port = Number.parseInt(value(), 10);
    else if (a === "--json-response") args.jsonResponse = true;
    else if (a === "--help" || a === "-h") {
      process.stdout.write("usage: server.mjs [--transport http|stdio] [--host H] [--port N] [--json-response]\n");
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!["http", "stdio"].includes(args.transport)) throw new Error(`unknown transport ${args.transport}`);
  if (!Number.isInteger(args.port) || args.port < 0 || args.port > 65535) throw new Error("bad --port");
  return args;
}

function makeServer() {
  const server = new McpServer(
    { name: "typescript-sdk-demo", version: "0.1.0", title: "mcpfast demo app on the official TypeScript SDK" },
    { instructions: "A small demo: echo, add, stream." },
  );

  server.registerTool(
    "echo",
    {
      description: "Return the text unchanged.",
      inputSchema: { text: z.string().describe("Text to return") },
      annotations: READ_ONLY,
    },
    async ({ text }) => ({ content: [{ type: "text", text }] }),
  );

  server.registerTool(
    "add",
    {
      title: "Add two numbers",
      description: "Add two numbers; the sum is returned as structured content.",
      inputSchema: { a: z.number(), b: z.number() },
      outputSchema: { sum: z.number() },
      annotations: READ_ONLY,
    },
    async ({ a, b }) => {
      const result = { sum: a + b };
      return { content: [{ type: "text", text: JSON.stringify(result) }], structuredContent: result };
    },
  );

  server.registerTool(
    "stream",
    {
      description: "Send n progress notifications (when asked for progress), then a result.",
      inputSchema: {
        n: z.number().int().default(3).describe("How many progress steps"),
        delay: z.number().default(0),
      },
    },
    async ({ n, delay }, extra) => {
      const token = extra._meta?.progressToken;
      for (let i = 1; i <= n; i++) {
        if (delay) await new Promise((resolve) => setTimeout(resolve, delay * 1000));
        if (token !== undefined) {
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken: token, progress: i, total: n, message: `step ${i} of ${n}` },
          });
        }
      }
      return { content: [{ type: "text", text: `streamed ${n} steps` }] };
    },
  );

  server.registerResource(
    "readme",
    "demo://readme",
    { title: "About this server", description: "What the demo server offers.", mimeType: "text/markdown" },
    async (uri) => ({
      contents: [{ uri: uri.href, mimeType: "text/markdown", text: "# mcpfast demo\n\nTools: echo, add, stream.\n" }],
    }),
  );

  server.registerResource(
    "greeting",
    new ResourceTemplate("demo://greeting/{name}", { list: undefined }),
    { description: "A greeting for anyone.", mimeType: "text/plain" },
    async (uri, { name }) => ({ contents: [{ uri: uri.href, mimeType: "text/plain", text: `Hello, ${name}!` }] }),
  );

  server.registerPrompt(
    "summarise",
    {
      title: "Summarise",
      description: "Ask for a summary of a text.",
      argsSchema: {
        text: z.string().describe("The text to summarise"),
        style: z.string().optional().describe("brief or detailed"),
      },
    },
    ({ text, style }) => ({
      description: "Ask for a summary of a text.",
      messages: [{ role: "user", content: { type: "text", text: `Summarise this text (${style ?? "brief"}):\n\n${text}` } }],
    }),
  );
  return server;
}

function sendJson(res, status, body) {
  const data = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data) });
  res.end(data);
}

function rpcError(code, message) {
  return { jsonrpc: "2.0", error: { code, message }, id: null };
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on("data", (chunk) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        reject(new Error("body too large"));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

function serveHttp({ host, port, jsonResponse }) {
  const sessions = new Map(); // session id -> transport

  async function handle(req, res) {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (url.pathname !== "/mcp") {
      sendJson(res, 404, rpcError(-32601, "Not found"));
      return;
    }
    const sid = req.headers["mcp-session-id"];
    const existing = typeof sid === "string" ? sessions.get(sid) : undefined;
    if (req.method === "POST") {
      let body;
      try {
        body = JSON.parse((await readBody(req)).toString("utf8"));
      } catch {
        sendJson(res, 400, rpcError(-32700, "Parse error"));
        return;
      }
      if (existing) {
        await existing.handleRequest(req, res, body);
        return;
      }
      if (sid === undefined && isInitializeRequest(body)) {
        const transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          enableJsonResponse: jsonResponse,
          onsessioninitialized: (id) => {
            sessions.set(id, transport);
          },
        });
        transport.onclose = () => {
          if (transport.sessionId) sessions.delete(transport.sessionId);
        };
        await makeServer().connect(transport);
        await transport.handleRequest(req, res, body);
        return;
      }
      if (sid !== undefined) sendJson(res, 404, rpcError(-32001, "Session not found"));
      else sendJson(res, 400, rpcError(-32600, "Bad Request: no valid session id"));
      return;
    }
    if (req.method === "GET" || req.method === "DELETE") {
      if (!existing) {
        if (sid !== undefined) sendJson(res, 404, rpcError(-32001, "Session not found"));
        else sendJson(res, 400, rpcError(-32600, "Bad Request: no valid session id"));
        return;
      }
      await existing.handleRequest(req, res);
      return;
    }
    res.writeHead(405, { Allow: "GET, POST, DELETE" }).end();
  }

  const http = createServer((req, res) => {
    handle(req, res).catch((err) => {
      process.stderr.write(`request failed: ${err?.stack ?? err}\n`);
      if (!res.headersSent) sendJson(res, 500, rpcError(-32603, "Internal error"));
      else res.end();
    });
  });
  http.keepAliveTimeout = 65_000;
  http.listen(port, host, () => {
    process.stderr.write(`typescript-sdk peer: Streamable HTTP on http://${host}:${http.address().port}/mcp\n`);
  });
  const stop = () => {
    for (const transport of sessions.values()) transport.close().catch(() => {});
    http.close();
    http.closeAllConnections();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

async function serveStdio() {
  const server = makeServer();
  await server.connect(new StdioServerTransport());
  process.stdin.on("end", () => process.exit(0));
}

const args = parseArgs(process.argv.slice(2));
if (args.transport === "stdio") await serveStdio();
else serveHttp(args);
