// The official `openai` npm client against lmx-server's /v1/completions (plain and streamed).
// usage: node e2e_openai.mjs BASE_URL MODEL   (NODE_PATH must reach the installed package)
import { createRequire } from "module";
const require = createRequire(process.env.NODE_PATH.split(":")[0] + "/");
const OpenAI = require("openai");
const [baseURL, model] = process.argv.slice(2);
const client = new (OpenAI.default ?? OpenAI)({ baseURL: baseURL + "/v1", apiKey: "none" });
let failed = 0;
const check = (cond, what) => { if (!cond) { failed++; console.log("FAIL:", what); } };

const r = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 8,
                                            temperature: 0 });
check(r.object === "text_completion" && typeof r.choices[0].text === "string",
      "completion " + JSON.stringify(r));
check(["length", "stop"].includes(r.choices[0].finish_reason), "finish_reason");
check(r.usage.completion_tokens >= 1 && r.usage.prompt_tokens >= 1, "usage");

const stream = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 8,
                                                 temperature: 0, stream: true });
let text = "", last = null, n = 0;
for await (const chunk of stream) { text += chunk.choices[0].text; last = chunk; n++; }
check(n >= 1 && ["length", "stop"].includes(last.choices[0].finish_reason), "stream end");
check(text === r.choices[0].text, `stream text ${JSON.stringify(text)} vs ${JSON.stringify(r.choices[0].text)}`);

// n choices (seed + i each: reproducible), logprobs of the chosen tokens, echo.
const params = { model, prompt: "Once upon a time", max_tokens: 6, n: 3, temperature: 1, seed: 11,
                 logprobs: 0, echo: true };
const nc = await client.completions.create(params);
const again = await client.completions.create(params);
check(nc.choices.length === 3 && nc.choices.every((c, i) => c.index === i &&
      c.text.startsWith("Once upon a time")), "n=3 " + JSON.stringify(nc.choices));
check(JSON.stringify(nc.choices.map(c => c.text)) === JSON.stringify(again.choices.map(c => c.text)),
      "n=3 with a seed is reproducible");
for (const c of nc.choices) {
  const lp = c.logprobs;
  check(lp.tokens.length === lp.token_logprobs.length && lp.tokens.length === lp.text_offset.length &&
        lp.token_logprobs.every(x => x <= 0) &&
        lp.tokens.every((t, k) => c.text.substr(lp.text_offset[k], t.length) === t) &&
        "Once upon a time" + lp.tokens.join("") === c.text, "logprobs " + JSON.stringify(c));
}
check(nc.usage.completion_tokens === nc.choices.reduce((a, c) => a + c.logprobs.tokens.length, 0),
      "n usage " + JSON.stringify(nc.usage));
const ncs = await client.completions.create({ ...params, stream: true, echo: false,
                                             stream_options: { include_usage: true } });
const texts = ["", "", ""]; let usage = null;
for await (const chunk of ncs) {
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) texts[c.index] += c.text;
}
check(texts.every((t, i) => "Once upon a time" + t === nc.choices[i].text), "n streamed " + JSON.stringify(texts));
check(usage?.completion_tokens === nc.usage.completion_tokens, "streamed usage " + JSON.stringify(usage));
// logprobs k: the k most likely tokens at each position, as {token: logprob}; the chosen one's
// logprob is the largest of them under greedy decoding.
const lp = await client.completions.create({ model, prompt: "x", max_tokens: 4, logprobs: 2 });
const lpc = lp.choices[0].logprobs;
check(lpc.tokens.length === 4 && lpc.top_logprobs.length === 4 &&
      lpc.top_logprobs.every((alts, i) => Object.keys(alts).length >= 1 && Object.keys(alts).length <= 2 &&
        Math.abs(Math.max(...Object.values(alts)) - lpc.token_logprobs[i]) < 1e-4),
      "logprobs=2 " + JSON.stringify(lpc));
try {
  await client.completions.create({ model, prompt: "x", max_tokens: 4, logprobs: 6 });
  check(false, "logprobs=6 accepted");
} catch (e) {
  check(e.status === 400, "logprobs=6 -> " + e.status);
}
console.log(failed ? `e2e_openai: ${failed} failures` : "e2e_openai: all checks passed");
process.exit(failed ? 1 : 0);
