// RUN: tfm-opt %s --tfm-lower-kernels=vector-width=8 --canonicalize --cse | FileCheck %s
// With AVX512_VNNI (int8-dot) the byte dot products of Q8_0 and Q4_0 are
// vpdpbusd on 256 bits; without, AVX2's vpmaddubsw + vpmaddwd.
// RUN: tfm-opt %s --tfm-lower-kernels="vector-width=16 int8-dot=true" | FileCheck %s --check-prefix=VNNI
// RUN: tfm-opt %s --tfm-lower-kernels=vector-width=16 | FileCheck %s --check-prefix=NOVNNI
// VNNI-LABEL: func.func private @tfm_ggml_gemm(
// VNNI: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.256"(%{{.*}}, %{{.*}}, %{{.*}}) : (vector<8xi32>, vector<32xi8>, vector<32xi8>) -> vector<8xi32>
// NOVNNI-LABEL: func.func private @tfm_ggml_gemm(
// NOVNNI-NOT: vpdpbusd
// NOVNNI: llvm.call_intrinsic "llvm.x86.avx2.pmadd.ub.sw"
// NOVNNI-NOT: vpdpbusd

// A linear on a weight in ggml blocks calls the module's one tfm_ggml_gemm
// (A and the output as strided matrices, the rows as bytes, the type read
// from its buffer), then applies the bias, activation and residual over
// the output, rows in parallel.
// CHECK-LABEL: func.func @g(
// CHECK-SAME: %[[X:.*]]: memref<?x64xf32>, %[[R:.*]]: memref<8192xi8>, %[[T:.*]]: memref<1xi32>, %[[B:.*]]: memref<32xf32>, %[[RES:.*]]: memref<?x32xf32>, %[[Y:.*]]: memref<?x32xf32>)
// CHECK: %[[A:.*]] = memref.cast %[[X]] : memref<?x64xf32> to memref<?x?xf32, strided<[?, 1], offset: ?>>
// CHECK: %[[O:.*]] = memref.cast %[[Y]] : memref<?x32xf32> to memref<?x?xf32, strided<[?, 1], offset: ?>>
// CHECK: %[[RB:.*]] = memref.cast %[[R]] : memref<8192xi8> to memref<?xi8>
// CHECK: %[[TY:.*]] = memref.load %[[T]][%{{.*}}] : memref<1xi32>
// CHECK: call @tfm_ggml_gemm(%[[A]], %[[RB]], %[[TY]], %[[O]])
// CHECK: scf.parallel
// CHECK: scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: vector.load %[[Y]]
// CHECK: vector.load %[[B]][%[[C]]]
// CHECK: math.exp
// CHECK: vector.load %[[RES]]
// CHECK: vector.store %{{.*}}, %[[Y]]
// CHECK: } {tfm.keep_parallel}

// Only one function, however many kernels.
// CHECK-LABEL: func.func @h(
// CHECK: call @tfm_ggml_gemm
// CHECK: call @tfm_ggml_gemm
// CHECK-NOT: scf.parallel

// An embedding of a table in ggml blocks: tfm_ggml_row per token (tokens in
// parallel) into the token's row of the output, then the scale.
// CHECK-LABEL: func.func @e(
// CHECK-SAME: %[[IDS:.*]]: memref<?x?xi32>, %[[ER:.*]]: memref<8192xi8>, %[[ET:.*]]: memref<1xi32>, %[[EX:.*]]: memref<?x?x64xf32>)
// CHECK: %[[ETY:.*]] = memref.load %[[ET]]
// CHECK: scf.parallel (%[[B:.*]], %[[P:.*]]) =
// CHECK: %[[ID:.*]] = memref.load %[[IDS]][%[[B]], %[[P]]]
// CHECK: %[[IDX:.*]] = arith.index_cast %[[ID]] : i32 to index
// CHECK: %[[ROW:.*]] = memref.subview %[[EX]][%[[B]], %[[P]], 0] [1, 1, 64] [1, 1, 1]
// CHECK: %[[ROWC:.*]] = memref.cast %[[ROW]]
// CHECK: call @tfm_ggml_row(%{{.*}}, %[[ETY]], %[[IDX]], %[[ROWC]])
// CHECK: arith.mulf
// CHECK: } {tfm.keep_parallel}

