// RUN: tfm-opt %s --tfm-lower-kernels --canonicalize --cse | FileCheck %s

// Weights in int8 quads of K ([P, ceil(K / 4) + 2, 4 W] bytes, here K = 70:
// 18 quads, then the columns' scales and sums): A is first quantized per
// row (its max |x| / 127 as the row's scale; 16 columns a vector, then one
// quad at a time, 70 = 4 x 16 + 6), each quad of a row is broadcast and
// multiplied with the panel's quads by vpdpbusd into i32 accumulators;
// the epilogue subtracts the columns' sums times 128 (A's unsigned offset),
// converts, and multiplies by the column and row scales before the bias.
// CHECK-LABEL: func.func @quads
// CHECK-SAME: (%[[X:.*]]: memref<?x70xf32>, %[[W:.*]]: memref<2x20x128xi8>, %[[B:.*]]: memref<40xf32>, %[[Y:.*]]: memref<?x40xf32>)
// CHECK: %[[AQ:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x18xi32>
// CHECK: %[[AS:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?xf32>
// CHECK: scf.parallel
// CHECK: math.absf %{{.*}} : vector<16xf32>
// CHECK: vector.reduction <maxnumf>
// CHECK: memref.store %{{.*}}, %[[AS]]
// CHECK: math.roundeven %{{.*}} : vector<16xf32>
// CHECK: %[[U:.*]] = arith.trunci %{{.*}} : vector<16xi32> to vector<16xi8>
// CHECK: %[[Q:.*]] = vector.bitcast %[[U]] : vector<16xi8> to vector<4xi32>
// CHECK: vector.store %[[Q]], %[[AQ]]
// CHECK: arith.shli
// CHECK: arith.ori
// CHECK: scf.for %{{.*}} = %c0 to %c18 step %c1 iter_args
// CHECK: vector.load %[[W]][%{{.*}}, %{{.*}}, %c0] : memref<2x20x128xi8>, vector<64xi8>
// CHECK: vector.load %[[W]][%{{.*}}, %{{.*}}, %c64] : memref<2x20x128xi8>, vector<64xi8>
// CHECK: %[[S:.*]] = memref.load %[[AQ]][%{{.*}}, %{{.*}}] : memref<?x18xi32>
// CHECK: %[[BC:.*]] = vector.broadcast %[[S]] : i32 to vector<16xi32>
// CHECK: %[[P:.*]] = vector.bitcast %[[BC]] : vector<16xi32> to vector<64xi8>
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"(%{{.*}}, %[[P]], %{{.*}}) : (vector<16xi32>, vector<64xi8>, vector<64xi8>) -> vector<16xi32>
// CHECK: vector.load %[[W]][%{{.*}}, %c18, %c0] : memref<2x20x128xi8>, vector<64xi8>
// CHECK: vector.load %[[W]][%{{.*}}, %c19, %c0] : memref<2x20x128xi8>, vector<64xi8>
// CHECK: arith.subi %{{.*}} : vector<16xi32>
// CHECK: arith.sitofp %{{.*}} : vector<16xi32> to vector<16xf32>
// CHECK: memref.load %[[AS]]
// CHECK: vector.load %[[B]]
// CHECK: memref.dealloc %[[AQ]]
// CHECK: memref.dealloc %[[AS]]
func.func @quads(%x: memref<?x70xf32>, %w: memref<2x20x128xi8>, %b: memref<40xf32>, %y: memref<?x40xf32>) {
  tfm.linear_kernel ins(%x, %w, %b : memref<?x70xf32>, memref<2x20x128xi8>, memref<40xf32>) outs(%y : memref<?x40xf32>)
  return
}
