// RUN: tfm-opt %s --tfm-fuse-epilogues --split-input-file | FileCheck %s

// A GPT-2 style layer's tail: the activation folds into the up projection,
// the residual add into the down projection (either operand order).
// CHECK-LABEL: func.func @ffn_residual
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x16xf32>, %[[WU:.*]]: tensor<64x16xf32>, %[[BU:.*]]: tensor<64xf32>, %[[WD:.*]]: tensor<16x64xf32>)
// CHECK-NEXT: %[[H:.*]] = tfm.linear %[[X]], %[[WU]], %[[BU]] {activation = #tfm.activation<gelu_tanh>}
// CHECK-NEXT: %[[Y:.*]] = tfm.linear %[[H]], %[[WD]] residual %[[X]] :
// CHECK-NEXT: return %[[Y]]
func.func @ffn_residual(%x: tensor<?x?x16xf32>, %wu: tensor<64x16xf32>, %bu: tensor<64xf32>, %wd: tensor<16x64xf32>) -> tensor<?x?x16xf32> {
  %u = tfm.linear %x, %wu, %bu : (tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %h = tfm.activation %u {kind = #tfm.activation<gelu_tanh>} : tensor<?x?x64xf32>
  %d = tfm.linear %h, %wd : (tensor<?x?x64xf32>, tensor<16x64xf32>) -> tensor<?x?x16xf32>
  %y = tfm.add %x, %d : tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}

// -----

// SwiGLU: silu into the gate, the product into the up projection (the right
// operand first), and the residual, on the left here, into the down one.
// CHECK-LABEL: func.func @swiglu
// CHECK-SAME: (%[[X:.*]]: tensor<?x16xf32>, %[[WG:.*]]: tensor<64x16xf32>, %[[WU:.*]]: tensor<64x16xf32>, %[[WD:.*]]: tensor<16x64xf32>)
// CHECK-NEXT: %[[G:.*]] = tfm.linear %[[X]], %[[WG]] {activation = #tfm.activation<silu>}
// CHECK-NEXT: %[[H:.*]] = tfm.linear %[[X]], %[[WU]] mul %[[G]] :
// CHECK-NEXT: %[[Y:.*]] = tfm.linear %[[H]], %[[WD]] residual %[[X]] :
// CHECK-NEXT: return %[[Y]]
func.func @swiglu(%x: tensor<?x16xf32>, %wg: tensor<64x16xf32>, %wu: tensor<64x16xf32>, %wd: tensor<16x64xf32>) -> tensor<?x16xf32> {
  %g = tfm.linear %x, %wg : (tensor<?x16xf32>, tensor<64x16xf32>) -> tensor<?x64xf32>
  %u = tfm.linear %x, %wu : (tensor<?x16xf32>, tensor<64x16xf32>) -> tensor<?x64xf32>
  %a = tfm.activation %g {kind = #tfm.activation<silu>} : tensor<?x64xf32>
  %h = tfm.mul %a, %u : tensor<?x64xf32>
  %d = tfm.linear %h, %wd : (tensor<?x64xf32>, tensor<16x64xf32>) -> tensor<?x16xf32>
  %y = tfm.add %d, %x : tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// The whole epilogue in one linear: act, then the product, then the sum.
// CHECK-LABEL: func.func @all_three
// CHECK-NEXT: %[[Y:.*]] = tfm.linear %{{.*}}, %{{.*}} mul %{{.*}} residual %{{.*}} {activation = #tfm.activation<relu>}
// CHECK-NEXT: return %[[Y]]
func.func @all_three(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>, %m: tensor<4x8xf32>, %r: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %l = tfm.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %a = tfm.activation %l {kind = #tfm.activation<relu>} : tensor<4x8xf32>
  %p = tfm.mul %m, %a : tensor<4x8xf32>
  %s = tfm.add %p, %r : tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// Not folded: a linear with another use (its result is needed unchanged),
// an activation after a product (the epilogue's order is act, mul, add),
// a product after a residual, and a second residual.
// CHECK-LABEL: func.func @not_folded
// CHECK: %[[L:.*]] = tfm.linear %{{.*}}, %{{.*}} : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: tfm.activation %[[L]]
// CHECK-NEXT: %[[M:.*]] = tfm.linear %{{.*}}, %{{.*}} mul %{{.*}} :
// CHECK-NEXT: tfm.activation %[[M]]
// CHECK-NEXT: %[[R:.*]] = tfm.linear %{{.*}}, %{{.*}} residual %{{.*}} :
// CHECK-NEXT: tfm.mul %{{.*}}, %[[R]]
// CHECK-NEXT: %[[R2:.*]] = tfm.linear %{{.*}}, %{{.*}} residual %{{.*}} :
// CHECK-NEXT: tfm.add %{{.*}}, %[[R2]]
func.func @not_folded(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>, %m: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %l = tfm.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %a = tfm.activation %l {kind = #tfm.activation<silu>} : tensor<4x8xf32>
  %l2 = tfm.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %p = tfm.mul %l2, %m : tensor<4x8xf32>
  %a2 = tfm.activation %p {kind = #tfm.activation<silu>} : tensor<4x8xf32>
  %l3 = tfm.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %s = tfm.add %m, %l3 : tensor<4x8xf32>
  %p3 = tfm.mul %m, %s : tensor<4x8xf32>
  %l4 = tfm.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %s4 = tfm.add %m, %l4 : tensor<4x8xf32>
  %s5 = tfm.add %m, %s4 : tensor<4x8xf32>
  return %l, %a, %a2, %p3, %s5 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
