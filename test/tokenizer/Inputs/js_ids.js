// Prints, for every line of a corpus file, the token ids an independent
// implementation gives: `gpt-3-encoder` for GPT-2's encoder.json + vocab.bpe,
// the transformers.js port `@lenml/tokenizers` for a tokenizer.json.
//
//   node js_ids.js NODE_MODULES (gpt2 | TOKENIZER_JSON) CORPUS [plain] [special-as-text]
//   node js_ids.js NODE_MODULES (gpt2 | TOKENIZER_JSON) CORPUS MODES=FILE...
//
// The second form writes each run to its file, MODES being "default" or
// the modes joined by "+" (plain+special-as-text=FILE).
// One line of space-separated ids per corpus line. The corpus is UTF-8 with
// "\n"-separated lines; the escapes \n, \t, \r and \\ in a line stand for
// those characters. "plain": no special tokens added (add_special_tokens =
// false). "special-as-text": the special added tokens are left out of the
// tokenizer, so that text spelling them is encoded as text (Hugging Face's
// split_special_tokens).
"use strict";
const fs = require("fs");
const path = require("path");

let [nodeModules, which, corpusPath, ...flags] = process.argv.slice(2);
if (!nodeModules || !which || !corpusPath) {
  console.error("usage: node js_ids.js NODE_MODULES (gpt2 | TOKENIZER_JSON) CORPUS [plain] [special-as-text]\n" +
                "       node js_ids.js NODE_MODULES (gpt2 | TOKENIZER_JSON) CORPUS MODES=FILE...");
  process.exit(2);
}
if (!fs.existsSync(nodeModules)) {
  console.error(`js_ids.js: ${nodeModules} is missing: run 'npm install --no-audit --no-fund' in test/tokenizer`);
  process.exit(2);
}
nodeModules = path.resolve(nodeModules);
const lines = fs.readFileSync(corpusPath, "utf8").split("\n");
if (lines[lines.length - 1] === "") lines.pop();
const unescape = (s) => s.replace(/\\(.)/g, (_, c) => ({ n: "\n", t: "\t", r: "\r", "\\": "\\" })[c] ?? "\\" + c);

// The tokenizer, once per special-as-text or not.
const tokenizers = new Map();
function encoder(modes) {
  const plain = modes.includes("plain");
  if (which === "gpt2") {
    const enc = require(path.join(nodeModules, "gpt-3-encoder"));
    return (t) => enc.encode(t);
  }
  const asText = modes.includes("special-as-text");
  if (!tokenizers.has(asText)) {
    const { TokenizerLoader } = require(path.join(nodeModules, "@lenml/tokenizers"));
    const tokenizerJSON = JSON.parse(fs.readFileSync(which, "utf8"));
    if (asText)
      tokenizerJSON.added_tokens = tokenizerJSON.added_tokens.filter((t) => !t.special);
    const cfgPath = path.join(path.dirname(which), "tokenizer_config.json");
    const tokenizerConfig = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, "utf8")) : {};
    tokenizers.set(asText, TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig }));
  }
  const tok = tokenizers.get(asText);
  return (t) => tok.encode(t, { add_special_tokens: !plain });
}
const ids = (encode) => lines.map((line) => encode(unescape(line)).join(" ")).join("\n") + "\n";

// MODES=FILE (modes joined by "+", "default" for none): one file per run
// of the corpus, from one process (loading a tokenizer is most of a run).
if (flags.some((f) => f.includes("="))) {
  for (const run of flags) {
    const eq = run.indexOf("=");
    if (eq < 0) {
      console.error(`js_ids.js: '${run}' is not MODES=FILE`);
      process.exit(2);
    }
    const modes = run.slice(0, eq).split("+").filter((m) => m !== "default");
    fs.writeFileSync(run.slice(eq + 1), ids(encoder(modes)));
  }
} else {
  process.stdout.write(ids(encoder(flags)));
}
