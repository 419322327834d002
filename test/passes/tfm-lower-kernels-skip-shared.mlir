// RUN: tfm-opt %s --tfm-lower-kernels=skip-shared-kernels=true | FileCheck %s
// RUN: not tfm-opt %s --tfm-lower-kernels 2>&1 | FileCheck %s --check-prefix=ALL

// With skip-shared-kernels, the functions tfm-outline-kernels made (marked
// tfm.shared_kernel) keep their kernel ops, which the driver lowers only
// where its kernel cache lacks them; the model's own code is lowered. A
// kernel op of another element type in a shared function is not looked at
// either: it is diagnosed when that function is lowered (ALL).
// CHECK-LABEL: func.func @model(
// CHECK-NOT: tfm.linear_kernel
// CHECK: vector.fma
// CHECK: call @tfm_kernel_0(
// CHECK-LABEL: func.func private @tfm_kernel_0(
// CHECK-SAME: attributes {tfm.shared_kernel}
// CHECK-NEXT: tfm.linear_kernel
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @tfm_kernel_1(
// CHECK-NEXT: tfm.linear_kernel {{.*}} memref<?x?xf16>
// ALL: error: 'tfm.linear_kernel' op computes in 'f16'
func.func @model(%x: memref<?x16xf32>, %w: memref<2x16x32xf32>, %y: memref<?x64xf32>) {
  tfm.linear_kernel ins(%x, %w : memref<?x16xf32>, memref<2x16x32xf32>) outs(%y : memref<?x64xf32>)
  %cx = memref.cast %x : memref<?x16xf32> to memref<?x?xf32>
  %cw = memref.cast %w : memref<2x16x32xf32> to memref<?x?x32xf32>
  %cy = memref.cast %y : memref<?x64xf32> to memref<?x?xf32>
  call @tfm_kernel_0(%cx, %cw, %cy) : (memref<?x?xf32>, memref<?x?x32xf32>, memref<?x?xf32>) -> ()
  return
}
func.func private @tfm_kernel_0(%x: memref<?x?xf32>, %w: memref<?x?x32xf32>, %y: memref<?x?xf32>) attributes {tfm.shared_kernel} {
  tfm.linear_kernel ins(%x, %w : memref<?x?xf32>, memref<?x?x32xf32>) outs(%y : memref<?x?xf32>)
  return
}
func.func private @tfm_kernel_1(%x: memref<?x?xf16>, %w: memref<?x?x32xf16>, %y: memref<?x?xf16>) attributes {tfm.shared_kernel} {
  tfm.linear_kernel ins(%x, %w : memref<?x?xf16>, memref<?x?x32xf16>) outs(%y : memref<?x?xf16>)
  return
}
