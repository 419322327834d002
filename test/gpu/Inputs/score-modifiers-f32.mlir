// Input of score-modifiers-ptx.test: Q/K RoPE with a non-geometric
// (llama3-like) partial table, softcap, ALiBi, a T5 relative bias table and
// a causal mask, with grouped K/V (f32).
func.func @attn(%q: tensor<1x4x?x64xf32>, %k: tensor<1x2x?x64xf32>, %v: tensor<1x2x?x64xf32>) -> tensor<1x4x?x64xf32> {
  %t = arith.constant dense<[[0.0, -0.1, -0.2, -0.3], [0.1, 0.0, -0.1, -0.2], [0.2, 0.1, 0.0, -0.1], [0.3, 0.2, 0.1, 0.0], [0.4, 0.3, 0.2, 0.1], [0.5, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3], [0.7, 0.6, 0.5, 0.4]]> : tensor<8x4xf32>
  %qr = tfm.rope %q {inv_freq = array<f64: 1.0, 0.3, 0.02, 0.001>, style = #tfm.rope_style<half>} : tensor<1x4x?x64xf32>
  %kr = tfm.rope %k {inv_freq = array<f64: 1.0, 0.3, 0.02, 0.001>, style = #tfm.rope_style<half>} : tensor<1x2x?x64xf32>
  %k4 = tfm.repeat_kv %kr {repeats = 2 : i64} : (tensor<1x2x?x64xf32>) -> tensor<1x4x?x64xf32>
  %v4 = tfm.repeat_kv %v {repeats = 2 : i64} : (tensor<1x2x?x64xf32>) -> tensor<1x4x?x64xf32>
  %s = tfm.matmul %qr, %k4 {transpose_rhs} : (tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>) -> tensor<1x4x?x?xf32>
  %ss = tfm.scale %s {factor = 0.125 : f64} : tensor<1x4x?x?xf32>
  %c = tfm.softcap %ss {cap = 20.0 : f64} : tensor<1x4x?x?xf32>
  %a = tfm.alibi %c {slopes = array<f64: 0.25, 0.0625, 0.015625, 0.00390625>} : tensor<1x4x?x?xf32>
  %r = tfm.relative_bias %a, %t {max_distance = 6 : i64} : (tensor<1x4x?x?xf32>, tensor<8x4xf32>) -> tensor<1x4x?x?xf32>
  %m = tfm.mask %r {kind = #tfm.mask<causal>} : (tensor<1x4x?x?xf32>) -> tensor<1x4x?x?xf32>
  %p = tfm.softmax %m {axis = 3 : i64} : tensor<1x4x?x?xf32>
  %o = tfm.matmul %p, %v4 : (tensor<1x4x?x?xf32>, tensor<1x4x?x64xf32>) -> tensor<1x4x?x64xf32>
  return %o : tensor<1x4x?x64xf32>
}
