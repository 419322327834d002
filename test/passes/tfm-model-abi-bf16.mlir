// RUN: tfm-opt %s --tfm-model-abi="panel-width=32 bf16-pairs=true" | FileCheck %s

// bf16-pairs: a linear weight [70, 15] is passed in bf16 pairs of K
// ([ceil(70/32), ceil(15/2), 64]) and unpacked to f32; the embedding's
// plain copy stays f32; the table marks the packed entry.
// CHECK-LABEL: func.func @m(
// CHECK-SAME: memref<3x8x64xbf16>, %{{.*}}: memref<70x15xf32>)
// CHECK-SAME: tfm.params = [{bf16_pairs, name = "embed.tokens.weight", panel = 32 : i64}, {name = "embed.tokens.weight", panel = 0 : i64}]
// CHECK: tfm.unpack_weight %{{.*}} : tensor<3x8x64xbf16> -> tensor<70x15xf32>
func.func @m(%tokens: tensor<?x?xi32>) -> tensor<?x?x70xf32> {
  %e = tfm.param "embed.tokens.weight" : tensor<70x15xf32>
  %x = tfm.embed %tokens, %e : (tensor<?x?xi32>, tensor<70x15xf32>) -> tensor<?x?x15xf32>
  %l = tfm.linear %x, %e : (tensor<?x?x15xf32>, tensor<70x15xf32>) -> tensor<?x?x70xf32>
  return %l : tensor<?x?x70xf32>
}
