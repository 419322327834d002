// RUN: tfm-opt %s --tfm-model-abi=panel-width=32 | FileCheck %s

// Inputs, then the output, then the parameters in first-use order; the
// linear weight is packed in panels of 32 columns ([ceil(70/32), 16, 32])
// and re-expressed as tfm.unpack_weight; the embedding read by both the
// lookup and the LM head is passed twice.
// CHECK-LABEL: func.func @m(
// CHECK-SAME: %[[TOK:.*]]: memref<?x?xi32>, %[[OUT:.*]]: memref<?x?x70xf32>,
// CHECK-SAME: memref<{{70x16|3x16x32}}xf32>, %{{.*}}: memref<{{70x16|3x16x32}}xf32>)
// CHECK-SAME: attributes {tfm.num_inputs = 1 : i64, tfm.params = [{name = "embed.tokens.weight", panel = {{0|32}} : i64}, {name = "embed.tokens.weight", panel = {{0|32}} : i64}]}
// CHECK-DAG: bufferization.to_tensor %[[TOK]] restrict
// CHECK-DAG: tfm.unpack_weight %{{.*}} : tensor<3x16x32xf32> -> tensor<70x16xf32>
// CHECK: tfm.embed
// CHECK: tfm.linear
// CHECK: bufferization.materialize_in_destination %{{.*}} in restrict writable %[[OUT]]
// CHECK-NEXT: return
// CHECK-NOT: tfm.param
func.func @m(%tokens: tensor<?x?xi32>) -> tensor<?x?x70xf32> {
  %e = tfm.param "embed.tokens.weight" : tensor<70x16xf32>
  %x = tfm.embed %tokens, %e : (tensor<?x?xi32>, tensor<70x16xf32>) -> tensor<?x?x16xf32>
  %w = tfm.param "embed.tokens.weight" : tensor<70x16xf32>
  %y = tfm.linear %x, %w : (tensor<?x?x16xf32>, tensor<70x16xf32>) -> tensor<?x?x70xf32>
  return %y : tensor<?x?x70xf32>
}
