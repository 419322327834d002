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

// -----

// The mask as an additive -inf bias (tfm.add) whose contents are causal, the
// scale as a multiply by a splat constant.
// CHECK-LABEL: func.func @additive_causal_bias
// CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} {mask = #tfm.mask<causal>, scale = 1.250000e-01 : f64}
// CHECK-NOT: tfm.softmax
func.func @additive_causal_bias(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %bias = arith.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %c = arith.constant dense<0.125> : tensor<1x1x4x4xf32>
  %s = tfm.matmul %q, %k {transpose_rhs} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32>
  %ss = tfm.mul %s, %c : tensor<1x1x4x4xf32>
  %m = tfm.add %ss, %bias : tensor<1x1x4x4xf32>
  %p = tfm.softmax %m {axis = 3 : i64} : tensor<1x1x4x4xf32>
  %o = tfm.matmul %p, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return %o : tensor<1x1x4x8xf32>
}

// -----

// The mask as a select against a large negative number under a constant
// condition that is a sliding window of 2; the scale as arith.divf.
// CHECK-LABEL: func.func @select_sliding
// CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} {mask = #tfm.mask<sliding>, scale = 5.000000e-01 : f64, window = 2 : i64}
// CHECK-NOT: arith.select
func.func @select_sliding(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %keep = arith.constant dense<[[[[true, false, false, false], [true, true, false, false], [false, true, true, false], [false, false, true, true]]]]> : tensor<1x1x4x4xi1>
  %neg = arith.constant dense<-1.0e9> : tensor<1x1x4x4xf32>
  %two = arith.constant dense<2.0> : tensor<1x1x4x4xf32>
  %s = tfm.matmul %q, %k {transpose_rhs} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32>
  %sd = arith.divf %s, %two : tensor<1x1x4x4xf32>
  %m = arith.select %keep, %sd, %neg : tensor<1x1x4x4xi1>, tensor<1x1x4x4xf32>
  %p = tfm.softmax %m {axis = 3 : i64} : tensor<1x1x4x4xf32>
  %o = tfm.matmul %p, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return %o : tensor<1x1x4x8xf32>
}

// -----

