// RUN: tfm-opt %s --tfm-lower-kernels=vector-width=16 | FileCheck %s
// RUN: tfm-opt %s --tfm-lower-kernels=vector-width=8 | FileCheck %s --check-prefix=AVX2

// The decode attention kernels below ask the runtime for the thread count:
// the pass declares it once in the module.
// CHECK: func.func private @tfm_get_threads() -> i32
// CHECK-NOT: @tfm_get_threads() -> i32

// 70 columns in panels of 32: the two full panels in tasks of (panel
// group, row group), a 2-D parallel loop whose row groups are whole 8-row
// tiles of about 128 rows; in a task, each panel's 8-row register tiles
// (16 accumulators) over all of K, then one tile each of 4, 2 and 1 rows
// as the remainder's bits say. Then the masked tail panel, on one thread.
// CHECK-LABEL: func.func @linear
// CHECK: %[[M:.*]] = memref.dim %arg0, %c0
// CHECK: arith.ceildivui %[[M]], %c128
// CHECK: %[[ROWS:.*]] = arith.muli %{{.*}}, %c8 : index
// CHECK: %[[GROUPS:.*]] = arith.ceildivui %[[M]], %[[ROWS]] : index
// CHECK: scf.parallel (%[[PG:.*]], %[[RG:.*]]) = (%c0, %c0) to (%c1, %[[GROUPS]]) step (%c1, %c1)
// CHECK: scf.for %[[P:.*]] = %{{.*}} to %{{.*}} step %c1
// CHECK: scf.for %[[M0:.*]] = %{{.*}} to %{{.*}} step %c8
// CHECK: scf.for %[[K:.*]] = %c0 to %c24 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-NOT: memref.prefetch
// CHECK: vector.load %arg1[%[[P]], %[[K]], %c0] : memref<3x24x32xf32>, vector<16xf32>
// CHECK: memref.load %arg0[%[[M0]], %[[K]]]
// CHECK: vector.broadcast %{{.*}} : f32 to vector<16xf32>
// CHECK: vector.fma
// CHECK: arith.andi %{{.*}}, %c4
// CHECK: scf.if
// CHECK: iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK: arith.andi %{{.*}}, %c2
// CHECK: scf.if
// CHECK: iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK: arith.andi %{{.*}}, %c1
// CHECK: scf.if
// CHECK: iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>)
// CHECK: } {tfm.keep_parallel}
// CHECK: vector.create_mask %c6 : vector<16xi1>
// CHECK: vector.maskedstore
// CHECK-NOT: tfm.linear_kernel
// AVX2 (8 lanes; this test's panels are 32 columns, 4 vectors, where the
// pipeline packs 2 for AVX2): 6-row tiles, remainder tiles of 4, 2 and 1
// rows.
// AVX2-LABEL: func.func @linear
// AVX2: scf.parallel
// AVX2: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c6
// AVX2: iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// AVX2: arith.andi %{{.*}}, %c4
// AVX2: arith.andi %{{.*}}, %c2
// AVX2: arith.andi %{{.*}}, %c1
// AVX2: } {tfm.keep_parallel}
func.func @linear(%a: memref<?x24xf32>, %w: memref<3x24x32xf32>, %b: memref<70xf32>, %o: memref<?x70xf32>) {
  tfm.linear_kernel ins(%a, %w, %b : memref<?x24xf32>, memref<3x24x32xf32>, memref<70xf32>) outs(%o : memref<?x70xf32>)
  return
}

