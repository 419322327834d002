// Input of mlir-input.test: softmax(Q K^T / 4 + causal) V spelled out.
func.func @attn(%q: tensor<1x2x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32> {
  %s = tfm.matmul %q, %k {transpose_rhs} : (tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) -> tensor<1x2x?x?xf32>
  %ss = tfm.scale %s {factor = 0.25 : f64} : tensor<1x2x?x?xf32>
  %m = tfm.mask %ss {kind = #tfm.mask<causal>} : (tensor<1x2x?x?xf32>) -> tensor<1x2x?x?xf32>
  %p = tfm.softmax %m {axis = 3 : i64} : tensor<1x2x?x?xf32>
  %o = tfm.matmul %p, %v : (tensor<1x2x?x?xf32>, tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32>
  return %o : tensor<1x2x?x16xf32>
}
