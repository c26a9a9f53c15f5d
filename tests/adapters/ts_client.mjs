// The official MCP TypeScript SDK client (pinned in peers/typescript, installed by `make peers-install`)
// runs the scenario of test_clients.py against one server and prints what it got as JSON.
//
//   node ts_client.mjs APP stdio '["cmd", "arg", ...]'
//   node ts_client.mjs APP http http://127.0.0.1:PORT/mcp
//
// APP (sdk or fastmcp) picks the sample app's structured-output tool. Every call's result, or the
// JSON-RPC error it raised ({"error": {code, message}}), goes in the summary; anything else a call
// throws is a client failure, listed in "failures" (the test wants none).

const SDK = new URL("../../peers/typescript/node_modules/@modelcontextprotocol/sdk/dist/esm/", import.meta.url);
const { Client } = await import(new URL("client/index.js", SDK));
const { StdioClientTransport } = await import(new URL("client/stdio.js", SDK));
const { StreamableHTTPClientTransport } = await import(new URL("client/streamableHttp.js", SDK));
const { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema, LoggingMessageNotificationSchema, McpError } = await import(
  new URL("types.js", SDK)
);

const [app, transportKind, target] = process.argv.slice(2);
const STRUCTURED = {
  sdk: ["weather", { city: "Wien" }],
  fastmcp: ["midpoint", { a: { x: 0, y: 0 }, b: { x: 2, y: 4 } }],
};

const summary = { failures: [] };
const progress = [];
const logs = [];
const elicited = [];

let transport;
if (transportKind === "stdio") {
  const [command, ...args] = JSON.parse(target);
  transport = new StdioClientTransport({ command, args, env: { ...process.env }, cwd: process.cwd(), stderr: "ignore" });
} else {
  transport = new StreamableHTTPClientTransport(new URL(target));
}
// The client tells the transport the negotiated version after initialize: kept for the summary.
const setVersion = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = (version) => {
  summary.protocolVersion = version;
  setVersion?.(version);
};

const client = new Client(
  { name: "ts-client-test", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} }, sampling: {}, roots: {} } },
);
client.setRequestHandler(CreateMessageRequestSchema, async () => ({
  role: "assistant",
  content: { type: "text", text: "short" },
  model: "test-model",
}));
client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: "file:///work/project", name: "project" }] }));
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  elicited.push(request.params);
  return { action: "accept", content: { date: "monday", seats: 2 } };
});
client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
  logs.push(notification.params);
});

async function step(name, call) {
  try {
    summary[name] = await call();
  } catch (err) {
    if (err instanceof McpError) {
      const prefix = `MCP error ${err.code}: `;
      const message = err.message.startsWith(prefix) ? err.message.slice(prefix.length) : err.message;
      summary[name] = { error: { code: err.code, message } };
    } else {
      summary[name] = { failure: String(err) };
      summary.failures.push(`${name}: ${err?.stack ?? err}`);
    }
  }
}

const deadline = setTimeout(() => {
  process.stderr.write(`timed out; so far: ${JSON.stringify(summary)}\n`);
  process.exit(3);
}, 30000);

try {
  await client.connect(transport);
  summary.serverInfo = client.getServerVersion();
  summary.capabilities = client.getServerCapabilities();
  summary.instructions = client.getInstructions();
  await step("tools/list", () => client.listTools());
  await step("add", () => client.callTool({ name: "add", arguments: { a: 1, b: 2 } }));
  await step("shout", () => client.callTool({ name: "shout", arguments: { text: "hi" } }));
  const [structured, args] = STRUCTURED[app];
  await step("structured", () => client.callTool({ name: structured, arguments: args }));
  // paced_count, not slow_count: this client runs notification handlers a microtask later than it
  // settles a response, and drops its progress callback on the response, so the progress of a tool
  // that reports every step at once (read in the same chunk as the reply) never reaches it, on any
  // server (typescript-sdk issue 2580). A tool that works between its reports is what it can follow.
  await step("progress", () =>
    client.callTool({ name: "paced_count", arguments: { steps: 3 } }, undefined, {
      onprogress: (p) => progress.push({ progress: p.progress, total: p.total ?? null, message: p.message ?? null }),
    }),
  );
  summary["progress notifications"] = progress;
  await step("logging", () => client.callTool({ name: "slow_count", arguments: { steps: 1 } }));
  summary["log notifications"] = logs;
  await step("elicitation", () => client.callTool({ name: "book", arguments: {} }));
  summary["elicitation requests"] = elicited;
  if (app === "sdk") {
    // sampling, then roots, answered by this client's handlers
    await step("sampling and roots", () => client.callTool({ name: "summarize", arguments: { text: "a long text" } }));
  }
  await step("bad arguments", () => client.callTool({ name: "add", arguments: { a: "x" } }));
  await step("tool error", () => client.callTool({ name: "fail", arguments: { reason: "boom" } }));
  await step("resources/list", () => client.listResources());
  await step("resources/templates/list", () => client.listResourceTemplates());
  await step("resources/read", () => client.readResource({ uri: "config://app" }));
  await step("resources/read template", () => client.readResource({ uri: "users://7/profile" }));
  await step("resources/read unknown", () => client.readResource({ uri: "nope://x" }));
  await step("prompts/list", () => client.listPrompts());
  await step("prompts/get", () => client.getPrompt({ name: "review", arguments: { code: "x=1", language: "rust" } }));
  await step("prompts/get missing argument", () => client.getPrompt({ name: "review", arguments: {} }));
  await step("completion", () =>
    client.complete({ ref: { type: "ref/prompt", name: "review" }, argument: { name: "language", value: "p" } }),
  );
  await step("completion template", () =>
    client.complete({ ref: { type: "ref/resource", uri: "users://{user_id}/profile" }, argument: { name: "user_id", value: "" } }),
  );
  if (transportKind === "http") {
    await transport.terminateSession();
  }
} catch (err) {
  summary.failures.push(`connect: ${err?.stack ?? err}`);
} finally {
  await client.close();
  clearTimeout(deadline);
}
process.stdout.write(JSON.stringify(summary) + "\n");
