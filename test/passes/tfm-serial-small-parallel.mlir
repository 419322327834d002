// RUN: tfm-opt %s --pass-pipeline='builtin.module(func.func(tfm-serial-small-parallel))' | FileCheck %s
// RUN: tfm-opt %s --pass-pipeline='builtin.module(func.func(tfm-serial-small-parallel{min-work=4096}))' | FileCheck %s --check-prefix=OPT

// Rows of 64 elements in vectors of 16 (a norm's or an add's rows): 4
// iterations of 3 operations and the yield, plus the alloca_scope's
// operations, per row; the rows are known only at run time. It forks for
// at least 2 rows of at least 32768 operations in all.
// CHECK-LABEL: func.func @rows(
// CHECK-SAME: %[[A:.*]]: memref<?x64xf32>, %[[N:.*]]: index)
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[D:.*]] = arith.subi %[[N]], %[[C0]]
// CHECK: %[[P:.*]] = arith.maxsi %[[D]],
// CHECK: %[[ROWS:.*]] = arith.ceildivui %[[P]], %[[C1]]
// CHECK: %[[ITER:.*]] = arith.muli %{{.*}}, %[[ROWS]]
// CHECK: %[[WORK:.*]] = arith.muli %[[ITER]], %[[PER:.*]] : index
// CHECK: %[[TWO:.*]] = arith.cmpi uge, %[[ITER]], %c2
// CHECK: %[[MIN:.*]] = arith.constant 32768 : index
// CHECK: %[[BIG:.*]] = arith.cmpi uge, %[[WORK]], %[[MIN]]
// CHECK: %[[IF:.*]] = arith.andi %[[TWO]], %[[BIG]]
// CHECK: omp.parallel if(%[[IF]])
// OPT-LABEL: func.func @rows(
// OPT: arith.constant 4096 : index
// OPT: omp.parallel if(
func.func @rows(%a: memref<?x64xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        memref.alloca_scope {
          scf.for %j = %c0 to %c64 step %c16 {
            %v = vector.load %a[%i, %j] : memref<?x64xf32>, vector<16xf32>
            %w = arith.addf %v, %v : vector<16xf32>
            vector.store %w, %a[%i, %j] : memref<?x64xf32>, vector<16xf32>
          }
        }
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// A loop over a run-time length beside operations of fixed cost: the
// operations add up to one constant, added once: the inner loop costs its
// trips times 3 (a load, a store, the yield), the rest 3 more.
// CHECK-LABEL: func.func @mixed(
// CHECK-SAME: %[[A:.*]]: memref<?xf32>, %[[N:.*]]: index, %[[K:.*]]: index)
// CHECK: %[[KD:.*]] = arith.subi %[[K]],
// CHECK: %[[KP:.*]] = arith.maxsi %[[KD]],
// CHECK: %[[KT:.*]] = arith.ceildivui %[[KP]],
// CHECK: %[[C3:.*]] = arith.constant 3 : index
// CHECK-NEXT: %[[INNER:.*]] = arith.muli %[[KT]], %[[C3]]
// CHECK-NEXT: %[[C3B:.*]] = arith.constant 3 : index
// CHECK-NEXT: %[[BODY:.*]] = arith.addi %[[INNER]], %[[C3B]]
// CHECK-NEXT: %[[WORK:.*]] = arith.muli %{{.*}}, %[[BODY]]
// CHECK-NOT: arith.addi
// CHECK: omp.parallel if(
func.func @mixed(%a: memref<?xf32>, %n: index, %k: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        scf.for %j = %c0 to %k step %c1 {
          %x = memref.load %a[%j] : memref<?xf32>
          memref.store %x, %a[%i] : memref<?xf32>
        }
        %y = memref.load %a[%i] : memref<?xf32>
        memref.store %y, %a[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// Static sizes: the condition is a constant (8 iterations of 4 operations:
// never worth a fork).
// CHECK-LABEL: func.func @small(
// CHECK: %[[F:.*]] = arith.constant false
// CHECK-NEXT: omp.parallel if(%[[F]])
func.func @small(%a: memref<8x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i, %k) : index = (%c0, %c0) to (%c2, %c4) step (%c1, %c1) {
        %x = memref.load %a[%i, %k] : memref<8x4xf32>
        %y = arith.mulf %x, %x : f32
        memref.store %y, %a[%i, %k] : memref<8x4xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// Static sizes with enough work: left as it is.
// CHECK-LABEL: func.func @big(
// CHECK-NOT: arith.cmpi
// CHECK: omp.parallel {
func.func @big(%a: memref<64x4096xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %c4096 = arith.constant 4096 : index
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%c64) step (%c1) {
        scf.for %j = %c0 to %c4096 step %c16 {
          %v = vector.load %a[%i, %j] : memref<64x4096xf32>, vector<16xf32>
          %w = arith.addf %v, %v : vector<16xf32>
          vector.store %w, %a[%i, %j] : memref<64x4096xf32>, vector<16xf32>
        }
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// Left parallel: an inner loop whose bound is computed inside the region
// (the keys a query row sees), a call, and a region with an `if` already.
// CHECK-LABEL: func.func @unknown(
// CHECK: omp.parallel {
// CHECK: omp.parallel {
// CHECK: omp.parallel if(%{{.*}}) {
// CHECK-NOT: omp.parallel if
func.func private @work(index)
func.func @unknown(%a: memref<?xf32>, %n: index, %flag: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        %end = arith.addi %i, %c1 : index
        scf.for %j = %c0 to %end step %c1 {
          %x = memref.load %a[%j] : memref<?xf32>
          memref.store %x, %a[%i] : memref<?xf32>
        }
        omp.yield
      }
    }
    omp.terminator
  }
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        func.call @work(%i) : (index) -> ()
        omp.yield
      }
    }
    omp.terminator
  }
  omp.parallel if(%flag) {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        %x = memref.load %a[%i] : memref<?xf32>
        memref.store %x, %a[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}
