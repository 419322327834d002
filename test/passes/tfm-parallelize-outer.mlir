// RUN: tfm-opt %s --tfm-parallelize-outer | FileCheck %s

// A multi-dimensional loop stays parallel over its outer dimensions; the
// innermost one becomes an scf.for (so that it vectorizes).
// CHECK-LABEL: func.func @three_d
// CHECK-SAME: (%[[M:.*]]: memref<?x?x?xf32>, %[[N0:.*]]: index, %[[N1:.*]]: index, %[[N2:.*]]: index)
// CHECK: scf.parallel (%[[I:.*]], %[[J:.*]]) = (%{{.*}}, %{{.*}}) to (%[[N0]], %[[N1]])
// CHECK-NEXT: scf.for %[[K:.*]] = %{{.*}} to %[[N2]]
// CHECK-NEXT: memref.store %{{.*}}, %[[M]][%[[I]], %[[J]], %[[K]]]
// CHECK-NEXT: }
// CHECK-NEXT: scf.reduce
// CHECK-NOT: scf.parallel
func.func @three_d(%m: memref<?x?x?xf32>, %n0: index, %n1: index, %n2: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  scf.parallel (%i, %j, %k) = (%c0, %c0, %c0) to (%n0, %n1, %n2) step (%c1, %c1, %c1) {
    memref.store %f, %m[%i, %j, %k] : memref<?x?x?xf32>
    scf.reduce
  }
  return
}

// A one-dimensional loop (a bias vector, say) is not worth a fork.
// CHECK-LABEL: func.func @one_d
// CHECK-NOT: scf.parallel
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT: memref.store %{{.*}}, %{{.*}}[%[[I]]]
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @one_d(%m: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %f, %m[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

// A parallel loop nested in another one runs sequentially.
// CHECK-LABEL: func.func @nested
// CHECK: scf.parallel (%[[I:.*]]) =
// CHECK-NEXT: scf.for %[[J:.*]] =
// CHECK-NEXT: scf.for %[[K:.*]] =
// CHECK-NEXT: scf.for %[[L:.*]] =
// CHECK-NEXT: memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]], %[[K]], %[[L]]]
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @nested(%m: memref<4x4x4x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f = arith.constant 1.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c4) step (%c1, %c1) {
    scf.parallel (%k, %l) = (%c0, %c0) to (%c4, %c4) step (%c1, %c1) {
      memref.store %f, %m[%i, %j, %k, %l] : memref<4x4x4x4xf32>
      scf.reduce
    }
    scf.reduce
  }
  return
}

// The kernels' own distribution (tfm.keep_parallel) is kept as it is, but a
// parallel loop nested in it still runs sequentially.
// CHECK-LABEL: func.func @keep_parallel
// CHECK: scf.parallel (%[[I:.*]], %[[J:.*]]) =
// CHECK-NEXT: scf.for %[[K:.*]] =
// CHECK-NEXT: memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]], %[[K]]]
// CHECK-NEXT: }
// CHECK-NEXT: scf.reduce
// CHECK-NEXT: } {tfm.keep_parallel}
func.func @keep_parallel(%m: memref<?x?x4xf32>, %n0: index, %n1: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f = arith.constant 1.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%n0, %n1) step (%c1, %c1) {
    scf.parallel (%k) = (%c0) to (%c4) step (%c1) {
      memref.store %f, %m[%i, %j, %k] : memref<?x?x4xf32>
      scf.reduce
    }
    scf.reduce
  } {tfm.keep_parallel}
  return
}

// Loops with reductions are left alone.
// CHECK-LABEL: func.func @reduction
// CHECK: %[[R:.*]] = scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) init (%{{.*}}) -> f32
// CHECK: scf.reduce(%{{.*}} : f32)
// CHECK-NOT: scf.for
// CHECK: return %[[R]]
func.func @reduction(%m: memref<?xf32>, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  %r = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%z) -> f32 {
    %v = memref.load %m[%i] : memref<?xf32>
    scf.reduce(%v : f32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }
  }
  return %r : f32
}
