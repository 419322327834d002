// RUN: tfm-opt %s --convert-tfm-to-linalg --split-input-file --verify-diagnostics | FileCheck %s

// A linear on a weight in ggml blocks becomes tfm.ggml_linear_kernel on
// the blocks and their type, its epilogue kept; the view is dropped.
// CHECK-LABEL: func.func @linear(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x64xf32>, %[[R:.*]]: tensor<4096xi8>, %[[T:.*]]: tensor<1xi32>, %[[B:.*]]: tensor<16xf32>, %[[RES:.*]]: tensor<?x?x16xf32>)
// CHECK-NOT: tfm.ggml_weight
// CHECK: %[[X2:.*]] = tensor.collapse_shape %[[X]]
// CHECK: tfm.ggml_linear_kernel ins(%[[X2]], %[[R]], %[[T]], %[[B]] : tensor<?x64xf32>, tensor<4096xi8>, tensor<1xi32>, tensor<16xf32>) residual(%[[RES]] : tensor<?x?x16xf32>) outs(%{{.*}} : tensor<?x16xf32>) {activation = #tfm.activation<gelu>} -> tensor<?x16xf32>
// CHECK-NOT: tfm.ggml_weight
func.func @linear(%x: tensor<?x?x64xf32>, %r: tensor<4096xi8>, %t: tensor<1xi32>, %b: tensor<16xf32>, %res: tensor<?x?x16xf32>) -> tensor<?x?x16xf32> {
  %w = tfm.ggml_weight %r, %t : tensor<4096xi8>, tensor<1xi32> -> tensor<16x64xf32>
  %y = tfm.linear %x, %w, %b residual %res {activation = #tfm.activation<gelu>} : (tensor<?x?x64xf32>, tensor<16x64xf32>, tensor<16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}

// -----

// Nothing but a linear's kernel reads the blocks.
func.func @other(%r: tensor<4096xi8>, %t: tensor<1xi32>) -> tensor<16x64xf32> {
  // expected-error @below {{failed to legalize operation 'tfm.ggml_weight'}}
  %w = tfm.ggml_weight %r, %t : tensor<4096xi8>, tensor<1xi32> -> tensor<16x64xf32>
  return %w : tensor<16x64xf32>
}

// -----

// An embedding whose table is in ggml blocks: tfm.ggml_embed_kernel, with
// the scale (sqrt(64) = 8) as an attribute.
// CHECK-LABEL: func.func @embed(
// CHECK-SAME: %[[IDS:.*]]: tensor<?x?xi32>, %[[R:.*]]: tensor<4096xi8>, %[[T:.*]]: tensor<1xi32>)
// CHECK: tfm.ggml_embed_kernel ins(%[[IDS]], %[[R]], %[[T]] : tensor<?x?xi32>, tensor<4096xi8>, tensor<1xi32>) outs(%{{.*}} : tensor<?x?x64xf32>) {scale = 8.000000e+00 : f64} -> tensor<?x?x64xf32>
func.func @embed(%ids: tensor<?x?xi32>, %r: tensor<4096xi8>, %t: tensor<1xi32>) -> tensor<?x?x64xf32> {
  %w = tfm.ggml_weight %r, %t : tensor<4096xi8>, tensor<1xi32> -> tensor<16x64xf32>
  %x = tfm.embed %ids, %w {scale} : (tensor<?x?xi32>, tensor<16x64xf32>) -> tensor<?x?x64xf32>
  return %x : tensor<?x?x64xf32>
}
