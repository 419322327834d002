// RUN: tfm-opt %s --tfm-lower-kernels --split-input-file | FileCheck %s
// RUN: tfm-opt %s --tfm-lower-kernels=vector-width=8 --split-input-file | FileCheck %s --check-prefix=AVX2

// A copy into a window of a strided buffer (a KV cache) whose rows are
// contiguous: a loop over the outer dimensions, and along each row whole
// vectors of the target's width (16 f32 lanes, 8 with AVX2), then what is
// left of the row in one masked vector. No element loop is left for LLVM
// to vectorize.
// CHECK-LABEL: func.func @rows(
// CHECK-SAME: %[[S:[a-z0-9]+]]: memref<?x4x?xf32>, %[[D:[a-z0-9]+]]: memref<?x4x?xf32, strided<[?, ?, 1], offset: ?>>
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK-DAG: %[[N:.*]] = memref.dim %[[S]], %c2
// CHECK-DAG: %[[REST:.*]] = arith.remui %[[N]], %[[C16]]
// CHECK-DAG: %[[WHOLE:.*]] = arith.subi %[[N]], %[[REST]]
// CHECK-DAG: %[[ANY:.*]] = arith.cmpi ne, %[[REST]], %c0
// CHECK: scf.for %[[I:.*]] = %c0 to %{{.*}} step %c1 {
// CHECK-NEXT: scf.for %[[H:.*]] = %c0 to %c4 step %c1 {
// CHECK-NEXT: scf.for %[[J:.*]] = %c0 to %[[WHOLE]] step %[[C16]] {
// CHECK-NEXT: %[[V:.*]] = vector.load %[[S]][%[[I]], %[[H]], %[[J]]] : memref<?x4x?xf32>, vector<16xf32>
// CHECK-NEXT: vector.store %[[V]], %[[D]][%[[I]], %[[H]], %[[J]]]
// CHECK-NEXT: }
// CHECK-NEXT: scf.if %[[ANY]] {
// CHECK-NEXT: %[[M:.*]] = vector.create_mask %[[REST]] : vector<16xi1>
// CHECK-NEXT: %[[T:.*]] = vector.maskedload %[[S]][%[[I]], %[[H]], %[[WHOLE]]], %[[M]], %[[ZERO]]
// CHECK-NEXT: vector.maskedstore %[[D]][%[[I]], %[[H]], %[[WHOLE]]], %[[M]], %[[T]]
// CHECK-NOT: memref.load
// CHECK-NOT: memref.copy
// AVX2-LABEL: func.func @rows(
// AVX2: vector.load {{.*}} vector<8xf32>
// AVX2: vector.create_mask %{{.*}} : vector<8xi1>
// AVX2: vector.maskedload {{.*}} into vector<8xf32>
func.func @rows(%s: memref<?x4x?xf32>, %d: memref<?x4x?xf32, strided<[?, ?, 1], offset: ?>>) {
  memref.copy %s, %d : memref<?x4x?xf32> to memref<?x4x?xf32, strided<[?, ?, 1], offset: ?>>
  return
}

// -----

// A vector holds as many lanes of a narrower type (a cache of f16: 32),
// and a one-dimensional copy is the row alone.
// CHECK-LABEL: func.func @half_row(
// CHECK-NOT: scf.for
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c32 {
// CHECK: vector.load {{.*}} vector<32xf16>
// CHECK: scf.if
// CHECK: vector.create_mask %{{.*}} : vector<32xi1>
// CHECK: vector.maskedload {{.*}} into vector<32xf16>
// CHECK: vector.maskedstore
func.func @half_row(%s: memref<?xf16>, %d: memref<?xf16, strided<[1], offset: ?>>) {
  memref.copy %s, %d : memref<?xf16> to memref<?xf16, strided<[1], offset: ?>>
  return
}

// -----

// Rows that are not contiguous (the innermost stride is not 1) move
// element by element.
// CHECK-LABEL: func.func @columns(
// CHECK: scf.for
// CHECK-NEXT: scf.for
// CHECK-NEXT: %[[X:.*]] = memref.load
// CHECK-NEXT: memref.store %[[X]]
// CHECK-NOT: vector.
func.func @columns(%s: memref<?x8xf32>, %d: memref<?x8xf32, strided<[1, ?], offset: ?>>) {
  memref.copy %s, %d : memref<?x8xf32> to memref<?x8xf32, strided<[1, ?], offset: ?>>
  return
}
