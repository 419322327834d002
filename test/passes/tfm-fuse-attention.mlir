// RUN: tfm-opt %s --tfm-fuse-attention --split-input-file | FileCheck %s

// The textbook spelling: Q K^T by the matmul flag, scale, causal mask.
// CHECK-LABEL: func.func @flag_scale_mask
// CHECK-SAME: (%[[Q:.*]]: tensor<?x4x?x8xf32>, %[[K:.*]]: tensor<?x4x?x8xf32>, %[[V:.*]]: tensor<?x4x?x8xf32>)
// CHECK-NEXT: %[[O:.*]] = tfm.attention %[[Q]], %[[K]], %[[V]] {mask = #tfm.mask<causal>, scale = 1.250000e-01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @flag_scale_mask(%q: tensor<?x4x?x8xf32>, %k: tensor<?x4x?x8xf32>, %v: tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32> {
  %s = tfm.matmul %q, %k {transpose_rhs} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x?xf32>
  %ss = tfm.scale %s {factor = 0.125 : f64} : tensor<?x4x?x?xf32>
  %m = tfm.mask %ss {kind = #tfm.mask<causal>} : (tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %p = tfm.softmax %m {axis = 3 : i64} : tensor<?x4x?x?xf32>
  %o = tfm.matmul %p, %v : (tensor<?x4x?x?xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32>
  return %o : tensor<?x4x?x8xf32>
}

// -----

// K transposed explicitly, the scale folded into Q beforehand and applied
// again after the mask; the factors multiply.
// CHECK-LABEL: func.func @explicit_transpose_scaled_q
// CHECK-SAME: (%[[Q:.*]]: tensor<?x4x?x8xf32>, %[[K:.*]]: tensor<?x4x?x8xf32>, %[[V:.*]]: tensor<?x4x?x8xf32>, %[[L:.*]]: tensor<?xi32>)
// CHECK-NEXT: tfm.attention %[[Q]], %[[K]], %[[V]] lengths(%[[L]]) {mask = #tfm.mask<sliding>, scale = 2.500000e-01 : f64, window = 2 : i64}
// CHECK-NOT: tfm.softmax
func.func @explicit_transpose_scaled_q(%q: tensor<?x4x?x8xf32>, %k: tensor<?x4x?x8xf32>, %v: tensor<?x4x?x8xf32>, %l: tensor<?xi32>) -> tensor<?x4x?x8xf32> {
  %qs = tfm.scale %q {factor = 0.5 : f64} : tensor<?x4x?x8xf32>
  %kt = tfm.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<?x4x?x8xf32>) -> tensor<?x4x8x?xf32>
  %s = tfm.matmul %qs, %kt : (tensor<?x4x?x8xf32>, tensor<?x4x8x?xf32>) -> tensor<?x4x?x?xf32>
  %m = tfm.mask %s lengths(%l) {kind = #tfm.mask<sliding>, window = 2 : i64} : (tensor<?x4x?x?xf32>, tensor<?xi32>) -> tensor<?x4x?x?xf32>
  %ms = tfm.scale %m {factor = 0.5 : f64} : tensor<?x4x?x?xf32>
  %p = tfm.softmax %ms {axis = 3 : i64} : tensor<?x4x?x?xf32>
  %o = tfm.matmul %p, %v : (tensor<?x4x?x?xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32>
  return %o : tensor<?x4x?x8xf32>
}

// -----

// Grouped-query attention: the K/V repeat is fused away; tfm.attention
// reads the two shared heads.
// CHECK-LABEL: func.func @gqa
// CHECK-SAME: (%[[Q:.*]]: tensor<?x4x?x8xf32>, %[[K:.*]]: tensor<?x2x?x8xf32>, %[[V:.*]]: tensor<?x2x?x8xf32>)
// CHECK-NEXT: tfm.attention %[[Q]], %[[K]], %[[V]] {mask = #tfm.mask<none>, scale = 1.000000e+00 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32>
// CHECK-NOT: tfm.repeat_kv
func.func @gqa(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %v: tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32> {
  %k4 = tfm.repeat_kv %k {repeats = 2 : i64} : (tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32>
  %v4 = tfm.repeat_kv %v {repeats = 2 : i64} : (tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32>
  %s = tfm.matmul %q, %k4 {transpose_rhs} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x?xf32>
  %p = tfm.softmax %s {axis = 3 : i64} : tensor<?x4x?x?xf32>
  %o = tfm.matmul %p, %v4 : (tensor<?x4x?x?xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32>
  return %o : tensor<?x4x?x8xf32>
}

// -----

// Not attention: the softmax runs over the queries (axis 2).
// CHECK-LABEL: func.func @softmax_other_axis
// CHECK-NOT: tfm.attention
// CHECK: tfm.softmax %{{.*}} {axis = 2 : i64}
func.func @softmax_other_axis(%q: tensor<?x4x?x8xf32>, %k: tensor<?x4x?x8xf32>, %v: tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32> {
  %s = tfm.matmul %q, %k {transpose_rhs} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x?xf32>
  %p = tfm.softmax %s {axis = 2 : i64} : tensor<?x4x?x?xf32>
  %o = tfm.matmul %p, %v : (tensor<?x4x?x?xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32>
  return %o : tensor<?x4x?x8xf32>
}

// -----

// Not fused: a negative scale after the mask would turn -inf into +inf.
// CHECK-LABEL: func.func @negative_scale_after_mask
// CHECK-NOT: tfm.attention
// CHECK: tfm.softmax
func.func @negative_scale_after_mask(%q: tensor<?x4x?x8xf32>, %k: tensor<?x4x?x8xf32>, %v: tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32> {
  %s = tfm.matmul %q, %k {transpose_rhs} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x?xf32>
  %m = tfm.mask %s {kind = #tfm.mask<causal>} : (tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %ms = tfm.scale %m {factor = -1.0 : f64} : tensor<?x4x?x?xf32>
  %p = tfm.softmax %ms {axis = 3 : i64} : tensor<?x4x?x?xf32>
  %o = tfm.matmul %p, %v : (tensor<?x4x?x?xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32>
  return %o : tensor<?x4x?x8xf32>
}

// -----

// Not fused: V is transposed by the flag, and K is not transposed at all.
// CHECK-LABEL: func.func @not_qkv
// CHECK-NOT: tfm.attention
func.func @not_qkv(%q: tensor<?x4x8x8xf32>, %k: tensor<?x4x8x8xf32>, %v: tensor<?x4x8x8xf32>) -> (tensor<?x4x8x8xf32>, tensor<?x4x8x8xf32>) {
  %s = tfm.matmul %q, %k {transpose_rhs} : (tensor<?x4x8x8xf32>, tensor<?x4x8x8xf32>) -> tensor<?x4x8x8xf32>
  %p = tfm.softmax %s {axis = 3 : i64} : tensor<?x4x8x8xf32>
  %o = tfm.matmul %p, %v {transpose_rhs} : (tensor<?x4x8x8xf32>, tensor<?x4x8x8xf32>) -> tensor<?x4x8x8xf32>
  %s2 = tfm.matmul %q, %k : (tensor<?x4x8x8xf32>, tensor<?x4x8x8xf32>) -> tensor<?x4x8x8xf32>
  %p2 = tfm.softmax %s2 {axis = 3 : i64} : tensor<?x4x8x8xf32>
  %o2 = tfm.matmul %p2, %v : (tensor<?x4x8x8xf32>, tensor<?x4x8x8xf32>) -> tensor<?x4x8x8xf32>
  return %o, %o2 : tensor<?x4x8x8xf32>, tensor<?x4x8x8xf32>
}
