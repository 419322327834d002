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
