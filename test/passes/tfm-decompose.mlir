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
  // CHECK: %[[QR:.*]] = tfm.rope %[[QH]] {style = #tfm.rope_style<interleaved>, theta = 1.000000e+04 : f64}
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
          scale = 0.5 : f64, rope_theta = 10000.0 : f64, rope_style = #tfm.rope_style<interleaved>}
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
