// The real `openai` npm client (pinned in test/tokenizer/package-lock.json)
// against a compiled model's server:
//
//   node openai_client.mjs NODE_MODULES BASE_URL
//
// (BASE_URL http://127.0.0.1:PORT; serve_check.py --run gives it as
// $TFM_SERVE_URL.) completions.create, chat.completions.create, a streamed
// chat read with `for await`, a streamed completion, models.list and an
// error the client raises as APIError; greedy throughout. It prints what it
// got, and checks what the client itself cannot: that the streamed text is
// the text of the same request unstreamed, and the usage adds up. Exit 1 on
// any failure.
import { createRequire } from "node:module";
import path from "node:path";
import fs from "node:fs";

const [nodeModules, baseURL] = process.argv.slice(2);
if (!nodeModules || !baseURL) {
  console.error("usage: node openai_client.mjs NODE_MODULES BASE_URL");
  process.exit(2);
}
if (!fs.existsSync(path.join(nodeModules, "openai"))) {
  console.error(`openai_client.mjs: ${nodeModules}/openai is missing: run ctest ` +
    "(fixture tfm-npm-peers) or `cmake --build BUILD --target tfm-npm-peers`");
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(nodeModules), "noop.js"));
const mod = require("openai");
const OpenAI = mod.OpenAI ?? mod.default ?? mod;

function fail(what) {
  console.log(`FAIL: ${what}`);
  process.exit(1);
}
function check(cond, what) {
  if (!cond) fail(what);
}

// The client's timeout stops at a stream's first bytes: a stream that
// stalls after them fails here instead of hanging the test.
setTimeout(() => fail("no end in 240 s"), 240_000).unref();

const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: "none", maxRetries: 0,
                            timeout: 60_000 });

try {
  const models = await client.models.list();
  const ids = [];
  for await (const m of models) ids.push(m.id);
  console.log(`models: ${JSON.stringify(ids)}`);

  const c = await client.completions.create({
    model: ids[0], prompt: "Once upon a time", max_tokens: 10, temperature: 0 });
  check(c.object === "text_completion", `completion object ${c.object}`);
  const ctext = c.choices[0].text;
  console.log(`completion: finish_reason=${c.choices[0].finish_reason} ` +
    `usage=${c.usage.prompt_tokens}+${c.usage.completion_tokens}=${c.usage.total_tokens}`);
  check(c.usage.total_tokens === c.usage.prompt_tokens + c.usage.completion_tokens,
        "completion usage");

  let streamed = "";
  let finish = null;
  const cs = await client.completions.create({
    model: ids[0], prompt: "Once upon a time", max_tokens: 10, temperature: 0,
    stream: true });
  for await (const chunk of cs) {
    streamed += chunk.choices[0]?.text ?? "";
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  check(streamed === ctext, `streamed completion ${JSON.stringify(streamed)}, ` +
        `not streamed ${JSON.stringify(ctext)}`);
  console.log(`completion stream: same text, finish_reason=${finish}`);

  const messages = [{ role: "system", content: "You are terse." },
                    { role: "user", content: "Name a colour." }];
  const chat = await client.chat.completions.create({
    model: ids[0], messages, max_tokens: 12, temperature: 0 });
  check(chat.object === "chat.completion", `chat object ${chat.object}`);
  const msg = chat.choices[0].message;
  check(msg.role === "assistant" && typeof msg.content === "string", "chat message");
  console.log(`chat: role=${msg.role} finish_reason=${chat.choices[0].finish_reason} ` +
    `completion_tokens=${chat.usage.completion_tokens}`);

  const st = await client.chat.completions.create({
    model: ids[0], messages, max_tokens: 12, temperature: 0, stream: true,
    stream_options: { include_usage: true } });
  let text = "", role = null, chunks = 0, usage = null;
  finish = null;
  for await (const chunk of st) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    const ch = chunk.choices[0];
    if (!ch) continue;
    if (ch.delta.role) role = role ?? ch.delta.role;
    text += ch.delta.content ?? "";
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  check(text === msg.content, `streamed chat ${JSON.stringify(text)}, not streamed ` +
        `${JSON.stringify(msg.content)}`);
  check(usage && usage.completion_tokens === chat.usage.completion_tokens &&
        usage.prompt_tokens === chat.usage.prompt_tokens, "streamed chat usage");
  console.log(`chat stream: role=${role} same text, finish_reason=${finish}, usage=` +
    `${usage.prompt_tokens}+${usage.completion_tokens}`);

  try {
    await client.completions.create({ model: ids[0], prompt: "x", max_tokens: "many" });
    fail("max_tokens \"many\" was accepted");
  } catch (e) {
    check(e instanceof OpenAI.APIError, `not an APIError: ${e}`);
    console.log(`error: status=${e.status} type=${e.type}`);
  }
} catch (e) {
  fail(`${e.constructor?.name}: ${e.message}`);
}
console.log("openai client: ok");
