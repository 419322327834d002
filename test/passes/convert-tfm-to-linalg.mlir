// RUN: tfm-opt %s --convert-tfm-to-linalg | FileCheck %s

// A linear whose weight comes packed feeds the kernel directly; the input is
// flattened to [B*T, K] and the result expanded back.
// CHECK-LABEL: func.func @linear_packed
// CHECK: %[[X2:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : tensor<?x?x16xf32> into tensor<?x16xf32>
// CHECK: %[[R:.*]] = tfm.linear_kernel ins(%[[X2]], %{{.*}}, %{{.*}} : tensor<?x16xf32>, tensor<3x16x32xf32>, tensor<70xf32>) outs(%{{.*}} : tensor<?x70xf32>) -> tensor<?x70xf32>
// CHECK: tensor.expand_shape %[[R]]
// CHECK-NOT: tfm.unpack_weight
func.func @linear_packed(%x: tensor<?x?x16xf32>, %p: tensor<3x16x32xf32>, %b: tensor<70xf32>) -> tensor<?x?x70xf32> {
  %w = tfm.unpack_weight %p : tensor<3x16x32xf32> -> tensor<70x16xf32>
  %y = tfm.linear %x, %w, %b : (tensor<?x?x16xf32>, tensor<70x16xf32>, tensor<70xf32>) -> tensor<?x?x70xf32>
  return %y : tensor<?x?x70xf32>
}

// A weight that is not packed (hand-written IR) is packed by a linalg.generic.
// CHECK-LABEL: func.func @linear_plain
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<1x16x32xf32>)
// CHECK: tfm.linear_kernel
func.func @linear_plain(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>) -> tensor<4x8xf32> {
  %y = tfm.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// Attention becomes the kernel on a transposed K.
// CHECK-LABEL: func.func @attention
// CHECK: %[[KT:.*]] = linalg.transpose ins(%{{.*}} : tensor<?x2x?x8xf32>) outs(%{{.*}} : tensor<?x2x8x?xf32>) permutation = [0, 1, 3, 2]
// CHECK: tfm.attention_kernel ins(%{{.*}}, %[[KT]], %{{.*}} : tensor<?x4x?x8xf32>, tensor<?x2x8x?xf32>, tensor<?x2x?x8xf32>)
func.func @attention(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %v: tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32> {
  %o = tfm.attention %q, %k, %v {mask = #tfm.mask<causal>, scale = 0.125 : f64} : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32>
  return %o : tensor<?x4x?x8xf32>
}

// Softmax: max, exp (zero for a fully masked row), sum, divide.
// CHECK-LABEL: func.func @softmax
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: arith.select
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: arith.divf
// CHECK-NOT: tfm.softmax
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = tfm.softmax %x {axis = 1 : i64} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// RMSNorm: one reduction (sum of squares), then x * rsqrt(mean + eps) * w.
// CHECK-LABEL: func.func @rmsnorm
// CHECK-COUNT-1: iterator_types = ["parallel", "reduction"]
// CHECK: math.rsqrt
// CHECK-NOT: tfm.norm
func.func @rmsnorm(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = tfm.norm %x, %w {kind = #tfm.norm<rmsnorm>, eps = 1.0e-6 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// A packed weight also read by something other than a linear is unpacked
// for that reader; the linear still takes the packed parameter.
// CHECK-LABEL: func.func @unpack_shared
// CHECK-SAME: (%[[X:.*]]: tensor<4x16xf32>, %[[P:.*]]: tensor<3x16x32xf32>, %[[Y:.*]]: tensor<70x16xf32>)
// CHECK: %[[W:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<70x16xf32>)
// CHECK: arith.divui
// CHECK: arith.remui
// CHECK: tensor.extract %[[P]]
// CHECK: tfm.linear_kernel ins(%[[X]], %[[P]] : tensor<4x16xf32>, tensor<3x16x32xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[W]], %[[Y]] :
// CHECK: arith.addf
// CHECK-NOT: tfm.unpack_weight
// CHECK-NOT: tfm.add
func.func @unpack_shared(%x: tensor<4x16xf32>, %p: tensor<3x16x32xf32>, %y: tensor<70x16xf32>) -> (tensor<4x70xf32>, tensor<70x16xf32>) {
  %w = tfm.unpack_weight %p : tensor<3x16x32xf32> -> tensor<70x16xf32>
  %a = tfm.linear %x, %w : (tensor<4x16xf32>, tensor<70x16xf32>) -> tensor<4x70xf32>
  %s = tfm.add %w, %y : tensor<70x16xf32>
  return %a, %s : tensor<4x70xf32>, tensor<70x16xf32>
}

// Kernel ops are already the target form: left alone.
// CHECK-LABEL: func.func @kernel
// CHECK-NEXT: %[[R:.*]] = tfm.linear_kernel ins(%{{.*}}, %{{.*}} : tensor<4x16xf32>, tensor<1x16x32xf32>) outs(%{{.*}} : tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @kernel(%x: tensor<4x16xf32>, %p: tensor<1x16x32xf32>, %o: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = tfm.linear_kernel ins(%x, %p : tensor<4x16xf32>, tensor<1x16x32xf32>) outs(%o : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
