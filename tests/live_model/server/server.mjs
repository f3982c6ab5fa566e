// An OpenAI-compatible chat completions server over node-llama-cpp (CPU), for sqlgate's
// live-model tests: a real model's replies, token counts and finish reasons, on 127.0.0.1.
//
//   node server.mjs --model FILE.gguf [--port 0] [--context 4096] [--threads 2]
//
// It prints one line `listening http://127.0.0.1:PORT/v1` once the model is loaded. Requests are
// served one at a time (one context sequence). `response_format` json_schema becomes a grammar
// when node-llama-cpp can build one from the schema, else the request is refused with a 400 naming
// response_format (as servers without json_schema support do); json_object constrains the reply
// to JSON. `max_tokens` caps the reply and `finish_reason` says "length" when it did.
import http from "node:http";
import { parseArgs } from "node:util";
import { getLlama, LlamaChat } from "node-llama-cpp";

const { values: args } = parseArgs({
  options: {
    model: { type: "string" },
    port: { type: "string", default: "0" },
    context: { type: "string", default: "4096" },
    threads: { type: "string", default: "2" },
  },
});
if (!args.model) {
  console.error("usage: node server.mjs --model FILE.gguf [--port N]");
  process.exit(2);
}

const llama = await getLlama({ gpu: false, build: "never", progressLogs: false, logLevel: "error" });
const model = await llama.loadModel({ modelPath: args.model });
const context = await model.createContext({
  contextSize: Number(args.context),
  sequences: 1,
  threads: Number(args.threads),
});
const modelName = "smollm2-135m-instruct";
const jsonGrammar = await llama.getGrammarFor("json");
let created = 1_700_000_000;
let queue = Promise.resolve();
// What the server saw, for tests that compare it with what sqlgate recorded.
const stats = { requests: 0, replies: 0, prompt_tokens: 0, completion_tokens: 0 };

function error(res, status, message, param = null) {
  const body = JSON.stringify({ error: { message, type: "invalid_request_error", param, code: null } });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

function history(messages) {
  const items = [];
  for (const m of messages) {
    const text = typeof m.content === "string" ? m.content : "";
    if (m.role === "system") items.push({ type: "system", text });
    else if (m.role === "assistant") items.push({ type: "model", response: [text] });
    else items.push({ type: "user", text });
  }
  items.push({ type: "model", response: [] });
  return items;
}

async function grammarFor(format) {
  if (!format || format.type === "text") return undefined;
  if (format.type === "json_object") return jsonGrammar;
  if (format.type === "json_schema") {
    try {
      return await llama.createGrammarForJsonSchema(format.json_schema.schema);
    } catch (exc) {
      throw Object.assign(new Error(`response_format json_schema is not supported for this schema: ${exc.message}`), { status: 400, param: "response_format" });
    }
  }
  throw Object.assign(new Error(`response_format type ${format.type} is not supported`), { status: 400, param: "response_format" });
}

async function complete(body, signal) {
  const grammar = await grammarFor(body.response_format);
  const sequence = context.getSequence();
  try {
    const chat = new LlamaChat({ contextSequence: sequence, autoDisposeSequence: false });
    const before = { input: sequence.tokenMeter.usedInputTokens, output: sequence.tokenMeter.usedOutputTokens };
    const result = await chat.generateResponse(history(body.messages || []), {
      maxTokens: body.max_tokens ?? undefined,
      temperature: body.temperature ?? 0,
      grammar,
      signal,
      stopOnAbortSignal: true,
    });
    const prompt = sequence.tokenMeter.usedInputTokens - before.input;
    const completion = sequence.tokenMeter.usedOutputTokens - before.output;
    const reason = result.metadata.stopReason === "maxTokens" ? "length" : "stop";
    return { text: result.response, reason, prompt, completion };
  } finally {
    sequence.dispose();
  }
}

const server = http.createServer((req, res) => {
  if (req.method === "GET" && req.url.replace(/\/$/, "") === "/v1/models") {
    const body = JSON.stringify({ object: "list", data: [{ id: modelName, object: "model", owned_by: "local" }] });
    res.writeHead(200, { "content-type": "application/json" });
    res.end(body);
    return;
  }
  if (req.method === "GET" && req.url.replace(/\/$/, "") === "/stats") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(stats));
    return;
  }
  if (req.method !== "POST" || req.url.replace(/\/$/, "") !== "/v1/chat/completions") {
    error(res, 404, `no route for ${req.method} ${req.url}`);
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch (exc) {
      error(res, 400, `could not parse the request body: ${exc.message}`);
      return;
    }
    stats.requests += 1;
    const aborter = new AbortController();
    res.on("close", () => { if (!res.writableFinished) aborter.abort(); });
    queue = queue.then(async () => {
      if (aborter.signal.aborted) return; // the client gave up while waiting its turn
      try {
        const out = await complete(body, aborter.signal);
        if (aborter.signal.aborted) return;
        stats.replies += 1; // the tokens of replies sent: what a client can know of
        stats.prompt_tokens += out.prompt;
        stats.completion_tokens += out.completion;
        const payload = JSON.stringify({
          id: `chatcmpl-local-${created}`,
          object: "chat.completion",
          created: created++,
          model: modelName,
          choices: [{ index: 0, message: { role: "assistant", content: out.text }, finish_reason: out.reason }],
          usage: { prompt_tokens: out.prompt, completion_tokens: out.completion, total_tokens: out.prompt + out.completion },
        });
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(payload) });
        res.end(payload);
      } catch (exc) {
        if (!res.headersSent) error(res, exc.status || 500, String(exc.message || exc), exc.param || null);
      }
    });
  });
});

server.listen(Number(args.port), "127.0.0.1", () => {
  console.log(`listening http://127.0.0.1:${server.address().port}/v1`);
});
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, async () => {
    server.close();
    await context.dispose();
    await model.dispose();
    process.exit(0);
  });
}
