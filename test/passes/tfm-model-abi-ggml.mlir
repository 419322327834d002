// RUN: tfm-opt %s --tfm-model-abi="panel-width=16 ggml-blocks=true" | FileCheck %s

// ggml-blocks: the weight [64, 32] of a tfm.linear is passed as its rows in
// ggml blocks, sized for the widest type (64 x 32 f32 = 8192 bytes), and
// their ggml type, viewed by tfm.ggml_weight; the embedding reads the same
// view of the same (tied) parameter: it is stored once. A linear whose K
// (40) is not whole blocks of 32 keeps f32 panels.
// CHECK-LABEL: func.func @m(
// CHECK-SAME: %{{.*}}: memref<8192xi8>, %{{.*}}: memref<1xi32>, %{{.*}}: memref<1x40x16xf32>)
// CHECK-SAME: tfm.params = [{ggml = "rows", name = "embed.tokens.weight", panel = 0 : i64}, {ggml = "type", name = "embed.tokens.weight", panel = 0 : i64}, {name = "proj.weight", panel = 16 : i64}]
// CHECK-DAG: %[[R:.*]] = bufferization.to_tensor %{{.*}} restrict : memref<8192xi8>
// CHECK-DAG: %[[T:.*]] = bufferization.to_tensor %{{.*}} restrict : memref<1xi32>
// CHECK: %[[W:.*]] = tfm.ggml_weight %[[R]], %[[T]] : tensor<8192xi8>, tensor<1xi32> -> tensor<64x32xf32>
// CHECK: tfm.embed %{{.*}}, %[[W]]
// CHECK: tfm.linear %{{.*}}, %[[W]]
func.func @m(%tokens: tensor<?x?xi32>) -> tensor<?x?x40xf32> {
  %e = tfm.param "embed.tokens.weight" : tensor<64x32xf32>
  %x = tfm.embed %tokens, %e : (tensor<?x?xi32>, tensor<64x32xf32>) -> tensor<?x?x32xf32>
  %l = tfm.linear %x, %e : (tensor<?x?x32xf32>, tensor<64x32xf32>) -> tensor<?x?x64xf32>
  %p = tfm.param "proj.weight" : tensor<16x40xf32>
  %s = tensor.extract_slice %l[0, 0, 0] [1, 1, 40] [1, 1, 1] : tensor<?x?x64xf32> to tensor<1x1x40xf32>
  %c = tensor.cast %s : tensor<1x1x40xf32> to tensor<?x?x40xf32>
  %y = tfm.linear %c, %p : (tensor<?x?x40xf32>, tensor<16x40xf32>) -> tensor<?x?x16xf32>
  %z = tensor.cast %y : tensor<?x?x16xf32> to tensor<?x?x16xf32>
  %o = tensor.pad %z low[0, 0, 0] high[0, 0, 24] {
  ^bb0(%i: index, %j: index, %k: index):
    %f = arith.constant 0.0 : f32
    tensor.yield %f : f32
  } : tensor<?x?x16xf32> to tensor<?x?x40xf32>
  return %o : tensor<?x?x40xf32>
}
