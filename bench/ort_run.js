// Times an ONNX model with ONNX Runtime (npm onnxruntime-node, CPU).
// usage: node ort_run.js MODEL.onnx INPUT_NAME B T RUNS THREADS
const ort = require(process.env.ORT_MODULE || 'onnxruntime-node');

async function main() {
  const [model, inputName, b, t, runs, threads] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1,
    graphOptimizationLevel: 'all', executionMode: 'sequential'});
  const n = Number(b) * Number(t);
  const data = new Int32Array(n);
  for (let i = 0; i < n; ++i) data[i] = (i * 7919) % 1000;
  const feeds = {};
  feeds[inputName] = new ort.Tensor('int32', data, [Number(b), Number(t)]);
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
