// RUN: tfm-opt %s --tfm-model-abi="panel-width=32 int8-quads=true" | FileCheck %s

// int8-quads: the weight of a tfm.linear [70, 15] is passed as int8 in
// quads of K with its columns' scales and sums ([ceil(70/32),
// ceil(15/4) + 2, 4 x 32] bytes) and unpacked to f32; the embedding's
// plain copy stays f32; the table marks the quantized entry.
// CHECK-LABEL: func.func @m(
// CHECK-SAME: memref<3x6x128xi8>, %{{.*}}: memref<70x15xf32>)
// CHECK-SAME: tfm.params = [{int8_quads, name = "embed.tokens.weight", panel = 32 : i64}, {name = "embed.tokens.weight", panel = 0 : i64}]
// CHECK: tfm.unpack_weight %{{.*}} : tensor<3x6x128xi8> -> tensor<70x15xf32>
func.func @m(%tokens: tensor<?x?xi32>) -> tensor<?x?x70xf32> {
  %e = tfm.param "embed.tokens.weight" : tensor<70x15xf32>
  %x = tfm.embed %tokens, %e : (tensor<?x?xi32>, tensor<70x15xf32>) -> tensor<?x?x15xf32>
  %l = tfm.linear %x, %e : (tensor<?x?x15xf32>, tensor<70x15xf32>) -> tensor<?x?x70xf32>
  return %l : tensor<?x?x70xf32>
}
