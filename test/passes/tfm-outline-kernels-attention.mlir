// RUN: tfm-opt %s --tfm-outline-kernels | FileCheck %s
// RUN: tfm-opt %s --tfm-outline-kernels --tfm-lower-kernels | FileCheck %s --check-prefix=LOWER

// Attention kernels take their head counts dynamic (cast at the call): over
// a KV cache 4 query heads over 2 KV heads and 8 over 4 share one function,
// whose tfm.kv_group (2) keeps the decode kernel's group; 4 over 4 (group 1)
// is another. The sinks, one per query head, are dynamic too.
// CHECK-LABEL: func.func @f(
// CHECK: %[[Q:.*]] = memref.cast %{{.*}} : memref<?x4x?x8xf32> to memref<?x?x?x8xf32>
// CHECK: %[[K:.*]] = memref.cast %{{.*}} : memref<?x2x8x128xf32> to memref<?x?x8x128xf32>
// CHECK: call @[[G2:tfm_kernel_[0-9a-f]{16}]](%[[Q]], %[[K]],
// CHECK: memref.cast %{{.*}} : memref<?x8x?x8xf32> to memref<?x?x?x8xf32>
// CHECK: call @[[G2]](
// CHECK: call @[[G1:tfm_kernel_[0-9a-f]{16}]](
// CHECK: memref.cast %{{.*}} : memref<4xf32> to memref<?xf32>
// CHECK: call @[[SINKS:tfm_kernel_[0-9a-f]{16}]](
// CHECK: func.func private @[[G2]](%{{.*}}: memref<?x?x?x8xf32>, %{{.*}}: memref<?x?x8x128xf32>, %{{.*}}: memref<?x?x128x8xf32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?x?xi32>, %{{.*}}: memref<?x?x?x8xf32>) attributes {tfm.shared_kernel}
// CHECK-NEXT: tfm.attention_kernel {{.*}} {mask = #tfm.mask<causal>, scale = 3.500000e-01 : f64, tfm.kv_group = 2 : i64}
// CHECK: func.func private @[[G1]](
// CHECK-NEXT: tfm.attention_kernel {{.*}} tfm.kv_group = 1 : i64}
// Without a KV cache there is no decode kernel and no group.
// CHECK: func.func private @[[SINKS]](
// CHECK-SAME: memref<?xf32>
// CHECK-NEXT: tfm.attention_kernel
// CHECK-NOT: kv_group
// CHECK-SAME: }

// The shared function still has the decode kernel (it asks the runtime for
// its threads), chosen by T at run time.
// LOWER: func.func private @tfm_get_threads() -> i32
// LOWER: func.func private @tfm_kernel_{{.*}}(%{{.*}}: memref<?x?x?x8xf32>
// LOWER: scf.if
// LOWER: call @tfm_get_threads()
func.func @f(%q: memref<?x4x?x8xf32>, %k: memref<?x2x8x128xf32>, %v: memref<?x2x128x8xf32>, %o: memref<?x4x?x8xf32>,
             %q8: memref<?x8x?x8xf32>, %k4: memref<?x4x8x128xf32>, %v4: memref<?x4x128x8xf32>, %o8: memref<?x8x?x8xf32>,
             %p: memref<?xi32>, %t: memref<?x?xi32>,
             %ks: memref<?x4x8x?xf32>, %vs: memref<?x4x?x8xf32>, %l: memref<?xi32>, %s: memref<4xf32>) {
  tfm.attention_kernel ins(%q, %k, %v : memref<?x4x?x8xf32>, memref<?x2x8x128xf32>, memref<?x2x128x8xf32>) positions(%p : memref<?xi32>) block_table(%t : memref<?x?xi32>) outs(%o : memref<?x4x?x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64}
  tfm.attention_kernel ins(%q8, %k4, %v4 : memref<?x8x?x8xf32>, memref<?x4x8x128xf32>, memref<?x4x128x8xf32>) positions(%p : memref<?xi32>) block_table(%t : memref<?x?xi32>) outs(%o8 : memref<?x8x?x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64}
  tfm.attention_kernel ins(%q, %k4, %v4 : memref<?x4x?x8xf32>, memref<?x4x8x128xf32>, memref<?x4x128x8xf32>) positions(%p : memref<?xi32>) block_table(%t : memref<?x?xi32>) outs(%o : memref<?x4x?x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64}
  tfm.attention_kernel ins(%q, %ks, %vs, %l : memref<?x4x?x8xf32>, memref<?x4x8x?xf32>, memref<?x4x?x8xf32>, memref<?xi32>) sinks(%s : memref<4xf32>) outs(%o : memref<?x4x?x8xf32>) {mask = #tfm.mask<none>, scale = 0.35 : f64}
  return
}
