// RUN: tfm-opt %s --tfm-gpu-merge-modules | FileCheck %s

// Three outlined kernels, two of them identical: one module, two kernels.
// CHECK-LABEL: func.func @m
// CHECK: gpu.launch_func @m_kernels::@m_kernel blocks
// CHECK: gpu.launch_func @m_kernels::@m_kernel blocks
// CHECK: gpu.launch_func @m_kernels::@m_kernel_1 blocks
// CHECK: gpu.module @m_kernels
// CHECK: gpu.func @m_kernel(
// CHECK: gpu.func @m_kernel_1(
// CHECK-NOT: gpu.func
// CHECK-NOT: gpu.module
module attributes {gpu.container_module} {
  func.func @m(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @m_kernel::@m_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @m_kernel_0::@m_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @m_kernel_1::@m_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    return
  }
  gpu.module @m_kernel {
    gpu.func @m_kernel(%a: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %f = arith.constant 1.0 : f32
      memref.store %f, %a[%c0] : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @m_kernel_0 {
    gpu.func @m_kernel(%b: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %f = arith.constant 1.0 : f32
      memref.store %f, %b[%c0] : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @m_kernel_1 {
    gpu.func @m_kernel(%a: memref<4xf32>) kernel {
      %c1 = arith.constant 1 : index
      %f = arith.constant 2.0 : f32
      memref.store %f, %a[%c1] : memref<4xf32>
      gpu.return
    }
  }
}
