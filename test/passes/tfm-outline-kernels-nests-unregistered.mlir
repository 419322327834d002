// RUN: tfm-opt %s --allow-unregistered-dialect --tfm-outline-kernels | FileCheck %s

// A nest holding an op of no registered dialect is not moved (and not a
// crash): what it does is unknown.
// CHECK-LABEL: func.func @f(
// CHECK: scf.parallel
// CHECK: "foo.bar"()
// CHECK-NOT: tfm_kernel
func.func @f(%a: memref<4xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    "foo.bar"() : () -> ()
    scf.reduce
  }
  return
}
