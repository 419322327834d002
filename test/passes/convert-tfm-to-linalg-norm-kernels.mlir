// RUN: tfm-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(convert-tfm-to-linalg{norm-kernels=true}))" | FileCheck %s
// RUN: tfm-opt %s --split-input-file --convert-tfm-to-linalg | FileCheck %s --check-prefix=LINALG

// norm-kernels: an f32 norm becomes tfm.norm_kernel over the rows of its
// input; its rows keep the input's shape [B, T, K] (a post-norm residual
// stream then crosses layers in that shape). Without the option it is
// linalg.
// CHECK-LABEL: func.func @rows
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x20xf32>, %[[W:.*]]: tensor<20xf32>, %[[B:.*]]: tensor<20xf32>)
// CHECK: %[[E:.*]] = tensor.empty(%{{.*}}, %{{.*}}) : tensor<?x?x20xf32>
// CHECK: %[[N:.*]] = tfm.norm_kernel ins(%[[X]], %[[W]], %[[B]] : tensor<?x?x20xf32>, tensor<20xf32>, tensor<20xf32>) outs(%[[E]] : tensor<?x?x20xf32>) {eps = 1.000000e-05 : f64, kind = #tfm.norm<layernorm>} -> tensor<?x?x20xf32>
// CHECK: return %[[N]]
// LINALG-LABEL: func.func @rows
// LINALG-NOT: tfm.norm_kernel
// LINALG: linalg.generic
func.func @rows(%x: tensor<?x?x20xf32>, %w: tensor<20xf32>, %b: tensor<20xf32>) -> tensor<?x?x20xf32> {
  %y = tfm.norm %x, %w, %b {kind = #tfm.norm<layernorm>, eps = 1.0e-05 : f64} : (tensor<?x?x20xf32>, tensor<20xf32>, tensor<20xf32>) -> tensor<?x?x20xf32>
  return %y : tensor<?x?x20xf32>
}

// -----

// Three linears of weights in bf16 pairs read an RMS norm (Q, K and V): the
// norm writes its rows once in bf16 pairs ([rows, 2 ceil(K / 2)]) and every
// linear reads them; no f32 rows and no collapse are left between.
// CHECK-LABEL: func.func @qkv_pairs
// CHECK-NOT: tensor.collapse_shape
// CHECK: %[[N:.*]] = tfm.norm_kernel ins(%{{.*}}, %{{.*}} : tensor<?x?x15xf32>, tensor<15xf32>) outs(%{{.*}} : tensor<?x16xbf16>) {eps = {{.*}}, kind = #tfm.norm<rmsnorm>, offset = 1.000000e+00 : f64} -> tensor<?x16xbf16>
// CHECK-NOT: tfm.norm_kernel
// CHECK: tfm.linear_kernel ins(%[[N]], %{{.*}} : tensor<?x16xbf16>, tensor<2x8x64xbf16>)
// CHECK: tfm.linear_kernel ins(%[[N]], %{{.*}} : tensor<?x16xbf16>, tensor<1x8x64xbf16>)
// CHECK: tfm.linear_kernel ins(%[[N]], %{{.*}} : tensor<?x16xbf16>, tensor<1x8x64xbf16>)
func.func @qkv_pairs(%x: tensor<?x?x15xf32>, %g: tensor<15xf32>, %pq: tensor<2x8x64xbf16>, %pk: tensor<1x8x64xbf16>, %pv: tensor<1x8x64xbf16>) -> (tensor<?x?x40xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %n = tfm.norm %x, %g {kind = #tfm.norm<rmsnorm>, eps = 1.0e-06 : f64, offset = 1.0 : f64} : (tensor<?x?x15xf32>, tensor<15xf32>) -> tensor<?x?x15xf32>
  %wq = tfm.unpack_weight %pq : tensor<2x8x64xbf16> -> tensor<40x15xf32>
  %wk = tfm.unpack_weight %pk : tensor<1x8x64xbf16> -> tensor<8x15xf32>
  %wv = tfm.unpack_weight %pv : tensor<1x8x64xbf16> -> tensor<8x15xf32>
  %q = tfm.linear %n, %wq : (tensor<?x?x15xf32>, tensor<40x15xf32>) -> tensor<?x?x40xf32>
  %k = tfm.linear %n, %wk : (tensor<?x?x15xf32>, tensor<8x15xf32>) -> tensor<?x?x8xf32>
  %v = tfm.linear %n, %wv : (tensor<?x?x15xf32>, tensor<8x15xf32>) -> tensor<?x?x8xf32>
  return %q, %k, %v : tensor<?x?x40xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// -----

// Weights in int8 quads: the rows are quantized once, [rows, 4 ceil(K / 4)
// + 4] bytes (K = 15: 16 bytes of quads, then the row's scale).
// CHECK-LABEL: func.func @up_gate_quads
// CHECK: %[[N:.*]] = tfm.norm_kernel ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x?x15xf32>, tensor<15xf32>, tensor<15xf32>) outs(%{{.*}} : tensor<?x20xi8>)
// CHECK: tfm.linear_kernel ins(%[[N]], %{{.*}} : tensor<?x20xi8>, tensor<2x6x128xi8>) outs
// CHECK: tfm.linear_kernel ins(%[[N]], %{{.*}} : tensor<?x20xi8>, tensor<2x6x128xi8>) mul
func.func @up_gate_quads(%x: tensor<?x?x15xf32>, %g: tensor<15xf32>, %b: tensor<15xf32>, %pu: tensor<2x6x128xi8>, %pg: tensor<2x6x128xi8>) -> tensor<?x?x40xf32> {
  %n = tfm.norm %x, %g, %b {kind = #tfm.norm<layernorm>, eps = 1.0e-05 : f64} : (tensor<?x?x15xf32>, tensor<15xf32>, tensor<15xf32>) -> tensor<?x?x15xf32>
  %wu = tfm.unpack_weight %pu : tensor<2x6x128xi8> -> tensor<40x15xf32>
  %wg = tfm.unpack_weight %pg : tensor<2x6x128xi8> -> tensor<40x15xf32>
  %u = tfm.linear %n, %wu : (tensor<?x?x15xf32>, tensor<40x15xf32>) -> tensor<?x?x40xf32>
  %y = tfm.linear %n, %wg mul %u : (tensor<?x?x15xf32>, tensor<40x15xf32>, tensor<?x?x40xf32>) -> tensor<?x?x40xf32>
  return %y : tensor<?x?x40xf32>
}

// -----

// Not packed: the normalized rows are also a result (a post-norm residual
// stream), so they are stored in f32 and each linear packs its own input.
// CHECK-LABEL: func.func @also_returned
// CHECK: %[[N:.*]] = tfm.norm_kernel {{.*}} outs(%{{.*}} : tensor<?x?x15xf32>)
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[N]]
// CHECK: tfm.linear_kernel ins(%[[C]], %{{.*}} : tensor<?x15xf32>, tensor<2x8x64xbf16>)
func.func @also_returned(%x: tensor<?x?x15xf32>, %g: tensor<15xf32>, %p: tensor<2x8x64xbf16>) -> (tensor<?x?x15xf32>, tensor<?x?x40xf32>) {
  %n = tfm.norm %x, %g {kind = #tfm.norm<rmsnorm>, eps = 1.0e-06 : f64} : (tensor<?x?x15xf32>, tensor<15xf32>) -> tensor<?x?x15xf32>
  %w = tfm.unpack_weight %p : tensor<2x8x64xbf16> -> tensor<40x15xf32>
  %y = tfm.linear %n, %w : (tensor<?x?x15xf32>, tensor<40x15xf32>) -> tensor<?x?x40xf32>
  return %n, %y : tensor<?x?x15xf32>, tensor<?x?x40xf32>
}

// -----

// Not packed: one reader has f32 weights, one bf16 pairs; f32 rows serve
// both.
// CHECK-LABEL: func.func @mixed
// CHECK: %[[N:.*]] = tfm.norm_kernel {{.*}} outs(%{{.*}} : tensor<?x?x15xf32>)
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[N]]
// CHECK: tfm.linear_kernel ins(%[[C]], %{{.*}} : tensor<?x15xf32>, tensor<2x8x64xbf16>)
// CHECK: %[[C2:.*]] = tensor.collapse_shape %[[N]]
// CHECK: tfm.linear_kernel ins(%[[C2]], %{{.*}} : tensor<?x15xf32>, tensor<2x15x32xf32>)
func.func @mixed(%x: tensor<?x?x15xf32>, %g: tensor<15xf32>, %p: tensor<2x8x64xbf16>, %pf: tensor<2x15x32xf32>) -> (tensor<?x?x40xf32>, tensor<?x?x40xf32>) {
  %n = tfm.norm %x, %g {kind = #tfm.norm<rmsnorm>, eps = 1.0e-06 : f64} : (tensor<?x?x15xf32>, tensor<15xf32>) -> tensor<?x?x15xf32>
  %w = tfm.unpack_weight %p : tensor<2x8x64xbf16> -> tensor<40x15xf32>
  %wf = tfm.unpack_weight %pf : tensor<2x15x32xf32> -> tensor<40x15xf32>
  %a = tfm.linear %n, %w : (tensor<?x?x15xf32>, tensor<40x15xf32>) -> tensor<?x?x40xf32>
  %b = tfm.linear %n, %wf : (tensor<?x?x15xf32>, tensor<40x15xf32>) -> tensor<?x?x40xf32>
  return %a, %b : tensor<?x?x40xf32>, tensor<?x?x40xf32>
}

// -----

// Not a kernel: a norm of f16 values (a GPU model) stays linalg.
// CHECK-LABEL: func.func @half
// CHECK-NOT: tfm.norm_kernel
// CHECK: linalg.generic
func.func @half(%x: tensor<?x?x16xf16>, %g: tensor<16xf16>) -> tensor<?x?x16xf16> {
  %n = tfm.norm %x, %g {kind = #tfm.norm<rmsnorm>, eps = 1.0e-06 : f64} : (tensor<?x?x16xf16>, tensor<16xf16>) -> tensor<?x?x16xf16>
  return %n : tensor<?x?x16xf16>
}
