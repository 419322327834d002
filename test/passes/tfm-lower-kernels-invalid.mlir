// RUN: tfm-opt %s --tfm-lower-kernels --split-input-file --verify-diagnostics

// The kernels are lowered on buffers: a kernel op still on tensors (not
// bufferized) is an error, not something left behind. (The lowering itself
// is tested in codegen/tfm-lower-kernels.mlir.)
func.func @on_tensors(%x: tensor<4x16xf32>, %p: tensor<1x16x32xf32>, %o: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{failed to legalize operation 'tfm.linear_kernel'}}
  %r = tfm.linear_kernel ins(%x, %p : tensor<4x16xf32>, tensor<1x16x32xf32>) outs(%o : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
