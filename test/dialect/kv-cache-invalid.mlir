// RUN: tfm-opt %s -split-input-file -verify-diagnostics

// A KV cache holds its computation's element type, or f16 or bf16 (tfmc
// --kv-cache): an f32 cache of f16 keys is none of them.
func.func @update_f16(%k: tensor<1x2x3x8xf16>, %c: tensor<1x2x8x16xf32>, %pos: tensor<1xi32>) {
  // expected-error @+1 {{'tfm.cache_write' op a KV cache holds the element type of the computation ('f16'), or f16 or bf16, not 'f32'}}
  %r = tfm.cache_write %k into %c at %pos {transposed} : tensor<1x2x3x8xf16> into tensor<1x2x8x16xf32> at tensor<1xi32>
  return
}

// -----

// Without positions the keys and values are not a cache: one element type.
func.func @attention_no_cache(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf16>, %v: tensor<1x2x3x8xf16>) {
  // expected-error @+1 {{'tfm.attention' op mixes element types 'f32' and 'f16'}}
  %o = tfm.attention %q, %k, %v {mask = #tfm.mask<causal>, scale = 0.35 : f64} : (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf16>, tensor<1x2x3x8xf16>) -> tensor<1x2x3x8xf32>
  return
}

// -----

func.func @kernel_no_cache(%q: memref<?x4x?x8xf32>, %kt: memref<?x2x8x?xf16>, %v: memref<?x2x?x8xf16>, %o: memref<?x4x?x8xf32>) {
  // expected-error @+1 {{'tfm.attention_kernel' op query, key, value and output must be 4-D, of one element type: f32, f16 or bf16 (f32 over f16 or bf16 KV caches)}}
  tfm.attention_kernel ins(%q, %kt, %v : memref<?x4x?x8xf32>, memref<?x2x8x?xf16>, memref<?x2x?x8xf16>) outs(%o : memref<?x4x?x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64}
  return
}
