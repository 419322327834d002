// RUN: tfm-opt %s --split-input-file --tfm-lower-kernels=vector-width=8 | FileCheck %s
// RUN: tfm-opt %s --split-input-file --convert-tfm-to-linalg | FileCheck %s --check-prefix=WRITE

// Attention over KV caches of f16 (tfmc --kv-cache=f16), computing in f32:
// each block of K^T is one load of f16 lanes extended in registers (F16C's
// vcvtph2ps) when it lies inside the cache; the block at the end of the keys
// (AVX2 has no masked load of 16-bit lanes) reads each lane as a scalar at
// a clamped index, extended, the lanes outside the mask zero. Each row of V
// is one f16 load, extended. Both kernels (decode, prefill) read so.
// CHECK-LABEL: func.func @attention_f16
// CHECK-NOT: vector.maskedload
// CHECK: %[[FULL:.*]] = vector.reduction <and>, %[[MASK:.*]] : vector<32xi1> into i1
// CHECK-NEXT: scf.if %[[FULL]] -> (vector<32xf32>) {
// CHECK-NEXT: %[[K16:.*]] = vector.load %arg1[%{{.*}}, %{{.*}}, %{{.*}}, %[[J0:.*]]] : memref<?x2x8x?xf16>, vector<32xf16>
// CHECK-NEXT: %[[K32:.*]] = arith.extf %[[K16]] : vector<32xf16> to vector<32xf32>
// CHECK-NEXT: scf.yield %[[K32]] : vector<32xf32>
// CHECK-NEXT: } else {
// CHECK: %[[LAST:.*]] = arith.subi %{{.*}}, %c1 : index
// CHECK: %[[AT:.*]] = arith.minsi %{{.*}}, %[[LAST]] : index
// CHECK-NEXT: %[[X:.*]] = memref.load %arg1[%{{.*}}, %{{.*}}, %{{.*}}, %[[AT]]] : memref<?x2x8x?xf16>
// CHECK-NEXT: arith.extf %[[X]] : f16 to f32
// CHECK: %[[LANES:.*]] = vector.from_elements {{.*}} : vector<32xf32>
// CHECK-NEXT: %[[TAIL:.*]] = arith.select %[[MASK]], %[[LANES]], %{{.*}} : vector<32xi1>, vector<32xf32>
// CHECK-NEXT: scf.yield %[[TAIL]] : vector<32xf32>
// CHECK: %[[V16:.*]] = vector.load %arg2[{{.*}}] : memref<?x2x?x8xf16>, vector<8xf16>
// CHECK-NEXT: arith.extf %[[V16]] : vector<8xf16> to vector<8xf32>
// The prefill kernel (T > 4 here).
// CHECK: vector.load %arg1[{{.*}}] : memref<?x2x8x?xf16>, vector<16xf16>
// CHECK-NEXT: arith.extf %{{.*}} : vector<16xf16> to vector<16xf32>
// CHECK: vector.load %arg2[{{.*}}] : memref<?x2x?x8xf16>, vector<8xf16>
// CHECK-NEXT: arith.extf %{{.*}} : vector<8xf16> to vector<8xf32>
func.func @attention_f16(%q: memref<?x4x?x8xf32>, %kt: memref<?x2x8x?xf16>, %v: memref<?x2x?x8xf16>, %p: memref<?xi32>, %o: memref<?x4x?x8xf32>) {
  tfm.attention_kernel ins(%q, %kt, %v : memref<?x4x?x8xf32>, memref<?x2x8x?xf16>, memref<?x2x?x8xf16>) positions(%p : memref<?xi32>) outs(%o : memref<?x4x?x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64}
  return
}

// -----

