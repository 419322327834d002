// RUN: tfm-opt %s -split-input-file -verify-diagnostics

// A paged KV cache (block_table): the table is [B, M] of i32, it needs
// positions and no ring buffer, and the pools' blocks hold a static number
// of positions.
func.func @write_no_static_block(%k: tensor<1x2x3x8xf32>, %c: tensor<?x2x8x?xf32>, %pos: tensor<1xi32>, %t: tensor<1x4xi32>) {
  // expected-error @+1 {{'tfm.cache_write' op a paged cache's blocks need a static number of positions (dimension 3)}}
  %r = tfm.cache_write %k into %c at %pos pages %t : tensor<1x4xi32> {transposed} : tensor<1x2x3x8xf32> into tensor<?x2x8x?xf32> at tensor<1xi32>
  return
}

// -----

func.func @write_ring(%k: tensor<1x2x3x8xf32>, %c: tensor<?x2x64x8xf32>, %pos: tensor<1xi32>, %t: tensor<1x4xi32>) {
  // expected-error @+1 {{'tfm.cache_write' op a ring buffer cannot be paged}}
  %r = tfm.cache_write %k into %c at %pos pages %t : tensor<1x4xi32> {ring} : tensor<1x2x3x8xf32> into tensor<?x2x64x8xf32> at tensor<1xi32>
  return
}

// -----

func.func @write_table_rank(%k: tensor<1x2x3x8xf32>, %c: tensor<?x2x64x8xf32>, %pos: tensor<1xi32>, %t: tensor<4xi32>) {
  // expected-error @+1 {{'tfm.cache_write' op block_table must have rank 2, got rank 1}}
  %r = tfm.cache_write %k into %c at %pos pages %t : tensor<4xi32> : tensor<1x2x3x8xf32> into tensor<?x2x64x8xf32> at tensor<1xi32>
  return
}

// -----

func.func @write_table_batch(%k: tensor<1x2x3x8xf32>, %c: tensor<?x2x64x8xf32>, %pos: tensor<1xi32>, %t: tensor<2x4xi32>) {
  // expected-error @+1 {{'tfm.cache_write' op block_table dimension 0 is 2, expected 1}}
  %r = tfm.cache_write %k into %c at %pos pages %t : tensor<2x4xi32> : tensor<1x2x3x8xf32> into tensor<?x2x64x8xf32> at tensor<1xi32>
  return
}

// -----

func.func @write_table_i64(%k: tensor<1x2x3x8xf32>, %c: tensor<?x2x64x8xf32>, %pos: tensor<1xi32>, %t: tensor<1x4xi64>) {
  // expected-error @+1 {{'tfm.cache_write' op block_table must hold i32 block indices}}
  %r = tfm.cache_write %k into %c at %pos pages %t : tensor<1x4xi64> : tensor<1x2x3x8xf32> into tensor<?x2x64x8xf32> at tensor<1xi32>
  return
}

// -----

func.func @attention_no_positions(%q: tensor<?x4x?x4xf32>, %k: tensor<?x2x4x64xf32>, %v: tensor<?x2x64x4xf32>, %t: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.attention' op a block table needs positions}}
  %o = tfm.attention %q, %k, %v block_table(%t) {key_transposed, mask = #tfm.mask<causal>, scale = 5.000000e-01 : f64} : (tensor<?x4x?x4xf32>, tensor<?x2x4x64xf32>, tensor<?x2x64x4xf32>, tensor<?x?xi32>) -> tensor<?x4x?x4xf32>
  return
}

// -----

func.func @attention_dynamic_block(%q: tensor<?x4x?x4xf32>, %k: tensor<?x2x4x?xf32>, %v: tensor<?x2x?x4xf32>, %pos: tensor<?xi32>, %t: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.attention' op a paged cache's blocks need a static number of positions (dimension 3)}}
  %o = tfm.attention %q, %k, %v positions(%pos) block_table(%t) {key_transposed, mask = #tfm.mask<causal>, scale = 5.000000e-01 : f64} : (tensor<?x4x?x4xf32>, tensor<?x2x4x?xf32>, tensor<?x2x?x4xf32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x4x?x4xf32>
  return
}

// -----

func.func @mha_sliding_paged(%x: tensor<?x?x16xf32>, %kc: tensor<?x2x4x64xf32>, %vc: tensor<?x2x64x4xf32>, %pos: tensor<?xi32>, %t: tensor<?x?xi32>) {
  %wq = tfm.param "wq" : tensor<16x16xf32>
  %wk = tfm.param "wk" : tensor<8x16xf32>
  %wv = tfm.param "wv" : tensor<8x16xf32>
  %wo = tfm.param "wo" : tensor<16x16xf32>
  // expected-error @+1 {{'tfm.multi_head_attention' op a ring buffer cannot be paged}}
  %y, %kc2, %vc2 = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wv, %wo) cache(%kc, %vc) positions(%pos) block_table(%t) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<sliding>, window = 8 : i64, ring, scale = 5.000000e-01 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<?x2x4x64xf32>, tensor<?x2x64x4xf32>, tensor<?xi32>, tensor<?x?xi32>) -> (tensor<?x?x16xf32>, tensor<?x2x4x64xf32>, tensor<?x2x64x4xf32>)
  return
}

// -----

func.func @kernel_table_without_positions(%q: memref<?x4x?x4xf32>, %k: memref<?x2x4x64xf32>, %v: memref<?x2x64x4xf32>, %t: memref<?x?xi32>, %o: memref<?x4x?x4xf32>) {
  // expected-error @+1 {{'tfm.attention_kernel' op a block table needs positions and no ring buffer}}
  tfm.attention_kernel ins(%q, %k, %v : memref<?x4x?x4xf32>, memref<?x2x4x64xf32>, memref<?x2x64x4xf32>) block_table(%t : memref<?x?xi32>) outs(%o : memref<?x4x?x4xf32>) {mask = #tfm.mask<causal>, scale = 5.000000e-01 : f64}
  return
}

// -----

func.func @kernel_dynamic_block(%q: memref<?x4x?x4xf32>, %k: memref<?x2x4x?xf32>, %v: memref<?x2x?x4xf32>, %p: memref<?xi32>, %t: memref<?x?xi32>, %o: memref<?x4x?x4xf32>) {
  // expected-error @+1 {{'tfm.attention_kernel' op a paged key cache needs a static block size (dimension 3)}}
  tfm.attention_kernel ins(%q, %k, %v : memref<?x4x?x4xf32>, memref<?x2x4x?xf32>, memref<?x2x?x4xf32>) positions(%p : memref<?xi32>) block_table(%t : memref<?x?xi32>) outs(%o : memref<?x4x?x4xf32>) {mask = #tfm.mask<causal>, scale = 5.000000e-01 : f64}
  return
}
