// RUN: tfm-opt %s --tfm-lower-kernels --canonicalize --cse | FileCheck %s

// A layer norm over the rows of [B, T, 20], written in that shape: rows in
// parallel, the row's indices split from the row number; its sum, then its sum of squares of
// x - mean (the masked lanes of the last 4 columns selected out), 16
// columns a vector, then the normalized values: one pass over the input.
// CHECK-LABEL: func.func @layer
// CHECK-SAME: (%[[X:.*]]: memref<?x?x20xf32>, %[[W:.*]]: memref<20xf32>, %[[B:.*]]: memref<20xf32>, %[[Y:.*]]: memref<?x?x20xf32>)
// CHECK: %[[D0:.*]] = memref.dim %[[X]], %c0
// CHECK: %[[T:.*]] = memref.dim %[[X]], %c1
// CHECK: %[[M:.*]] = arith.muli %[[D0]], %[[T]]
// CHECK: scf.parallel (%[[R:.*]]) = (%c0) to (%[[M]]) step (%c1)
// CHECK: %[[J:.*]] = arith.remui %[[R]], %[[T]]
// CHECK: %[[I:.*]] = arith.divui %[[R]], %[[T]]
// CHECK: %[[V0:.*]] = vector.load %[[X]][%[[I]], %[[J]], %c0]
// CHECK: %[[TAIL:.*]] = vector.constant_mask [4] : vector<16xi1>
// CHECK: %[[V1:.*]] = vector.maskedload %[[X]][%[[I]], %[[J]], %c16], %[[TAIL]]
// CHECK: %[[SUM:.*]] = vector.reduction <add>
// CHECK: %[[MEAN:.*]] = arith.mulf %[[SUM]]
// CHECK: %[[MV:.*]] = vector.broadcast %[[MEAN]]
// CHECK: arith.subf %[[V0]], %[[MV]]
// CHECK: %[[D1:.*]] = arith.subf %[[V1]], %[[MV]]
// CHECK: arith.select %[[TAIL]], %[[D1]]
// CHECK: vector.reduction <add>
// CHECK: %[[RSTD:.*]] = math.rsqrt
// CHECK: vector.load %[[W]][%c0]
// CHECK: vector.load %[[B]][%c0]
// CHECK: vector.store %{{.*}}, %[[Y]][%{{.*}}, %{{.*}}, %c0]
// CHECK: vector.maskedload %[[W]][%c16], %[[TAIL]]
// CHECK: vector.maskedload %[[B]][%c16], %[[TAIL]]
// CHECK: vector.maskedstore %[[Y]][%{{.*}}, %{{.*}}, %c16], %[[TAIL]]
// CHECK: } {tfm.keep_parallel}
func.func @layer(%x: memref<?x?x20xf32>, %w: memref<20xf32>, %b: memref<20xf32>, %y: memref<?x?x20xf32>) {
  tfm.norm_kernel ins(%x, %w, %b : memref<?x?x20xf32>, memref<20xf32>, memref<20xf32>) outs(%y : memref<?x?x20xf32>) {kind = #tfm.norm<layernorm>, eps = 1.0e-05 : f64}
  return
}

// An RMS norm with offset 1 (Gemma's (1 + weight)) written in bf16 pairs:
// the rounded values of 15 columns and a zero past them fill the row of
// 16.
// CHECK-LABEL: func.func @rms_pairs
// CHECK-SAME: (%[[X:.*]]: memref<?x15xf32>, %[[W:.*]]: memref<15xf32>, %[[Y:.*]]: memref<?x16xbf16>)
// CHECK: %[[K:.*]] = vector.constant_mask [15] : vector<16xi1>
// CHECK: %[[V:.*]] = vector.maskedload %[[X]][%{{.*}}, %c0], %[[K]]
// CHECK: arith.mulf %[[V]], %[[V]]
// CHECK: math.rsqrt
// CHECK: %[[G:.*]] = vector.maskedload %[[W]][%c0], %[[K]]
// CHECK: arith.addf %[[G]], %{{.*}} : vector<16xf32>
// CHECK: %[[Z:.*]] = arith.select %[[K]]
// CHECK: %[[H:.*]] = arith.truncf %[[Z]] : vector<16xf32> to vector<16xbf16>
// CHECK: vector.store %[[H]], %[[Y]]
func.func @rms_pairs(%x: memref<?x15xf32>, %w: memref<15xf32>, %y: memref<?x16xbf16>) {
  tfm.norm_kernel ins(%x, %w : memref<?x15xf32>, memref<15xf32>) outs(%y : memref<?x16xbf16>) {kind = #tfm.norm<rmsnorm>, eps = 1.0e-06 : f64, offset = 1.0 : f64}
  return
}

// An RMS norm written in int8 quads: the normalized row's max |y| first,
// then the quantized bytes, then the row's scale (max / 127) as its last
// 4 bytes.
// CHECK-LABEL: func.func @rms_quads
// CHECK-SAME: (%[[X:.*]]: memref<?x32xf32>, %[[W:.*]]: memref<32xf32>, %[[Y:.*]]: memref<?x36xi8>)
// CHECK: math.rsqrt
// CHECK: scf.for
// CHECK: math.absf
// CHECK: arith.maxnumf
// CHECK: %[[MX:.*]] = vector.reduction <maxnumf>
// CHECK: %[[SCALE:.*]] = arith.divf %[[MX]]
// CHECK: scf.for
// CHECK: math.roundeven
// CHECK: arith.trunci %{{.*}} : vector<16xi32> to vector<16xi8>
// CHECK: vector.store %{{.*}}, %[[Y]]
// CHECK: %[[S1:.*]] = vector.broadcast %[[SCALE]] : f32 to vector<1xf32>
// CHECK: %[[SB:.*]] = vector.bitcast %[[S1]] : vector<1xf32> to vector<4xi8>
// CHECK: vector.store %[[SB]], %[[Y]][%{{.*}}, %c32]
func.func @rms_quads(%x: memref<?x32xf32>, %w: memref<32xf32>, %y: memref<?x36xi8>) {
  tfm.norm_kernel ins(%x, %w : memref<?x32xf32>, memref<32xf32>) outs(%y : memref<?x36xi8>) {kind = #tfm.norm<rmsnorm>, eps = 1.0e-06 : f64}
  return
}
