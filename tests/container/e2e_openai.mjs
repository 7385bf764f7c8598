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

try {
  await client.completions.create({ model, prompt: "x", max_tokens: 4, n: 3 });
  check(false, "n=3 accepted");
} catch (e) {
  check(e.status === 400, "n=3 -> " + e.status);
}
console.log(failed ? `e2e_openai: ${failed} failures` : "e2e_openai: all checks passed");
process.exit(failed ? 1 : 0);
