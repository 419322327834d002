// RUN: tfm-opt %s --tfm-outline-kernels | FileCheck %s
// RUN: tfm-opt %s --tfm-outline-kernels --tfm-outline-kernels | FileCheck %s --check-prefix=TWICE

// Each kernel op on buffers becomes a call of a function named by a hash of
// its IR, marked tfm.shared_kernel: equal kernels (other weights, other
// outputs) share one; another epilogue is another function; a buffer given
// twice (residual and output) is one argument. A linear on f32 panels
// takes every size but the panel width dynamic (cast at the call), so
// linears of other K and N (%w3: K = 48, N = 61) share its function too.
// CHECK-LABEL: func.func @f(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?x16xf32>, %[[W:[a-z0-9]+]]: memref<2x16x32xf32>, %[[Y1:[a-z0-9]+]]: memref<?x64xf32>, %[[Y2:[a-z0-9]+]]: memref<?x64xf32>, %[[W2:[a-z0-9]+]]: memref<2x16x32xf32>
// CHECK-NEXT: %[[CX:.*]] = memref.cast %[[X]] : memref<?x16xf32> to memref<?x?xf32>
// CHECK-NEXT: %[[CW:.*]] = memref.cast %[[W]] : memref<2x16x32xf32> to memref<?x?x32xf32>
// CHECK-NEXT: %[[CY1:.*]] = memref.cast %[[Y1]] : memref<?x64xf32> to memref<?x?xf32>
// CHECK-NEXT: call @[[PLAIN:tfm_kernel_[0-9a-f]{16}]](%[[CX]], %[[CW]], %[[CY1]]) : (memref<?x?xf32>, memref<?x?x32xf32>, memref<?x?xf32>) -> ()
// CHECK-COUNT-3: memref.cast
// CHECK-NEXT: call @[[PLAIN]](
// CHECK-COUNT-4: memref.cast
// CHECK-NEXT: call @[[SILU:tfm_kernel_[0-9a-f]{16}]](
// CHECK-COUNT-3: memref.cast
// CHECK-NEXT: call @[[INPLACE:tfm_kernel_[0-9a-f]{16}]](%{{.*}}, %{{.*}}, %{{.*}}) : (memref<?x?xf32>, memref<?x?x32xf32>, memref<?x?xf32>) -> ()
// CHECK-NEXT: call @[[NORM:tfm_kernel_[0-9a-f]{16}]](
// CHECK-COUNT-3: memref.cast
// CHECK-NEXT: call @[[PLAIN]](
// CHECK-NEXT: return
// CHECK-NOT: tfm.linear_kernel
// CHECK: func.func private @[[PLAIN]](%[[A0:.*]]: memref<?x?xf32>, %[[A1:.*]]: memref<?x?x32xf32>, %[[A2:.*]]: memref<?x?xf32>) attributes {tfm.shared_kernel} {
// CHECK-NEXT: tfm.linear_kernel ins(%[[A0]], %[[A1]] : memref<?x?xf32>, memref<?x?x32xf32>) outs(%[[A2]] : memref<?x?xf32>)
// CHECK-NEXT: return
// CHECK: func.func private @[[SILU]]({{.*}}) attributes {tfm.shared_kernel} {
// CHECK-NEXT: tfm.linear_kernel {{.*}} {activation = #tfm.activation<silu>}
// CHECK: func.func private @[[INPLACE]]({{.*}}, %[[B2:.*]]: memref<?x?xf32>) attributes {tfm.shared_kernel} {
// CHECK-NEXT: tfm.linear_kernel {{.*}} residual(%[[B2]] : memref<?x?xf32>) outs(%[[B2]] : memref<?x?xf32>)
// CHECK: func.func private @[[NORM]](
// CHECK-NEXT: tfm.norm_kernel
// A second run finds nothing left to move.
// TWICE-COUNT-4: func.func private @tfm_kernel_
// TWICE-NOT: func.func private @tfm_kernel_
func.func @f(%x: memref<?x16xf32>, %w: memref<2x16x32xf32>, %y1: memref<?x64xf32>, %y2: memref<?x64xf32>, %w2: memref<2x16x32xf32>, %n: memref<4x16xf32>, %g: memref<16xf32>, %x3: memref<?x48xf32>, %w3: memref<2x48x32xf32>, %y3: memref<?x61xf32>) {
  tfm.linear_kernel ins(%x, %w : memref<?x16xf32>, memref<2x16x32xf32>) outs(%y1 : memref<?x64xf32>)
  tfm.linear_kernel ins(%x, %w2 : memref<?x16xf32>, memref<2x16x32xf32>) outs(%y2 : memref<?x64xf32>)
  tfm.linear_kernel ins(%x, %w : memref<?x16xf32>, memref<2x16x32xf32>) residual(%y1 : memref<?x64xf32>) outs(%y2 : memref<?x64xf32>) {activation = #tfm.activation<silu>}
  tfm.linear_kernel ins(%x, %w : memref<?x16xf32>, memref<2x16x32xf32>) residual(%y2 : memref<?x64xf32>) outs(%y2 : memref<?x64xf32>)
  tfm.norm_kernel ins(%n, %g : memref<4x16xf32>, memref<16xf32>) outs(%n : memref<4x16xf32>) {eps = 1.0e-05 : f64, kind = #tfm.norm<rmsnorm>}
  tfm.linear_kernel ins(%x3, %w3 : memref<?x48xf32>, memref<2x48x32xf32>) outs(%y3 : memref<?x61xf32>)
  return
}
