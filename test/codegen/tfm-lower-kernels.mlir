// RUN: tfm-opt %s --tfm-lower-kernels=vector-width=16 | FileCheck %s

// 70 columns in panels of 32: two full panels in parallel, then a masked
// tail panel; 8-row register blocks, then single rows.
// CHECK-LABEL: func.func @linear
// CHECK: scf.parallel (%[[P:.*]]) = (%{{.*}}) to (%{{.*}}) step
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c8
// CHECK: %{{.*}} = scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>
// CHECK: vector.load %{{.*}}[%[[P]], %[[K]], %{{.*}}] : memref<3x24x32xf32>, vector<16xf32>
// CHECK: vector.broadcast %{{.*}} : f32 to vector<16xf32>
// CHECK: vector.fma
// CHECK: } {tfm.keep_parallel}
// CHECK: vector.create_mask %c6 : vector<16xi1>
// CHECK: vector.maskedstore
// CHECK-NOT: tfm.linear_kernel
func.func @linear(%a: memref<?x24xf32>, %w: memref<3x24x32xf32>, %b: memref<70xf32>, %o: memref<?x70xf32>) {
  tfm.linear_kernel ins(%a, %w, %b : memref<?x24xf32>, memref<3x24x32xf32>, memref<70xf32>) outs(%o : memref<?x70xf32>)
  return
}

// Blocked online softmax: query blocks (8 rows for an 8-wide head: the
// accumulators fit in registers) against blocks of 32 keys read from K^T,
// key blocks outside the causal bound never visited, exp vectorized over a
// block, no buffer at all.
// CHECK-LABEL: func.func @attention
// CHECK-NOT: memref.alloc
// CHECK: scf.parallel (%[[B:.*]], %[[H:.*]], %[[QB:.*]]) =
// CHECK: arith.divui %[[H]]
// CHECK: arith.minsi
// CHECK: scf.for %[[J:[a-z0-9]+]] = %{{.*}} to %{{.*}} step %c32 iter_args({{.*}}) -> (f32, f32,
// CHECK: scf.for %[[D:.*]] = %{{.*}} to %c8 step %{{.*}} iter_args
// CHECK: vector.maskedload %{{.*}}[%[[B]], %{{.*}}, %[[D]], %[[J]]]
// CHECK: vector.fma
// CHECK: vector.reduction <maximumf>
// CHECK: math.exp %{{.*}} : vector<32xf32>
// CHECK: vector.reduction <add>
// CHECK: vector.fma {{.*}} : vector<8xf32>
// CHECK: } {tfm.keep_parallel}
func.func @attention(%q: memref<?x4x?x8xf32>, %kt: memref<?x2x8x?xf32>, %v: memref<?x2x?x8xf32>, %l: memref<?xi32>, %o: memref<?x4x?x8xf32>) {
  tfm.attention_kernel ins(%q, %kt, %v, %l : memref<?x4x?x8xf32>, memref<?x2x8x?xf32>, memref<?x2x?x8xf32>, memref<?xi32>) outs(%o : memref<?x4x?x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64}
  return
}

// DSL v2 score modifiers on each block of scores, before the mask: softcap
// (tanh of the vector), ALiBi (slope times the distance vector) and the bias
// by distance (a gather with clamped distances). Causal blocks are still
// skipped: the key loop ends at the diagonal.
// CHECK-LABEL: func.func @attention_modifiers
// CHECK: scf.parallel
// CHECK: arith.select
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c32
// CHECK: vector.fma
// CHECK: math.tanh %{{.*}} : vector<32xf32>
// CHECK: arith.sitofp %{{.*}} : vector<32xi32> to vector<32xf32>
// CHECK: vector.fma
// CHECK: arith.minsi %{{.*}} : vector<32xindex>
// CHECK: vector.gather %{{.*}}[%{{.*}}, %c0] [%{{.*}}], %{{.*}}, %{{.*}} : memref<4x17xf32>, vector<32xindex>, vector<32xi1>, vector<32xf32> into vector<32xf32>
// CHECK: vector.reduction <maximumf>
func.func @attention_modifiers(%q: memref<?x4x?x8xf32>, %kt: memref<?x2x8x?xf32>, %v: memref<?x2x?x8xf32>, %b: memref<4x17xf32>, %o: memref<?x4x?x8xf32>) {
  tfm.attention_kernel ins(%q, %kt, %v : memref<?x4x?x8xf32>, memref<?x2x8x?xf32>, memref<?x2x?x8xf32>) bias(%b : memref<4x17xf32>) outs(%o : memref<?x4x?x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64, softcap = 20.0 : f64, alibi_slopes = array<f64: 0.25, 0.0625, 0.015625, 0.00390625>, bias_distance = 8 : i64}
  return
}
