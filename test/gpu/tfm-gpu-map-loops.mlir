// RUN: tfm-opt %s --split-input-file --verify-diagnostics --tfm-gpu-map-loops --canonicalize | FileCheck %s

// The iteration space [0, n) x [0, 64) runs as one thread per point in
// blocks of 256; the inner reduction loop stays a loop; buffers are device
// allocations.
// CHECK-LABEL: func.func @rows
// CHECK: %[[A:.*]] = gpu.alloc {{.*}}: memref<?xf32>
// CHECK: %[[N:.*]] = arith.muli %{{.*}}, %c64
// CHECK: %[[G:.*]] = arith.ceildivui %[[N]], %c256
// CHECK: %[[G1:.*]] = arith.maxsi %[[G]], %c1
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[G1]], {{.*}} threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c256
// CHECK: %[[ID:.*]] = arith.addi %{{.*}}, %[[TX]]
// CHECK: arith.cmpi slt, %[[ID]], %[[N]]
// CHECK: arith.remui %[[ID]], %c64
// CHECK: scf.for
// CHECK: memref.load %arg0
// CHECK: gpu.terminator
// CHECK: gpu.dealloc {{.*}}%[[A]] : memref<?xf32>
// CHECK-NOT: scf.parallel
func.func @rows(%x: memref<?x64x32xf32>, %y: memref<?x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %n = memref.dim %x, %c0 : memref<?x64x32xf32>
  %tmp = memref.alloc(%n) : memref<?xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c64) step (%c1, %c1) {
    %s = scf.for %k = %c0 to %c32 step %c1 iter_args(%acc = %j) -> index {
      %v = memref.load %x[%i, %j, %k] : memref<?x64x32xf32>
      memref.store %v, %y[%i, %j] : memref<?x64xf32>
      scf.yield %acc : index
    }
    scf.reduce
  }
  memref.dealloc %tmp : memref<?xf32>
  return
}

// -----

// A nested parallel loop runs sequentially inside the thread.
// CHECK-LABEL: func.func @nested
// CHECK: gpu.launch
// CHECK: scf.for
// CHECK-NOT: scf.parallel
func.func @nested(%x: memref<8x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %f = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    scf.parallel (%j) = (%c0) to (%c8) step (%c1) {
      memref.store %f, %x[%i, %j] : memref<8x8xf32>
      scf.reduce
    }
    scf.reduce
  }
  return
}

// -----

// Buffers are on the device: the host may not read them.
func.func @host_read(%x: memref<4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  // expected-error @below {{'memref.load' op accesses device memory on the host}}
  %v = memref.load %x[%c0] : memref<4xf32>
  return %v : f32
}

// -----

// A constant table is copied to the device where it is used.
// CHECK-LABEL: func.func @table
// CHECK: %[[G:.*]] = memref.get_global @cst : memref<4xf32>
// CHECK: %[[D:.*]] = gpu.alloc {{.*}}: memref<4xf32>
// CHECK: gpu.memcpy %[[D]], %[[G]] : memref<4xf32>, memref<4xf32>
// CHECK: gpu.launch
// CHECK: memref.load %[[D]]
memref.global "private" constant @cst : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
func.func @table(%y: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %t = memref.get_global @cst : memref<4xf32>
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %v = memref.load %t[%i] : memref<4xf32>
    memref.store %v, %y[%i] : memref<4xf32>
    scf.reduce
  }
  return
}

