// RUN: tfm-opt %s --tfm-expand-shape-to-cast | FileCheck %s

// [B*T, N] -> [B, T, N] with B and T dynamic (what every linear layer
// produces): a reinterpret_cast with row-major strides, the dynamic one
// computed from the output shape.
// CHECK-LABEL: func.func @split_dynamic
// CHECK-SAME: (%[[M:.*]]: memref<?x64xf32>, %[[B:.*]]: index, %[[T:.*]]: index)
// CHECK: %[[C64:.*]] = arith.constant 64 : index
// CHECK: %[[S0:.*]] = arith.muli %[[T]], %[[C64]] : index
// CHECK: %[[R:.*]] = memref.reinterpret_cast %[[M]] to offset: [0], sizes: [%[[B]], %[[T]], 64], strides: [%[[S0]], 64, 1] : memref<?x64xf32> to memref<?x?x64xf32>
// CHECK-NOT: memref.expand_shape
// CHECK: return %[[R]]
func.func @split_dynamic(%m: memref<?x64xf32>, %b: index, %t: index) -> memref<?x?x64xf32> {
  %0 = memref.expand_shape %m [[0, 1], [2]] output_shape [%b, %t, 64] : memref<?x64xf32> into memref<?x?x64xf32>
  return %0 : memref<?x?x64xf32>
}

// Static shapes give constant strides.
// CHECK-LABEL: func.func @split_static
// CHECK: memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [2, 3, 8], strides: [24, 8, 1] : memref<6x8xf32> to memref<2x3x8xf32>
// CHECK-NOT: memref.expand_shape
func.func @split_static(%m: memref<6x8xf32>) -> memref<2x3x8xf32> {
  %0 = memref.expand_shape %m [[0, 1], [2]] output_shape [2, 3, 8] : memref<6x8xf32> into memref<2x3x8xf32>
  return %0 : memref<2x3x8xf32>
}

// A buffer that is not contiguous keeps its expand_shape.
// CHECK-LABEL: func.func @strided
// CHECK: memref.expand_shape %{{.*}} {{\[}}[0, 1], [2]] output_shape [2, 3, 8]
// CHECK-NOT: memref.reinterpret_cast
func.func @strided(%m: memref<6x8xf32, strided<[16, 1]>>) -> memref<2x3x8xf32, strided<[48, 16, 1]>> {
  %0 = memref.expand_shape %m [[0, 1], [2]] output_shape [2, 3, 8] : memref<6x8xf32, strided<[16, 1]>> into memref<2x3x8xf32, strided<[48, 16, 1]>>
  return %0 : memref<2x3x8xf32, strided<[48, 16, 1]>>
}

// An alloca_scope without allocas (what convert-scf-to-openmp puts around
// loop bodies) is inlined; one whose allocas sit in its body is inlined
// between a stack save and a restore, which free them at its end.
// CHECK-LABEL: func.func @scopes
// CHECK-SAME: (%[[M:.*]]: memref<4xf32>, %[[I:.*]]: index)
// CHECK-NEXT: %[[F:.*]] = arith.constant
// CHECK-NEXT: memref.store %[[F]], %[[M]][%[[I]]]
// CHECK-NEXT: %[[SP:.*]] = llvm.intr.stacksave : !llvm.ptr
// CHECK-NEXT: %[[A:.*]] = memref.alloca() : memref<4xf32>
// CHECK-NEXT: memref.store %[[F]], %[[A]][%[[I]]]
// CHECK-NEXT: memref.copy %[[A]], %[[M]]
// CHECK-NEXT: llvm.intr.stackrestore %[[SP]] : !llvm.ptr
// CHECK-NEXT: return
func.func @scopes(%m: memref<4xf32>, %i: index) {
  %f = arith.constant 1.0 : f32
  memref.alloca_scope {
    memref.store %f, %m[%i] : memref<4xf32>
  }
  memref.alloca_scope {
    %a = memref.alloca() : memref<4xf32>
    memref.store %f, %a[%i] : memref<4xf32>
    memref.copy %a, %m : memref<4xf32> to memref<4xf32>
  }
  return
}

// An alloca inside a loop of the scope would need a save and restore of
// its own: the scope stays.
// CHECK-LABEL: func.func @nested_alloca
// CHECK: memref.alloca_scope {
// CHECK: scf.for
// CHECK: memref.alloca()
func.func @nested_alloca(%m: memref<4xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  memref.alloca_scope {
    scf.for %i = %c0 to %n step %c1 {
      %a = memref.alloca() : memref<4xf32>
      memref.store %f, %a[%c0] : memref<4xf32>
      memref.copy %a, %m : memref<4xf32> to memref<4xf32>
    }
  }
  return
}
