// Times an ONNX model with ONNX Runtime (npm onnxruntime-node, CPU) on
// deterministic inputs, median of RUNS after a warm-up.
// usage: node ort_run.js MODEL.onnx DTYPE THREADS RUNS NAME=D0xD1x...[@FILE] ...
//   DTYPE: int32 (token ids below 1000) or float32 (values in [-0.5, 0.5)),
//          or, with @FILE, the raw little-endian values of FILE (that dtype)
//   ORT_OUTPUT=PATH (environment): also write the first output's values
//          (raw float32) there, for checking them
const fs = require('fs');
const ort = require(process.env.ORT_MODULE || 'onnxruntime-node');

async function main() {
  const [model, dtype, threads, runs, ...inputs] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1,
    graphOptimizationLevel: 'all', executionMode: 'sequential'});
  const feeds = {};
  for (const spec of inputs) {
    const [name, rest] = spec.split('=');
    const [dims, file] = rest.split('@');
    const shape = dims.split('x').map(Number);
    const n = shape.reduce((a, b) => a * b, 1);
    const Arr = dtype === 'int32' ? Int32Array : Float32Array;
    let data;
    if (file) {
      const buf = fs.readFileSync(file);
      if (buf.length !== 4 * n) throw new Error(`${file}: ${buf.length} bytes, want ${4 * n}`);
      data = new Arr(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
    } else {
      data = new Arr(n);
      for (let i = 0; i < n; ++i)
        data[i] = dtype === 'int32' ? (i * 7919) % 1000
                                    : ((i * 7919) % 1000) / 1000 - 0.5;
    }
    feeds[name] = new ort.Tensor(dtype, data, shape);
  }
  for (let i = 0; i < 3; ++i) {
    const out = await session.run(feeds);
    if (i === 0 && process.env.ORT_OUTPUT) {
      const d = out[session.outputNames[0]].data;
      fs.writeFileSync(process.env.ORT_OUTPUT,
                       Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    }
  }
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
