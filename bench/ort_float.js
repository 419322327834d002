// Times an ONNX attention model (inputs q, k, v: float [B, T, H*D]) with ONNX
// Runtime (npm onnxruntime-node, CPU).
// usage: node ort_float.js MODEL.onnx B T HD RUNS THREADS
const ort = require(process.env.ORT_MODULE || 'onnxruntime-node');

async function main() {
  const [model, b, t, hd, runs, threads] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1,
    graphOptimizationLevel: 'all', executionMode: 'sequential'});
  const n = Number(b) * Number(t) * Number(hd);
  const data = new Float32Array(n);
  for (let i = 0; i < n; ++i) data[i] = ((i * 7919) % 1000) / 1000 - 0.5;
  const feeds = {};
  for (const name of ['q', 'k', 'v'])
    feeds[name] = new ort.Tensor('float32', data, [Number(b), Number(t), Number(hd)]);
  for (let i = 0; i < 3; ++i) await session.run(feeds);
  const times = [];
  for (let i = 0; i < Number(runs); ++i) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(JSON.stringify({median_ms: times[Math.floor(times.length / 2)]}));
}
main().catch((e) => { console.error(e); process.exit(1); });