// Not fused: the constant mask hides the first key of every row, which is
// neither causal nor a window.
// CHECK-LABEL: func.func @unprovable_mask
// CHECK-NOT: tfm.attention
// CHECK: tfm.softmax
func.func @unprovable_mask(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %bias = arith.constant dense<[[[[0xFF800000, 0.0, 0.0, 0.0], [0xFF800000, 0.0, 0.0, 0.0], [0xFF800000, 0.0, 0.0, 0.0], [0xFF800000, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %s = tfm.matmul %q, %k {transpose_rhs} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32>
  %m = tfm.add %s, %bias : tensor<1x1x4x4xf32>
  %p = tfm.softmax %m {axis = 3 : i64} : tensor<1x1x4x4xf32>
  %o = tfm.matmul %p, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return %o : tensor<1x1x4x8xf32>
}

// -----

// Not fused: a real additive bias (ALiBi-like values), not a mask; and a
// scale by a non-constant.
// CHECK-LABEL: func.func @real_bias_and_dynamic_scale
// CHECK-NOT: tfm.attention
func.func @real_bias_and_dynamic_scale(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>, %f: tensor<1x1x4x4xf32>) -> (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) {
  %bias = arith.constant dense<[[[[0.0, -0.5, -1.0, -1.5], [0.5, 0.0, -0.5, -1.0], [1.0, 0.5, 0.0, -0.5], [1.5, 1.0, 0.5, 0.0]]]]> : tensor<1x1x4x4xf32>
  %s = tfm.matmul %q, %k {transpose_rhs} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32>
  %m = tfm.add %s, %bias : tensor<1x1x4x4xf32>
  %p = tfm.softmax %m {axis = 3 : i64} : tensor<1x1x4x4xf32>
  %o = tfm.matmul %p, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  %s2 = tfm.mul %s, %f : tensor<1x1x4x4xf32>
  %p2 = tfm.softmax %s2 {axis = 3 : i64} : tensor<1x1x4x4xf32>
  %o2 = tfm.matmul %p2, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return %o, %o2 : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>
}

// -----

// The score modifiers of DSL v2 fuse: scale, softcap, ALiBi and the T5
// relative bias (in either order), mask in between.
// CHECK-LABEL: func.func @score_modifiers
// CHECK-SAME: (%[[Q:.*]]: tensor<?x4x?x8xf32>, %[[K:.*]]: tensor<?x4x?x8xf32>, %[[V:.*]]: tensor<?x4x?x8xf32>, %[[T:.*]]: tensor<32x4xf32>, %[[L:.*]]: tensor<?xi32>)
// CHECK-NEXT: %[[O:.*]] = tfm.attention %[[Q]], %[[K]], %[[V]] relative(%[[T]]) lengths(%[[L]]) {alibi_slopes = array<f64: 2.500000e-01, 6.250000e-02, 1.562500e-02, 3.906250e-03>, mask = #tfm.mask<causal>, relative_max_distance = 128 : i64, scale = 2.500000e-01 : f64, softcap = 2.000000e+01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @score_modifiers(%q: tensor<?x4x?x8xf32>, %k: tensor<?x4x?x8xf32>, %v: tensor<?x4x?x8xf32>, %t: tensor<32x4xf32>, %l: tensor<?xi32>) -> tensor<?x4x?x8xf32> {
  %qs = tfm.scale %q {factor = 0.5 : f64} : tensor<?x4x?x8xf32>
  %s = tfm.matmul %qs, %k {transpose_rhs} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x?xf32>
  %ss = tfm.scale %s {factor = 0.5 : f64} : tensor<?x4x?x?xf32>
  %c = tfm.softcap %ss {cap = 20.0 : f64} : tensor<?x4x?x?xf32>
  %r = tfm.relative_bias %c, %t {max_distance = 128 : i64} : (tensor<?x4x?x?xf32>, tensor<32x4xf32>) -> tensor<?x4x?x?xf32>
  %m = tfm.mask %r lengths(%l) {kind = #tfm.mask<causal>} : (tensor<?x4x?x?xf32>, tensor<?xi32>) -> tensor<?x4x?x?xf32>
  %a = tfm.alibi %m {slopes = array<f64: 0.25, 0.0625, 0.015625, 0.00390625>} : tensor<?x4x?x?xf32>
  %p = tfm.softmax %a {axis = 3 : i64} : tensor<?x4x?x?xf32>
  %o = tfm.matmul %p, %v : (tensor<?x4x?x?xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32>
  return %o : tensor<?x4x?x8xf32>
}

// -----

// A scale after a position bias is not tfm.attention's order: left alone.
// CHECK-LABEL: func.func @scale_after_bias
// CHECK-NOT: tfm.attention
// CHECK: tfm.softmax
func.func @scale_after_bias(%q: tensor<?x4x?x8xf32>, %k: tensor<?x4x?x8xf32>, %v: tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32> {
  %s = tfm.matmul %q, %k {transpose_rhs} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x?xf32>
  %a = tfm.alibi %s {slopes = array<f64: 0.25, 0.0625, 0.015625, 0.00390625>} : tensor<?x4x?x?xf32>
  %ss = tfm.scale %a {factor = 0.5 : f64} : tensor<?x4x?x?xf32>
  %p = tfm.softmax %ss {axis = 3 : i64} : tensor<?x4x?x?xf32>
  %o = tfm.matmul %p, %v : (tensor<?x4x?x?xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32>
  return %o : tensor<?x4x?x8xf32>
}

// -----

// A mask before the softcap would turn -inf into -cap: left alone.
// CHECK-LABEL: func.func @mask_before_softcap
// CHECK-NOT: tfm.attention
// CHECK: tfm.softmax
func.func @mask_before_softcap(%q: tensor<?x4x?x8xf32>, %k: tensor<?x4x?x8xf32>, %v: tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32> {
  %s = tfm.matmul %q, %k {transpose_rhs} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x?xf32>
  %m = tfm.mask %s {kind = #tfm.mask<causal>} : (tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %c = tfm.softcap %m {cap = 20.0 : f64} : tensor<?x4x?x?xf32>
  %p = tfm.softmax %c {axis = 3 : i64} : tensor<?x4x?x?xf32>
  %o = tfm.matmul %p, %v : (tensor<?x4x?x?xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32>
  return %o : tensor<?x4x?x8xf32>
}
