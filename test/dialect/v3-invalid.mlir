// The verifiers of the language v3 ops: mixtures of experts, sinks.
// RUN: tfm-opt %s -split-input-file -verify-diagnostics

func.func @k_too_large(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>, %up: tensor<4x32x16xf32>, %down: tensor<4x16x32xf32>) {
  // expected-error @+1 {{'tfm.moe' op experts_per_token must be in [1, 4], got 5}}
  %y = tfm.moe %x router(%wr) up(%up) down(%down) {experts_per_token = 5 : i64, router = #tfm.router<softmax>, activation = #tfm.activation<gelu>}
         : (tensor<?x16xf32>, tensor<4x16xf32>, tensor<4x32x16xf32>, tensor<4x16x32xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @router_shape(%x: tensor<?x16xf32>, %wr: tensor<3x16xf32>, %up: tensor<4x32x16xf32>, %down: tensor<4x16x32xf32>) {
  // expected-error @+1 {{'tfm.moe' op router weight dimension 0 is 3, expected 4}}
  %y = tfm.moe %x router(%wr) up(%up) down(%down) {experts_per_token = 2 : i64, router = #tfm.router<softmax>, activation = #tfm.activation<gelu>}
         : (tensor<?x16xf32>, tensor<3x16xf32>, tensor<4x32x16xf32>, tensor<4x16x32xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @gated_needs_gate(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>, %up: tensor<4x32x16xf32>, %down: tensor<4x16x32xf32>) {
  // expected-error @+1 {{'tfm.moe' op swiglu needs a gate weight}}
  %y = tfm.moe %x router(%wr) up(%up) down(%down) {experts_per_token = 2 : i64, router = #tfm.router<softmax>, activation = #tfm.activation<swiglu>}
         : (tensor<?x16xf32>, tensor<4x16xf32>, tensor<4x32x16xf32>, tensor<4x16x32xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @down_shape(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>, %up: tensor<4x32x16xf32>, %down: tensor<4x32x16xf32>) {
  // expected-error @+1 {{'tfm.moe' op down weight dimension 1 is 32, expected 16}}
  %y = tfm.moe %x router(%wr) up(%up) down(%down) {experts_per_token = 2 : i64, router = #tfm.router<softmax>, activation = #tfm.activation<gelu>}
         : (tensor<?x16xf32>, tensor<4x16xf32>, tensor<4x32x16xf32>, tensor<4x32x16xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @scale_needs_shared(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>, %up: tensor<4x32x16xf32>, %down: tensor<4x16x32xf32>, %ss: tensor<1x16xf32>) {
  // expected-error @+1 {{'tfm.moe' op shared_scale needs a shared expert}}
  %y = tfm.moe %x router(%wr) up(%up) down(%down) shared_scale(%ss) {experts_per_token = 2 : i64, router = #tfm.router<softmax>, activation = #tfm.activation<gelu>}
         : (tensor<?x16xf32>, tensor<4x16xf32>, tensor<4x32x16xf32>, tensor<4x16x32xf32>, tensor<1x16xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @routed_scale(%l: tensor<?x4xf32>) {
  // expected-error @+1 {{'tfm.route' op routed_scale must be > 0, got 0}}
  %w = tfm.route %l {experts_per_token = 2 : i64, router = #tfm.router<softmax>, routed_scale = 0.0 : f64} : tensor<?x4xf32>
  return
}

// -----

func.func @weights_columns(%x: tensor<?x16xf32>, %w: tensor<?x3xf32>, %up: tensor<4x32x16xf32>, %down: tensor<4x16x32xf32>) {
  // expected-error @+1 {{'tfm.moe_experts' op weights must have 4 columns (one per expert), got 3}}
  %y = tfm.moe_experts %x, %w up(%up) down(%down) {activation = #tfm.activation<relu>}
         : (tensor<?x16xf32>, tensor<?x3xf32>, tensor<4x32x16xf32>, tensor<4x16x32xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @row_scale(%x: tensor<?x16xf32>, %s: tensor<?x2xf32>) {
  // expected-error @+1 {{'tfm.row_scale' op scale must be [..., 1] of the input's rank}}
  %y = tfm.row_scale %x, %s : (tensor<?x16xf32>, tensor<?x2xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @kernel_hidden(%x: memref<?x16xf32>, %w: memref<?x4xf32>, %up: memref<4x1x16x32xf32>, %down: memref<4x1x32x32xf32>, %y: memref<?x16xf32>) {
  // expected-error @+1 {{'tfm.moe_kernel' op down_p has 32 rows per panel, not hidden (24)}}
  tfm.moe_kernel ins(%x, %w : memref<?x16xf32>, memref<?x4xf32>) up(%up : memref<4x1x16x32xf32>) gate(%up : memref<4x1x16x32xf32>) down(%down : memref<4x1x32x32xf32>) outs(%y : memref<?x16xf32>) {hidden = 24 : i64, activation = #tfm.activation<swiglu>}
  return
}

// -----

func.func @kernel_experts(%x: memref<?x16xf32>, %w: memref<?x5xf32>, %up: memref<4x1x16x32xf32>, %down: memref<4x1x32x32xf32>, %y: memref<?x16xf32>) {
  // expected-error @+1 {{'tfm.moe_kernel' op weights must have a column per expert, and the stacks a static number of experts}}
  tfm.moe_kernel ins(%x, %w : memref<?x16xf32>, memref<?x5xf32>) up(%up : memref<4x1x16x32xf32>) down(%down : memref<4x1x32x32xf32>) outs(%y : memref<?x16xf32>) {hidden = 32 : i64, activation = #tfm.activation<gelu>}
  return
}

// -----

func.func @softmax_sinks_axis(%s: tensor<?x4x?xf32>, %sinks: tensor<4xf32>) {
  // expected-error @+1 {{'tfm.softmax' op takes sinks for attention scores only: rank 4, axis 3}}
  %p = tfm.softmax %s sinks(%sinks : tensor<4xf32>) {axis = 2 : i64} : tensor<?x4x?xf32>
  return
}

// -----

func.func @attention_sinks_heads(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %sinks: tensor<2xf32>) {
  // expected-error @+1 {{'tfm.attention' op sinks dimension 0 is 2, expected 4}}
  %o = tfm.attention %q, %k, %k sinks(%sinks) {mask = #tfm.mask<causal>, scale = 0.35 : f64}
         : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>, tensor<2xf32>) -> tensor<?x4x?x8xf32>
  return
}
