// Input of decode-ptx.test: attention over a KV cache (f16), multi-query
// with 8 heads and head_dim 128, causal, a T5 relative bias table.
func.func @decode(%q: tensor<?x8x?x128xf16>, %kc: tensor<?x1x128x?xf16>, %vc: tensor<?x1x?x128xf16>, %pos: tensor<?xi32>) -> tensor<?x8x?x128xf16> {
  %t = arith.constant dense<[[0.0, -0.1, -0.2, -0.3, 0.1, 0.2, 0.3, 0.4], [0.1, 0.0, -0.1, -0.2, 0.2, 0.3, 0.4, 0.5], [0.2, 0.1, 0.0, -0.1, 0.3, 0.4, 0.5, 0.6], [0.3, 0.2, 0.1, 0.0, 0.4, 0.5, 0.6, 0.7]]> : tensor<4x8xf16>
  %o = tfm.attention %q, %kc, %vc relative(%t) positions(%pos) {key_transposed, mask = #tfm.mask<causal>, scale = 0.088 : f64, relative_max_distance = 6 : i64} : (tensor<?x8x?x128xf16>, tensor<?x1x128x?xf16>, tensor<?x1x?x128xf16>, tensor<4x8xf16>, tensor<?xi32>) -> tensor<?x8x?x128xf16>
  return %o : tensor<?x8x?x128xf16>
}
