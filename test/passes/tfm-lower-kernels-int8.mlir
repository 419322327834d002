// RUN: tfm-opt %s --tfm-lower-kernels --canonicalize --cse | FileCheck %s

// Weights in int8 quads of K ([P, ceil(K / 4) + 2, 4 W] bytes, here K = 70:
// 18 quads, then the columns' scales and sums): A is first quantized per
// row into [M, 4 ceil(K / 4) + 4] bytes (its max |x| / 127 as the row's
// scale; 16 columns a vector, then one masked vector for 70 = 4 x 16 + 6,
// stored up to the padding of 72 so that the quad past K holds 128; the
// scale's bytes last), each quad of a row is read as an i32, broadcast and
// multiplied with the panel's quads by vpdpbusd into i32 accumulators; the
// epilogue subtracts the columns' sums times 128 (A's unsigned offset),
// converts, and multiplies by the column and row scales before the bias.
// CHECK-LABEL: func.func @quads
// CHECK-SAME: (%[[X:.*]]: memref<?x70xf32>, %[[W:.*]]: memref<2x20x128xi8>, %[[B:.*]]: memref<40xf32>, %[[Y:.*]]: memref<?x40xf32>)
// CHECK: %[[AQ:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x76xi8>
// CHECK: scf.parallel
// CHECK: math.absf %{{.*}} : vector<16xf32>
// CHECK: vector.reduction <maxnumf>
// CHECK: math.roundeven %{{.*}} : vector<16xf32>
// CHECK: %[[U:.*]] = arith.trunci %{{.*}} : vector<16xi32> to vector<16xi8>
// CHECK: vector.store %[[U]], %[[AQ]]
// CHECK: %[[PAD:.*]] = vector.constant_mask [8] : vector<16xi1>
// CHECK: vector.maskedstore %[[AQ]][%{{.*}}, %c64], %[[PAD]]
// CHECK: %[[SB:.*]] = vector.bitcast %{{.*}} : vector<1xf32> to vector<4xi8>
// CHECK: vector.store %[[SB]], %[[AQ]][%{{.*}}, %c72]
// CHECK: scf.for %{{.*}} = %c0 to %c18 step %c1 iter_args
// CHECK: vector.load %[[W]][%{{.*}}, %{{.*}}, %c0] : memref<2x20x128xi8>, vector<64xi8>
// CHECK: vector.load %[[W]][%{{.*}}, %{{.*}}, %c64] : memref<2x20x128xi8>, vector<64xi8>
// CHECK: %[[L:.*]] = vector.load %[[AQ]][%{{.*}}, %{{.*}}] : memref<?x76xi8>, vector<4xi8>
// CHECK: %[[LI:.*]] = vector.bitcast %[[L]] : vector<4xi8> to vector<1xi32>
// CHECK: %[[S:.*]] = vector.extract %[[LI]][0] : i32 from vector<1xi32>
// CHECK: %[[BC:.*]] = vector.broadcast %[[S]] : i32 to vector<16xi32>
// CHECK: %[[P:.*]] = vector.bitcast %[[BC]] : vector<16xi32> to vector<64xi8>
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"(%{{.*}}, %[[P]], %{{.*}}) : (vector<16xi32>, vector<64xi8>, vector<64xi8>) -> vector<16xi32>
// CHECK: vector.load %[[W]][%{{.*}}, %c18, %c0] : memref<2x20x128xi8>, vector<64xi8>
// CHECK: vector.load %[[W]][%{{.*}}, %c19, %c0] : memref<2x20x128xi8>, vector<64xi8>
// CHECK: arith.subi %{{.*}} : vector<16xi32>
// CHECK: arith.sitofp %{{.*}} : vector<16xi32> to vector<16xf32>
// CHECK: vector.load %[[AQ]][%{{.*}}, %c72] : memref<?x76xi8>, vector<4xi8>
// CHECK: vector.bitcast %{{.*}} : vector<4xi8> to vector<1xi32>
// CHECK: arith.bitcast %{{.*}} : i32 to f32
// CHECK: vector.load %[[B]]
// CHECK: memref.dealloc %[[AQ]]
func.func @quads(%x: memref<?x70xf32>, %w: memref<2x20x128xi8>, %b: memref<40xf32>, %y: memref<?x40xf32>) {
  tfm.linear_kernel ins(%x, %w, %b : memref<?x70xf32>, memref<2x20x128xi8>, memref<40xf32>) outs(%y : memref<?x40xf32>)
  return
}
