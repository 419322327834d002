// RUN: tfm-opt %s --split-input-file --tfm-lower-kernels --canonicalize --cse | FileCheck %s

// The epilogue is applied to the accumulators between the K loop and their
// store: bias first (the accumulators start from it), then the activation,
// the product with `mul` and the sum with the residual, whose [B, T, N]
// index is split from the output's row.
// CHECK-LABEL: func.func @epilogue
// CHECK-SAME: (%[[X:.*]]: memref<?x16xf32>, %[[W:.*]]: memref<1x16x32xf32>, %[[B:.*]]: memref<32xf32>, %[[M:.*]]: memref<?x32xf32>, %[[R:.*]]: memref<?x?x32xf32>, %[[Y:.*]]: memref<?x32xf32>)
// CHECK: scf.for %[[ROW:.*]] = %{{.*}} to %{{.*}} step %c8
// CHECK: %[[BIAS:.*]] = vector.load %[[B]][%c0]
// CHECK: %[[ACC:.*]]:16 = scf.for %{{.*}} iter_args(%{{.*}} = %[[BIAS]],
// CHECK: vector.fma
// CHECK: scf.yield
// CHECK: %[[ACT:.*]] = arith.maximumf %[[ACC]]#0, %{{.*}} : vector<16xf32>
// CHECK-NEXT: %[[MV:.*]] = vector.load %[[M]][%[[ROW]], %c0]
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[ACT]], %[[MV]]
// CHECK-NEXT: %[[T:.*]] = memref.dim %[[R]], %c1
// CHECK-NEXT: %[[I1:.*]] = arith.remui %[[ROW]], %[[T]]
// CHECK-NEXT: %[[I0:.*]] = arith.divui %[[ROW]], %[[T]]
// CHECK-NEXT: %[[RV:.*]] = vector.load %[[R]][%[[I0]], %[[I1]], %c0]
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[P]], %[[RV]]
// CHECK-NEXT: vector.store %[[S]], %[[Y]][%[[ROW]], %c0]
func.func @epilogue(%x: memref<?x16xf32>, %w: memref<1x16x32xf32>, %b: memref<32xf32>, %m: memref<?x32xf32>, %r: memref<?x?x32xf32>, %y: memref<?x32xf32>) {
  tfm.linear_kernel ins(%x, %w, %b : memref<?x16xf32>, memref<1x16x32xf32>, memref<32xf32>) mul(%m : memref<?x32xf32>) residual(%r : memref<?x?x32xf32>) outs(%y : memref<?x32xf32>) {activation = #tfm.activation<relu>}
  return
}

// -----

// A partial last panel reads the epilogue's operands through the same
// masks as it stores.
// CHECK-LABEL: func.func @masked
// CHECK: %[[MASK:.*]] = vector.constant_mask [4] : vector<16xi1>
// CHECK: %[[RV:.*]] = vector.maskedload %{{.*}}[%{{.*}}, %c0], %[[MASK]], %{{.*}}
// CHECK: %[[S:.*]] = arith.addf %{{.*}}, %[[RV]]
// CHECK: vector.maskedstore %{{.*}}[%{{.*}}, %c0], %[[MASK]], %[[S]]
func.func @masked(%x: memref<?x16xf32>, %w: memref<1x16x32xf32>, %r: memref<?x4xf32>, %y: memref<?x4xf32>) {
  tfm.linear_kernel ins(%x, %w : memref<?x16xf32>, memref<1x16x32xf32>) residual(%r : memref<?x4xf32>) outs(%y : memref<?x4xf32>)
  return
}

// -----

// P, K and N at run time (a kernel shared by every shape): K bounds the
// product loop, N / 32 whole panels run in the parallel tasks, and a
// partial last panel, if N % 32 says there is one, runs after through masks
// of its remaining columns.
// CHECK-LABEL: func.func @any_shape
// CHECK-SAME: (%[[X:.*]]: memref<?x?xf32>, %[[W:.*]]: memref<?x?x32xf32>, %[[Y:.*]]: memref<?x?xf32>)
// CHECK-DAG: %[[K:.*]] = memref.dim %[[W]], %c1
// CHECK-DAG: %[[N:.*]] = memref.dim %[[Y]], %c1
// CHECK-DAG: %[[FULL:.*]] = arith.divui %[[N]], %c32
// CHECK: scf.parallel
// CHECK: scf.for %{{.*}} = %c0 to %[[K]] step %c1 iter_args
// CHECK: vector.store
// CHECK: %[[TAIL:.*]] = arith.remui %[[N]], %c32
// CHECK: %[[HAS:.*]] = arith.cmpi ne, %[[TAIL]], %c0
// CHECK: scf.if %[[HAS]] {
// CHECK: %[[MASK:.*]] = vector.create_mask %{{.*}} : vector<16xi1>
// CHECK: scf.for %{{.*}} = %c0 to %[[K]] step %c1 iter_args
// CHECK: vector.maskedstore %[[Y]][%{{.*}}, %{{.*}}], %[[MASK]]
func.func @any_shape(%x: memref<?x?xf32>, %w: memref<?x?x32xf32>, %y: memref<?x?xf32>) {
  tfm.linear_kernel ins(%x, %w : memref<?x?xf32>, memref<?x?x32xf32>) outs(%y : memref<?x?xf32>)
  return
}
