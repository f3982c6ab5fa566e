// The official TypeScript MCP SDK client, driven line by line by sqlgate's scenario tests
// (tests/mcp/drivers.py). argv[2] is a JSON config:
//   {"transport": "stdio", "command": ..., "args": [...], "env": {...}, "cwd": ..., "stderr": path}
//   {"transport": "http", "url": ..., "token": ...}
// Each stdin line is a request {"id", "op": "list_tools" | "call" | "read_resource" |
// "notifications" (the change notifications received since the last ask), ...}; each
// stdout line answers it: {"id", "ok": true, "result"} or {"id", "ok": false, "error"}. The SDK's
// own checks apply as in any client built on it: a tool result whose structured content does not
// match the tool's output schema is an error here, as it is for the agent.
import fs from "node:fs";
import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const config = JSON.parse(process.argv[2]);

function transport() {
  if (config.transport === "stdio") {
    const stdio = new StdioClientTransport({
      command: config.command,
      args: config.args,
      env: config.env,
      cwd: config.cwd,
      stderr: "pipe",
    });
    const sink = fs.createWriteStream(config.stderr);
    stdio.stderr.pipe(sink);
    return stdio;
  }
  return new StreamableHTTPClientTransport(new URL(config.url), {
    requestInit: { headers: { Authorization: `Bearer ${config.token}` } },
  });
}

const client = new Client({ name: "sqlgate-ts-scenario", version: "1.0.0" });
const notifications = [];
client.setNotificationHandler(ToolListChangedNotificationSchema, (note) => {
  notifications.push(note.method);
});
await client.connect(transport());

async function handle(request) {
  if (request.op === "list_tools") {
    return (await client.listTools()).tools;
  }
  if (request.op === "notifications") {
    return notifications.splice(0);
  }
  if (request.op === "read_resource") {
    return await client.readResource({ uri: request.uri });
  }
  if (request.op === "call") {
    const progress = [];
    const started = Date.now();
    const result = await client.callTool(
      { name: request.name, arguments: request.arguments },
      undefined,
      {
        // The SDK's default request timeout (60 s) stays: a tool must answer within it.
        onprogress: (p) => progress.push({ progress: p.progress, message: p.message ?? null }),
      },
    );
    return { ...result, progress, elapsed_s: (Date.now() - started) / 1000 };
  }
  throw new Error(`unknown op ${request.op}`);
}

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const request = JSON.parse(line);
  let answer;
  try {
    answer = { id: request.id, ok: true, result: await handle(request) };
  } catch (error) {
    answer = {
      id: request.id,
      ok: false,
      error: { code: error.code ?? null, message: String(error.message ?? error) },
    };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
await client.close();
