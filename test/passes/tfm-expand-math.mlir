// RUN: tfm-opt %s --tfm-expand-math | FileCheck %s

// exp: range reduction x = k ln2 + r, a polynomial in r (FMAs), and 2^k
// built in the exponent bits: no libm call per lane.
// CHECK-LABEL: func.func @exp
// CHECK-NOT: math.exp
// CHECK: math.floor %{{.*}} : vector<8xf32>
// CHECK: math.fma %{{.*}} : vector<8xf32>
// CHECK: arith.fptosi %{{.*}} : vector<8xf32> to vector<8xi32>
// CHECK: arith.shli
// CHECK: %[[P2:.*]] = arith.bitcast %{{.*}} : vector<8xi32> to vector<8xf32>
// CHECK: %[[R:.*]] = arith.mulf %{{.*}}, %[[P2]] : vector<8xf32>
// CHECK-NOT: math.exp
// CHECK: return %[[R]]
func.func @exp(%x: vector<8xf32>) -> vector<8xf32> {
  %0 = math.exp %x : vector<8xf32>
  return %0 : vector<8xf32>
}

// tanh (scalars too): a rational approximation on the clamped input, x
// itself near zero.
// CHECK-LABEL: func.func @tanh
// CHECK-NOT: math.tanh
// CHECK: math.absf
// CHECK: math.fma
// CHECK: arith.divf
// CHECK: %[[R:.*]] = arith.select
// CHECK-NOT: math.tanh
// CHECK: return %[[R]] : f32
func.func @tanh(%x: f32) -> f32 {
  %0 = math.tanh %x : f32
  return %0 : f32
}

// erf (GELU): a rational approximation on |x|, the sign restored.
// CHECK-LABEL: func.func @erf
// CHECK-NOT: math.erf
// CHECK: math.fma %{{.*}} : vector<8xf32>
// CHECK: arith.divf %{{.*}} : vector<8xf32>
// CHECK: arith.negf
// CHECK: %[[R:.*]] = arith.select
// CHECK-NOT: math.erf
// CHECK: return %[[R]]
func.func @erf(%x: vector<8xf32>) -> vector<8xf32> {
  %0 = math.erf %x : vector<8xf32>
  return %0 : vector<8xf32>
}

// Other functions are left to convert-math-to-llvm / libm, and so is f64
// (the approximations are for f32).
// CHECK-LABEL: func.func @left_alone
// CHECK-NEXT: %[[S:.*]] = math.sin %{{.*}} : vector<8xf32>
// CHECK-NEXT: %[[L:.*]] = math.log %{{.*}} : f32
// CHECK-NEXT: %[[E:.*]] = math.exp %{{.*}} : f64
// CHECK-NEXT: return %[[S]], %[[L]], %[[E]]
func.func @left_alone(%x: vector<8xf32>, %y: f32, %z: f64) -> (vector<8xf32>, f32, f64) {
  %0 = math.sin %x : vector<8xf32>
  %1 = math.log %y : f32
  %2 = math.exp %z : f64
  return %0, %1, %2 : vector<8xf32>, f32, f64
}
