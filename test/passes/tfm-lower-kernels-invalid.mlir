// RUN: tfm-opt %s --tfm-lower-kernels --split-input-file --verify-diagnostics

// The kernels are lowered on buffers: a kernel op still on tensors (not
// bufferized) is an error, not something left behind. (The lowering itself
// is tested in codegen/tfm-lower-kernels.mlir.)
func.func @on_tensors(%x: tensor<4x16xf32>, %p: tensor<1x16x32xf32>, %o: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{failed to legalize operation 'tfm.linear_kernel'}}
  %r = tfm.linear_kernel ins(%x, %p : tensor<4x16xf32>, tensor<1x16x32xf32>) outs(%o : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// The CPU kernels compute in f32: an f16 kernel is an error on the op, not
// an invalid vector.maskedload deep in the lowering (issue 14).
func.func @f16_attention(%q: memref<?x4x?x8xf16>, %k: memref<?x2x8x?xf16>, %v: memref<?x2x?x8xf16>, %o: memref<?x4x?x8xf16>) {
  // expected-error @below {{'tfm.attention_kernel' op computes in 'f16', which the CPU kernels do not support (they compute in f32)}}
  tfm.attention_kernel ins(%q, %k, %v : memref<?x4x?x8xf16>, memref<?x2x8x?xf16>, memref<?x2x?x8xf16>) outs(%o : memref<?x4x?x8xf16>) {mask = #tfm.mask<none>, scale = 0.35 : f64}
  return
}
