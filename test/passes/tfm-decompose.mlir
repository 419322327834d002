// RUN: tfm-opt %s --tfm-decompose | FileCheck %s

// CHECK-LABEL: func.func @gqa_rope_sliding
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x16xf32>, %[[LEN:.*]]: tensor<?xi32>
func.func @gqa_rope_sliding(%x: tensor<?x?x16xf32>, %len: tensor<?xi32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>) -> tensor<?x?x16xf32> {
  // CHECK: %[[Q:.*]] = tfm.linear %[[X]], %{{.*}} : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  // CHECK: %[[K:.*]] = tfm.linear %[[X]], %{{.*}} : (tensor<?x?x16xf32>, tensor<8x16xf32>) -> tensor<?x?x8xf32>
  // CHECK: %[[V:.*]] = tfm.linear %[[X]]
  // CHECK: %[[QH:.*]] = tfm.split_heads %[[Q]] {heads = 4 : i64} : (tensor<?x?x16xf32>) -> tensor<?x4x?x4xf32>
  // CHECK: %[[KH:.*]] = tfm.split_heads %[[K]] {heads = 2 : i64} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32>
  // CHECK: %[[VH:.*]] = tfm.split_heads %[[V]] {heads = 2 : i64}
  // CHECK: %[[QR:.*]] = tfm.rope %[[QH]] {inv_freq = array<f64: 1.000000e+00, 1.000000e-02>, style = #tfm.rope_style<interleaved>}
  // CHECK: %[[KR:.*]] = tfm.rope %[[KH]]
  // CHECK: %[[KREP:.*]] = tfm.repeat_kv %[[KR]] {repeats = 2 : i64} : (tensor<?x2x?x4xf32>) -> tensor<?x4x?x4xf32>
  // CHECK: %[[VREP:.*]] = tfm.repeat_kv %[[VH]] {repeats = 2 : i64}
  // CHECK: %[[S:.*]] = tfm.matmul %[[QR]], %[[KREP]] {transpose_rhs} : (tensor<?x4x?x4xf32>, tensor<?x4x?x4xf32>) -> tensor<?x4x?x?xf32>
  // CHECK: %[[SS:.*]] = tfm.scale %[[S]] {factor = 5.000000e-01 : f64}
  // CHECK: %[[M:.*]] = tfm.mask %[[SS]] lengths(%[[LEN]]) {kind = #tfm.mask<sliding>, window = 3 : i64}
  // CHECK: %[[P:.*]] = tfm.softmax %[[M]] {axis = 3 : i64}
  // CHECK: %[[O:.*]] = tfm.matmul %[[P]], %[[VREP]] : (tensor<?x4x?x?xf32>, tensor<?x4x?x4xf32>) -> tensor<?x4x?x4xf32>
  // CHECK: %[[MH:.*]] = tfm.merge_heads %[[O]] : (tensor<?x4x?x4xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfm.linear %[[MH]]
  // CHECK-NOT: tfm.multi_head_attention
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo) lengths(%len)
         {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<sliding>, window = 3 : i64,
          scale = 0.5 : f64, rope_inv_freq = array<f64: 1.0, 0.01>, rope_style = #tfm.rope_style<interleaved>}
         : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<?xi32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}