// The function switches on the type once: F32, F16, Q4_0, Q8_0, Q4_K, Q5_K,
// Q6_K, BF16 (ggml's numbers), each a loop nest over tasks of 16 rows of W
// x 64 of A, 4 x 2 tiles then 1 x 2 ones.
// CHECK-LABEL: func.func private @tfm_ggml_gemm(
// CHECK-SAME: %[[GA:.*]]: memref<?x?xf32, strided<[?, 1], offset: ?>>, %[[GW:.*]]: memref<?xi8>, %[[GT:.*]]: i32, %[[GO:.*]]: memref<?x?xf32, strided<[?, 1], offset: ?>>)
// CHECK: %[[IT:.*]] = arith.index_cast %[[GT]] : i32 to index
// CHECK: scf.index_switch %[[IT]]
// CHECK: case 0 {
// F32: rows of K x 4 bytes, 8 floats read as 32 bytes.
// CHECK: vector.load %[[GW]][%{{.*}}] : memref<?xi8>, vector<32xi8>
// CHECK: vector.bitcast %{{.*}} : vector<32xi8> to vector<8xf32>
// CHECK: case 1 {
// CHECK: vector.bitcast %{{.*}} : vector<16xi8> to vector<8xf16>
// CHECK: arith.extf %{{.*}} : vector<8xf16> to vector<8xf32>
// CHECK: case 2 {
// Q4_0: 18 bytes a block, nibbles less 8, times d.
// CHECK: arith.muli %{{.*}}, %c18 : index
// CHECK: case 8 {
// Q8_0: A quantized to bytes per block of 32 first (max |x| / 127, rounded
// to nearest even), then 34-byte blocks, d (f16) and 32 signed bytes,
// multiplied by vpsignb / vpmaddubsw / vpmaddwd, scaled by d times A's d.
// CHECK: memref.alloc(%{{.*}}, %{{.*}}) {alignment = 64 : i64} : memref<?x?xi8>
// CHECK: vector.reduction <maximumf>
// CHECK: math.roundeven
// CHECK: arith.trunci %{{.*}} : vector<8xi32> to vector<8xi8>
// CHECK: scf.parallel
// CHECK: scf.for %{{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK: vector.load %{{.*}} : memref<?x?xi8>, vector<32xi8>
// CHECK: arith.muli %{{.*}}, %c34 : index
// CHECK: vector.bitcast %{{.*}} : vector<2xi8> to vector<1xf16>
// CHECK: llvm.call_intrinsic "llvm.x86.avx2.psign.b"
// CHECK: llvm.call_intrinsic "llvm.x86.avx2.pmadd.ub.sw"
// CHECK: llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"
// CHECK: arith.sitofp %{{.*}} : vector<8xi32> to vector<8xf32>
// CHECK: vector.fma
// CHECK: vector.reduction <add>
// CHECK: memref.dealloc
// CHECK: case 12 {
// Q4_K: 144 bytes a super-block of 8 sub-blocks, the 6-bit scale and min
// of sub-block j chosen by j < 4.
// CHECK: arith.muli %{{.*}}, %c144 : index
// CHECK: arith.cmpi ult
// CHECK: arith.select
// CHECK: case 13 {
// CHECK: arith.muli %{{.*}}, %c176 : index
// CHECK: case 14 {
// Q6_K: 210 bytes, d at 208, signed scales at 192.
// CHECK: arith.muli %{{.*}}, %c210 : index
// CHECK: case 30 {
// CHECK: arith.shli %{{.*}}, %{{.*}} : vector<8xi32>
// CHECK: default {
func.func @g(%x: memref<?x64xf32>, %r: memref<8192xi8>, %t: memref<1xi32>, %b: memref<32xf32>, %res: memref<?x32xf32>, %y: memref<?x32xf32>) {
  tfm.ggml_linear_kernel ins(%x, %r, %t, %b : memref<?x64xf32>, memref<8192xi8>, memref<1xi32>, memref<32xf32>) residual(%res : memref<?x32xf32>) outs(%y : memref<?x32xf32>) {activation = #tfm.activation<silu>}
  return
}

func.func @h(%x: memref<?x64xf32>, %r: memref<8192xi8>, %t: memref<1xi32>, %y: memref<?x32xf32>, %z: memref<?x32xf32>) {
  tfm.ggml_linear_kernel ins(%x, %r, %t : memref<?x64xf32>, memref<8192xi8>, memref<1xi32>) outs(%y : memref<?x32xf32>)
  tfm.ggml_linear_kernel ins(%x, %r, %t : memref<?x64xf32>, memref<8192xi8>, memref<1xi32>) outs(%z : memref<?x32xf32>)
  return
}

// The row function switches on the type too.
// CHECK-LABEL: func.func private @tfm_ggml_row(
// CHECK-SAME: memref<?xi8>, %{{.*}}: i32, %{{.*}}: index, %{{.*}}: memref<?xf32, strided<[1], offset: ?>>)
// CHECK: scf.index_switch
// CHECK: case 8 {
// CHECK: arith.extsi %{{.*}} : vector<8xi8> to vector<8xi32>
// CHECK: vector.store
func.func @e(%ids: memref<?x?xi32>, %r: memref<8192xi8>, %t: memref<1xi32>, %x: memref<?x?x64xf32>) {
  tfm.ggml_embed_kernel ins(%ids, %r, %t : memref<?x?xi32>, memref<8192xi8>, memref<1xi32>) outs(%x : memref<?x?x64xf32>) {scale = 8.0 : f64}
  return
}
