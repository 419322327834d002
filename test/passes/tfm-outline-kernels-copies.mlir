// RUN: tfm-opt %s --tfm-outline-kernels | FileCheck %s
// RUN: tfm-opt %s --tfm-outline-kernels --tfm-lower-kernels | FileCheck %s --check-prefix=LOWERED
// RUN: tfm-opt %s --tfm-outline-kernels=loop-nests=false | FileCheck %s --check-prefix=OFF

// A copy into or out of a view (a concatenation's half, a window of a KV
// cache) becomes a shared function with the nests: tfm-lower-kernels makes
// it a loop nest over its rows (tfm-lower-kernels-copy.mlir), which left
// among a layer's code cost LLVM's
// loop strength reduction most of an encoder-decoder's machine code. Two
// equal copies share one function; a copy between whole buffers (a
// memcpy) stays where it is.
// CHECK-LABEL: func.func @f(
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<?x4x12xf32>, %[[B:[a-z0-9]+]]: memref<?x4x14xf32>, %[[C:[a-z0-9]+]]: memref<?x4x12xf32>
// CHECK: %[[L:.*]] = memref.subview %[[B]][0, 0, 0]
// CHECK: call @[[COPY:tfm_kernel_[0-9a-f]{16}]](%[[A]], %[[L]]) : (memref<?x4x12xf32>, memref<?x4x12xf32, strided<[56, 14, 1]>>) -> ()
// CHECK-NEXT: call @[[COPY]](%[[C]], %[[L]])
// CHECK-NEXT: memref.copy %[[A]], %[[C]] : memref<?x4x12xf32> to memref<?x4x12xf32>
// CHECK-NEXT: return
// CHECK: func.func private @[[COPY]](%[[X:.*]]: memref<?x4x12xf32>, %[[Y:.*]]: memref<?x4x12xf32, strided<[56, 14, 1]>>) attributes {tfm.shared_kernel} {
// CHECK-NEXT: memref.copy %[[X]], %[[Y]]
// CHECK-NEXT: return
// CHECK-NOT: func.func private @tfm_kernel_
// LOWERED-LABEL: func.func private @tfm_kernel_
// LOWERED-NOT: memref.copy
// LOWERED: vector.maskedload
// LOWERED: vector.maskedstore
// OFF-NOT: tfm_kernel
func.func @f(%a: memref<?x4x12xf32>, %b: memref<?x4x14xf32>, %c: memref<?x4x12xf32>, %n: index) {
  %left = memref.subview %b[0, 0, 0] [%n, 4, 12] [1, 1, 1] : memref<?x4x14xf32> to memref<?x4x12xf32, strided<[56, 14, 1]>>
  memref.copy %a, %left : memref<?x4x12xf32> to memref<?x4x12xf32, strided<[56, 14, 1]>>
  memref.copy %c, %left : memref<?x4x12xf32> to memref<?x4x12xf32, strided<[56, 14, 1]>>
  memref.copy %a, %c : memref<?x4x12xf32> to memref<?x4x12xf32>
  return
}