// No mask and no lengths: no tfm.mask; cross-attention reads the source.
// CHECK-LABEL: func.func @cross_unmasked
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x16xf32>, %[[SRC:.*]]: tensor<?x?x16xf32>
// CHECK: tfm.linear %[[X]]
// CHECK: tfm.linear %[[SRC]]
// CHECK: tfm.linear %[[SRC]]
// CHECK-NOT: tfm.mask
// CHECK-NOT: tfm.repeat_kv
// CHECK: tfm.softmax
func.func @cross_unmasked(%x: tensor<?x?x16xf32>, %src: tensor<?x?x16xf32>, %w: tensor<16x16xf32>) -> tensor<?x?x16xf32> {
  %y = tfm.multi_head_attention %x, %src weights(%w, %w, %w, %w)
         {heads = 2 : i64, kv_heads = 2 : i64, head_dim = 8 : i64, mask = #tfm.mask<none>, scale = 0.35 : f64}
         : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}

// CHECK-LABEL: func.func @swiglu
// CHECK: %[[UP:.*]] = tfm.linear %[[X:.*]], %{{.*}}, %{{.*}} : (tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<64xf32>)
// CHECK: %[[G:.*]] = tfm.linear %[[X]]
// CHECK: %[[A:.*]] = tfm.activation %[[G]] {kind = #tfm.activation<silu>}
// CHECK: %[[H:.*]] = tfm.mul %[[A]], %[[UP]]
// CHECK: tfm.linear %[[H]], %{{.*}}, %{{.*}} : (tensor<?x?x64xf32>, tensor<16x64xf32>, tensor<16xf32>)
func.func @swiglu(%x: tensor<?x?x16xf32>, %wu: tensor<64x16xf32>, %wd: tensor<16x64xf32>, %b64: tensor<64xf32>, %b16: tensor<16xf32>) -> tensor<?x?x16xf32> {
  %y = tfm.ffn %x up(%wu) gate(%wu) down(%wd) biases(%b64, %b64, %b16) {activation = #tfm.activation<swiglu>} : (tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<64x16xf32>, tensor<16x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}

// CHECK-LABEL: func.func @gelu
// CHECK: tfm.activation %{{.*}} {kind = #tfm.activation<gelu_tanh>}
// CHECK-NOT: tfm.mul
func.func @gelu(%x: tensor<?x?x16xf32>, %wu: tensor<64x16xf32>, %wd: tensor<16x64xf32>) -> tensor<?x?x16xf32> {
  %y = tfm.ffn %x up(%wu) down(%wd) {activation = #tfm.activation<gelu_tanh>} : (tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<16x64xf32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}

// DSL v2: q/k/v biases without an output bias, Q/K norms (rmsnorm with
// offset 1 on the norm), ALiBi, the relative bias and softcap as score
// modifiers in tfm.attention's order.
// CHECK-LABEL: func.func @v2_modifiers
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x16xf32>, %{{.*}}: tensor<16x16xf32>, %{{.*}}: tensor<16xf32>, %[[N:.*]]: tensor<4xf32>, %[[T:.*]]: tensor<32x4xf32>)
// CHECK: tfm.linear %[[X]], %{{.*}}, %{{.*}} : (tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<16xf32>)
// CHECK: %[[QH:.*]] = tfm.split_heads
// CHECK: %[[KH:.*]] = tfm.split_heads
// CHECK: %[[QN:.*]] = tfm.norm %[[QH]], %[[N]] {eps = 9.9999999999999995E-7 : f64, kind = #tfm.norm<rmsnorm>, offset = 1.000000e+00 : f64} : (tensor<?x4x?x4xf32>, tensor<4xf32>) -> tensor<?x4x?x4xf32>
// CHECK: %[[KN:.*]] = tfm.norm %[[KH]]
// CHECK: %[[S:.*]] = tfm.matmul %[[QN]], %[[KN]] {transpose_rhs}
// CHECK: %[[SS:.*]] = tfm.scale %[[S]]
// CHECK: %[[C:.*]] = tfm.softcap %[[SS]] {cap = 3.000000e+01 : f64}
// CHECK: %[[A:.*]] = tfm.alibi %[[C]] {slopes = array<f64: 2.500000e-01, 6.250000e-02, 1.562500e-02, 3.906250e-03>}
// CHECK: %[[R:.*]] = tfm.relative_bias %[[A]], %[[T]] {bidirectional, max_distance = 64 : i64}
// CHECK: %[[P:.*]] = tfm.softmax %[[R]] {axis = 3 : i64}
// CHECK: %[[MH:.*]] = tfm.merge_heads
// CHECK: tfm.linear %[[MH]], %{{.*}} : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
func.func @v2_modifiers(%x: tensor<?x?x16xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>, %n: tensor<4xf32>, %t: tensor<32x4xf32>) -> tensor<?x?x16xf32> {
  %y = tfm.multi_head_attention %x, %x weights(%w, %w, %w, %w) biases(%b, %b, %b) qk_norm(%n, %n) relative(%t)
         {heads = 4 : i64, kv_heads = 4 : i64, head_dim = 4 : i64, mask = #tfm.mask<none>, scale = 0.5 : f64,
          qk_norm_kind = #tfm.norm<rmsnorm>, qk_norm_eps = 1.0e-06 : f64, qk_norm_offset = 1.0 : f64, softcap = 30.0 : f64,
          alibi_slopes = array<f64: 0.25, 0.0625, 0.015625, 0.00390625>, relative_max_distance = 64 : i64, relative_bidirectional}
         : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>,
            tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<4xf32>, tensor<4xf32>, tensor<32x4xf32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}

// A layernorm Q/K norm has no bias of its own: a zero bias.
// CHECK-LABEL: func.func @qk_layernorm
// CHECK: %[[Z:.*]] = arith.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: tfm.norm %{{.*}}, %{{.*}}, %[[Z]] {eps = 1.000000e-05 : f64, kind = #tfm.norm<layernorm>}
func.func @qk_layernorm(%x: tensor<?x?x16xf32>, %w: tensor<16x16xf32>, %n: tensor<4xf32>) -> tensor<?x?x16xf32> {
  %y = tfm.multi_head_attention %x, %x weights(%w, %w, %w, %w) qk_norm(%n, %n)
         {heads = 4 : i64, kv_heads = 4 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64,
          qk_norm_kind = #tfm.norm<layernorm>, qk_norm_eps = 1.0e-05 : f64}
         : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>,
            tensor<4xf32>, tensor<4xf32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}
