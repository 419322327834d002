// RUN: tfm-opt %s --tfm-outline-kernels | FileCheck %s
// RUN: tfm-opt %s --tfm-outline-kernels --tfm-outline-kernels | FileCheck %s --check-prefix=TWICE
// RUN: tfm-opt %s --tfm-outline-kernels=loop-nests=false | FileCheck %s --check-prefix=OFF

// The model's own loop nests become shared functions: an outermost
// scf.parallel without results that only loads, stores and computes. Its
// values from above are arguments of their own types (a strided view
// included), its constants are copied in; two equal nests share one
// function. A nest that calls a function, one that allocates and one with
// a reduction stay where they are.
// CHECK-LABEL: func.func @f(
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<?x4x12xf32>, %[[B:[a-z0-9]+]]: memref<?x4x12xf32>, %[[N:[a-z0-9]+]]: index, %[[S:[a-z0-9]+]]: f32, %[[V:[a-z0-9]+]]: memref<?x4x12xf32, strided<[96, 12, 1], offset: ?>>
// CHECK: call @[[SCALE:tfm_kernel_[0-9a-f]{16}]](%[[N]], %[[A]], %[[S]], %[[B]]) : (index, memref<?x4x12xf32>, f32, memref<?x4x12xf32>) -> ()
// CHECK-NEXT: call @[[SCALE]](%[[N]], %[[B]], %[[S]], %[[A]])
// CHECK-NEXT: call @[[VIEW:tfm_kernel_[0-9a-f]{16}]](%[[N]], %[[V]], %[[A]]) : (index, memref<?x4x12xf32, strided<[96, 12, 1], offset: ?>>, memref<?x4x12xf32>) -> ()
// CHECK-NEXT: scf.parallel
// CHECK: func.call @g()
// CHECK: scf.parallel
// CHECK: memref.alloca
// CHECK: scf.parallel
// CHECK: scf.reduce
// CHECK: return
// CHECK: func.func private @[[SCALE]](%[[N2:.*]]: index, %[[X:.*]]: memref<?x4x12xf32>, %[[F:.*]]: f32, %[[Y:.*]]: memref<?x4x12xf32>) attributes {tfm.shared_kernel} {
// CHECK-DAG: arith.constant 0 : index
// CHECK-DAG: arith.constant 4 : index
// CHECK: scf.parallel
// CHECK: memref.load %[[X]]
// CHECK: arith.mulf %{{.*}}, %[[F]]
// CHECK: memref.store %{{.*}}, %[[Y]]
// CHECK: func.func private @[[VIEW]](
// A second run finds nothing left to move.
// TWICE-COUNT-2: func.func private @tfm_kernel_
// TWICE-NOT: func.func private @tfm_kernel_
// OFF-NOT: tfm_kernel
func.func private @g()
func.func @f(%a: memref<?x4x12xf32>, %b: memref<?x4x12xf32>, %n: index, %s: f32, %v: memref<?x4x12xf32, strided<[96, 12, 1], offset: ?>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c12 = arith.constant 12 : index
  scf.parallel (%i, %h) = (%c0, %c0) to (%n, %c4) step (%c1, %c1) {
    scf.for %d = %c0 to %c12 step %c1 {
      %x = memref.load %a[%i, %h, %d] : memref<?x4x12xf32>
      %y = arith.mulf %x, %s : f32
      memref.store %y, %b[%i, %h, %d] : memref<?x4x12xf32>
    }
    scf.reduce
  }
  scf.parallel (%i, %h) = (%c0, %c0) to (%n, %c4) step (%c1, %c1) {
    scf.for %d = %c0 to %c12 step %c1 {
      %x = memref.load %b[%i, %h, %d] : memref<?x4x12xf32>
      %y = arith.mulf %x, %s : f32
      memref.store %y, %a[%i, %h, %d] : memref<?x4x12xf32>
    }
    scf.reduce
  }
  scf.parallel (%i, %h) = (%c0, %c0) to (%n, %c4) step (%c1, %c1) {
    scf.for %d = %c0 to %c12 step %c1 {
      %x = memref.load %v[%i, %h, %d] : memref<?x4x12xf32, strided<[96, 12, 1], offset: ?>>
      memref.store %x, %a[%i, %h, %d] : memref<?x4x12xf32>
    }
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    func.call @g() : () -> ()
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %t = memref.alloca() : memref<4xf32>
    %x = memref.load %t[%c0] : memref<4xf32>
    memref.store %x, %a[%i, %c0, %c0] : memref<?x4x12xf32>
    scf.reduce
  }
  %sum = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%s) -> f32 {
    %x = memref.load %a[%i, %c0, %c0] : memref<?x4x12xf32>
    scf.reduce(%x : f32) {
    ^bb0(%l: f32, %r: f32):
      %z = arith.addf %l, %r : f32
      scf.reduce.return %z : f32
    }
  }
  memref.store %sum, %b[%c0, %c0, %c0] : memref<?x4x12xf32>
  return
}