// Blocked online softmax: a task per (sequence, head, tile of 64 query
// rows) keeps the tile's accumulators, running maxes and lane-wise sums on
// its stack; it passes over the keys in superblocks (4096 keys of an
// 8-wide head fill 256 KB of L2), which each group of 8 rows meets in
// blocks of 32 keys read from K^T (8 rows x 2 vectors of scores in
// registers); key blocks outside the causal bound are never visited. The
// max is raised (and the row rescaled) only when a score passes it by the
// threshold; exp2 on full vectors (a polynomial, no math.exp); P goes to
// the task's buffer, from which P V broadcasts it.
// CHECK-LABEL: func.func @attention
// CHECK-NOT: memref.alloc(
// CHECK: scf.parallel (%[[B:.*]], %[[H:.*]], %[[QB:.*]]) =
// CHECK: %[[ACC:.*]] = memref.alloca() : memref<64x8xf32>
// CHECK: %[[M:.*]] = memref.alloca() : memref<64xf32>
// CHECK: %[[L:.*]] = memref.alloca() : memref<64x16xf32>
// CHECK: %[[P:.*]] = memref.alloca() : memref<8x32xf32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c4096 {
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 {
// CHECK: scf.for %[[J:[a-z0-9]+]] = %{{.*}} to %{{.*}} step %c32 {
// CHECK: scf.for %[[D:.*]] = %{{.*}} to %c8 step %{{.*}} iter_args
// CHECK: vector.maskedload %{{.*}}[%[[B]], %{{.*}}, %[[D]], %[[J]]]
// CHECK-COUNT-8: vector.fma %{{.*}} : vector<32xf32>
// CHECK: arith.cmpi ult, %{{.*}} : vector<32xi32>
// CHECK: memref.load %[[M]]
// CHECK: arith.cmpf ogt, %{{.*}} : vector<32xf32>
// CHECK: %[[ANY:.*]] = vector.reduction <or>, %{{.*}} : vector<32xi1> into i1
// CHECK: scf.if %[[ANY]] -> (f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK: vector.reduction <maxnumf>
// CHECK: math.exp %{{.*}} : f32
// CHECK: memref.store %{{.*}}, %[[M]]
// CHECK: } else {
// CHECK-NOT: math.exp
// CHECK: math.roundeven %{{.*}} : vector<32xf32>
// CHECK: vector.store %{{.*}}, %[[L]]
// CHECK: vector.store %{{.*}}, %[[P]]
// CHECK: vector.load %[[ACC]]
// CHECK: memref.load %[[P]]
// CHECK: vector.fma {{.*}} : vector<8xf32>
// CHECK: vector.store %{{.*}}, %[[ACC]]
// CHECK: vector.reduction <add>
// CHECK: vector.store %{{.*}}, %arg4[%[[B]], %[[H]], %{{.*}}, %{{.*}}]
// CHECK: } {tfm.keep_parallel}
func.func @attention(%q: memref<?x4x?x8xf32>, %kt: memref<?x2x8x?xf32>, %v: memref<?x2x?x8xf32>, %l: memref<?xi32>, %o: memref<?x4x?x8xf32>) {
  tfm.attention_kernel ins(%q, %kt, %v, %l : memref<?x4x?x8xf32>, memref<?x2x8x?xf32>, memref<?x2x?x8xf32>, memref<?xi32>) outs(%o : memref<?x4x?x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64}
  return
}

// DSL v2 score modifiers on each block of scores, before the mask: softcap
// (tanh of the vector), ALiBi (slope times the distance vector) and the bias
// by distance (a gather with clamped distances). Causal blocks are still
// skipped: the key loop ends at the diagonal.
// CHECK-LABEL: func.func @attention_modifiers
// CHECK: scf.parallel
// CHECK: arith.select
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c32
// CHECK: vector.fma
// CHECK: math.tanh %{{.*}} : vector<32xf32>
// CHECK: arith.sitofp %{{.*}} : vector<32xi32> to vector<32xf32>
// CHECK: vector.fma
// CHECK: arith.minsi %{{.*}} : vector<32xindex>
// CHECK: vector.gather %{{.*}}[%{{.*}}, %c0] [%{{.*}}], %{{.*}}, %{{.*}} : memref<4x17xf32>, vector<32xindex>, vector<32xi1>, vector<32xf32> into vector<32xf32>
// CHECK: vector.reduction <maxnumf>
func.func @attention_modifiers(%q: memref<?x4x?x8xf32>, %kt: memref<?x2x8x?xf32>, %v: memref<?x2x?x8xf32>, %b: memref<4x17xf32>, %o: memref<?x4x?x8xf32>) {
  tfm.attention_kernel ins(%q, %kt, %v : memref<?x4x?x8xf32>, memref<?x2x8x?xf32>, memref<?x2x?x8xf32>) bias(%b : memref<4x17xf32>) outs(%o : memref<?x4x?x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64, softcap = 20.0 : f64, alibi_slopes = array<f64: 0.25, 0.0625, 0.015625, 0.00390625>, bias_distance = 8 : i64}
  return
}

// Over a KV cache (positions) with a dynamic T: the decode kernel when
// T x group <= 16 (here T <= 4: 4 query heads per KV head), else the
// prefill kernel, chosen at run time. Decode: the thread count from the
// runtime sets the number of key splits (at least 256 keys each); a task
// per (sequence, KV head, split) loads each block of K^T (64 keys: scores
// of 4 rows x 4 vectors, half the registers) once for the 4 query heads of
// its group (one masked load, four FMAs) and each V vector once for them
// too, keeping each row's running max and sum (a cache line per row) and
// unnormalized output in a workspace per split; a second parallel loop
// over (sequence, head) merges the splits: max, exp-weighted sums, the
// output.
// CHECK-LABEL: func.func @attention_decode
// CHECK: %[[T:.*]] = memref.dim %arg0, %c2 : memref<?x8x?x8xf32>
// CHECK: %[[DECODE:.*]] = arith.cmpi ule, %[[T]], %c4
// CHECK: scf.if %[[DECODE]] {
// CHECK: call @tfm_get_threads() : () -> i32
// CHECK: arith.ceildivui %{{.*}}, %c256 : index
// CHECK-NEXT: arith.minsi
// CHECK-NEXT: %[[SPLITS:.*]] = arith.maxsi
// CHECK: %[[ML:.*]] = memref.alloc(%{{.*}}, %[[SPLITS]], %{{.*}}) {alignment = 64 : i64} : memref<?x2x?x?x16xf32>
// CHECK: %[[O:.*]] = memref.alloc(%{{.*}}, %[[SPLITS]], %{{.*}}) {alignment = 64 : i64} : memref<?x2x?x?x8xf32>
// CHECK: %[[P:.*]] = memref.alloc(%{{.*}}, %[[SPLITS]]) {alignment = 64 : i64} : memref<?x2x?x4x64xf32>
// CHECK: scf.parallel (%[[B:.*]], %[[KV:.*]], %[[S:.*]]) = (%c0, %c0, %c0) to (%{{.*}}, %c2, %[[SPLITS]])
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %c64 {
// CHECK: scf.for %[[TI:.*]] = %c0 to %[[T]] step %c1 {
// CHECK: scf.for %[[D:.*]] = %c0 to %c8 step %c1 iter_args({{.*}}) -> (vector<64xf32>, vector<64xf32>, vector<64xf32>, vector<64xf32>) {
// CHECK-NEXT: %[[KB:.*]] = vector.maskedload %arg1[%[[B]], %[[KV]], %[[D]], %[[J]]]
// CHECK-COUNT-4: vector.fma %{{.*}}, %[[KB]], %{{.*}} : vector<64xf32>
// CHECK-NEXT: scf.yield
// CHECK: memref.load %[[ML]][%[[B]], %[[KV]], %[[S]], %{{.*}}, %c0]
// CHECK: memref.load %[[ML]][%[[B]], %[[KV]], %[[S]], %{{.*}}, %c1]
// CHECK: vector.reduction <maximumf>
// CHECK: math.exp %{{.*}} : vector<64xf32>
// CHECK: vector.store %{{.*}}, %[[P]][%[[B]], %[[KV]], %[[S]], %c0, %c0]
// CHECK: vector.store %{{.*}}, %[[P]][%[[B]], %[[KV]], %[[S]], %c3, %c0]
// CHECK: scf.for
// CHECK: %[[VROW:.*]] = vector.load %arg2[%[[B]], %[[KV]], %{{.*}}, %{{.*}}] : memref<?x2x?x8xf32>, vector<8xf32>
// CHECK-COUNT-4: vector.fma %{{.*}}, %[[VROW]], %{{.*}} : vector<8xf32>
// CHECK: vector.store %{{.*}}, %[[O]][%[[B]], %[[KV]], %[[S]], %{{.*}}, %{{.*}}]
// CHECK: } {tfm.keep_parallel}
// CHECK: scf.parallel (%[[MB:.*]], %[[MH:.*]]) = (%c0, %c0) to (%{{.*}}, %c8)
// CHECK: scf.for %{{.*}} = %c0 to %[[SPLITS]] step %c1 iter_args
// CHECK: arith.maximumf
// CHECK: scf.for %{{.*}} = %c0 to %[[SPLITS]] step %c1 iter_args
// CHECK: math.exp
// CHECK: vector.store %{{.*}}, %arg4[%[[MB]], %[[MH]], %{{.*}}, %{{.*}}]
// CHECK: } {tfm.keep_parallel}
// CHECK: memref.dealloc %[[ML]]
// CHECK: memref.dealloc %[[O]]
// CHECK: memref.dealloc %[[P]]
// CHECK: } else {
// CHECK: scf.parallel (%{{.*}}, %{{.*}}, %{{.*}}) = (%c0, %c0, %c0) to (%{{.*}}, %c8, %{{.*}})
// CHECK: } {tfm.keep_parallel}
func.func @attention_decode(%q: memref<?x8x?x8xf32>, %kt: memref<?x2x8x?xf32>, %v: memref<?x2x?x8xf32>, %p: memref<?xi32>, %o: memref<?x8x?x8xf32>) {
  tfm.attention_kernel ins(%q, %kt, %v : memref<?x8x?x8xf32>, memref<?x2x8x?xf32>, memref<?x2x?x8xf32>) positions(%p : memref<?xi32>) outs(%o : memref<?x8x?x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64}
  return
}

// One query row (T = 1, static): the decode kernel alone. Multi-query with
// 16 heads: two register blocks of 8 rows per block of keys (eight FMAs
// each on one load of K^T). A ring buffer's slots are mapped to positions
// per block of keys, and every written slot is in the key range split
// across tasks.
// CHECK-LABEL: func.func @attention_step
// CHECK-NOT: scf.if
// CHECK: call @tfm_get_threads()
// CHECK: scf.parallel (%[[B:.*]], %[[KV:.*]], %[[S:.*]]) = (%c0, %c0, %c0) to (%{{.*}}, %c1, %{{.*}})
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %c32 {
// CHECK: arith.remsi %{{.*}} : vector<32xindex>
// CHECK: scf.for %[[D:.*]] = %c0 to %c8 step %c1 iter_args
// CHECK-NEXT: %[[KB:.*]] = vector.maskedload %arg1[%[[B]], %[[KV]], %[[D]], %[[J]]]
// CHECK-COUNT-8: vector.fma %{{.*}}, %[[KB]], %{{.*}} : vector<32xf32>
// CHECK-NEXT: scf.yield
// CHECK: scf.for %[[D2:.*]] = %c0 to %c8 step %c1 iter_args
// CHECK-NEXT: %[[KB2:.*]] = vector.maskedload %arg1[%[[B]], %[[KV]], %[[D2]], %[[J]]]
// CHECK-COUNT-8: vector.fma %{{.*}}, %[[KB2]], %{{.*}} : vector<32xf32>
// CHECK-NEXT: scf.yield
// CHECK: } {tfm.keep_parallel}
// CHECK: scf.parallel
// CHECK: } {tfm.keep_parallel}
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @attention_step(%q: memref<?x16x1x8xf32>, %kt: memref<?x1x8x?xf32>, %v: memref<?x1x?x8xf32>, %p: memref<?xi32>, %o: memref<?x16x1x8xf32>) {
  tfm.attention_kernel ins(%q, %kt, %v : memref<?x16x1x8xf32>, memref<?x1x8x?xf32>, memref<?x1x?x8xf32>) positions(%p : memref<?xi32>) outs(%o : memref<?x16x1x8xf32>) {mask = #tfm.mask<sliding>, window = 4 : i64, scale = 0.35 : f64, ring}
  return
}
