// RUN: tfm-opt %s --tfm-lower-kernels --canonicalize --cse | FileCheck %s

// Weights in bf16 pairs of K ([P, ceil(K / 2), 2 W]): A is first rounded to
// bf16 pairs ([M, ceil(K / 2)] of i32; 32 columns a vector, then one pair
// at a time, K = 70 ending in whole pairs here), then each pair of a row is
// broadcast and multiplied with the panel's pairs by vdpbf16ps.
// CHECK-LABEL: func.func @pairs
// CHECK-SAME: (%[[X:.*]]: memref<?x70xf32>, %[[W:.*]]: memref<2x35x64xbf16>, %[[Y:.*]]: memref<?x40xf32>)
// CHECK: %[[AP:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x35xi32>
// CHECK: scf.parallel
// CHECK: %[[V:.*]] = vector.load %[[X]][%{{.*}}, %{{.*}}] : memref<?x70xf32>, vector<32xf32>
// CHECK: %[[H:.*]] = arith.truncf %[[V]] : vector<32xf32> to vector<32xbf16>
// CHECK: %[[I:.*]] = vector.bitcast %[[H]] : vector<32xbf16> to vector<16xi32>
// CHECK: vector.store %[[I]], %[[AP]]
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: arith.shli
// CHECK: arith.ori
// CHECK: scf.for %{{.*}} = %c0 to %c35 step %c1 iter_args
// CHECK: vector.load %[[W]][%{{.*}}, %{{.*}}, %c0] : memref<2x35x64xbf16>, vector<32xbf16>
// CHECK: vector.load %[[W]][%{{.*}}, %{{.*}}, %c32] : memref<2x35x64xbf16>, vector<32xbf16>
// CHECK: %[[S:.*]] = memref.load %[[AP]][%{{.*}}, %{{.*}}] : memref<?x35xi32>
// CHECK: %[[B:.*]] = vector.broadcast %[[S]] : i32 to vector<16xi32>
// CHECK: %[[P:.*]] = vector.bitcast %[[B]] : vector<16xi32> to vector<32xbf16>
// CHECK: x86vector.avx512.dot %{{.*}}, %[[P]], %{{.*}} : vector<32xbf16> -> vector<16xf32>
// CHECK: memref.dealloc %[[AP]]
func.func @pairs(%x: memref<?x70xf32>, %w: memref<2x35x64xbf16>, %y: memref<?x40xf32>) {
  tfm.linear_kernel ins(%x, %w : memref<?x70xf32>, memref<2x35x64xbf16>) outs(%y : memref<?x40xf32>)
  return
}
