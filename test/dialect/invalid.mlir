// RUN: tfm-opt %s -split-input-file -verify-diagnostics

func.func @f0() {
  // expected-error @+1 {{'tfm.param' op needs a non-empty name}}
  %w = tfm.param "" : tensor<4xf32>
  return
}

// -----

func.func @f1() {
  // expected-error @+1 {{'tfm.param' op must have a static shape}}
  %w = tfm.param "w" : tensor<?xf32>
  return
}

// -----

func.func @f2(%t: tensor<?xi32>, %w: tensor<10x16xf32>) {
  // expected-error @+1 {{'tfm.embed' op tokens must have rank 2, got rank 1}}
  %x = tfm.embed %t, %w : (tensor<?xi32>, tensor<10x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f3(%t: tensor<?x?xi32>, %w: tensor<10x16xf32>) {
  // expected-error @+1 {{'tfm.embed' op result dimension 2 is 8, expected 16}}
  %x = tfm.embed %t, %w : (tensor<?x?xi32>, tensor<10x16xf32>) -> tensor<?x?x8xf32>
  return
}

// -----

func.func @f4(%t: tensor<?x?xi32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.embed' op table must have rank 2, got rank 1}}
  %x = tfm.embed %t, %w : (tensor<?x?xi32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f5(%x: tensor<?x?x16xf32>, %w: tensor<32x16xf32>) {
  // expected-error @+1 {{'tfm.positions' op sinusoidal positions take no table}}
  %y = tfm.positions %x, %w {kind = #tfm.position<sinusoidal>} : (tensor<?x?x16xf32>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f6(%x: tensor<?x?x16xf32>) {
  // expected-error @+1 {{'tfm.positions' op learned positions need a table}}
  %y = tfm.positions %x {kind = #tfm.position<learned>} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f7(%x: tensor<?x?x16xf32>, %w: tensor<32x8xf32>) {
  // expected-error @+1 {{'tfm.positions' op table dimension 1 is 8, expected 16}}
  %y = tfm.positions %x, %w {kind = #tfm.position<learned>} : (tensor<?x?x16xf32>, tensor<32x8xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f8(%x: tensor<1x64x16xf32>, %w: tensor<32x16xf32>) {
  // expected-error @+1 {{'tfm.positions' op sequence length 64 exceeds the position table's 32 rows}}
  %y = tfm.positions %x, %w {kind = #tfm.position<learned>} : (tensor<1x64x16xf32>, tensor<32x16xf32>) -> tensor<1x64x16xf32>
  return
}

// -----

func.func @f9(%x: tensor<?x?x16xf32>) {
  // expected-error @+1 {{'tfm.positions' op result type must equal the input type}}
  %y = tfm.positions %x {kind = #tfm.position<sinusoidal>} : (tensor<?x?x16xf32>) -> tensor<2x?x16xf32>
  return
}

// -----

func.func @f10(%x: tensor<?x16xf32>) {
  // expected-error @+1 {{'tfm.positions' op input must have rank 3, got rank 2}}
  %y = tfm.positions %x {kind = #tfm.position<sinusoidal>} : (tensor<?x16xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f11(%x: tensor<?x?x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.norm' op layernorm needs a bias}}
  %y = tfm.norm %x, %w {kind = #tfm.norm<layernorm>, eps = 1.0e-5 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f12(%x: tensor<?x?x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.norm' op rmsnorm has no bias}}
  %y = tfm.norm %x, %w, %w {kind = #tfm.norm<rmsnorm>, eps = 1.0e-5 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f13(%x: tensor<?x?x16xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'tfm.norm' op weight dimension 0 is 8, expected 16}}
  %y = tfm.norm %x, %w {kind = #tfm.norm<rmsnorm>, eps = 1.0e-5 : f64} : (tensor<?x?x16xf32>, tensor<8xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f14(%x: tensor<?x?x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.norm' op eps must be > 0}}
  %y = tfm.norm %x, %w {kind = #tfm.norm<rmsnorm>, eps = 0.0 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f15(%x: tensor<?x?x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.norm' op result type must equal the input type}}
  %y = tfm.norm %x, %w {kind = #tfm.norm<rmsnorm>, eps = 1.0e-5 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f16(%x: tensor<?x?x16xf32>, %w: tensor<16xf16>) {
  // expected-error @+1 {{'tfm.norm' op mixes element types 'f32' and 'f16'}}
  %y = tfm.norm %x, %w {kind = #tfm.norm<rmsnorm>, eps = 1.0e-5 : f64} : (tensor<?x?x16xf32>, tensor<16xf16>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f17(%x: tensor<?x?x16xf32>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{'tfm.linear' op input dimension 2 is 16, expected 8}}
  %y = tfm.linear %x, %w : (tensor<?x?x16xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
  return
}

// -----

func.func @f18(%x: tensor<?x?x16xf32>, %w: tensor<4x16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'tfm.linear' op bias dimension 0 is 8, expected 4}}
  %y = tfm.linear %x, %w, %b : (tensor<?x?x16xf32>, tensor<4x16xf32>, tensor<8xf32>) -> tensor<?x?x4xf32>
  return
}

// -----

func.func @f19(%x: tensor<?x?x16xf32>, %w: tensor<4x16xf32>) {
  // expected-error @+1 {{'tfm.linear' op result dimension 2 is 5, expected 4}}
  %y = tfm.linear %x, %w : (tensor<?x?x16xf32>, tensor<4x16xf32>) -> tensor<?x?x5xf32>
  return
}

// -----

func.func @f20(%x: tensor<?x?x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.linear' op weight must have rank 2, got rank 1}}
  %y = tfm.linear %x, %w : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x4xf32>
  return
}

// -----

func.func @f20a(%x: tensor<?x?x16xf32>, %w: tensor<4x16xf32>, %r: tensor<?x4xf32>) {
  // expected-error @+1 {{'tfm.linear' op residual must have the result's type 'tensor<?x?x4xf32>', not 'tensor<?x4xf32>'}}
  %y = tfm.linear %x, %w residual %r : (tensor<?x?x16xf32>, tensor<4x16xf32>, tensor<?x4xf32>) -> tensor<?x?x4xf32>
  return
}

// -----

func.func @f20b(%x: tensor<?x?x16xf32>, %w: tensor<4x16xf32>) {
  // expected-error @+1 {{'tfm.linear' op activation swiglu is gated: spell it with mul}}
  %y = tfm.linear %x, %w {activation = #tfm.activation<swiglu>} : (tensor<?x?x16xf32>, tensor<4x16xf32>) -> tensor<?x?x4xf32>
  return
}

// -----

func.func @f20c(%x: memref<?x16xf32>, %w: memref<1x16x32xf32>, %r: memref<?x8xf32>, %y: memref<?x32xf32>) {
  // expected-error @+1 {{mul and residual must have the output's shape, or its rows split in several dimensions}}
  tfm.linear_kernel ins(%x, %w : memref<?x16xf32>, memref<1x16x32xf32>) residual(%r : memref<?x8xf32>) outs(%y : memref<?x32xf32>)
  return
}

// -----

func.func @f20d(%x: memref<6x16xf32>, %w: memref<1x16x32xf32>, %r: memref<2x2x32xf32>, %y: memref<6x32xf32>) {
  // expected-error @+1 {{mul and residual must have the output's shape, or its rows split in several dimensions}}
  tfm.linear_kernel ins(%x, %w : memref<6x16xf32>, memref<1x16x32xf32>) mul(%r : memref<2x2x32xf32>) outs(%y : memref<6x32xf32>)
  return
}

// -----

func.func @f21(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op kv_heads (3) must divide heads (4)}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wq, %wq, %wo)  {heads = 4 : i64, kv_heads = 3 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f22(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op heads must be > 0, got 0}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 0 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f23(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op kv_heads must be > 0, got 0}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 0 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f24(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op head_dim must be > 0, got 0}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 0 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f25(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op wk dimension 0 is 8, expected 16}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 4 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f26(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op wq dimension 0 is 16, expected 32}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 8 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f27(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op takes 0 or 3 biases (q, k, v), got 1}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo) biases(%b16) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f28(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op k bias dimension 0 is 16, expected 8}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo) biases(%b16, %b16, %b8) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<8xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f29(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op sliding mask needs a window}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<sliding>, scale = 0.5 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f30(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op window must be >= 1, got 0}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<sliding>, window = 0 : i64, scale = 0.5 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f31(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op window is only valid with a sliding mask}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64, window = 4 : i64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f32(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op scale must be finite and nonzero}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.0 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f33(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op rope_inv_freq and rope_style go together}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64, rope_inv_freq = array<f64: 1.0>} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f34(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op rope_inv_freq entries must be finite and >= 0, got -1}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64, rope_inv_freq = array<f64: 1.0, -1.0>, rope_style = #tfm.rope_style<half>} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f35(%x: tensor<?x?x12xf32>, %w: tensor<12x12xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op rope_inv_freq rotates 4 dimensions, more than the head's 3}}
  %y = tfm.multi_head_attention %x, %x weights(%w, %w, %w, %w) {heads = 4 : i64, kv_heads = 4 : i64, head_dim = 3 : i64, mask = #tfm.mask<none>, scale = 0.5 : f64, rope_inv_freq = array<f64: 1.0, 0.1>, rope_style = #tfm.rope_style<half>} : (tensor<?x?x12xf32>, tensor<?x?x12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<12x12xf32>) -> tensor<?x?x12xf32>
  return
}

// -----

func.func @f36(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>, %l2: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op lengths must have rank 1, got rank 2}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo) lengths(%l2) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<?x?xi32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f37(%x: tensor<?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %len: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op query must have rank 3, got rank 2}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64} : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f38(%x: tensor<2x?x16xf32>, %s: tensor<3x?x16xf32>, %w: tensor<16x16xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op source dimension 0 is 3, expected 2}}
  %y = tfm.multi_head_attention %x, %s weights(%w, %w, %w, %w) {heads = 4 : i64, kv_heads = 4 : i64, head_dim = 4 : i64, mask = #tfm.mask<none>, scale = 0.5 : f64} : (tensor<2x?x16xf32>, tensor<3x?x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<2x?x16xf32>
  return
}

// -----

func.func @f39(%x: tensor<?x?x16xf32>, %w: tensor<16x16xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op result type must equal the query type}}
  %y = tfm.multi_head_attention %x, %x weights(%w, %w, %w, %w) {heads = 4 : i64, kv_heads = 4 : i64, head_dim = 4 : i64, mask = #tfm.mask<none>, scale = 0.5 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<2x?x16xf32>
  return
}

// -----

func.func @f40(%x: tensor<?x?x16xf32>, %wu: tensor<64x16xf32>, %wd: tensor<16x64xf32>, %b64: tensor<64xf32>, %b16: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.ffn' op swiglu needs a gate weight}}
  %y = tfm.ffn %x up(%wu) down(%wd) {activation = #tfm.activation<swiglu>} : (tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<16x64xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f41(%x: tensor<?x?x16xf32>, %wu: tensor<64x16xf32>, %wd: tensor<16x64xf32>, %b64: tensor<64xf32>, %b16: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.ffn' op relu takes no gate weight}}
  %y = tfm.ffn %x up(%wu) gate(%wu) down(%wd) {activation = #tfm.activation<relu>} : (tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<64x16xf32>, tensor<16x64xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f42(%x: tensor<?x?x16xf32>, %wu: tensor<64x16xf32>, %wd: tensor<16x32xf32>, %b64: tensor<64xf32>, %b16: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.ffn' op down weight dimension 1 is 32, expected 64}}
  %y = tfm.ffn %x up(%wu) down(%wd) {activation = #tfm.activation<relu>} : (tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f43(%x: tensor<?x?x16xf32>, %wu: tensor<64x8xf32>, %wd: tensor<16x64xf32>, %b64: tensor<64xf32>, %b16: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.ffn' op up weight dimension 1 is 8, expected 16}}
  %y = tfm.ffn %x up(%wu) down(%wd) {activation = #tfm.activation<relu>} : (tensor<?x?x16xf32>, tensor<64x8xf32>, tensor<16x64xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f44(%x: tensor<?x?x16xf32>, %wu: tensor<64x16xf32>, %wd: tensor<16x64xf32>, %b64: tensor<64xf32>, %b16: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.ffn' op takes 0, 1 (no down bias) or 2 biases, got 3}}
  %y = tfm.ffn %x up(%wu) down(%wd) biases(%b64, %b16, %b16) {activation = #tfm.activation<relu>} : (tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<16x64xf32>, tensor<64xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f45(%x: tensor<?x?x16xf32>, %wu: tensor<64x16xf32>, %wd: tensor<16x64xf32>, %b64: tensor<64xf32>, %b16: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.ffn' op up bias dimension 0 is 16, expected 64}}
  %y = tfm.ffn %x up(%wu) down(%wd) biases(%b16, %b16) {activation = #tfm.activation<relu>} : (tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @f46(%x: tensor<?x?x16xf32>, %wu: tensor<64x16xf32>, %wd: tensor<16x64xf32>, %b64: tensor<64xf32>, %b16: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.ffn' op result type must equal the input type}}
  %y = tfm.ffn %x up(%wu) down(%wd) {activation = #tfm.activation<relu>} : (tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<16x64xf32>) -> tensor<1x?x16xf32>
  return
}

// -----

func.func @f47(%img: tensor<?x3x8x8xf32>, %w: tensor<16x48xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.patch_embed' op patch (3) must divide the image size (8)}}
  %y = tfm.patch_embed %img, %w, %b {patch = 3 : i64} : (tensor<?x3x8x8xf32>, tensor<16x48xf32>, tensor<16xf32>) -> tensor<?x4x16xf32>
  return
}

// -----

func.func @f48(%img: tensor<?x3x8x8xf32>, %w: tensor<16x48xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.patch_embed' op patch must be > 0, got 0}}
  %y = tfm.patch_embed %img, %w, %b {patch = 0 : i64} : (tensor<?x3x8x8xf32>, tensor<16x48xf32>, tensor<16xf32>) -> tensor<?x4x16xf32>
  return
}

// -----

func.func @f49(%img: tensor<?x3x8x8xf32>, %w: tensor<16x48xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.patch_embed' op weight dimension 1 is 48, expected 12}}
  %y = tfm.patch_embed %img, %w, %b {patch = 2 : i64} : (tensor<?x3x8x8xf32>, tensor<16x48xf32>, tensor<16xf32>) -> tensor<?x16x16xf32>
  return
}

// -----

func.func @f50(%img: tensor<?x3x8x4xf32>, %w: tensor<16x48xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.patch_embed' op image must be square, got 8x4}}
  %y = tfm.patch_embed %img, %w, %b {patch = 4 : i64} : (tensor<?x3x8x4xf32>, tensor<16x48xf32>, tensor<16xf32>) -> tensor<?x2x16xf32>
  return
}

// -----

func.func @f51(%img: tensor<?x3x8x8xf32>, %w: tensor<16x48xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.patch_embed' op result dimension 1 is 5, expected 4}}
  %y = tfm.patch_embed %img, %w, %b {patch = 4 : i64} : (tensor<?x3x8x8xf32>, tensor<16x48xf32>, tensor<16xf32>) -> tensor<?x5x16xf32>
  return
}

// -----

func.func @f52(%img: tensor<?x3x?x8xf32>, %w: tensor<16x48xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.patch_embed' op pixels must have static channels and size}}
  %y = tfm.patch_embed %img, %w, %b {patch = 4 : i64} : (tensor<?x3x?x8xf32>, tensor<16x48xf32>, tensor<16xf32>) -> tensor<?x4x16xf32>
  return
}

// -----

func.func @f53(%x: tensor<?x4x16xf32>, %t: tensor<16xf32>) {
  // expected-error @+1 {{'tfm.prepend_token' op result dimension 1 is 4, expected 5}}
  %y = tfm.prepend_token %x, %t : (tensor<?x4x16xf32>, tensor<16xf32>) -> tensor<?x4x16xf32>
  return
}

// -----

func.func @f54(%x: tensor<?x4x16xf32>, %t: tensor<8xf32>) {
  // expected-error @+1 {{'tfm.prepend_token' op token dimension 0 is 8, expected 16}}
  %y = tfm.prepend_token %x, %t : (tensor<?x4x16xf32>, tensor<8xf32>) -> tensor<?x5x16xf32>
  return
}

// -----

func.func @f55(%x: tensor<?x?x16xf32>) {
  // expected-error @+1 {{'tfm.pool' op result dimension 1 is 8, expected 16}}
  %y = tfm.pool %x {kind = #tfm.pool<cls>} : (tensor<?x?x16xf32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f56(%x: tensor<2x?x16xf32>, %l: tensor<3xi32>) {
  // expected-error @+1 {{'tfm.pool' op lengths dimension 0 is 3, expected 2}}
  %y = tfm.pool %x lengths(%l) {kind = #tfm.pool<mean>} : (tensor<2x?x16xf32>, tensor<3xi32>) -> tensor<2x16xf32>
  return
}

// -----

func.func @f57(%a: tensor<2x16xf32>, %b: tensor<3x16xf32>) {
  // expected-error @+1 {{'tfm.add' op requires the same type for all operands and results}}
  %y = "tfm.add"(%a, %b) : (tensor<2x16xf32>, tensor<3x16xf32>) -> tensor<2x16xf32>
  return
}

// -----

func.func @f58(%a: tensor<2x16xf32>) {
  // expected-error @+1 {{'tfm.mul' op requires the same type for all operands and results}}
  %y = "tfm.mul"(%a, %a) : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf16>
  return
}

// -----

func.func @f59(%a: tensor<?x2x?x8xf32>, %b: tensor<?x2x4x?xf32>) {
  // expected-error @+1 {{'tfm.matmul' op contraction dimensions differ: 8 vs 4}}
  %y = tfm.matmul %a, %b : (tensor<?x2x?x8xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  return
}

// -----

func.func @f60(%a: tensor<?x2x?x8xf32>, %b: tensor<?x3x8x?xf32>) {
  // expected-error @+1 {{'tfm.matmul' op batch dimension 1 differs: 2 vs 3}}
  %y = tfm.matmul %a, %b : (tensor<?x2x?x8xf32>, tensor<?x3x8x?xf32>) -> tensor<?x2x?x?xf32>
  return
}

// -----

func.func @f61(%a: tensor<?x2x?x8xf32>, %b: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'tfm.matmul' op operands must have the same rank, got 4 and 3}}
  %y = tfm.matmul %a, %b : (tensor<?x2x?x8xf32>, tensor<2x8x4xf32>) -> tensor<?x2x?x4xf32>
  return
}

// -----

func.func @f62(%a: tensor<8xf32>) {
  // expected-error @+1 {{'tfm.matmul' op operands must have rank >= 2, got rank 1}}
  %y = tfm.matmul %a, %a : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @f63(%a: tensor<2x5x8xf32>, %b: tensor<2x6x8xf32>) {
  // expected-error @+1 {{'tfm.matmul' op result dimension 1 is 4, expected 5}}
  %y = tfm.matmul %a, %b {transpose_rhs} : (tensor<2x5x8xf32>, tensor<2x6x8xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @f64(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'tfm.scale' op factor must be finite and nonzero}}
  %y = tfm.scale %a {factor = 0x7FF0000000000000 : f64} : tensor<2x8xf32>
  return
}

// -----

func.func @f65(%s: tensor<?x2x?x?xf32>, %l: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.mask' op mask of kind none needs lengths}}
  %y = tfm.mask %s {kind = #tfm.mask<none>} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  return
}

// -----

func.func @f66(%s: tensor<?x2x?x?xf32>, %l: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.mask' op sliding mask needs a window}}
  %y = tfm.mask %s {kind = #tfm.mask<sliding>} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  return
}

// -----

func.func @f67(%s: tensor<?x2x?x?xf32>, %l: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.mask' op window must be >= 1, got -2}}
  %y = tfm.mask %s {kind = #tfm.mask<sliding>, window = -2 : i64} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  return
}

// -----

func.func @f68(%s: tensor<?x2x?x?xf32>, %l: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.mask' op window is only valid with a sliding mask}}
  %y = tfm.mask %s {kind = #tfm.mask<causal>, window = 2 : i64} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  return
}

// -----

func.func @f69(%s: tensor<2x?x?xf32>) {
  // expected-error @+1 {{'tfm.mask' op input must have rank 4, got rank 3}}
  %y = tfm.mask %s {kind = #tfm.mask<causal>} : (tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
  return
}

// -----

func.func @f70(%s: tensor<?x2x?x?xf32>, %l: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.mask' op result type must equal the input type}}
  %y = tfm.mask %s {kind = #tfm.mask<causal>} : (tensor<?x2x?x?xf32>) -> tensor<?x3x?x?xf32>
  return
}

// -----

func.func @f71(%s: tensor<?x2x?x?xf32>, %l: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.mask' op lengths must have rank 1, got rank 2}}
  %y = tfm.mask %s lengths(%l) {kind = #tfm.mask<causal>} : (tensor<?x2x?x?xf32>, tensor<?x?xi32>) -> tensor<?x2x?x?xf32>
  return
}

// -----

func.func @f72(%s: tensor<?x2x?x?xf32>) {
  // expected-error @+1 {{'tfm.softmax' op axis 4 is out of range for rank 4}}
  %y = tfm.softmax %s {axis = 4 : i64} : tensor<?x2x?x?xf32>
  return
}

// -----

func.func @f73(%s: tensor<?x2x?x?xf32>) {
  // expected-error @+1 {{'tfm.softmax' op axis -1 is out of range for rank 4}}
  %y = tfm.softmax %s {axis = -1 : i64} : tensor<?x2x?x?xf32>
  return
}

// -----

func.func @f74(%x: tensor<?x16xf32>) {
  // expected-error @+1 {{'tfm.activation' op kind swiglu is gated: spell it with tfm.mul}}
  %y = tfm.activation %x {kind = #tfm.activation<swiglu>} : tensor<?x16xf32>
  return
}

// -----

func.func @f75(%x: tensor<?x?x16xf32>) {
  // expected-error @+1 {{'tfm.split_heads' op heads (3) must divide dimension 2 (16)}}
  %y = tfm.split_heads %x {heads = 3 : i64} : (tensor<?x?x16xf32>) -> tensor<?x3x?x5xf32>
  return
}

// -----

func.func @f76(%x: tensor<?x?x16xf32>) {
  // expected-error @+1 {{'tfm.split_heads' op result dimension 3 is 8, expected 4}}
  %y = tfm.split_heads %x {heads = 4 : i64} : (tensor<?x?x16xf32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @f77(%x: tensor<?x?x16xf32>) {
  // expected-error @+1 {{'tfm.split_heads' op heads must be > 0, got 0}}
  %y = tfm.split_heads %x {heads = 0 : i64} : (tensor<?x?x16xf32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @f78(%x: tensor<?x4x?x4xf32>) {
  // expected-error @+1 {{'tfm.merge_heads' op result dimension 2 is 8, expected 16}}
  %y = tfm.merge_heads %x : (tensor<?x4x?x4xf32>) -> tensor<?x?x8xf32>
  return
}

// -----

func.func @f79(%x: tensor<?x?x4xf32>) {
  // expected-error @+1 {{'tfm.merge_heads' op input must have rank 4, got rank 3}}
  %y = tfm.merge_heads %x : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  return
}

// -----

func.func @f80(%x: tensor<?x4x?x8xf32>) {
  // expected-error @+1 {{'tfm.transpose' op permutation has 3 entries for rank 4}}
  %y = tfm.transpose %x {permutation = array<i64: 0, 2, 1>} : (tensor<?x4x?x8xf32>) -> tensor<?x?x4xf32>
  return
}

// -----

func.func @f81(%x: tensor<?x4x?x8xf32>) {
  // expected-error @+1 {{'tfm.transpose' op permutation is not a permutation of 0..3}}
  %y = tfm.transpose %x {permutation = array<i64: 0, 1, 1, 2>} : (tensor<?x4x?x8xf32>) -> tensor<?x4x4x?xf32>
  return
}

// -----

func.func @f82(%x: tensor<?x4x?x8xf32>) {
  // expected-error @+1 {{'tfm.transpose' op result dimension 2 is 4, expected 8}}
  %y = tfm.transpose %x {permutation = array<i64: 0, 1, 3, 2>} : (tensor<?x4x?x8xf32>) -> tensor<?x4x4x?xf32>
  return
}

// -----

func.func @f83(%x: tensor<?x4x?x7xf32>) {
  // expected-error @+1 {{'tfm.rope' op inv_freq rotates 8 dimensions, more than the head's 7}}
  %y = tfm.rope %x {inv_freq = array<f64: 1.0, 0.5, 0.25, 0.125>, style = #tfm.rope_style<half>} : tensor<?x4x?x7xf32>
  return
}

// -----

func.func @f84(%x: tensor<?x4x?x8xf32>) {
  // expected-error @+1 {{'tfm.rope' op inv_freq must not be empty}}
  %y = tfm.rope %x {inv_freq = array<f64>, style = #tfm.rope_style<half>} : tensor<?x4x?x8xf32>
  return
}

// -----

func.func @f85(%x: tensor<?x?x8xf32>) {
  // expected-error @+1 {{'tfm.rope' op input must have rank 4, got rank 3}}
  %y = tfm.rope %x {inv_freq = array<f64: 1.0>, style = #tfm.rope_style<half>} : tensor<?x?x8xf32>
  return
}

// -----

func.func @f86(%x: tensor<?x2x?x8xf32>) {
  // expected-error @+1 {{'tfm.repeat_kv' op result dimension 1 is 3, expected 4}}
  %y = tfm.repeat_kv %x {repeats = 2 : i64} : (tensor<?x2x?x8xf32>) -> tensor<?x3x?x8xf32>
  return
}

// -----

func.func @f87(%x: tensor<?x2x?x8xf32>) {
  // expected-error @+1 {{'tfm.repeat_kv' op repeats must be > 0, got 0}}
  %y = tfm.repeat_kv %x {repeats = 0 : i64} : (tensor<?x2x?x8xf32>) -> tensor<?x2x?x8xf32>
  return
}

// -----

func.func @f88(%q: tensor<?x4x?x8xf32>, %k: tensor<?x3x?x8xf32>, %v: tensor<?x3x?x8xf32>, %l: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.attention' op kv_heads (3) must divide heads (4)}}
  %y = tfm.attention %q, %k, %v  {mask = #tfm.mask<causal>, scale = 0.125 : f64} : (tensor<?x4x?x8xf32>, tensor<?x3x?x8xf32>, tensor<?x3x?x8xf32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @f89(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x4xf32>, %v: tensor<?x2x?x8xf32>, %l: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.attention' op key dimension 3 is 4, expected 8}}
  %y = tfm.attention %q, %k, %v  {mask = #tfm.mask<causal>, scale = 0.125 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @f90(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x7x8xf32>, %v: tensor<?x2x5x8xf32>, %l: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.attention' op value dimension 2 is 5, expected 7}}
  %y = tfm.attention %q, %k, %v  {mask = #tfm.mask<causal>, scale = 0.125 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x7x8xf32>, tensor<?x2x5x8xf32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @f91(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %v: tensor<?x1x?x8xf32>, %l: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.attention' op value dimension 1 is 1, expected 2}}
  %y = tfm.attention %q, %k, %v  {mask = #tfm.mask<causal>, scale = 0.125 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x1x?x8xf32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @f92(%q: tensor<2x4x?x8xf32>, %k: tensor<3x2x?x8xf32>, %v: tensor<?x2x?x8xf32>, %l: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.attention' op key dimension 0 is 3, expected 2}}
  %y = tfm.attention %q, %k, %v  {mask = #tfm.mask<causal>, scale = 0.125 : f64} : (tensor<2x4x?x8xf32>, tensor<3x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<2x4x?x8xf32>
  return
}

// -----

func.func @f93(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %v: tensor<?x2x?x4xf32>, %l: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.attention' op result dimension 3 is 8, expected 4}}
  %y = tfm.attention %q, %k, %v  {mask = #tfm.mask<causal>, scale = 0.125 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x4xf32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @f94(%q: tensor<4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %v: tensor<?x2x?x8xf32>, %l: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.attention' op query must have rank 4, got rank 3}}
  %y = tfm.attention %q, %k, %v  {mask = #tfm.mask<causal>, scale = 0.125 : f64} : (tensor<4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<4x?x8xf32>
  return
}

// -----

func.func @f95(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %v: tensor<?x2x?x8xf32>, %l: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.attention' op sliding mask needs a window}}
  %y = tfm.attention %q, %k, %v  {mask = #tfm.mask<sliding>, scale = 0.125 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @f96(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %v: tensor<?x2x?x8xf32>, %l: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.attention' op window is only valid with a sliding mask}}
  %y = tfm.attention %q, %k, %v  {mask = #tfm.mask<none>, window = 3 : i64, scale = 0.125 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @f97(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %v: tensor<?x2x?x8xf32>, %l: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.attention' op scale must be finite and nonzero}}
  %y = tfm.attention %q, %k, %v  {mask = #tfm.mask<none>, scale = 0.0 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @f98(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %v: tensor<?x2x?x8xf32>, %l: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.attention' op lengths must have rank 1, got rank 2}}
  %y = tfm.attention %q, %k, %v lengths(%l) {mask = #tfm.mask<causal>, scale = 0.125 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x?xi32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @f99(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %v: tensor<?x2x?x8xf16>, %l: tensor<?x?xi32>) {
  // expected-error @+1 {{'tfm.attention' op mixes element types 'f32' and 'f16'}}
  %y = tfm.attention %q, %k, %v  {mask = #tfm.mask<causal>, scale = 0.125 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf16>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @f100(%s: tensor<?x2x?x?xf32>, %l: tensor<?xi32>) {
  // expected-error @+2 {{expected ::mlir::tfm::MaskKind to be one of: none, causal, sliding}}
  // expected-error @+1 {{failed to parse Tfm_MaskKindAttr parameter}}
  %y = tfm.mask %s {kind = #tfm.mask<diagonal>} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  return
}

// -----

// Kernel ops compute in f32, f16 or bf16, one element type throughout.
func.func @f101(%x: memref<?x16xf16>, %w: memref<1x16x64xf32>, %y: memref<?x64xf16>) {
  // expected-error @+1 {{operands must be ranked f32, f16 or bf16 tensors or buffers of one element type}}
  tfm.linear_kernel ins(%x, %w : memref<?x16xf16>, memref<1x16x64xf32>) outs(%y : memref<?x64xf16>)
  return
}

// -----

func.func @f102(%q: memref<?x2x?x8xf64>, %kt: memref<?x2x8x?xf64>, %v: memref<?x2x?x8xf64>, %o: memref<?x2x?x8xf64>) {
  // expected-error @+1 {{query, key, value and output must be 4-D, of one element type: f32, f16 or bf16}}
  tfm.attention_kernel ins(%q, %kt, %v : memref<?x2x?x8xf64>, memref<?x2x8x?xf64>, memref<?x2x?x8xf64>) outs(%o : memref<?x2x?x8xf64>) {mask = #tfm.mask<none>, scale = 0.35 : f64}
  return
}

// -----

// The discardable attributes are checked wherever they appear.
// expected-error @below {{'func.func' op 'tfm.num_inputs' must be a non-negative i64, got "one"}}
func.func @f103() attributes {tfm.num_inputs = "one"} {
  return
}

// -----

// expected-error @below {{'func.func' op 'tfm.num_inputs' must be a non-negative i64, got 1 : i32}}
func.func @f104() attributes {tfm.num_inputs = 1 : i32} {
  return
}

// -----

// expected-error @below {{'func.func' op 'tfm.params' must be an array of parameters, got {name = "w", panel = 0 : i64}}}
func.func @f105() attributes {tfm.params = {name = "w", panel = 0 : i64}} {
  return
}

// -----

// expected-error @below {{'func.func' op 'tfm.params' entry 1 must be {name = "<non-empty>", panel = <non-negative i64>}, with bf16_pairs or int8_quads where a panel is in bf16 pairs or int8 quads, or panel 0 and ggml = "rows" or "type" for a weight in ggml blocks, got {name = "b"}}}
func.func @f106() attributes {tfm.params = [{name = "w", panel = 0 : i64}, {name = "b"}]} {
  return
}

// -----

func.func @f107(%m: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f = arith.constant 1.0 : f32
  // expected-error @below {{'scf.parallel' op 'tfm.keep_parallel' must be a unit attribute, got true}}
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    memref.store %f, %m[%i] : memref<4xf32>
    scf.reduce
  } {tfm.keep_parallel = true}
  return
}

// -----

// expected-error @below {{'func.func' op has an unknown tfm attribute 'tfm.num_input'}}
func.func @f108() attributes {tfm.num_input = 1 : i64} {
  return
}

// -----

func.func @v2a(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %n4: tensor<4xf32>, %n3: tensor<3xf32>, %rel: tensor<32x4xf32>, %rel3: tensor<32x3xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op o bias dimension 0 is 8, expected 16}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo) out_bias(%b8) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<8xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @v2b(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %n4: tensor<4xf32>, %n3: tensor<3xf32>, %rel: tensor<32x4xf32>, %rel3: tensor<32x3xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op takes 0 or 2 qk_norm weights (q, k), got 1}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo) qk_norm(%n4) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64, qk_norm_kind = #tfm.norm<rmsnorm>, qk_norm_eps = 1.0e-06 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<4xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @v2c(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %n4: tensor<4xf32>, %n3: tensor<3xf32>, %rel: tensor<32x4xf32>, %rel3: tensor<32x3xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op k_norm weight dimension 0 is 3, expected 4}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo) qk_norm(%n4, %n3) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64, qk_norm_kind = #tfm.norm<rmsnorm>, qk_norm_eps = 1.0e-06 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<4xf32>, tensor<3xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @v2d(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %n4: tensor<4xf32>, %n3: tensor<3xf32>, %rel: tensor<32x4xf32>, %rel3: tensor<32x3xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op qk_norm weights go with qk_norm_kind and qk_norm_eps}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo) qk_norm(%n4, %n4) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @v2e(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %n4: tensor<4xf32>, %n3: tensor<3xf32>, %rel: tensor<32x4xf32>, %rel3: tensor<32x3xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op qk_norm_eps must be > 0}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo) qk_norm(%n4, %n4) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64, qk_norm_kind = #tfm.norm<rmsnorm>, qk_norm_eps = 0.0 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @v2f(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %n4: tensor<4xf32>, %n3: tensor<3xf32>, %rel: tensor<32x4xf32>, %rel3: tensor<32x3xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op softcap must be finite and > 0}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64, softcap = -5.0 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @v2g(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %n4: tensor<4xf32>, %n3: tensor<3xf32>, %rel: tensor<32x4xf32>, %rel3: tensor<32x3xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op alibi_slopes has 3 entries for 4 heads}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64, alibi_slopes = array<f64: 0.5, 0.25, 0.125>} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @v2h(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %n4: tensor<4xf32>, %n3: tensor<3xf32>, %rel: tensor<32x4xf32>, %rel3: tensor<32x3xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op relative bias table dimension 1 is 3, expected 4}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo) relative(%rel3) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64, relative_max_distance = 128 : i64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<32x3xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @v2i(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %n4: tensor<4xf32>, %n3: tensor<3xf32>, %rel: tensor<32x4xf32>, %rel3: tensor<32x3xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op a relative bias table needs relative_max_distance}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo) relative(%rel) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<32x4xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @v2j(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %n4: tensor<4xf32>, %n3: tensor<3xf32>, %rel: tensor<32x4xf32>, %rel3: tensor<32x3xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op max_distance (8) must exceed the 8 exact buckets}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo) relative(%rel) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64, relative_max_distance = 8 : i64, relative_bidirectional} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<32x4xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @v2j2(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %n4: tensor<4xf32>, %n3: tensor<3xf32>, %rel: tensor<32x4xf32>, %rel3: tensor<32x3xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op max_distance (16) must exceed the 16 exact buckets}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo) relative(%rel) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64, relative_max_distance = 16 : i64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<32x4xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @v2k(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %n4: tensor<4xf32>, %n3: tensor<3xf32>, %rel: tensor<32x4xf32>, %rel3: tensor<32x3xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op relative_max_distance and relative_bidirectional need a relative bias table}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64, relative_max_distance = 8 : i64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @v2l(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %n4: tensor<4xf32>, %n3: tensor<3xf32>, %rel: tensor<32x4xf32>, %rel3: tensor<32x3xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op rope_inv_freq must not be empty}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64, rope_inv_freq = array<f64>, rope_style = #tfm.rope_style<half>} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @v2m(%x: tensor<?x?x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>, %wo: tensor<16x16xf32>, %b16: tensor<16xf32>, %b8: tensor<8xf32>, %n4: tensor<4xf32>, %n3: tensor<3xf32>, %rel: tensor<32x4xf32>, %rel3: tensor<32x3xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op qk_norm_offset needs qk_norm weights}}
  %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wo)  {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 0.5 : f64, qk_norm_offset = 1.0 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @v2n(%s: tensor<?x4x?x?xf32>) {
  // expected-error @+1 {{'tfm.softcap' op cap must be finite and > 0}}
  %y = tfm.softcap %s {cap = 0.0 : f64} : tensor<?x4x?x?xf32>
  return
}

// -----

func.func @v2o(%s: tensor<?x4x?x?xf32>) {
  // expected-error @+1 {{'tfm.alibi' op slopes has 2 entries for 4 heads}}
  %y = tfm.alibi %s {slopes = array<f64: 0.5, 0.25>} : tensor<?x4x?x?xf32>
  return
}

// -----

func.func @v2p(%s: tensor<?x?x?xf32>) {
  // expected-error @+1 {{'tfm.alibi' op input must have rank 4, got rank 3}}
  %y = tfm.alibi %s {slopes = array<f64: 0.5>} : tensor<?x?x?xf32>
  return
}

// -----

func.func @v2q(%s: tensor<?x4x?x?xf32>, %t: tensor<32x2xf32>) {
  // expected-error @+1 {{'tfm.relative_bias' op relative bias table dimension 1 is 2, expected 4}}
  %y = tfm.relative_bias %s, %t {max_distance = 128 : i64} : (tensor<?x4x?x?xf32>, tensor<32x2xf32>) -> tensor<?x4x?x?xf32>
  return
}

// -----

func.func @v2r(%s: tensor<?x4x?x?xf32>, %t: tensor<2x4xf32>) {
  // expected-error @+1 {{'tfm.relative_bias' op 2 buckets are too few (bidirectional: >= 4)}}
  %y = tfm.relative_bias %s, %t {max_distance = 128 : i64, bidirectional} : (tensor<?x4x?x?xf32>, tensor<2x4xf32>) -> tensor<?x4x?x?xf32>
  return
}

// -----

func.func @v2s(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>) {
  // expected-error @+1 {{'tfm.attention' op alibi_slopes has 1 entries for 4 heads}}
  %o = tfm.attention %q, %k, %k {mask = #tfm.mask<causal>, scale = 0.5 : f64, alibi_slopes = array<f64: 0.5>} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @v2t(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %t: tensor<16x4xf32>) {
  // expected-error @+1 {{'tfm.attention' op a relative bias table needs relative_max_distance}}
  %o = tfm.attention %q, %k, %k relative(%t) {mask = #tfm.mask<causal>, scale = 0.5 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>, tensor<16x4xf32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @v2u(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>) {
  // expected-error @+1 {{'tfm.attention' op softcap must be finite and > 0}}
  %o = tfm.attention %q, %k, %k {mask = #tfm.mask<causal>, scale = 0.5 : f64, softcap = 0.0 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @v2v(%q: memref<?x4x?x8xf32>, %k: memref<?x2x8x?xf32>, %v: memref<?x2x?x8xf32>, %b: memref<4x9xf32>, %o: memref<?x4x?x8xf32>) {
  // expected-error @+1 {{'tfm.attention_kernel' op bias must be f32 [heads, 2 * bias_distance + 1]}}
  tfm.attention_kernel ins(%q, %k, %v : memref<?x4x?x8xf32>, memref<?x2x8x?xf32>, memref<?x2x?x8xf32>) bias(%b : memref<4x9xf32>) outs(%o : memref<?x4x?x8xf32>) {mask = #tfm.mask<none>, scale = 0.5 : f64, bias_distance = 3 : i64}
  return
}

// -----

func.func @v2w(%q: memref<?x4x?x8xf32>, %k: memref<?x2x8x?xf32>, %v: memref<?x2x?x8xf32>, %b: memref<4x9xf32>, %o: memref<?x4x?x8xf32>) {
  // expected-error @+1 {{'tfm.attention_kernel' op bias and bias_distance go together}}
  tfm.attention_kernel ins(%q, %k, %v : memref<?x4x?x8xf32>, memref<?x2x8x?xf32>, memref<?x2x?x8xf32>) bias(%b : memref<4x9xf32>) outs(%o : memref<?x4x?x8xf32>) {mask = #tfm.mask<none>, scale = 0.5 : f64}
  return
}

// -----

// Sizes attention divides by or loops over (issue 14: K/V of 0 heads
// divided by zero in this verifier; head dimension 0 in tfm-lower-kernels).
func.func @zero_kv_heads(%q: tensor<?x4x?x8xf32>, %k: tensor<?x0x?x8xf32>, %v: tensor<?x0x?x8xf32>) {
  // expected-error @+1 {{'tfm.attention' op the key's heads (dimension 1) must be > 0, got 0}}
  %y = tfm.attention %q, %k, %v {mask = #tfm.mask<none>, scale = 0.125 : f64} : (tensor<?x4x?x8xf32>, tensor<?x0x?x8xf32>, tensor<?x0x?x8xf32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @zero_q_heads(%q: tensor<?x0x?x8xf32>, %k: tensor<?x2x?x8xf32>, %v: tensor<?x2x?x8xf32>) {
  // expected-error @+1 {{'tfm.attention' op the query's heads (dimension 1) must be > 0, got 0}}
  %y = tfm.attention %q, %k, %v {mask = #tfm.mask<none>, scale = 0.125 : f64} : (tensor<?x0x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x0x?x8xf32>
  return
}

// -----

func.func @zero_head_dim(%q: tensor<?x4x?x0xf32>, %k: tensor<?x2x?x0xf32>, %v: tensor<?x2x?x8xf32>) {
  // expected-error @+1 {{'tfm.attention' op the head dimension (query dimension 3) must be > 0, got 0}}
  %y = tfm.attention %q, %k, %v {mask = #tfm.mask<none>, scale = 0.125 : f64} : (tensor<?x4x?x0xf32>, tensor<?x2x?x0xf32>, tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

func.func @zero_value_dim(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %v: tensor<?x2x?x0xf32>) {
  // expected-error @+1 {{'tfm.attention' op the value's head dimension (dimension 3) must be > 0, got 0}}
  %y = tfm.attention %q, %k, %v {mask = #tfm.mask<none>, scale = 0.125 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x0xf32>) -> tensor<?x4x?x0xf32>
  return
}

// -----

func.func @kernel_zero_kv_heads(%q: memref<?x4x?x8xf32>, %k: memref<?x0x8x?xf32>, %v: memref<?x0x?x8xf32>, %o: memref<?x4x?x8xf32>) {
  // expected-error @+1 {{'tfm.attention_kernel' op the key's heads (dimension 1) must be > 0, got 0}}
  tfm.attention_kernel ins(%q, %k, %v : memref<?x4x?x8xf32>, memref<?x0x8x?xf32>, memref<?x0x?x8xf32>) outs(%o : memref<?x4x?x8xf32>) {mask = #tfm.mask<none>, scale = 0.5 : f64}
  return
}

// -----

func.func @kernel_zero_head_dim(%q: memref<?x4x?x0xf32>, %k: memref<?x2x0x?xf32>, %v: memref<?x2x?x8xf32>, %o: memref<?x4x?x8xf32>) {
  // expected-error @+1 {{'tfm.attention_kernel' op the head dimension (query dimension 3) must be > 0, got 0}}
  tfm.attention_kernel ins(%q, %k, %v : memref<?x4x?x0xf32>, memref<?x2x0x?xf32>, memref<?x2x?x8xf32>) outs(%o : memref<?x4x?x8xf32>) {mask = #tfm.mask<none>, scale = 0.5 : f64}
  return
}

// -----

func.func @cache1(%x: tensor<?x?x16xf32>, %kc: tensor<?x2x4x?xf32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op a KV cache is 2 tensors (keys transposed, values) with positions, got 1 tensors and no positions}}
  %y, %c = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wq) cache(%kc) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 5.000000e-01 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<?x2x4x?xf32>) -> (tensor<?x?x16xf32>, tensor<?x2x4x?xf32>)
  return
}

// -----

func.func @cache2(%x: tensor<?x?x16xf32>, %kc: tensor<?x2x3x?xf32>, %vc: tensor<?x2x?x4xf32>, %pos: tensor<?xi32>, %wq: tensor<16x16xf32>, %wk: tensor<8x16xf32>) {
  // expected-error @+1 {{'tfm.multi_head_attention' op key cache dimension 2 is 3, expected 4}}
  %y, %a, %b = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wk, %wq) cache(%kc, %vc) positions(%pos) {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64, mask = #tfm.mask<causal>, scale = 5.000000e-01 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<?x2x3x?xf32>, tensor<?x2x?x4xf32>, tensor<?xi32>) -> (tensor<?x?x16xf32>, tensor<?x2x3x?xf32>, tensor<?x2x?x4xf32>)
  return
}

// -----

func.func @cache3(%k: tensor<4x2x3x8xf32>, %c: tensor<2x2x8x16xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'tfm.cache_write' op the cache holds 2 sequences, fewer than the update's 4}}
  %r = tfm.cache_write %k into %c at %pos {transposed} : tensor<4x2x3x8xf32> into tensor<2x2x8x16xf32> at tensor<4xi32>
  return
}

// -----

func.func @cache4(%k: tensor<1x2x3x8xf32>, %c: tensor<2x2x16x8xf32>, %pos: tensor<2xi32>) {
  // expected-error @+1 {{'tfm.cache_write' op positions dimension 0 is 2, expected 1}}
  %r = tfm.cache_write %k into %c at %pos : tensor<1x2x3x8xf32> into tensor<2x2x16x8xf32> at tensor<2xi32>
  return
}

// -----

func.func @cache5(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %v: tensor<?x2x?x8xf32>, %pos: tensor<?x1xi32>) {
  // expected-error @+1 {{'tfm.attention' op positions must have rank 1, got rank 2}}
  %o = tfm.attention %q, %k, %v positions(%pos) {mask = #tfm.mask<causal>, scale = 0.5 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x1xi32>) -> tensor<?x4x?x8xf32>
  return
}

// -----

// Tensor parallelism (tfmc --tensor-parallel): the collectives.
func.func @tp_reduce_type(%x: tensor<?x?x16xf32>) {
  // expected-error @+1 {{'tfm.all_reduce' op result type must equal the input type}}
  %y = tfm.all_reduce %x {ranks = 2 : i64} : (tensor<?x?x16xf32>) -> tensor<?x?x8xf32>
  return
}

// -----

func.func @tp_reduce_bias(%x: tensor<?x?x16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'tfm.all_reduce' op bias dimension 0 is 8, expected 16}}
  %y = tfm.all_reduce %x, %b {ranks = 2 : i64} : (tensor<?x?x16xf32>, tensor<8xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @tp_reduce_ranks(%x: tensor<?x?x16xf32>) {
  // expected-error @+1 {{'tfm.all_reduce' op ranks must be positive, got 0}}
  %y = tfm.all_reduce %x {ranks = 0 : i64} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @tp_gather_cols(%x: tensor<?x?x50xf32>) {
  // expected-error @+1 {{'tfm.all_gather' op result dimension 2 is 50, expected 100}}
  %y = tfm.all_gather %x {ranks = 2 : i64} : tensor<?x?x50xf32> -> tensor<?x?x50xf32>
  return
}

// -----

func.func @tp_gather_dynamic(%x: tensor<?x?xf32>) {
  // expected-error @+1 {{'tfm.all_gather' op input's last dimension must be static}}
  %y = tfm.all_gather %x {ranks = 2 : i64} : tensor<?x?xf32> -> tensor<?x?xf32>
  return
}

// -----

func.func @tp_embed_shards(%t: tensor<?x?xi32>, %w: tensor<10x16xf32>) {
  // expected-error @+1 {{'tfm.embed' op vocab_shards must be positive, got 0}}
  %x = tfm.embed %t, %w {vocab_shards = 0 : i64} : (tensor<?x?xi32>, tensor<10x16xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @tp_reduce_kernel(%x: memref<?x16xf32>, %y: memref<?x8xf32>) {
  // expected-error @+1 {{'tfm.all_reduce_kernel' op output must have the input's shape}}
  tfm.all_reduce_kernel ins(%x : memref<?x16xf32>) outs(%y : memref<?x8xf32>)
  return
}

// -----

func.func @tp_gather_kernel(%x: memref<?x16xf32>, %y: memref<?x24xf32>) {
  // expected-error @+1 {{'tfm.all_gather_kernel' op output columns must be a static multiple of the input's}}
  tfm.all_gather_kernel ins(%x : memref<?x16xf32>) outs(%y : memref<?x24xf32>)
  return
}

// -----

func.func @norm_kernel_rows(%x: memref<2x3x16xf32>, %w: memref<16xf32>, %y: memref<5x16xbf16>) {
  // expected-error @+1 {{output must have 6 rows}}
  tfm.norm_kernel ins(%x, %w : memref<2x3x16xf32>, memref<16xf32>) outs(%y : memref<5x16xbf16>) {kind = #tfm.norm<rmsnorm>, eps = 1.0e-05 : f64}
  return
}

// -----

func.func @norm_kernel_pairs(%x: memref<?x15xf32>, %w: memref<15xf32>, %y: memref<?x15xbf16>) {
  // expected-error @+1 {{output must have 16 columns for 15 values a row, not 15}}
  tfm.norm_kernel ins(%x, %w : memref<?x15xf32>, memref<15xf32>) outs(%y : memref<?x15xbf16>) {kind = #tfm.norm<rmsnorm>, eps = 1.0e-05 : f64}
  return
}

// -----

func.func @norm_kernel_quads(%x: memref<?x15xf32>, %w: memref<15xf32>, %y: memref<?x16xi8>) {
  // expected-error @+1 {{output must have 20 columns for 15 values a row, not 16}}
  tfm.norm_kernel ins(%x, %w : memref<?x15xf32>, memref<15xf32>) outs(%y : memref<?x16xi8>) {kind = #tfm.norm<rmsnorm>, eps = 1.0e-05 : f64}
  return
}

// -----

func.func @norm_kernel_type(%x: memref<?x16xf32>, %w: memref<16xf32>, %y: memref<?x16xf16>) {
  // expected-error @+1 {{output must be f32, bf16 (pairs) or i8 (quads)}}
  tfm.norm_kernel ins(%x, %w : memref<?x16xf32>, memref<16xf32>) outs(%y : memref<?x16xf16>) {kind = #tfm.norm<rmsnorm>, eps = 1.0e-05 : f64}
  return
}

// -----

func.func @norm_kernel_bias(%x: memref<?x16xf32>, %w: memref<16xf32>, %y: memref<?x16xf32>) {
  // expected-error @+1 {{layernorm needs a bias}}
  tfm.norm_kernel ins(%x, %w : memref<?x16xf32>, memref<16xf32>) outs(%y : memref<?x16xf32>) {kind = #tfm.norm<layernorm>, eps = 1.0e-05 : f64}
  return
}

// -----

func.func @norm_kernel_weight(%x: memref<?x16xf32>, %w: memref<8xf32>, %y: memref<?x16xf32>) {
  // expected-error @+1 {{weight and bias must be 1-D of 16}}
  tfm.norm_kernel ins(%x, %w : memref<?x16xf32>, memref<8xf32>) outs(%y : memref<?x16xf32>) {kind = #tfm.norm<rmsnorm>, eps = 1.0e-05 : f64}
  return
}

// -----

func.func @kv_group_value(%q: memref<?x?x?x8xf32>, %k: memref<?x?x8x128xf32>, %v: memref<?x?x128x8xf32>, %p: memref<?xi32>, %t: memref<?x?xi32>, %o: memref<?x?x?x8xf32>) {
  // expected-error @+1 {{'tfm.kv_group' must be a positive i64, got 0 : i64}}
  tfm.attention_kernel ins(%q, %k, %v : memref<?x?x?x8xf32>, memref<?x?x8x128xf32>, memref<?x?x128x8xf32>) positions(%p : memref<?xi32>) block_table(%t : memref<?x?xi32>) outs(%o : memref<?x?x?x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64, tfm.kv_group = 0 : i64}
  return
}

// -----

func.func @kv_group_no_cache(%q: memref<?x?x?x8xf32>, %k: memref<?x?x8x?xf32>, %v: memref<?x?x?x8xf32>, %o: memref<?x?x?x8xf32>) {
  // expected-error @+1 {{'tfm.kv_group' must be on a tfm.attention_kernel over a KV cache (positions)}}
  tfm.attention_kernel ins(%q, %k, %v : memref<?x?x?x8xf32>, memref<?x?x8x?xf32>, memref<?x?x?x8xf32>) outs(%o : memref<?x?x?x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64, tfm.kv_group = 2 : i64}
  return
}

// -----

func.func @linear_kernel_panel_width(%x: memref<?x16xf32>, %w: memref<1x16x?xf32>, %y: memref<?x32xf32>) {
  // expected-error @+1 {{weight_p's panel width must be static}}
  tfm.linear_kernel ins(%x, %w : memref<?x16xf32>, memref<1x16x?xf32>) outs(%y : memref<?x32xf32>)
  return
}

// -----

func.func @linear_kernel_dynamic_pairs(%x: memref<?x16xf32>, %w: memref<?x8x64xbf16>, %y: memref<?x?xf32>) {
  // expected-error @+1 {{weight_p and the output columns must be static for weights in bf16 pairs or int8 quads}}
  tfm.linear_kernel ins(%x, %w : memref<?x16xf32>, memref<?x8x64xbf16>) outs(%y : memref<?x?xf32>)
  return
}

// -----

func.func @linear_kernel_packed_input(%x: memref<?x14xbf16>, %w: memref<1x8x64xbf16>, %y: memref<?x32xf32>) {
  // expected-error @+1 {{a packed input for this weight has 16 columns, not 14}}
  tfm.linear_kernel ins(%x, %w : memref<?x14xbf16>, memref<1x8x64xbf16>) outs(%y : memref<?x32xf32>)
  return
}

// -----

func.func @linear_kernel_packed_kind(%x: memref<?x16xbf16>, %w: memref<1x6x128xi8>, %y: memref<?x32xf32>) {
  // expected-error @+1 {{operands must be ranked f32, f16 or bf16 tensors or buffers of one element type (or f32 with weights in bf16 pairs or int8 quads, the input perhaps packed for them)}}
  tfm.linear_kernel ins(%x, %w : memref<?x16xbf16>, memref<1x6x128xi8>) outs(%y : memref<?x32xf32>)
  return
}

// -----

func.func @norm_kernel_shape(%x: memref<2x3x16xf32>, %w: memref<16xf32>, %y: memref<6x16xf32>) {
  // expected-error @+1 {{output of f32 rows must have the input's shape}}
  tfm.norm_kernel ins(%x, %w : memref<2x3x16xf32>, memref<16xf32>) outs(%y : memref<6x16xf32>) {kind = #tfm.norm<rmsnorm>, eps = 1.0e-05 : f64}
  return
}

// -----

// expected-error @below {{'tfm.params' entry 0 must be}}
func.func @ggml_entry_kind() attributes {tfm.params = [{ggml = "scales", name = "w", panel = 0 : i64}]} {
  return
}

// -----

// expected-error @below {{'tfm.params' entry 0 must be}}
func.func @ggml_entry_no_panel() attributes {tfm.params = [{ggml = "rows", name = "w", pknel = 0 : i28}]} {
  return
}

// -----

// expected-error @below {{'tfm.params' entry 0 must be}}
func.func @ggml_entry_panel() attributes {tfm.params = [{ggml = "rows", name = "w", panel = 16 : i64}]} {
  return
}

// -----

func.func @ggml_weight_capacity(%r: tensor<4096xi8>, %t: tensor<1xi32>) -> tensor<32x64xf32> {
  // expected-error @below {{'tfm.ggml_weight' op the rows of a 32 x 64 weight in ggml blocks are 8192 bytes (i8), not 'tensor<4096xi8>'}}
  %w = tfm.ggml_weight %r, %t : tensor<4096xi8>, tensor<1xi32> -> tensor<32x64xf32>
  return %w : tensor<32x64xf32>
}

// -----

func.func @ggml_weight_k(%r: tensor<5120xi8>, %t: tensor<1xi32>) -> tensor<32x40xf32> {
  // expected-error @below {{'tfm.ggml_weight' op a weight in ggml blocks has static sizes and K a multiple of 32, not 32 x 40}}
  %w = tfm.ggml_weight %r, %t : tensor<5120xi8>, tensor<1xi32> -> tensor<32x40xf32>
  return %w : tensor<32x40xf32>
}

// -----

func.func @ggml_weight_type(%r: tensor<8192xi8>, %t: tensor<2xi32>) -> tensor<32x64xf32> {
  // expected-error @below {{'tfm.ggml_weight' op the type of a weight in ggml blocks is one i32, not 'tensor<2xi32>'}}
  %w = tfm.ggml_weight %r, %t : tensor<8192xi8>, tensor<2xi32> -> tensor<32x64xf32>
  return %w : tensor<32x64xf32>
}

// -----

func.func @ggml_kernel_rows(%x: memref<?x64xf32>, %r: memref<8192xi8>, %t: memref<1xi32>, %y: memref<?x16xf32>) {
  // expected-error @below {{'tfm.ggml_linear_kernel' op the rows of a 16 x 64 weight in ggml blocks are 4096 bytes (i8), not 'memref<8192xi8>'}}
  tfm.ggml_linear_kernel ins(%x, %r, %t : memref<?x64xf32>, memref<8192xi8>, memref<1xi32>) outs(%y : memref<?x16xf32>)
  return
}

// -----

func.func @ggml_kernel_bias(%x: memref<?x64xf32>, %r: memref<4096xi8>, %t: memref<1xi32>, %b: memref<8xf32>, %y: memref<?x16xf32>) {
  // expected-error @below {{'tfm.ggml_linear_kernel' op bias must be 1-D with 16 elements}}
  tfm.ggml_linear_kernel ins(%x, %r, %t, %b : memref<?x64xf32>, memref<4096xi8>, memref<1xi32>, memref<8xf32>) outs(%y : memref<?x16xf32>)
  return
}

// -----

func.func @ggml_kernel_f16(%x: memref<?x64xf16>, %r: memref<4096xi8>, %t: memref<1xi32>, %y: memref<?x16xf16>) {
  // expected-error @below {{'tfm.ggml_linear_kernel' op input, bias, mul, residual and output must be f32}}
  tfm.ggml_linear_kernel ins(%x, %r, %t : memref<?x64xf16>, memref<4096xi8>, memref<1xi32>) outs(%y : memref<?x16xf16>)
  return
}

// -----

// expected-error @below {{'func.func' op 'tfm.shared_kernel' must be on a function with a body}}
func.func private @shared_decl(memref<?xf32>) attributes {tfm.shared_kernel}

// -----

// expected-error @below {{'func.func' op 'tfm.shared_kernel' must be a unit attribute, got 1 : i64}}
func.func @shared_value(%x: memref<?xf32>) attributes {tfm.shared_kernel = 1} {
  return
}
