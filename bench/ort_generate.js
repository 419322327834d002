// Prefill and decode timing of a decoder exported with past key/values
// (generate_bench.py --export-onnx) on ONNX Runtime (npm onnxruntime-node,
// CPU). The graph: inputs tokens int64 [1, T], past_k / past_v float32
// [L, 1, kv_heads, S, head_dim] (S = 0 for the prefill); outputs logits
// float32 [1, vocab] (last position), present_k / present_v [L, 1, kv_heads,
// S + T, head_dim], which are fed back as the next step's past (ORT's plain
// past/present API: the cache goes out and back in every step).
//
// usage: node ort_generate.js MODEL.onnx THREADS P N REPS L KV_HEADS HEAD_DIM VOCAB
// Tokens are fixed, as llama_bench's: token(i) = (1 + 7919 i) % vocab.
// Prints one JSON line: {"prefill_ms": [...], "decode_ms": [...all steps],
// "load_ms": ...}.
const ort = require(process.env.ORT_MODULE || 'onnxruntime-node');

function tok(i, vocab) {
  return BigInt((1 + 7919 * i) % vocab);
}

async function main() {
  const [model, threads, P, N, reps, L, kvh, hd, vocab] =
      process.argv.slice(2).map((x, i) => (i ? Number(x) : x));
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1,
    graphOptimizationLevel: 'all', executionMode: 'sequential'});
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const empty = () =>
      new ort.Tensor('float32', new Float32Array(0), [L, 1, kvh, 0, hd]);
  const prompt = new BigInt64Array(P);
  for (let i = 0; i < P; ++i) prompt[i] = tok(i, vocab);

  const prefill = [], decode = [];
  for (let r = -1; r < reps; ++r) {  // r = -1: warm-up
    let feeds = {tokens: new ort.Tensor('int64', prompt, [1, P]),
                 past_k: empty(), past_v: empty()};
    let a = process.hrtime.bigint();
    let out = await session.run(feeds);
    const pms = Number(process.hrtime.bigint() - a) / 1e6;
    if (r >= 0) prefill.push(pms);
    const steps = r < 0 ? Math.min(N, 4) : N;
    for (let s = 0; s < steps; ++s) {
      feeds = {tokens: new ort.Tensor('int64', BigInt64Array.of(tok(P + s, vocab)), [1, 1]),
               past_k: out.present_k, past_v: out.present_v};
      a = process.hrtime.bigint();
      out = await session.run(feeds);
      const dms = Number(process.hrtime.bigint() - a) / 1e6;
      if (r >= 0) decode.push(dms);
    }
  }
  console.log(JSON.stringify({prefill_ms: prefill, decode_ms: decode, load_ms: loadMs}));
}
main().catch((e) => { console.error(e); process.exit(1); });
