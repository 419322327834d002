// RUN: tfm-opt %s --convert-tfm-to-linalg --split-input-file --verify-diagnostics

// Model-level ops must be decomposed first (tfm-decompose): a tfm op the
// conversion cannot lower is an error, not something left behind.
func.func @undecomposed(%x: tensor<?x?x16xf32>, %wu: tensor<64x16xf32>, %wd: tensor<16x64xf32>) -> tensor<?x?x16xf32> {
  // expected-error @below {{failed to legalize operation 'tfm.ffn'}}
  %y = tfm.ffn %x up(%wu) down(%wd) {activation = #tfm.activation<gelu>} : (tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<16x64xf32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}

// -----

// So is a parameter that tfm-model-abi has not turned into an argument.
func.func @param() -> tensor<8x16xf32> {
  // expected-error @below {{failed to legalize operation 'tfm.param'}}
  %w = tfm.param "w" : tensor<8x16xf32>
  return %w : tensor<8x16xf32>
}
