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

// Online softmax per query row over the visible keys only: running max and
// sum, a rescaled accumulator, no score buffer.
// CHECK-LABEL: func.func @attention
// CHECK-NOT: memref.alloc
// CHECK: scf.parallel (%[[B:.*]], %[[H:.*]]) =
// CHECK: arith.divui %[[H]]
// CHECK: scf.for %[[I:.*]] =
// CHECK: arith.minsi
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[M:.*]] = %{{.*}}, %[[L:.*]] = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, f32, vector<8xf32>)
// CHECK: vector.reduction <add>
// CHECK: arith.maximumf %[[M]]
// CHECK: math.exp
// CHECK: math.exp
// CHECK: vector.fma
// CHECK: } {tfm.keep_parallel}
func.func @attention(%q: memref<?x4x?x8xf32>, %k: memref<?x2x?x8xf32>, %v: memref<?x2x?x8xf32>, %l: memref<?xi32>, %o: memref<?x4x?x8xf32>) {
  tfm.attention_kernel ins(%q, %k, %v, %l : memref<?x4x?x8xf32>, memref<?x2x?x8xf32>, memref<?x2x?x8xf32>, memref<?xi32>) outs(%o : memref<?x4x?x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64}
  return
}
