// tfm.latent_attention: the forms it takes (a query latent or not, a
// latent cache) and what its verifier rejects.
// RUN: tfm-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func @direct_query
// CHECK: tfm.latent_attention %{{.*}} weights(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {
func.func @direct_query(%x: tensor<?x?x16xf32>, %wq: tensor<12x16xf32>, %wkva: tensor<10x16xf32>, %n: tensor<8xf32>, %wkvb: tensor<16x8xf32>, %wo: tensor<16x8xf32>) -> tensor<?x?x16xf32> {
  %y = tfm.latent_attention %x weights(%wq, %wkva, %n, %wkvb, %wo)
         {heads = 2 : i64, head_dim = 6 : i64, rope_dim = 2 : i64, value_dim = 4 : i64, kv_rank = 8 : i64,
          mask = #tfm.mask<causal>, scale = 0.4 : f64, rope_inv_freq = array<f64: 1.0>, rope_style = #tfm.rope_style<interleaved>,
          norm_kind = #tfm.norm<rmsnorm>, norm_eps = 1.0e-06 : f64}
         : (tensor<?x?x16xf32>, tensor<12x16xf32>, tensor<10x16xf32>, tensor<8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}

// -----

// CHECK-LABEL: func @query_latent_and_cache
// CHECK: query_latent(%{{.*}}, %{{.*}}) cache(%{{.*}}) positions(%{{.*}})
func.func @query_latent_and_cache(%x: tensor<?x?x16xf32>, %wqa: tensor<6x16xf32>, %qn: tensor<6xf32>, %wq: tensor<12x6xf32>, %wkva: tensor<10x16xf32>, %n: tensor<8xf32>, %wkvb: tensor<16x8xf32>, %wo: tensor<16x8xf32>, %c: tensor<?x1x10x?xf32>, %p: tensor<?xi32>) -> (tensor<?x?x16xf32>, tensor<?x1x10x?xf32>) {
  %y, %c2 = tfm.latent_attention %x weights(%wq, %wkva, %n, %wkvb, %wo) query_latent(%wqa, %qn) cache(%c) positions(%p)
         {heads = 2 : i64, head_dim = 6 : i64, rope_dim = 2 : i64, value_dim = 4 : i64, kv_rank = 8 : i64,
          mask = #tfm.mask<causal>, scale = 0.4 : f64, norm_kind = #tfm.norm<rmsnorm>, norm_eps = 1.0e-06 : f64}
         : (tensor<?x?x16xf32>, tensor<12x6xf32>, tensor<10x16xf32>, tensor<8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<6x16xf32>, tensor<6xf32>, tensor<?x1x10x?xf32>, tensor<?xi32>) -> (tensor<?x?x16xf32>, tensor<?x1x10x?xf32>)
  return %y, %c2 : tensor<?x?x16xf32>, tensor<?x1x10x?xf32>
}

// -----

func.func @kvb_shape(%x: tensor<?x?x16xf32>, %wq: tensor<12x16xf32>, %wkva: tensor<10x16xf32>, %n: tensor<8xf32>, %wkvb: tensor<12x8xf32>, %wo: tensor<16x8xf32>) {
  // expected-error @+1 {{'tfm.latent_attention' op wkv_b dimension 0 is 12, expected 16}}
  %y = tfm.latent_attention %x weights(%wq, %wkva, %n, %wkvb, %wo)
         {heads = 2 : i64, head_dim = 6 : i64, rope_dim = 2 : i64, value_dim = 4 : i64, kv_rank = 8 : i64,
          mask = #tfm.mask<causal>, scale = 0.4 : f64, norm_kind = #tfm.norm<rmsnorm>, norm_eps = 1.0e-06 : f64}
         : (tensor<?x?x16xf32>, tensor<12x16xf32>, tensor<10x16xf32>, tensor<8xf32>, tensor<12x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @rope_dim_odd(%x: tensor<?x?x16xf32>, %wq: tensor<12x16xf32>, %wkva: tensor<11x16xf32>, %n: tensor<8xf32>, %wkvb: tensor<14x8xf32>, %wo: tensor<16x8xf32>) {
  // expected-error @+1 {{'tfm.latent_attention' op rope_dim (3) must be even and less than head_dim (6)}}
  %y = tfm.latent_attention %x weights(%wq, %wkva, %n, %wkvb, %wo)
         {heads = 2 : i64, head_dim = 6 : i64, rope_dim = 3 : i64, value_dim = 4 : i64, kv_rank = 8 : i64,
          mask = #tfm.mask<causal>, scale = 0.4 : f64, norm_kind = #tfm.norm<rmsnorm>, norm_eps = 1.0e-06 : f64}
         : (tensor<?x?x16xf32>, tensor<12x16xf32>, tensor<11x16xf32>, tensor<8xf32>, tensor<14x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @cache_width(%x: tensor<?x?x16xf32>, %wq: tensor<12x16xf32>, %wkva: tensor<10x16xf32>, %n: tensor<8xf32>, %wkvb: tensor<16x8xf32>, %wo: tensor<16x8xf32>, %c: tensor<?x1x8x?xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.latent_attention' op latent cache dimension 2 is 8, expected 10}}
  %y, %c2 = tfm.latent_attention %x weights(%wq, %wkva, %n, %wkvb, %wo) cache(%c) positions(%p)
         {heads = 2 : i64, head_dim = 6 : i64, rope_dim = 2 : i64, value_dim = 4 : i64, kv_rank = 8 : i64,
          mask = #tfm.mask<causal>, scale = 0.4 : f64, norm_kind = #tfm.norm<rmsnorm>, norm_eps = 1.0e-06 : f64}
         : (tensor<?x?x16xf32>, tensor<12x16xf32>, tensor<10x16xf32>, tensor<8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<?x1x8x?xf32>, tensor<?xi32>) -> (tensor<?x?x16xf32>, tensor<?x1x8x?xf32>)
  return
}

// -----

func.func @cache_without_positions(%x: tensor<?x?x16xf32>, %wq: tensor<12x16xf32>, %wkva: tensor<10x16xf32>, %n: tensor<8xf32>, %wkvb: tensor<16x8xf32>, %wo: tensor<16x8xf32>, %c: tensor<?x1x10x?xf32>) {
  // expected-error @+1 {{'tfm.latent_attention' op a latent cache is 1 tensor (the latents, transposed) with positions, got 1 tensors and no positions}}
  %y, %c2 = tfm.latent_attention %x weights(%wq, %wkva, %n, %wkvb, %wo) cache(%c)
         {heads = 2 : i64, head_dim = 6 : i64, rope_dim = 2 : i64, value_dim = 4 : i64, kv_rank = 8 : i64,
          mask = #tfm.mask<causal>, scale = 0.4 : f64, norm_kind = #tfm.norm<rmsnorm>, norm_eps = 1.0e-06 : f64}
         : (tensor<?x?x16xf32>, tensor<12x16xf32>, tensor<10x16xf32>, tensor<8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<?x1x10x?xf32>) -> (tensor<?x?x16xf32>, tensor<?x1x10x?xf32>)
  return
}

// -----

func.func @rope_pairs(%x: tensor<?x?x16xf32>, %wq: tensor<12x16xf32>, %wkva: tensor<10x16xf32>, %n: tensor<8xf32>, %wkvb: tensor<16x8xf32>, %wo: tensor<16x8xf32>) {
  // expected-error @+1 {{'tfm.latent_attention' op rope_inv_freq rotates 4 dimensions, more than the head's 2}}
  %y = tfm.latent_attention %x weights(%wq, %wkva, %n, %wkvb, %wo)
         {heads = 2 : i64, head_dim = 6 : i64, rope_dim = 2 : i64, value_dim = 4 : i64, kv_rank = 8 : i64,
          mask = #tfm.mask<causal>, scale = 0.4 : f64, rope_inv_freq = array<f64: 1.0, 0.5>, rope_style = #tfm.rope_style<half>,
          norm_kind = #tfm.norm<rmsnorm>, norm_eps = 1.0e-06 : f64}
         : (tensor<?x?x16xf32>, tensor<12x16xf32>, tensor<10x16xf32>, tensor<8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

// The absorbed form's attention: every head against one KV head of
// latents (key transposed [B', 1, 10, S]), the values the latents' first
// rows in place (value transposed [B', 1, 8, S]).
// CHECK-LABEL: func @values_in_place
// CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} positions(%{{.*}}) {key_transposed, mask = #tfm.mask<causal>, scale = 4.000000e-01 : f64, value_transposed}
func.func @values_in_place(%q: tensor<?x2x?x10xf32>, %kt: tensor<?x1x10x?xf32>, %vt: tensor<?x1x8x?xf32>, %p: tensor<?xi32>) -> tensor<?x2x?x8xf32> {
  %o = tfm.attention %q, %kt, %vt positions(%p) {key_transposed, value_transposed, mask = #tfm.mask<causal>, scale = 0.4 : f64}
         : (tensor<?x2x?x10xf32>, tensor<?x1x10x?xf32>, tensor<?x1x8x?xf32>, tensor<?xi32>) -> tensor<?x2x?x8xf32>
  return %o : tensor<?x2x?x8xf32>
}

// -----

func.func @values_in_place_width(%q: tensor<?x2x?x10xf32>, %kt: tensor<?x1x10x?xf32>, %vt: tensor<?x1x8x?xf32>, %p: tensor<?xi32>) -> tensor<?x2x?x6xf32> {
  // expected-error @+1 {{'tfm.attention' op result dimension 3 is 6, expected 8}}
  %o = tfm.attention %q, %kt, %vt positions(%p) {key_transposed, value_transposed, mask = #tfm.mask<causal>, scale = 0.4 : f64}
         : (tensor<?x2x?x10xf32>, tensor<?x1x10x?xf32>, tensor<?x1x8x?xf32>, tensor<?xi32>) -> tensor<?x2x?x6xf32>
  return %o : tensor<?x2x?x6xf32>
}
