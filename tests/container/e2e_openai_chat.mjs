// The official `openai` npm client against lmx-server's chat endpoints.
// usage: node e2e_openai_chat.mjs BASE_URL MODEL real|fake   (NODE_PATH must reach the package)
//   real: tinystories-656k with a ChatML template: chat, streaming, usage, n, logprobs, tools
//         rendered, BOS not doubled, LMI messages, errors.
//   fake: the fake engine echoes the rendered prompt (ECHO_PROMPT) or emits a Hermes tool call
//         (EMIT_TOOL_CALL): exact prompt, tool_calls plain and streamed, malformed call = content.
//   forced: stories260k (whose vocabulary has every byte) with the same template: tool_choice
//         named and "required" make a model that never calls a tool write exactly one call per
//         choice whose arguments satisfy the schema, greedy and seeded, streamed and not.
import { createRequire } from "module";
const require = createRequire(process.env.NODE_PATH.split(":")[0] + "/");
const OpenAI = require("openai");
const [baseURL, model, mode] = process.argv.slice(2);
const client = new (OpenAI.default ?? OpenAI)({ baseURL: baseURL + "/v1", apiKey: "none" });
let failed = 0, count = 0;
const check = (cond, what) => { count++; if (!cond) { failed++; console.log("FAIL:", what); } };
const show = (x) => JSON.stringify(x);
// fetch sends a string body as text/plain, which LMI takes as the input text itself.
const post = async (path, body) => (await fetch(baseURL + path, { method: "POST",
  headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })).json();
const user = (content) => [{ role: "user", content }];
const tools = [{ type: "function", function: { name: "get_weather", description: "Weather now",
  parameters: { type: "object", properties: { zeta: { type: "string" }, alpha: {} } } } }];

async function expect400(params, field, text) {
  try {
    await client.chat.completions.create(params);
    check(false, `accepted: ${show(params)}`);
  } catch (e) {
    // The client exposes the body's "error" (the message, which starts with the field name
    // unless it is the template's own raise_exception text); the field is checked by raw POST.
    check(e.status === 400, `${show(params)} -> ${e.status}`);
    check(String(e.error).includes(text ?? field + ":"), `message ${show(e.error)} has ${text ?? field}`);
    const raw = await fetch(baseURL + "/v1/chat/completions", { method: "POST",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify(params) });
    const body = await raw.json();
    check(raw.status === 400 && body.field === field, `field ${show(body)} (want ${field})`);
  }
}

// A stream as OpenAI clients accumulate it: per choice, the role, content, tool-call deltas by
// index (arguments concatenated), the finish reason; plus the usage chunk.
async function collect(stream) {
  const choices = {}; let usage = null, first = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      const acc = choices[c.index] ??= { role: null, content: "", calls: [], finish: null, logprobs: [] };
      if (first === null) first = c.delta;
      if (c.delta.role) acc.role = c.delta.role;
      if (c.delta.content) acc.content += c.delta.content;
      for (const t of c.delta.tool_calls ?? []) {
        const call = acc.calls[t.index] ??= { id: "", name: "", arguments: "" };
        if (t.id) call.id = t.id;
        if (t.function?.name) call.name += t.function.name;
        if (t.function?.arguments) call.arguments += t.function.arguments;
      }
      if (c.logprobs?.content) acc.logprobs.push(...c.logprobs.content);
      if (c.finish_reason) acc.finish = c.finish_reason;
    }
  }
  return { choices, usage, first, chunks };
}

