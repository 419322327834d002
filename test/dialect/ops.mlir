// RUN: tfm-opt %s | tfm-opt | FileCheck %s
// RUN: tfm-opt %s --mlir-print-op-generic | tfm-opt | FileCheck %s
// RUN: tfm-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @model_level
func.func @model_level(%tokens: tensor<?x?xi32>, %lengths: tensor<?xi32>) -> tensor<?x?x16xf32> {
  // CHECK: %[[TABLE:.*]] = tfm.param "embed.tokens.weight" : tensor<100x16xf32>
  // GENERIC: "tfm.param"() <{name = "embed.tokens.weight"}> : () -> tensor<100x16xf32>
  %table = tfm.param "embed.tokens.weight" : tensor<100x16xf32>
  // CHECK: %[[X:.*]] = tfm.embed %{{.*}}, %[[TABLE]] {scale} : (tensor<?x?xi32>, tensor<100x16xf32>) -> tensor<?x?x16xf32>
  %x = tfm.embed %tokens, %table {scale} : (tensor<?x?xi32>, tensor<100x16xf32>) -> tensor<?x?x16xf32>
  %pos = tfm.param "embed.positions.weight" : tensor<32x16xf32>
  // CHECK: tfm.positions %[[X]], %{{.*}} {kind = #tfm.position<learned>}
  %x1 = tfm.positions %x, %pos {kind = #tfm.position<learned>} : (tensor<?x?x16xf32>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfm.positions %{{.*}} {kind = #tfm.position<sinusoidal>} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %x2 = tfm.positions %x1 {kind = #tfm.position<sinusoidal>} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %nw = tfm.param "layers.0.attn_norm.weight" : tensor<16xf32>
  %nb = tfm.param "layers.0.attn_norm.bias" : tensor<16xf32>
  // CHECK: tfm.norm %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64, kind = #tfm.norm<layernorm>}
  %n = tfm.norm %x2, %nw, %nb {kind = #tfm.norm<layernorm>, eps = 1.0e-05 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfm.norm %{{.*}}, %{{.*}} {eps = {{.*}} : f64, kind = #tfm.norm<rmsnorm>} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  %r = tfm.norm %n, %nw {kind = #tfm.norm<rmsnorm>, eps = 1.0e-06 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  %wq = tfm.param "layers.0.attn.q.weight" : tensor<16x16xf32>
  %wk = tfm.param "layers.0.attn.k.weight" : tensor<8x16xf32>
  %wv = tfm.param "layers.0.attn.v.weight" : tensor<8x16xf32>
  %wo = tfm.param "layers.0.attn.o.weight" : tensor<16x16xf32>
  %bq = tfm.param "layers.0.attn.q.bias" : tensor<16xf32>
  %bk = tfm.param "layers.0.attn.k.bias" : tensor<8xf32>
  %bv = tfm.param "layers.0.attn.v.bias" : tensor<8xf32>
  %bo = tfm.param "layers.0.attn.o.bias" : tensor<16xf32>
  // CHECK: tfm.multi_head_attention %{{.*}}, %{{.*}} weights(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) biases(%{{.*}}, %{{.*}}, %{{.*}}) out_bias(%{{.*}}) qk_norm(%{{.*}}, %{{.*}}) relative(%{{.*}}) lengths(%{{.*}}) {alibi_slopes = array<f64: 2.500000e-01, 6.250000e-02, 1.562500e-02, 3.906250e-03>, head_dim = 4 : i64, heads = 4 : i64, kv_heads = 2 : i64, mask = #tfm.mask<sliding>, qk_norm_eps = 9.9999999999999995E-7 : f64, qk_norm_kind = #tfm.norm<rmsnorm>, qk_norm_offset = 1.000000e+00 : f64, relative_bidirectional, relative_max_distance = 16 : i64, rope_inv_freq = array<f64: 1.000000e+00, 1.000000e-02>, rope_style = #tfm.rope_style<interleaved>, scale = 5.000000e-01 : f64, softcap = 5.000000e+01 : f64, window = 3 : i64}
  %qn = tfm.param "layers.0.attn.q_norm.weight" : tensor<4xf32>
  %kn = tfm.param "layers.0.attn.k_norm.weight" : tensor<4xf32>
  %rel = tfm.param "embed.relative.weight" : tensor<8x4xf32>
  %a = tfm.multi_head_attention %r, %r weights(%wq, %wk, %wv, %wo) biases(%bq, %bk, %bv) out_bias(%bo) qk_norm(%qn, %kn) relative(%rel) lengths(%lengths)
         {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<sliding>, window = 3 : i64,
          scale = 0.5 : f64, rope_inv_freq = array<f64: 1.0, 0.01>, rope_style = #tfm.rope_style<interleaved>,
          qk_norm_kind = #tfm.norm<rmsnorm>, qk_norm_eps = 1.0e-06 : f64, qk_norm_offset = 1.0 : f64, softcap = 50.0 : f64,
          alibi_slopes = array<f64: 0.25, 0.0625, 0.015625, 0.00390625>, relative_max_distance = 16 : i64, relative_bidirectional}
         : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>,
            tensor<16xf32>, tensor<8xf32>, tensor<8xf32>, tensor<16xf32>, tensor<4xf32>, tensor<4xf32>, tensor<8x4xf32>, tensor<?xi32>) -> tensor<?x?x16xf32>
  // CHECK: %[[RES:.*]] = tfm.add
  %res = tfm.add %x2, %a : tensor<?x?x16xf32>
  %wu = tfm.param "layers.0.ffn.up.weight" : tensor<64x16xf32>
  %wg = tfm.param "layers.0.ffn.gate.weight" : tensor<64x16xf32>
  %wd = tfm.param "layers.0.ffn.down.weight" : tensor<16x64xf32>
  %bu = tfm.param "layers.0.ffn.up.bias" : tensor<64xf32>
  %bd = tfm.param "layers.0.ffn.down.bias" : tensor<16xf32>
  // CHECK: tfm.ffn %[[RES]] up(%{{.*}}) down(%{{.*}}) biases(%{{.*}}, %{{.*}}) {activation = #tfm.activation<gelu>}
  %f = tfm.ffn %res up(%wu) down(%wd) biases(%bu, %bd) {activation = #tfm.activation<gelu>} : (tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<16x64xf32>, tensor<64xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfm.ffn %{{.*}} up(%{{.*}}) gate(%{{.*}}) down(%{{.*}}) {activation = #tfm.activation<swiglu>}
  %g = tfm.ffn %f up(%wu) gate(%wg) down(%wd) {activation = #tfm.activation<swiglu>} : (tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<64x16xf32>, tensor<16x64xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfm.mul
  %m = tfm.mul %g, %f : tensor<?x?x16xf32>
  // CHECK: tfm.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  %l = tfm.linear %m, %wo, %bo : (tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  return %l : tensor<?x?x16xf32>
}

// CHECK-LABEL: func.func @image
func.func @image(%img: tensor<?x3x8x8xf32>) -> tensor<?x16xf32> {
  %w = tfm.param "patch.weight" : tensor<16x48xf32>
  %b = tfm.param "patch.bias" : tensor<16xf32>
  %cls = tfm.param "embed.cls_token" : tensor<16xf32>
  // CHECK: tfm.patch_embed %{{.*}}, %{{.*}}, %{{.*}} {patch = 4 : i64} : (tensor<?x3x8x8xf32>, tensor<16x48xf32>, tensor<16xf32>) -> tensor<?x4x16xf32>
  %x = tfm.patch_embed %img, %w, %b {patch = 4 : i64} : (tensor<?x3x8x8xf32>, tensor<16x48xf32>, tensor<16xf32>) -> tensor<?x4x16xf32>
  // CHECK: tfm.prepend_token %{{.*}}, %{{.*}} : (tensor<?x4x16xf32>, tensor<16xf32>) -> tensor<?x5x16xf32>
  %y = tfm.prepend_token %x, %cls : (tensor<?x4x16xf32>, tensor<16xf32>) -> tensor<?x5x16xf32>
  // CHECK: tfm.pool %{{.*}} {kind = #tfm.pool<cls>} : (tensor<?x5x16xf32>) -> tensor<?x16xf32>
  %p = tfm.pool %y {kind = #tfm.pool<cls>} : (tensor<?x5x16xf32>) -> tensor<?x16xf32>
  return %p : tensor<?x16xf32>
}

// CHECK-LABEL: func.func @pool_lengths
func.func @pool_lengths(%x: tensor<?x?x16xf32>, %len: tensor<?xi32>) -> tensor<?x16xf32> {
  // CHECK: tfm.pool %{{.*}} lengths(%{{.*}}) {kind = #tfm.pool<mean>}
  %p = tfm.pool %x lengths(%len) {kind = #tfm.pool<mean>} : (tensor<?x?x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
  return %p : tensor<?x16xf32>
}

// CHECK-LABEL: func.func @primitive_level
func.func @primitive_level(%x: tensor<?x?x16xf32>, %len: tensor<?xi32>) -> tensor<?x?x16xf32> {
  // CHECK: %[[Q:.*]] = tfm.split_heads %{{.*}} {heads = 2 : i64} : (tensor<?x?x16xf32>) -> tensor<?x2x?x8xf32>
  %q = tfm.split_heads %x {heads = 2 : i64} : (tensor<?x?x16xf32>) -> tensor<?x2x?x8xf32>
  // CHECK: tfm.rope %[[Q]] {inv_freq = array<f64: 1.000000e+00, 1.000000e-01>, style = #tfm.rope_style<half>} : tensor<?x2x?x8xf32>
  %qr = tfm.rope %q {inv_freq = array<f64: 1.0, 0.1>, style = #tfm.rope_style<half>} : tensor<?x2x?x8xf32>
  // CHECK: tfm.split_heads %{{.*}} {heads = 1 : i64} : (tensor<?x?x16xf32>) -> tensor<?x1x?x16xf32>
  %k1 = tfm.split_heads %x {heads = 1 : i64} : (tensor<?x?x16xf32>) -> tensor<?x1x?x16xf32>
  // CHECK: tfm.repeat_kv %{{.*}} {repeats = 2 : i64} : (tensor<?x1x?x16xf32>) -> tensor<?x2x?x16xf32>
  %k2 = tfm.repeat_kv %k1 {repeats = 2 : i64} : (tensor<?x1x?x16xf32>) -> tensor<?x2x?x16xf32>
  // CHECK: tfm.transpose %{{.*}} {permutation = array<i64: 0, 1, 3, 2>} : (tensor<?x2x?x8xf32>) -> tensor<?x2x8x?xf32>
  %kt = tfm.transpose %qr {permutation = array<i64: 0, 1, 3, 2>} : (tensor<?x2x?x8xf32>) -> tensor<?x2x8x?xf32>
  // CHECK: tfm.matmul %{{.*}}, %{{.*}} : (tensor<?x2x?x8xf32>, tensor<?x2x8x?xf32>) -> tensor<?x2x?x?xf32>
  %s0 = tfm.matmul %qr, %kt : (tensor<?x2x?x8xf32>, tensor<?x2x8x?xf32>) -> tensor<?x2x?x?xf32>
  // CHECK: tfm.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x2x?x?xf32>
  %s = tfm.matmul %qr, %qr {transpose_rhs} : (tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x2x?x?xf32>
  // CHECK: tfm.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<?x2x8x?xf32>, tensor<?x2x8x?xf32>) -> tensor<?x2x?x?xf32>
  %s1 = tfm.matmul %kt, %kt {transpose_lhs} : (tensor<?x2x8x?xf32>, tensor<?x2x8x?xf32>) -> tensor<?x2x?x?xf32>
  // CHECK: tfm.scale %{{.*}} {factor = 0.35355339059327379 : f64} : tensor<?x2x?x?xf32>
  %ss = tfm.scale %s {factor = 0.35355339059327379 : f64} : tensor<?x2x?x?xf32>
  // CHECK: tfm.mask %{{.*}} {kind = #tfm.mask<causal>} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %sm = tfm.mask %ss {kind = #tfm.mask<causal>} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  // CHECK: tfm.mask %{{.*}} lengths(%{{.*}}) {kind = #tfm.mask<none>} : (tensor<?x2x?x?xf32>, tensor<?xi32>) -> tensor<?x2x?x?xf32>
  %sp = tfm.mask %sm lengths(%len) {kind = #tfm.mask<none>} : (tensor<?x2x?x?xf32>, tensor<?xi32>) -> tensor<?x2x?x?xf32>
  // CHECK: tfm.softcap %{{.*}} {cap = 5.000000e+01 : f64} : tensor<?x2x?x?xf32>
  %sc = tfm.softcap %sp {cap = 50.0 : f64} : tensor<?x2x?x?xf32>
  // CHECK: tfm.alibi %{{.*}} {slopes = array<f64: 2.500000e-01, 6.250000e-02>} : tensor<?x2x?x?xf32>
  %sa = tfm.alibi %sc {slopes = array<f64: 0.25, 0.0625>} : tensor<?x2x?x?xf32>
  %table = tfm.param "embed.relative.weight" : tensor<32x2xf32>
  // CHECK: tfm.relative_bias %{{.*}}, %{{.*}} {bidirectional, max_distance = 128 : i64} : (tensor<?x2x?x?xf32>, tensor<32x2xf32>) -> tensor<?x2x?x?xf32>
  %sr = tfm.relative_bias %sa, %table {max_distance = 128 : i64, bidirectional} : (tensor<?x2x?x?xf32>, tensor<32x2xf32>) -> tensor<?x2x?x?xf32>
  // CHECK: tfm.softmax %{{.*}} {axis = 3 : i64} : tensor<?x2x?x?xf32>
  %p = tfm.softmax %sp {axis = 3 : i64} : tensor<?x2x?x?xf32>
  // CHECK: tfm.matmul
  %o = tfm.matmul %p, %q : (tensor<?x2x?x?xf32>, tensor<?x2x?x8xf32>) -> tensor<?x2x?x8xf32>
  // CHECK: tfm.merge_heads %{{.*}} : (tensor<?x2x?x8xf32>) -> tensor<?x?x16xf32>
  %m = tfm.merge_heads %o : (tensor<?x2x?x8xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfm.activation %{{.*}} {kind = #tfm.activation<gelu_tanh>} : tensor<?x?x16xf32>
  %a = tfm.activation %m {kind = #tfm.activation<gelu_tanh>} : tensor<?x?x16xf32>
  return %a : tensor<?x?x16xf32>
}

// CHECK-LABEL: func.func @fused_level
func.func @fused_level(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %v: tensor<?x2x?x8xf32>, %len: tensor<?xi32>) -> tensor<?x4x?x8xf32> {
  // CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} {mask = #tfm.mask<causal>, scale = 1.250000e-01 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32>
  %o = tfm.attention %q, %k, %v {mask = #tfm.mask<causal>, scale = 0.125 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32>
  %rt = tfm.param "embed.relative.weight" : tensor<32x4xf32>
  // CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} relative(%{{.*}}) {alibi_slopes = array<f64: 5.000000e-01, 2.500000e-01, 1.250000e-01, 6.250000e-02>, mask = #tfm.mask<none>, relative_max_distance = 128 : i64, scale = 1.000000e+00 : f64, softcap = 3.000000e+01 : f64}
  %o3 = tfm.attention %q, %k, %v relative(%rt) {mask = #tfm.mask<none>, scale = 1.0 : f64, softcap = 30.0 : f64, alibi_slopes = array<f64: 0.5, 0.25, 0.125, 0.0625>, relative_max_distance = 128 : i64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>, tensor<32x4xf32>) -> tensor<?x4x?x8xf32>
  // CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} lengths(%{{.*}}) {mask = #tfm.mask<sliding>, scale = 1.250000e-01 : f64, window = 16 : i64}
  %o2 = tfm.attention %o, %k, %v lengths(%len) {mask = #tfm.mask<sliding>, window = 16 : i64, scale = 0.125 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?xi32>) -> tensor<?x4x?x8xf32>
  return %o2 : tensor<?x4x?x8xf32>
}

// CHECK-LABEL: func.func @half_precision
func.func @half_precision(%x: tensor<2x3x16xf16>, %y: tensor<2x3x16xbf16>) -> (tensor<2x3x16xf16>, tensor<2x3x16xbf16>) {
  // CHECK: tfm.add %{{.*}}, %{{.*}} : tensor<2x3x16xf16>
  %a = tfm.add %x, %x : tensor<2x3x16xf16>
  // CHECK: tfm.add %{{.*}}, %{{.*}} : tensor<2x3x16xbf16>
  %b = tfm.add %y, %y : tensor<2x3x16xbf16>
  return %a, %b : tensor<2x3x16xf16>, tensor<2x3x16xbf16>
}

// A function that depends on no model (tfm-lower-kernels' ggml GEMM).
// CHECK-LABEL: func.func @shared_kernel
// CHECK-SAME: attributes {tfm.shared_kernel}
func.func @shared_kernel(%x: memref<?xf32>) attributes {tfm.shared_kernel} {
  return
}

// The discardable attributes the passes put on other dialects' ops.
// CHECK-LABEL: func.func @discardable_attrs
// CHECK-SAME: attributes {tfm.num_inputs = 1 : i64, tfm.params = [{name = "w", panel = 32 : i64}, {name = "w", panel = 0 : i64}]}
// CHECK: scf.parallel
// CHECK: } {tfm.keep_parallel}
func.func @discardable_attrs(%x: memref<?xf32>, %out: memref<?xf32>, %wp: memref<1x4x32xf32>, %w: memref<4x4xf32>) attributes {tfm.num_inputs = 1 : i64, tfm.params = [{name = "w", panel = 32 : i64}, {name = "w", panel = 0 : i64}]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %v = memref.load %x[%i] : memref<?xf32>
    memref.store %v, %out[%i] : memref<?xf32>
    scf.reduce
  } {tfm.keep_parallel}
  return
}

// The KV-cache forms: multi-head attention over a cache, the cache write,
// attention over a transposed key cache from each sequence's position.
// CHECK-LABEL: func.func @kv_cache
func.func @kv_cache(%x: tensor<?x?x16xf32>, %kc: tensor<?x2x4x?xf32>, %vc: tensor<?x2x?x4xf32>, %pos: tensor<?xi32>, %q: tensor<?x4x?x4xf32>, %k: tensor<?x2x?x4xf32>) -> tensor<?x4x?x4xf32> {
  %wq = tfm.param "wq" : tensor<16x16xf32>
  %wk = tfm.param "wk" : tensor<8x16xf32>
  %wv = tfm.param "wv" : tensor<8x16xf32>
  %wo = tfm.param "wo" : tensor<16x16xf32>
  // CHECK: tfm.multi_head_attention %{{.*}}, %{{.*}} weights(%{{.*}}) cache(%{{.*}}, %{{.*}}) positions(%{{.*}}) {{{.*}}} : ({{.*}}) -> (tensor<?x?x16xf32>, tensor<?x2x4x?xf32>, tensor<?x2x?x4xf32>)
  %y, %kc2, %vc2 = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wv, %wo) cache(%kc, %vc) positions(%pos) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 5.000000e-01 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<?x2x4x?xf32>, tensor<?x2x?x4xf32>, tensor<?xi32>) -> (tensor<?x?x16xf32>, tensor<?x2x4x?xf32>, tensor<?x2x?x4xf32>)
  // CHECK: tfm.cache_write %{{.*}} into %{{.*}} at %{{.*}} {transposed} : tensor<?x2x?x4xf32> into tensor<?x2x4x?xf32> at tensor<?xi32>
  %kc3 = tfm.cache_write %k into %kc at %pos {transposed} : tensor<?x2x?x4xf32> into tensor<?x2x4x?xf32> at tensor<?xi32>
  // CHECK: tfm.rope %{{.*}} positions(%{{.*}} : tensor<?xi32>)
  %r = tfm.rope %q positions(%pos : tensor<?xi32>) {inv_freq = array<f64: 1.0, 0.1>, style = #tfm.rope_style<half>} : tensor<?x4x?x4xf32>
  // CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} positions(%{{.*}}) {key_transposed, mask = #tfm.mask<causal>
  %o = tfm.attention %r, %kc3, %vc positions(%pos) {key_transposed, mask = #tfm.mask<causal>, scale = 5.000000e-01 : f64} : (tensor<?x4x?x4xf32>, tensor<?x2x4x?xf32>, tensor<?x2x?x4xf32>, tensor<?xi32>) -> tensor<?x4x?x4xf32>
  return %o : tensor<?x4x?x4xf32>
}

// A paged KV cache: pools of blocks of 64 positions and a block table
// [B, M], through the block, the write, the attention and its kernel.
// CHECK-LABEL: func.func @paged_kv_cache
func.func @paged_kv_cache(%x: tensor<?x?x16xf32>, %kc: tensor<?x2x4x64xf32>, %vc: tensor<?x2x64x4xf32>, %pos: tensor<?xi32>, %table: tensor<?x?xi32>, %q: tensor<?x4x?x4xf32>, %k: tensor<?x2x?x4xf32>, %qm: memref<?x4x?x4xf32>, %km: memref<?x2x4x64xf32>, %vm: memref<?x2x64x4xf32>, %pm: memref<?xi32>, %tm: memref<?x?xi32>, %om: memref<?x4x?x4xf32>) -> tensor<?x4x?x4xf32> {
  %wq = tfm.param "wq" : tensor<16x16xf32>
  %wk = tfm.param "wk" : tensor<8x16xf32>
  %wv = tfm.param "wv" : tensor<8x16xf32>
  %wo = tfm.param "wo" : tensor<16x16xf32>
  // CHECK: tfm.multi_head_attention {{.*}} cache(%{{.*}}, %{{.*}}) positions(%{{.*}}) block_table(%{{.*}}) {{{.*}}} : ({{.*}}, tensor<?x2x4x64xf32>, tensor<?x2x64x4xf32>, tensor<?xi32>, tensor<?x?xi32>) -> (tensor<?x?x16xf32>, tensor<?x2x4x64xf32>, tensor<?x2x64x4xf32>)
  %y, %kc2, %vc2 = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wv, %wo) cache(%kc, %vc) positions(%pos) block_table(%table) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 5.000000e-01 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<?x2x4x64xf32>, tensor<?x2x64x4xf32>, tensor<?xi32>, tensor<?x?xi32>) -> (tensor<?x?x16xf32>, tensor<?x2x4x64xf32>, tensor<?x2x64x4xf32>)
  // CHECK: tfm.cache_write %{{.*}} into %{{.*}} at %{{.*}} pages %{{.*}} : tensor<?x?xi32> {transposed} : tensor<?x2x?x4xf32> into tensor<?x2x4x64xf32> at tensor<?xi32>
  %kc3 = tfm.cache_write %k into %kc at %pos pages %table : tensor<?x?xi32> {transposed} : tensor<?x2x?x4xf32> into tensor<?x2x4x64xf32> at tensor<?xi32>
  // CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} positions(%{{.*}}) block_table(%{{.*}}) {key_transposed
  %o = tfm.attention %q, %kc3, %vc positions(%pos) block_table(%table) {key_transposed, mask = #tfm.mask<causal>, scale = 5.000000e-01 : f64} : (tensor<?x4x?x4xf32>, tensor<?x2x4x64xf32>, tensor<?x2x64x4xf32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x4x?x4xf32>
  // CHECK: tfm.attention_kernel {{.*}} positions(%{{.*}} : memref<?xi32>) block_table(%{{.*}} : memref<?x?xi32>) outs(
  tfm.attention_kernel ins(%qm, %km, %vm : memref<?x4x?x4xf32>, memref<?x2x4x64xf32>, memref<?x2x64x4xf32>) positions(%pm : memref<?xi32>) block_table(%tm : memref<?x?xi32>) outs(%om : memref<?x4x?x4xf32>) {mask = #tfm.mask<causal>, scale = 5.000000e-01 : f64}
  return %o : tensor<?x4x?x4xf32>
}

// Tensor parallelism: a rank's block of the vocabulary, the collectives and
// their kernel forms.
// CHECK-LABEL: func.func @tensor_parallel
func.func @tensor_parallel(%tokens: tensor<?x?xi32>, %table: tensor<50x16xf32>, %b: tensor<16xf32>, %xm: memref<?x16xf32>, %bm: memref<16xf32>, %ym: memref<?x16xf32>, %gm: memref<?x32xf32>) -> tensor<?x?x100xf32> {
  // CHECK: tfm.embed %{{.*}}, %{{.*}} {vocab_shards = 2 : i64}
  %x = tfm.embed %tokens, %table {vocab_shards = 2 : i64} : (tensor<?x?xi32>, tensor<50x16xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfm.all_reduce %{{.*}} {ranks = 2 : i64} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %s = tfm.all_reduce %x {ranks = 2 : i64} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfm.all_reduce %{{.*}}, %{{.*}} {ranks = 2 : i64} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  %sb = tfm.all_reduce %s, %b {ranks = 2 : i64} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  %l = tfm.linear %sb, %table : (tensor<?x?x16xf32>, tensor<50x16xf32>) -> tensor<?x?x50xf32>
  // CHECK: tfm.all_gather %{{.*}} {ranks = 2 : i64} : tensor<?x?x50xf32> -> tensor<?x?x100xf32>
  %g = tfm.all_gather %l {ranks = 2 : i64} : tensor<?x?x50xf32> -> tensor<?x?x100xf32>
  // CHECK: tfm.tp_rank
  %r = tfm.tp_rank
  // CHECK: tfm.all_reduce_kernel ins(%{{.*}}, %{{.*}} : memref<?x16xf32>, memref<16xf32>) outs(%{{.*}} : memref<?x16xf32>)
  tfm.all_reduce_kernel ins(%xm, %bm : memref<?x16xf32>, memref<16xf32>) outs(%ym : memref<?x16xf32>)
  // CHECK: tfm.all_gather_kernel ins(%{{.*}} : memref<?x16xf32>) outs(%{{.*}} : memref<?x32xf32>)
  tfm.all_gather_kernel ins(%xm : memref<?x16xf32>) outs(%gm : memref<?x32xf32>)
  return %g : tensor<?x?x100xf32>
}

// Linears with an epilogue (tfm-fuse-epilogues) and their kernel forms.
// CHECK-LABEL: func.func @epilogues
func.func @epilogues(%x: tensor<?x?x16xf32>, %w: tensor<16x16xf32>, %m: tensor<?x?x16xf32>, %xm: memref<?x16xf32>, %wp: memref<1x16x32xf32>, %mm: memref<?x16xf32>, %rm: memref<?x?x16xf32>, %ym: memref<?x16xf32>) -> tensor<?x?x16xf32> {
  // CHECK: tfm.linear %{{.*}}, %{{.*}} mul %{{.*}} residual %{{.*}} {activation = #tfm.activation<gelu>} : (tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %l = tfm.linear %x, %w mul %m residual %x {activation = #tfm.activation<gelu>} : (tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfm.linear_kernel ins(%{{.*}}, %{{.*}} : memref<?x16xf32>, memref<1x16x32xf32>) mul(%{{.*}} : memref<?x16xf32>) residual(%{{.*}} : memref<?x?x16xf32>) outs(%{{.*}} : memref<?x16xf32>) {activation = #tfm.activation<silu>}
  tfm.linear_kernel ins(%xm, %wp : memref<?x16xf32>, memref<1x16x32xf32>) mul(%mm : memref<?x16xf32>) residual(%rm : memref<?x?x16xf32>) outs(%ym : memref<?x16xf32>) {activation = #tfm.activation<silu>}
  return %l : tensor<?x?x16xf32>
}

// On f32 panels P, K and N may be dynamic (a kernel shared by every shape,
// tfm-outline-kernels); the panel width stays static.
// CHECK-LABEL: func.func @linear_kernel_any_shape
// CHECK: tfm.linear_kernel ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<?x?xf32>, memref<?x?x32xf32>, memref<?xf32>) residual(%{{.*}} : memref<?x?x?xf32>) outs(%{{.*}} : memref<?x?xf32>)
func.func @linear_kernel_any_shape(%x: memref<?x?xf32>, %w: memref<?x?x32xf32>, %b: memref<?xf32>, %r: memref<?x?x?xf32>, %y: memref<?x?xf32>) {
  tfm.linear_kernel ins(%x, %w, %b : memref<?x?xf32>, memref<?x?x32xf32>, memref<?xf32>) residual(%r : memref<?x?x?xf32>) outs(%y : memref<?x?xf32>)
  return
}

// Norm kernels (convert-tfm-to-linalg{norm-kernels}): f32 rows, rows in bf16
// pairs or int8 quads, and a linear reading packed rows.
// CHECK-LABEL: func.func @norm_kernels
func.func @norm_kernels(%x: tensor<?x?x15xf32>, %g: tensor<15xf32>, %b: tensor<15xf32>, %y: tensor<?x?x15xf32>, %xm: memref<?x15xf32>, %gm: memref<15xf32>, %pm: memref<?x16xbf16>, %qm: memref<?x20xi8>, %wp: memref<1x8x64xbf16>, %om: memref<?x32xf32>) -> tensor<?x?x15xf32> {
  // CHECK: tfm.norm_kernel ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x?x15xf32>, tensor<15xf32>, tensor<15xf32>) outs(%{{.*}} : tensor<?x?x15xf32>) {eps = 1.000000e-05 : f64, kind = #tfm.norm<layernorm>} -> tensor<?x?x15xf32>
  %n = tfm.norm_kernel ins(%x, %g, %b : tensor<?x?x15xf32>, tensor<15xf32>, tensor<15xf32>) outs(%y : tensor<?x?x15xf32>) {kind = #tfm.norm<layernorm>, eps = 1.0e-05 : f64} -> tensor<?x?x15xf32>
  // CHECK: tfm.norm_kernel ins(%{{.*}}, %{{.*}} : memref<?x15xf32>, memref<15xf32>) outs(%{{.*}} : memref<?x16xbf16>) {eps = 1.000000e-05 : f64, kind = #tfm.norm<rmsnorm>, offset = 1.000000e+00 : f64}
  tfm.norm_kernel ins(%xm, %gm : memref<?x15xf32>, memref<15xf32>) outs(%pm : memref<?x16xbf16>) {kind = #tfm.norm<rmsnorm>, eps = 1.0e-05 : f64, offset = 1.0 : f64}
  // CHECK: tfm.norm_kernel ins(%{{.*}}, %{{.*}} : memref<?x15xf32>, memref<15xf32>) outs(%{{.*}} : memref<?x20xi8>)
  tfm.norm_kernel ins(%xm, %gm : memref<?x15xf32>, memref<15xf32>) outs(%qm : memref<?x20xi8>) {kind = #tfm.norm<rmsnorm>, eps = 1.0e-05 : f64}
  // CHECK: tfm.linear_kernel ins(%{{.*}}, %{{.*}} : memref<?x16xbf16>, memref<1x8x64xbf16>) outs(%{{.*}} : memref<?x32xf32>)
  tfm.linear_kernel ins(%pm, %wp : memref<?x16xbf16>, memref<1x8x64xbf16>) outs(%om : memref<?x32xf32>)
  return %n : tensor<?x?x15xf32>
}

// A weight in ggml blocks and its kernel, on tensors and on buffers.
// CHECK-LABEL: func.func @ggml
// CHECK: tfm.ggml_weight %{{.*}}, %{{.*}} : tensor<4096xi8>, tensor<1xi32> -> tensor<16x64xf32>
// CHECK: tfm.ggml_linear_kernel ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<4096xi8>, tensor<1xi32>) outs(%{{.*}} : tensor<?x16xf32>) -> tensor<?x16xf32>
// CHECK: tfm.ggml_linear_kernel ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<?x64xf32>, memref<4096xi8>, memref<1xi32>, memref<16xf32>) residual(%{{.*}} : memref<?x16xf32>) outs(%{{.*}} : memref<?x16xf32>) {activation = #tfm.activation<silu>}
func.func @ggml(%r: tensor<4096xi8>, %t: tensor<1xi32>, %x: tensor<?x64xf32>, %o: tensor<?x16xf32>, %xm: memref<?x64xf32>, %rm: memref<4096xi8>, %tm: memref<1xi32>, %bm: memref<16xf32>, %ym: memref<?x16xf32>) -> (tensor<16x64xf32>, tensor<?x16xf32>) {
  %w = tfm.ggml_weight %r, %t : tensor<4096xi8>, tensor<1xi32> -> tensor<16x64xf32>
  %y = tfm.ggml_linear_kernel ins(%x, %r, %t : tensor<?x64xf32>, tensor<4096xi8>, tensor<1xi32>) outs(%o : tensor<?x16xf32>) -> tensor<?x16xf32>
  tfm.ggml_linear_kernel ins(%xm, %rm, %tm, %bm : memref<?x64xf32>, memref<4096xi8>, memref<1xi32>, memref<16xf32>) residual(%ym : memref<?x16xf32>) outs(%ym : memref<?x16xf32>) {activation = #tfm.activation<silu>}
  return %w, %y : tensor<16x64xf32>, tensor<?x16xf32>
}
