// RUN: tfm-opt %s --tfm-outline-layers --split-input-file | FileCheck %s

// Two equal layers share one function; the constant is cloned into it, the
// op after the layers stays in the caller.
#l0 = loc("layers.0")
#l1 = loc("layers.1")
// CHECK-LABEL: func.func @equal(
// CHECK-SAME: %[[X:.*]]: tensor<4xf32>, %[[W0:.*]]: tensor<4xf32>, %[[W1:.*]]: tensor<4xf32>)
// CHECK: %[[Y0:.*]] = call @equal_layer(%[[X]], %[[W0]])
// CHECK: %[[Y1:.*]] = call @equal_layer(%[[Y0]], %[[W1]])
// CHECK: %[[R:.*]] = arith.negf %[[Y1]]
// CHECK: return %[[R]]
// CHECK: func.func private @equal_layer(%[[A:.*]]: tensor<4xf32>, %[[B:.*]]: tensor<4xf32>) -> tensor<4xf32> attributes {llvm.linkage = #llvm.linkage<internal>, no_inline}
// CHECK: %[[C:.*]] = arith.constant dense<2.0
// CHECK: %[[M:.*]] = arith.mulf %[[A]], %[[B]]
// CHECK: %[[S:.*]] = arith.addf %[[M]], %[[C]]
// CHECK: return %[[S]]
// CHECK-NOT: func.func
func.func @equal(%x: tensor<4xf32>, %w0: tensor<4xf32>, %w1: tensor<4xf32>) -> tensor<4xf32> {
  %c = arith.constant dense<2.0> : tensor<4xf32>
  %a0 = arith.mulf %x, %w0 : tensor<4xf32> loc(#l0)
  %b0 = arith.addf %a0, %c : tensor<4xf32> loc(#l0)
  %a1 = arith.mulf %b0, %w1 : tensor<4xf32> loc(#l1)
  %b1 = arith.addf %a1, %c : tensor<4xf32> loc(#l1)
  %r = arith.negf %b1 : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Layers that differ get a function each.
#l0 = loc("decoder.layers.0")
#l1 = loc("decoder.layers.1")
// CHECK-LABEL: func.func @different(
// CHECK: %[[Y0:.*]] = call @different_layer(%{{.*}}, %{{.*}})
// CHECK: call @different_layer_0(%[[Y0]], %{{.*}})
// CHECK-DAG: func.func private @different_layer(
// CHECK-DAG: func.func private @different_layer_0(
func.func @different(%x: tensor<4xf32>, %w0: tensor<4xf32>, %w1: tensor<4xf32>) -> tensor<4xf32> {
  %a0 = arith.mulf %x, %w0 : tensor<4xf32> loc(#l0)
  %a1 = arith.addf %a0, %w1 : tensor<4xf32> loc(#l1)
  return %a1 : tensor<4xf32>
}

// -----

// A cheap op that CSE merged into the first layer (an empty destination
// sized from the input) is recomputed in each layer, so the first layer
// looks like the others.
#l0 = loc("layers.0")
#l1 = loc("layers.1")
// CHECK-LABEL: func.func @uncse(
// CHECK: %[[D:.*]] = tensor.dim
// CHECK: %[[Y0:.*]] = call @uncse_layer(%[[D]], %{{.*}})
// CHECK: call @uncse_layer(%[[D]], %[[Y0]])
// CHECK: func.func private @uncse_layer(%[[N:.*]]: index, %{{.*}}: tensor<?xf32>)
// CHECK: tensor.empty(%[[N]])
// CHECK: linalg.generic
// CHECK-NOT: func.func private
#id = affine_map<(d0) -> (d0)>
func.func @uncse(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32> loc(#l0)
  %y0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<?xf32> loc(#l0)
  %y1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%y0 : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<?xf32> loc(#l1)
  return %y1 : tensor<?xf32>
}

// -----

// A layer whose result is used before the layer ends stays inline.
#l0 = loc("layers.0")
// CHECK-LABEL: func.func @interleaved(
// CHECK-NOT: call
// CHECK: arith.mulf
// CHECK: arith.negf
// CHECK: arith.addf
func.func @interleaved(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = arith.mulf %x, %x : tensor<4xf32> loc(#l0)
  %n = arith.negf %a : tensor<4xf32>
  %b = arith.addf %a, %n : tensor<4xf32> loc(#l0)
  return %b : tensor<4xf32>
}

// -----

// A cheap op of the first layer that code after the layers also uses (the
// zero accumulator of the final norm, merged by CSE) is recomputed there,
// so that the layer returns only its output.
#l0 = loc("layers.0")
// CHECK-LABEL: func.func @after(
// CHECK: %[[Y:.*]] = call @after_layer(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK: %[[E:.*]] = tensor.empty()
// CHECK: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<4xf32>)
// CHECK: arith.addf %[[Y]], %[[Z]]
// CHECK: func.func private @after_layer(%{{.*}}: tensor<4xf32>) -> tensor<4xf32>
func.func @after(%x: tensor<4xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32> loc(#l0)
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32> loc(#l0)
  %a = arith.mulf %x, %z : tensor<4xf32> loc(#l0)
  %b = arith.addf %a, %z : tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// Equal layers of two functions share one function (a decoder's forward and
// step functions). The constant sits in another place in each function.
// The second function also returns a value of its layer that the first one
// drops (the caches the step function updates): the shared function gains
// that result and the first function's call is rebuilt with it.
#l0 = loc("layers.0")
// CHECK-LABEL: func.func @forward(
// CHECK: %[[F:.*]]:2 = call @forward_layer(%{{.*}}, %{{.*}}) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK: return %[[F]]#0
// CHECK-LABEL: func.func private @forward_layer(
// CHECK-SAME: -> (tensor<4xf32>, tensor<4xf32>)
// CHECK: %[[C:.*]] = arith.constant dense<3.0
// CHECK: %[[M:.*]] = arith.mulf
// CHECK: %[[S:.*]] = arith.addf %[[M]], %[[C]]
// CHECK: return %[[S]], %[[M]]
// CHECK-LABEL: func.func @step(
// CHECK: %[[S:.*]]:2 = call @forward_layer(%{{.*}}, %{{.*}}) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK: return %[[S]]#0, %[[S]]#1
// CHECK-NOT: func.func private
func.func @forward(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %c = arith.constant dense<3.0> : tensor<4xf32>
  %a = arith.mulf %x, %w : tensor<4xf32> loc(#l0)
  %b = arith.addf %a, %c : tensor<4xf32> loc(#l0)
  return %b : tensor<4xf32>
}
func.func @step(%x: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = arith.mulf %x, %w : tensor<4xf32> loc(#l0)
  %c = arith.constant dense<3.0> : tensor<4xf32>
  %b = arith.addf %a, %c : tensor<4xf32> loc(#l0)
  return %b, %a : tensor<4xf32>, tensor<4xf32>
}

// -----

// Layers of two functions that differ get a function each.
#l0 = loc("layers.0")
// CHECK-LABEL: func.func @one(
// CHECK: call @one_layer(
// CHECK-LABEL: func.func @two(
// CHECK: call @two_layer(
func.func @one(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = arith.mulf %x, %x : tensor<4xf32> loc(#l0)
  return %a : tensor<4xf32>
}
func.func @two(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = arith.addf %x, %x : tensor<4xf32> loc(#l0)
  return %a : tensor<4xf32>
}
