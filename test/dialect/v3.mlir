// The language v3 ops (mixtures of experts, attention sinks) print and
// parse back, in the custom and the generic form.
// RUN: tfm-opt %s | tfm-opt | FileCheck %s
// RUN: tfm-opt %s --mlir-print-op-generic | tfm-opt | FileCheck %s

// CHECK-LABEL: func.func @moe
func.func @moe(%x: tensor<?x?x16xf32>, %wr: tensor<4x16xf32>, %br: tensor<4xf32>,
               %up: tensor<4x32x16xf32>, %gate: tensor<4x32x16xf32>, %down: tensor<4x16x32xf32>,
               %bu: tensor<4x32xf32>, %bg: tensor<4x32xf32>, %bd: tensor<4x16xf32>,
               %su: tensor<24x16xf32>, %sg: tensor<24x16xf32>, %sd: tensor<16x24xf32>, %ss: tensor<1x16xf32>) -> tensor<?x?x16xf32> {
  // CHECK: tfm.moe %{{.*}} router(%{{.*}}, %{{.*}}) up(%{{.*}}) gate(%{{.*}}) down(%{{.*}}) expert_biases(%{{.*}}, %{{.*}}, %{{.*}}) shared(%{{.*}}, %{{.*}}, %{{.*}}) shared_scale(%{{.*}}) {activation = #tfm.activation<swiglu>, experts_per_token = 2 : i64, normalize, routed_scale = 2.500000e+00 : f64, router = #tfm.router<softmax>}
  %y = tfm.moe %x router(%wr, %br) up(%up) gate(%gate) down(%down) expert_biases(%bu, %bg, %bd)
         shared(%su, %sg, %sd) shared_scale(%ss)
         {experts_per_token = 2 : i64, router = #tfm.router<softmax>, normalize, routed_scale = 2.5 : f64,
          activation = #tfm.activation<swiglu>}
         : (tensor<?x?x16xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4x32x16xf32>, tensor<4x32x16xf32>,
            tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x16xf32>, tensor<24x16xf32>,
            tensor<24x16xf32>, tensor<16x24xf32>, tensor<1x16xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfm.moe %{{.*}} router(%{{.*}}) up(%{{.*}}) down(%{{.*}}) {activation = #tfm.activation<gelu>, experts_per_token = 1 : i64, router = #tfm.router<topk_softmax>}
  %z = tfm.moe %y router(%wr) up(%up) down(%down)
         {experts_per_token = 1 : i64, router = #tfm.router<topk_softmax>, activation = #tfm.activation<gelu>}
         : (tensor<?x?x16xf32>, tensor<4x16xf32>, tensor<4x32x16xf32>, tensor<4x16x32xf32>) -> tensor<?x?x16xf32>
  return %z : tensor<?x?x16xf32>
}

// CHECK-LABEL: func.func @primitives
func.func @primitives(%x: tensor<?x?x16xf32>, %l: tensor<?x?x4xf32>, %s: tensor<?x?x1xf32>,
                      %up: tensor<4x32x16xf32>, %down: tensor<4x16x32xf32>) -> tensor<?x?x16xf32> {
  // CHECK: tfm.route %{{.*}} {experts_per_token = 2 : i64, normalize, router = #tfm.router<softmax>} : tensor<?x?x4xf32>
  %w = tfm.route %l {experts_per_token = 2 : i64, router = #tfm.router<softmax>, normalize} : tensor<?x?x4xf32>
  // CHECK: tfm.moe_experts %{{.*}}, %{{.*}} up(%{{.*}}) down(%{{.*}}) {activation = #tfm.activation<relu>}
  %y = tfm.moe_experts %x, %w up(%up) down(%down) {activation = #tfm.activation<relu>}
         : (tensor<?x?x16xf32>, tensor<?x?x4xf32>, tensor<4x32x16xf32>, tensor<4x16x32xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfm.row_scale %{{.*}}, %{{.*}} {activation = #tfm.activation<sigmoid>}
  %z = tfm.row_scale %y, %s {activation = #tfm.activation<sigmoid>} : (tensor<?x?x16xf32>, tensor<?x?x1xf32>) -> tensor<?x?x16xf32>
  return %z : tensor<?x?x16xf32>
}

// CHECK-LABEL: func.func @kernel
func.func @kernel(%x: memref<?x16xf32>, %w: memref<?x4xf32>, %up: memref<4x1x16x32xf32>,
                  %down: memref<4x1x32x32xf32>, %y: memref<?x16xf32>) {
  // CHECK: tfm.moe_kernel ins(%{{.*}}, %{{.*}} : memref<?x16xf32>, memref<?x4xf32>) up(%{{.*}} : memref<4x1x16x32xf32>) gate(%{{.*}} : memref<4x1x16x32xf32>) down(%{{.*}} : memref<4x1x32x32xf32>) outs(%{{.*}} : memref<?x16xf32>) {activation = #tfm.activation<swiglu>, hidden = 32 : i64}
  tfm.moe_kernel ins(%x, %w : memref<?x16xf32>, memref<?x4xf32>) up(%up : memref<4x1x16x32xf32>) gate(%up : memref<4x1x16x32xf32>) down(%down : memref<4x1x32x32xf32>) outs(%y : memref<?x16xf32>) {hidden = 32 : i64, activation = #tfm.activation<swiglu>}
  return
}

// Attention sinks (v3) on the softmax, the fused attention and its kernel.
// CHECK-LABEL: func.func @sinks
func.func @sinks(%s: tensor<?x4x?x?xf32>, %q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %sinks: tensor<4xf32>,
                 %qm: memref<?x4x?x8xf32>, %ktm: memref<?x2x8x?xf32>, %vm: memref<?x2x?x8xf32>, %sm: memref<4xf32>, %om: memref<?x4x?x8xf32>) -> (tensor<?x4x?x?xf32>, tensor<?x4x?x8xf32>) {
  // CHECK: tfm.softmax %{{.*}} sinks(%{{.*}} : tensor<4xf32>) {axis = 3 : i64} : tensor<?x4x?x?xf32>
  %p = tfm.softmax %s sinks(%sinks : tensor<4xf32>) {axis = 3 : i64} : tensor<?x4x?x?xf32>
  // CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} sinks(%{{.*}}) {mask = #tfm.mask<causal>
  %o = tfm.attention %q, %k, %k sinks(%sinks) {mask = #tfm.mask<causal>, scale = 0.35 : f64}
         : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>, tensor<4xf32>) -> tensor<?x4x?x8xf32>
  // CHECK: tfm.attention_kernel ins({{.*}}) sinks(%{{.*}} : memref<4xf32>) outs(
  tfm.attention_kernel ins(%qm, %ktm, %vm : memref<?x4x?x8xf32>, memref<?x2x8x?xf32>, memref<?x2x?x8xf32>) sinks(%sm : memref<4xf32>) outs(%om : memref<?x4x?x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64}
  return %p, %o : tensor<?x4x?x?xf32>, tensor<?x4x?x8xf32>
}