if (mode === "real") {
  const base = { model, messages: user("Once upon a time"), max_tokens: 8, temperature: 0 };
  const r = await client.chat.completions.create(base);
  const text = r.choices[0].message.content;
  check(r.object === "chat.completion" && r.choices[0].message.role === "assistant" &&
        typeof text === "string" && text.length > 0, "chat " + show(r));
  check(["length", "stop"].includes(r.choices[0].finish_reason), "finish_reason " + show(r));
  check(r.usage.completion_tokens >= 1 && r.usage.prompt_tokens > 5 &&
        r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, "usage " + show(r.usage));

  const s = await collect(await client.chat.completions.create(
      { ...base, stream: true, stream_options: { include_usage: true } }));
  check(s.first?.role === "assistant", "role delta first " + show(s.first));
  check(s.choices[0].content === text, `stream ${show(s.choices[0].content)} vs ${show(text)}`);
  check(s.choices[0].finish === r.choices[0].finish_reason, "stream finish " + s.choices[0].finish);
  check(show(s.usage) === show(r.usage), `stream usage ${show(s.usage)} vs ${show(r.usage)}`);
  const plain = await collect(await client.chat.completions.create({ ...base, stream: true }));
  check(plain.usage === null && plain.choices[0].content === text, "no usage without include_usage");

  // The template put BOS in: it is not added again (the same count as LMI's own BOS + the text).
  const rendered = "<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n";
  const lmi = await post("/invocations", { inputs: rendered, parameters: { max_new_tokens: 8, details: true } });
  check(lmi.details.prompt_tokens === r.usage.prompt_tokens,
        `prompt tokens ${r.usage.prompt_tokens} vs LMI ${lmi.details.prompt_tokens} (BOS once)`);
  check(lmi.generated_text === text, `same greedy text as LMI ${show(lmi.generated_text)}`);

  // n sampled choices with a seed: n independent generations, reproducible.
  const n = await client.chat.completions.create({ ...base, n: 3, temperature: 1, seed: 7 });
  check(n.choices.length === 3 && n.choices.every((c, i) => c.index === i &&
        typeof c.message.content === "string"), "n=3 " + show(n.choices));
  const n2 = await client.chat.completions.create({ ...base, n: 3, temperature: 1, seed: 7 });
  check(show(n.choices.map(c => c.message.content)) === show(n2.choices.map(c => c.message.content)),
        "n=3 with a seed is reproducible");
  check(n.usage.completion_tokens === 3 * 8 || n.usage.completion_tokens >= 3, "n usage " + show(n.usage));
  const ns = await collect(await client.chat.completions.create({ ...base, n: 2, stream: true }));
  check(Object.keys(ns.choices).length === 2 && ns.choices[1].content === text &&
        ns.choices[1].role === "assistant", "n=2 streamed " + show(ns.choices));

  // logprobs: one entry per generated token; their texts make the content.
  const lp = await client.chat.completions.create({ ...base, logprobs: true, top_logprobs: 0 });
  const entries = lp.choices[0].logprobs.content;
  check(entries.length === lp.usage.completion_tokens, `logprobs entries ${entries.length}`);
  check(entries.every(e => typeof e.token === "string" && e.logprob <= 0 &&
        Array.isArray(e.bytes) && Array.isArray(e.top_logprobs)), "logprob entries " + show(entries));
  check(entries.map(e => e.token).join("") === text, "logprob tokens make the content");
  const lps = await collect(await client.chat.completions.create({ ...base, logprobs: true, stream: true }));
  check(show(lps.choices[0].logprobs.map(e => e.logprob)) === show(entries.map(e => e.logprob)),
        "streamed logprobs = non-streamed");
  // top_logprobs: the k most likely tokens of each draw, most likely first; greedy picks the first.
  const top = await client.chat.completions.create({ ...base, logprobs: true, top_logprobs: 3 });
  const tops = top.choices[0].logprobs.content;
  check(top.choices[0].message.content === text, "top_logprobs leaves the greedy text as it was");
  check(tops.every(e => e.top_logprobs.length === 3 &&
        e.top_logprobs[0].token === e.token && Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-4 &&
        e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob &&
        e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob),
        "top_logprobs: 3 each, the chosen token first, descending " + show(tops.slice(0, 2)));
  const tops_streamed = await collect(await client.chat.completions.create(
      { ...base, logprobs: true, top_logprobs: 3, stream: true }));
  check(show(tops_streamed.choices[0].logprobs.map(e => e.top_logprobs)) === show(tops.map(e => e.top_logprobs)),
        "streamed top_logprobs = non-streamed");
  await expect400({ ...base, top_logprobs: 2 }, "top_logprobs", "logprobs");
  await expect400({ ...base, logprobs: true, top_logprobs: 21 }, "top_logprobs", "20");

  // Tools are accepted and rendered into the prompt (the tiny model will not call them).
  const t = await client.chat.completions.create({ ...base, tools, tool_choice: "auto" });
  check(t.usage.prompt_tokens > r.usage.prompt_tokens + 20, `tools rendered: ${t.usage.prompt_tokens} prompt tokens`);
  check(typeof t.choices[0].message.content === "string", "tools answer " + show(t.choices[0]));
  const tn = await client.chat.completions.create({ ...base, tools, tool_choice: "none" });
  check(tn.usage.prompt_tokens === r.usage.prompt_tokens, "tool_choice none leaves tools out");

  // No max_tokens: up to the context (option.max_tokens), not LMI's 30 new tokens.
  const long = await client.chat.completions.create({ model, messages: user("Once upon a time"), temperature: 0 });
  check(long.usage.completion_tokens > 30 || long.choices[0].finish_reason === "stop",
        "no max_tokens: " + show(long.usage) + " " + long.choices[0].finish_reason);

  // LMI 0.27: {"messages", "parameters"} on /invocations answers a chat completion.
  const inv = await post("/invocations", { messages: user("Once upon a time"), parameters: { max_new_tokens: 8 } });
  check(inv.object === "chat.completion" && inv.choices[0].message.content === text, "LMI messages " + show(inv));

  await expect400({ ...base, max_tokens: "8" }, "max_tokens");
  await expect400({ ...base, messages: [{ role: "robot", content: "hi" }] }, "messages", "Unknown role: robot");
  await expect400({ ...base, messages: [{ role: "user", content: [{ type: "image_url" }] }] },
                  "messages[0].content[0].type", "text");
  await expect400({ ...base, presence_penalty: 0.5 }, "presence_penalty");
} else if (mode === "forced") {
  const weather = { type: "function", function: { name: "get_weather", parameters: {
    type: "object", required: ["city", "days"], additionalProperties: false,
    properties: { city: { enum: ["Paris", "Tokyo"] }, days: { type: "integer" } } } } };
  const time = { type: "function", function: { name: "get_time", parameters: {
    type: "object", properties: { zone: { enum: ["UTC", "CET"] } }, additionalProperties: false } } };
  const valid = (call) => {
    const args = JSON.parse(call.arguments);
    if (call.name === "get_weather")
      return ["Paris", "Tokyo"].includes(args.city) && Number.isInteger(args.days) && Object.keys(args).length === 2;
    return call.name === "get_time";
  };
  // No max_tokens: the room the 512 positions leave after the prompt with the tools.
  const forced = { model, messages: user("Once upon a time"), tools: [weather, time],
    tool_choice: { type: "function", function: { name: "get_weather" } } };
  const one = (choice, names) => {
    const calls = choice.message?.tool_calls ?? choice.calls;
    return calls?.length === 1 && names.includes(calls[0].function?.name ?? calls[0].name) &&
      valid(calls[0].function ?? calls[0]) && (choice.finish_reason ?? choice.finish) === "tool_calls";
  };
  const g = await client.chat.completions.create({ ...forced, temperature: 0 });
  check(one(g.choices[0], ["get_weather"]), "named, greedy: " + show(g.choices[0]));
  // Seeded sampling, n = 2: one call each, and the same seed gives the same calls.
  const sampled = { ...forced, temperature: 1, seed: 11, n: 2 };
  const s1 = await client.chat.completions.create(sampled);
  const s2 = await client.chat.completions.create(sampled);
  for (const i of [0, 1]) check(one(s1.choices[i], ["get_weather"]), `named, seeded, choice ${i}: ` + show(s1.choices[i]));
  check(show(s1.choices.map(c => c.message.tool_calls[0]?.function.arguments)) ===
        show(s2.choices.map(c => c.message.tool_calls[0]?.function.arguments)), "seeded calls reproducible");
  // "required", streamed: one of the tools, one tool-call delta per choice.
  const r2 = await collect(await client.chat.completions.create(
      { ...forced, tool_choice: "required", temperature: 1, seed: 5, n: 2, stream: true }));
  for (const i of [0, 1])
    check(one(r2.choices[i], ["get_weather", "get_time"]), `required, streamed, choice ${i}: ` + show(r2.choices[i]));
  const rg = await client.chat.completions.create({ ...forced, tool_choice: "required", temperature: 0 });
  check(one(rg.choices[0], ["get_weather", "get_time"]), "required, greedy: " + show(rg.choices[0]));
  // LMI's {"messages", ...} on /invocations takes tool_choice too.
  const inv = await post("/invocations", { messages: user("Once upon a time"), tools: [weather],
    tool_choice: "required" });
  check(one(inv.choices?.[0] ?? {}, ["get_weather"]), "LMI messages, required: " + show(inv));
  await expect400({ ...forced, tool_choice: { type: "function", function: { name: "nope" } } },
                  "tool_choice.function.name", "no tool named");
  await expect400({ ...forced, tools: undefined, tool_choice: "required" }, "tool_choice", "needs a non-empty");
} else {
  // The exact prompt the template rendered: BOS, tools (key order kept), content parts joined,
  // chat_template_kwargs, the generation prompt. It holds "<tool_call>{"name": NAME...", which
  // is not a well-formed call: it must come back as content, streamed or not.
  const params = { model, max_tokens: 200, tools, chat_template_kwargs: { greeting: "Hi" },
    messages: [{ role: "system", content: "S" },
               { role: "user", content: [{ type: "text", text: "ECHO_PROMPT" }, { type: "text", text: "two" }] }] };
  const expected = "<|start_story|><|im_start|>system\nTools:\n" + JSON.stringify(tools[0]).replace(/([,:])/g, "$1 ") +
    "\nCall one as <tool_call>{\"name\": NAME, \"arguments\": ARGS}</tool_call><|im_end|>\n" +
    "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nECHO_PROMPT\ntwo<|im_end|>\n<|im_start|>assistant\nHi";
  const e = await client.chat.completions.create(params);
  check(e.choices[0].message.content === expected, `rendered prompt ${show(e.choices[0].message.content)}\n  want ${show(expected)}`);
  check(e.choices[0].finish_reason === "stop" && !e.choices[0].message.tool_calls, "malformed call is content");
  const es = await collect(await client.chat.completions.create({ ...params, stream: true }));
  check(es.choices[0].content === expected && es.choices[0].calls.length === 0, "streamed echo " + show(es.choices[0]));

  const call = { model, max_tokens: 50, tools, messages: user("EMIT_TOOL_CALL please") };
  const c = await client.chat.completions.create(call);
  const tc = c.choices[0].message.tool_calls ?? [];
  check(c.choices[0].finish_reason === "tool_calls" && tc.length === 1 && c.choices[0].message.content === null,
        "tool call " + show(c.choices[0]));
  check(tc[0]?.type === "function" && tc[0]?.function.name === "get_weather" &&
        show(JSON.parse(tc[0]?.function.arguments ?? "null")) === show({ city: "Paris" }) &&
        /^call_[A-Za-z0-9]+$/.test(tc[0]?.id), "tool call fields " + show(tc));
  const cs = await collect(await client.chat.completions.create({ ...call, stream: true, n: 2 }));
  for (const i of [0, 1]) {
    const ch = cs.choices[i];
    check(ch?.finish === "tool_calls" && ch.content === "" && ch.calls.length === 1 &&
          ch.calls[0].name === "get_weather" && ch.calls[0].id.startsWith("call_") &&
          show(JSON.parse(ch.calls[0].arguments)) === show({ city: "Paris" }), `streamed tool call ${i} ` + show(ch));
  }
  // Without tools (or with tool_choice none) the same text is plain content.
  const nt = await client.chat.completions.create({ ...call, tools: undefined });
  check(nt.choices[0].message.content.startsWith("<tool_call>") && !nt.choices[0].message.tool_calls,
        "no tools: content " + show(nt.choices[0]));
  const none = await client.chat.completions.create({ ...call, tool_choice: "none" });
  check(none.choices[0].message.content.startsWith("<tool_call>"), "tool_choice none: content");
}
console.log(`e2e_openai_chat (${mode}): ${count - failed}/${count} checks passed`);
process.exit(failed ? 1 : 0);