// bf16 caches read the same way (the extension is a shift).
// CHECK-LABEL: func.func @decode_bf16
// CHECK: vector.load %arg1[{{.*}}] : memref<?x1x8x?xbf16>, vector<16xbf16>
// CHECK-NEXT: arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK: vector.load %arg2[{{.*}}] : memref<?x1x?x8xbf16>, vector<8xbf16>
// CHECK-NEXT: arith.extf %{{.*}} : vector<8xbf16> to vector<8xf32>
func.func @decode_bf16(%q: memref<?x8x1x8xf32>, %kt: memref<?x1x8x?xbf16>, %v: memref<?x1x?x8xbf16>, %p: memref<?xi32>, %o: memref<?x8x1x8xf32>) {
  tfm.attention_kernel ins(%q, %kt, %v : memref<?x8x1x8xf32>, memref<?x1x8x?xbf16>, memref<?x1x?x8xbf16>) positions(%p : memref<?xi32>) outs(%o : memref<?x8x1x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64}
  return
}

// -----

// The cache write rounds the new keys to f16 as it copies them into the
// cache (transposed for keys).
// WRITE-LABEL: func.func @write_f16
// WRITE: linalg.generic {{.*}} ins(%{{.*}} : tensor<1x2x?x8xf32>) outs(%{{.*}} : tensor<1x2x8x?xf16>)
// WRITE-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f16):
// WRITE-NEXT: %[[H:.*]] = arith.truncf %[[IN]] : f32 to f16
// WRITE-NEXT: linalg.yield %[[H]] : f16
func.func @write_f16(%k: tensor<?x2x?x8xf32>, %c: tensor<?x2x8x?xf16>, %p: tensor<?xi32>) -> tensor<?x2x8x?xf16> {
  %0 = tfm.cache_write %k into %c at %p {transposed} : tensor<?x2x?x8xf32> into tensor<?x2x8x?xf16> at tensor<?xi32>
  return %0 : tensor<?x2x8x?xf16>
}

// -----

// To bf16: rounded to nearest, ties to even, in integer ops (LLVM would
// call __truncsfbf2 for an arith.truncf on x86 without AVX512_BF16): a NaN
// gets its quiet bit first, so that it stays a NaN.
// WRITE-LABEL: func.func @write_bf16
// WRITE: linalg.generic {{.*}} ins(%{{.*}} : tensor<1x2x?x8xf32>) outs(%{{.*}} : tensor<1x2x?x8xbf16>)
// WRITE-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: bf16):
// WRITE-NEXT: %[[BITS:.*]] = arith.bitcast %[[IN]] : f32 to i32
// WRITE-NEXT: %[[NAN:.*]] = arith.cmpf uno, %[[IN]], %[[IN]] : f32
// WRITE-NEXT: %[[NAN32:.*]] = arith.extui %[[NAN]] : i1 to i32
// WRITE-NEXT: %[[QUIET:.*]] = arith.shli %[[NAN32]], %c22_i32 : i32
// WRITE-NEXT: %[[B:.*]] = arith.ori %[[BITS]], %[[QUIET]] : i32
// WRITE-NEXT: %[[SH:.*]] = arith.shrui %[[B]], %c16_i32 : i32
// WRITE-NEXT: %[[LSB:.*]] = arith.andi %[[SH]], %c1_i32 : i32
// WRITE-NEXT: %[[BIAS:.*]] = arith.addi %[[LSB]], %c32767_i32 : i32
// WRITE-NEXT: %[[R:.*]] = arith.addi %[[B]], %[[BIAS]] : i32
// WRITE-NEXT: %[[HI:.*]] = arith.shrui %[[R]], %c16_i32 : i32
// WRITE-NEXT: %[[T:.*]] = arith.trunci %[[HI]] : i32 to i16
// WRITE-NEXT: %[[OUT:.*]] = arith.bitcast %[[T]] : i16 to bf16
// WRITE-NEXT: linalg.yield %[[OUT]] : bf16
func.func @write_bf16(%v: tensor<?x2x?x8xf32>, %c: tensor<?x2x?x8xbf16>, %p: tensor<?xi32>) -> tensor<?x2x?x8xbf16> {
  %0 = tfm.cache_write %v into %c at %p : tensor<?x2x?x8xf32> into tensor<?x2x?x8xbf16> at tensor<?xi32>
  return %0 : tensor<?x2x?x8xbf16>
}
