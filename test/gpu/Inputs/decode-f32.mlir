// Input of decode-ptx.test: attention over a KV cache (f32), GQA with 4
// query heads per KV head, a sliding window over a ring buffer, softcap and
// ALiBi.
func.func @decode(%q: tensor<?x8x?x64xf32>, %kc: tensor<?x2x64x?xf32>, %vc: tensor<?x2x?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x8x?x64xf32> {
  %o = tfm.attention %q, %kc, %vc positions(%pos) {key_transposed, mask = #tfm.mask<sliding>, window = 100 : i64, ring, scale = 0.125 : f64, softcap = 30.0 : f64, alibi_slopes = array<f64: 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625>} : (tensor<?x8x?x64xf32>, tensor<?x2x64x?xf32>, tensor<?x2x?x64xf32>, tensor<?xi32>) -> tensor<?x8x?x64xf32>
  return %o : tensor<?x8x?x64xf32>
}
