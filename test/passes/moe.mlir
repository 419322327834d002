// A mixture of experts through the passes: tfm-decompose (the router's
// linear, tfm.route, tfm.moe_experts, the shared expert's linears behind
// its sigmoid gate; with dense-experts every expert over every row), then
// convert-tfm-to-linalg (the route as linalg reductions, the experts as
// tfm.moe_kernel on stacks packed expert by expert), then tfm-model-abi
// (the stacks passed packed) and tfm-lower-kernels (the counting sort and
// the linear kernels of each chosen expert).
// RUN: tfm-opt %s --tfm-decompose | FileCheck %s --check-prefix=DEC
// RUN: tfm-opt %s --tfm-decompose=dense-experts | FileCheck %s --check-prefix=DENSE
// RUN: tfm-opt %s --tfm-decompose --tfm-model-abi="panel-width=32" --convert-tfm-to-linalg | FileCheck %s --check-prefix=LINALG
// RUN: tfm-opt %s --tfm-decompose --tfm-model-abi="panel-width=32" | FileCheck %s --check-prefix=ABI
// RUN: tfm-opt %s --tfm-cpu-pipeline="vector-width=16" | FileCheck %s --check-prefix=LLVM

func.func @moe(%x: tensor<?x?x16xf32>) -> tensor<?x?x16xf32> {
  %wr = tfm.param "layers.0.ffn.router.weight" : tensor<4x16xf32>
  %up = tfm.param "layers.0.ffn.experts.up.weight" : tensor<4x40x16xf32>
  %gate = tfm.param "layers.0.ffn.experts.gate.weight" : tensor<4x40x16xf32>
  %down = tfm.param "layers.0.ffn.experts.down.weight" : tensor<4x16x40xf32>
  %su = tfm.param "layers.0.ffn.shared.up.weight" : tensor<24x16xf32>
  %sg = tfm.param "layers.0.ffn.shared.gate.weight" : tensor<24x16xf32>
  %sd = tfm.param "layers.0.ffn.shared.down.weight" : tensor<16x24xf32>
  %ss = tfm.param "layers.0.ffn.shared.scale.weight" : tensor<1x16xf32>
  %y = tfm.moe %x router(%wr) up(%up) gate(%gate) down(%down) shared(%su, %sg, %sd) shared_scale(%ss)
         {experts_per_token = 2 : i64, router = #tfm.router<softmax>, normalize, activation = #tfm.activation<swiglu>}
         : (tensor<?x?x16xf32>, tensor<4x16xf32>, tensor<4x40x16xf32>, tensor<4x40x16xf32>, tensor<4x16x40xf32>, tensor<24x16xf32>, tensor<24x16xf32>, tensor<16x24xf32>, tensor<1x16xf32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}

// DEC: %[[L:.*]] = tfm.linear %[[X:.*]], %{{.*}} : (tensor<?x?x16xf32>, tensor<4x16xf32>) -> tensor<?x?x4xf32>
// DEC: %[[W:.*]] = tfm.route %[[L]] {experts_per_token = 2 : i64, normalize, router = #tfm.router<softmax>}
// DEC: %[[E:.*]] = tfm.moe_experts %[[X]], %[[W]] up(%{{.*}}) gate(%{{.*}}) down(%{{.*}}) {activation = #tfm.activation<swiglu>}
// DEC: %[[S:.*]] = tfm.linear {{.*}} -> tensor<?x?x16xf32>
// DEC: %[[G:.*]] = tfm.linear %[[X]], %{{.*}} : (tensor<?x?x16xf32>, tensor<1x16xf32>) -> tensor<?x?x1xf32>
// DEC: %[[SG:.*]] = tfm.row_scale %[[S]], %[[G]] {activation = #tfm.activation<sigmoid>}
// DEC: tfm.add %[[E]], %[[SG]]
// DEC-NOT: tfm.moe

// Four experts: each one's slices, ffn and routing weight, summed in order.
// DENSE: tfm.route
// DENSE: tensor.extract_slice %{{.*}}[0, 0, 0] [1, 40, 16] [1, 1, 1] : tensor<4x40x16xf32> to tensor<40x16xf32>
// DENSE: tensor.extract_slice %{{.*}}[0, 0, 0] [%{{.*}}, %{{.*}}, 1] [1, 1, 1] : tensor<?x?x4xf32> to tensor<?x?x1xf32>
// DENSE-COUNT-4: tfm.row_scale %{{[0-9]+}}, %{{[a-z_0-9]+}} : (tensor<?x?x16xf32>, tensor<?x?x1xf32>)
// DENSE: tfm.row_scale {{.*}}{activation = #tfm.activation<sigmoid>}
// DENSE-NOT: tfm.moe_experts

// LINALG: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// LINALG: tfm.moe_kernel ins(%{{.*}}, %{{.*}} : tensor<?x16xf32>, tensor<?x4xf32>) up(%{{.*}} : tensor<4x2x16x32xf32>) gate(%{{.*}} : tensor<4x2x16x32xf32>) down(%{{.*}} : tensor<4x1x40x32xf32>) outs(%{{.*}} : tensor<?x16xf32>) {activation = #tfm.activation<swiglu>, hidden = 40 : i64}
// LINALG-NOT: tfm.moe_experts

// ABI: memref<4x2x16x32xf32>
// ABI-SAME: tfm.params = [{{.*}}{name = "layers.0.ffn.experts.up.weight", panel = 32 : i64}
// ABI: tfm.unpack_weight %{{.*}} : tensor<4x2x16x32xf32> -> tensor<4x40x16xf32>

// LLVM: llvm.func @moe
// LLVM-NOT: tfm.moe
// LLVM-NOT: tfm.linear_kernel
