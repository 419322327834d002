// RUN: tfm-opt %s --tfm-lower-kernels --canonicalize --cse | FileCheck %s

// Weights in bf16 pairs of K ([P, ceil(K / 2), 2 W]): A is first rounded to
// bf16 ([M, 2 ceil(K / 2)]; 16 columns a vector, then one masked vector for
// the rest, K = 70 = 4 x 16 + 6 here), then each pair of a row is read as
// an i32, broadcast and multiplied with the panel's pairs by vdpbf16ps.
// CHECK-LABEL: func.func @pairs
// CHECK-SAME: (%[[X:.*]]: memref<?x70xf32>, %[[W:.*]]: memref<2x35x64xbf16>, %[[Y:.*]]: memref<?x40xf32>)
// CHECK: %[[AP:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x70xbf16>
// CHECK: scf.parallel
// CHECK: scf.for %{{.*}} = %c0 to %c64 step %c16
// CHECK: %[[V:.*]] = vector.load %[[X]][%{{.*}}, %{{.*}}] : memref<?x70xf32>, vector<16xf32>
// CHECK: %[[H:.*]] = arith.truncf %[[V]] : vector<16xf32> to vector<16xbf16>
// CHECK: vector.store %[[H]], %[[AP]]
// CHECK: %[[M:.*]] = vector.constant_mask [6] : vector<16xi1>
// CHECK: vector.maskedload %[[X]][%{{.*}}, %c64], %[[M]]
// CHECK: vector.maskedstore %[[AP]][%{{.*}}, %c64], %[[M]]
// CHECK: scf.for %{{.*}} = %c0 to %c35 step %c1 iter_args
// CHECK: vector.load %[[W]][%{{.*}}, %{{.*}}, %c0] : memref<2x35x64xbf16>, vector<32xbf16>
// CHECK: vector.load %[[W]][%{{.*}}, %{{.*}}, %c32] : memref<2x35x64xbf16>, vector<32xbf16>
// CHECK: %[[L:.*]] = vector.load %[[AP]][%{{.*}}, %{{.*}}] : memref<?x70xbf16>, vector<2xbf16>
// CHECK: %[[LI:.*]] = vector.bitcast %[[L]] : vector<2xbf16> to vector<1xi32>
// CHECK: %[[S:.*]] = vector.extract %[[LI]][0] : i32 from vector<1xi32>
// CHECK: %[[B:.*]] = vector.broadcast %[[S]] : i32 to vector<16xi32>
// CHECK: %[[P:.*]] = vector.bitcast %[[B]] : vector<16xi32> to vector<32xbf16>
// CHECK: x86vector.avx512.dot %{{.*}}, %[[P]], %{{.*}} : vector<32xbf16> -> vector<16xf32>
// CHECK: memref.dealloc %[[AP]]
func.func @pairs(%x: memref<?x70xf32>, %w: memref<2x35x64xbf16>, %y: memref<?x40xf32>) {
  tfm.linear_kernel ins(%x, %w : memref<?x70xf32>, memref<2x35x64xbf16>) outs(%y : memref<?x40xf32>)
  return
}

// A tfm.norm_kernel's rows already in bf16 pairs ([M, 2 ceil(K / 2)]) are
// read as they are: nothing is packed or freed here.
// CHECK-LABEL: func.func @packed_input
// CHECK-SAME: (%[[X:.*]]: memref<?x70xbf16>, %[[W:.*]]: memref<2x35x64xbf16>
// CHECK-NOT: memref.alloc
// CHECK: scf.for %{{.*}} = %c0 to %c35 step %c1 iter_args
// CHECK: vector.load %[[X]][%{{.*}}, %{{.*}}] : memref<?x70xbf16>, vector<2xbf16>
// CHECK: x86vector.avx512.dot
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @packed_input(%x: memref<?x70xbf16>, %w: memref<2x35x64xbf16>, %y: memref<?x40xf32>) {
  tfm.linear_kernel ins(%x, %w : memref<?x70xbf16>, memref<2x35x64xbf16>) outs(%y : memref<?x40xf32>)
  return
}
