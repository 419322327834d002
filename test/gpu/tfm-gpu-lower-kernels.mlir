// RUN: tfm-opt %s --split-input-file --verify-diagnostics --tfm-gpu-lower-kernels | FileCheck %s

// f16 attention with head_dim 64: the tensor-core flash-attention kernel.
// CHECK-LABEL: func.func @attention_f16
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %[[H:.*]], %{{.*}} = %[[B:.*]]) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128
// CHECK-SAME: workgroup(%[[SK:.*]] : memref<64x72xf16, #gpu.address_space<workgroup>>, %[[SV:.*]] : memref<64x72xf16, #gpu.address_space<workgroup>>)
// Q fragments are loaded once, as pairs, before the key loop.
// CHECK: vector.load %arg0{{.*}} : memref<?x8x?x64xf16>, vector<2xf16>
// CHECK: scf.for
// CHECK: gpu.barrier
// K and V tiles are staged in shared memory.
// CHECK: memref.store %{{.*}}, %[[SK]]
// CHECK: memref.store %{{.*}}, %[[SV]]
// CHECK: gpu.barrier
// CHECK: vector.load %[[SK]]{{.*}} vector<2xf16>
// CHECK: nvvm.mma.sync A[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// The running max is reduced over the quad of lanes sharing a row.
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32, %c32_i32
// CHECK: math.exp
// P V reuses the S accumulators as A fragments.
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: vector.load %[[SV]]{{.*}} vector<2xf16>
// CHECK: nvvm.mma.sync
// CHECK: scf.yield
// CHECK: memref.store %{{.*}}, %arg4
// CHECK-NOT: tfm.attention_kernel
func.func @attention_f16(%q: memref<?x8x?x64xf16>, %kt: memref<?x2x64x?xf16>,
                         %v: memref<?x2x?x64xf16>, %len: memref<?xi32>,
                         %o: memref<?x8x?x64xf16>) {
  tfm.attention_kernel ins(%q, %kt, %v, %len : memref<?x8x?x64xf16>, memref<?x2x64x?xf16>, memref<?x2x?x64xf16>, memref<?xi32>) outs(%o : memref<?x8x?x64xf16>) {mask = #tfm.mask<causal>, scale = 1.250000e-01 : f64}
  return
}

// -----

// bf16 pairs are passed to mma.sync as 32-bit registers.
// CHECK-LABEL: func.func @attention_bf16
// CHECK: vector.bitcast %{{.*}} : vector<2xbf16> to vector<1xi32>
// CHECK: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>{{.*}} : (i32, i32, f32)
func.func @attention_bf16(%q: memref<1x4x?x128xbf16>, %kt: memref<1x4x128x?xbf16>,
                          %v: memref<1x4x?x128xbf16>, %o: memref<1x4x?x128xbf16>) {
  tfm.attention_kernel ins(%q, %kt, %v : memref<1x4x?x128xbf16>, memref<1x4x128x?xbf16>, memref<1x4x?x128xbf16>) outs(%o : memref<1x4x?x128xbf16>) {mask = #tfm.mask<sliding>, window = 16 : i64, scale = 0.088 : f64}
  return
}

// -----

// f32 (and head dimensions that are not multiples of 16) take the
// one-thread-per-row kernel: no tensor cores.
// CHECK-LABEL: func.func @attention_f32
// CHECK: gpu.launch
// CHECK-SAME: workgroup(%{{.*}} : memref<32x24xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<32x24xf32, #gpu.address_space<workgroup>>)
// CHECK-NOT: nvvm.mma.sync
// CHECK: math.exp
// CHECK-NOT: nvvm.mma.sync
// CHECK: return
func.func @attention_f32(%q: memref<?x2x?x24xf32>, %kt: memref<?x2x24x?xf32>,
                         %v: memref<?x2x?x24xf32>, %o: memref<?x2x?x24xf32>) {
  tfm.attention_kernel ins(%q, %kt, %v : memref<?x2x?x24xf32>, memref<?x2x24x?xf32>, memref<?x2x?x24xf32>) outs(%o : memref<?x2x?x24xf32>) {mask = #tfm.mask<none>, scale = 0.2 : f64}
  return
}

// -----

// The GEMM: 64x64 tiles, K staged 32 at a time, 8 mma.sync per 16-wide k step.
// CHECK-LABEL: func.func @linear_f16
// CHECK: gpu.launch {{.*}} threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128
// CHECK-SAME: workgroup(%[[SA:.*]] : memref<64x40xf16, #gpu.address_space<workgroup>>, %[[SB:.*]] : memref<64x40xf16, #gpu.address_space<workgroup>>)
// CHECK: scf.for
// CHECK-COUNT-16: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK: scf.yield
// Bias, then the store of rows and columns inside the output.
// CHECK: memref.load %arg2
// CHECK: memref.store %{{.*}}, %arg3
func.func @linear_f16(%x: memref<?x96xf16>, %w: memref<2x96x64xf16>,
                      %b: memref<100xf16>, %y: memref<?x100xf16>) {
  tfm.linear_kernel ins(%x, %w, %b : memref<?x96xf16>, memref<2x96x64xf16>, memref<100xf16>) outs(%y : memref<?x100xf16>)
  return
}

// -----

// CHECK-LABEL: func.func @linear_f32
// CHECK: gpu.launch
// CHECK-SAME: workgroup(%{{.*}} : memref<64x33xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<32x64xf32, #gpu.address_space<workgroup>>)
// CHECK-NOT: nvvm.mma.sync
// CHECK: math.fma
// CHECK-NOT: nvvm.mma.sync
// CHECK: return
func.func @linear_f32(%x: memref<?x16xf32>, %w: memref<1x16x64xf32>,
                      %y: memref<?x64xf32>) {
  tfm.linear_kernel ins(%x, %w : memref<?x16xf32>, memref<1x16x64xf32>) outs(%y : memref<?x64xf32>)
  return
}

// -----

func.func @linear_panel(%x: memref<?x16xf32>, %w: memref<2x16x32xf32>,
                        %y: memref<?x64xf32>) {
  // expected-error @below {{the GPU GEMM needs weights packed in 64-column panels, got 32}}
  tfm.linear_kernel ins(%x, %w : memref<?x16xf32>, memref<2x16x32xf32>) outs(%y : memref<?x64xf32>)
  return
}

// -----

// memref.copy runs as a kernel too (linalg.copy, then parallel loops).
// CHECK-LABEL: func.func @copy
// CHECK: linalg.copy ins(%arg0 : memref<?x8xf16>) outs(%arg1 : memref<?x8xf16>)
func.func @copy(%a: memref<?x8xf16>, %b: memref<?x8xf16>) {
  memref.copy %a, %b : memref<?x8xf16> to memref<?x8xf16>
  return
}

// -----

// DSL v2 score modifiers in the tensor-core kernel: each scaled score is
// soft-capped, gets the head's ALiBi slope times the distance and the bias
// by distance (clamped), then masked.
// CHECK-LABEL: func.func @attention_f16_modifiers
// CHECK: gpu.launch
// CHECK: nvvm.mma.sync
// CHECK: math.tanh
// CHECK: arith.sitofp
// CHECK: math.fma
// CHECK: arith.minsi %{{.*}}, %c16
// CHECK: memref.load %arg4
// CHECK: arith.select
// CHECK: math.exp
func.func @attention_f16_modifiers(%q: memref<?x8x?x64xf16>, %kt: memref<?x2x64x?xf16>,
                                   %v: memref<?x2x?x64xf16>, %len: memref<?xi32>,
                                   %bias: memref<8x33xf32>, %o: memref<?x8x?x64xf16>) {
  tfm.attention_kernel ins(%q, %kt, %v, %len : memref<?x8x?x64xf16>, memref<?x2x64x?xf16>, memref<?x2x?x64xf16>, memref<?xi32>) bias(%bias : memref<8x33xf32>) outs(%o : memref<?x8x?x64xf16>) {mask = #tfm.mask<causal>, scale = 0.125 : f64, softcap = 50.0 : f64, alibi_slopes = array<f64: 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625>, bias_distance = 16 : i64}
  return
}

// -----

// The same modifiers in the f32 kernel, key by key.
// CHECK-LABEL: func.func @attention_f32_modifiers
// CHECK: gpu.launch
// CHECK: scf.for
// CHECK: scf.for
// CHECK: math.fma
// CHECK: math.tanh
// CHECK: memref.load %arg3
// CHECK: arith.select
// CHECK: math.exp
func.func @attention_f32_modifiers(%q: memref<?x4x?x8xf32>, %kt: memref<?x4x8x?xf32>,
                                   %v: memref<?x4x?x8xf32>, %bias: memref<4x9xf32>,
                                   %o: memref<?x4x?x8xf32>) {
  tfm.attention_kernel ins(%q, %kt, %v : memref<?x4x?x8xf32>, memref<?x4x8x?xf32>, memref<?x4x?x8xf32>) bias(%bias : memref<4x9xf32>) outs(%o : memref<?x4x?x8xf32>) {mask = #tfm.mask<none>, scale = 1.0 : f64, softcap = 30.0 : f64, bias_distance = 4 : i64}
  return
}

// -----

// Over a KV cache (positions): split-K flash decoding. A block per (key
// split, KV head, sequence x query step) stages each K/V tile once for the
// 4 query heads of the group (scores in shared memory [4 x 32 keys]), runs
// the online softmax a warp per row and a lane per key (max and sum across
// the warp's lanes), accumulates P V and writes its partial max, sum and
// output; a second kernel per (head, sequence x step) merges the splits.
// Splits: about 256 blocks, at least 256 keys each.
// CHECK-LABEL: func.func @attention_cache_f16
// CHECK: %[[STEPS:.*]] = arith.muli
// CHECK: arith.ceildivui %c256
// CHECK-NEXT: arith.ceildivui %{{.*}}, %c256
// CHECK-NEXT: arith.minsi
// CHECK-NEXT: %[[SPLITS:.*]] = arith.maxsi
// CHECK: %[[ML:.*]] = memref.alloc(%[[STEPS]], %[[SPLITS]]) : memref<?x2x?x4x2xf32>
// CHECK: %[[O:.*]] = memref.alloc(%[[STEPS]], %[[SPLITS]]) : memref<?x2x?x4x64xf32>
// CHECK: gpu.launch blocks(%[[SI:.*]], %[[KV:.*]], %[[ST:.*]]) in (%{{.*}} = %[[SPLITS]], %{{.*}} = %c2, %{{.*}} = %[[STEPS]]) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128
// CHECK-SAME: workgroup(%[[SK:.*]] : memref<32x64xf32, #gpu.address_space<workgroup>>, %[[SV:.*]] : memref<32x64xf32, #gpu.address_space<workgroup>>, %[[SP:.*]] : memref<4x32xf32, #gpu.address_space<workgroup>>, %[[SC:.*]] : memref<4xf32, #gpu.address_space<workgroup>>)
// CHECK: memref.load %arg3
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %c32 iter_args
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}}, %[[SK]]
// CHECK: memref.store %{{.*}}, %[[SV]]
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %{{.*}} to %c128 step %c128
// CHECK: memref.load %[[SK]]
// CHECK: memref.store %{{.*}}, %[[SP]]
// CHECK: gpu.barrier
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32
// CHECK: arith.addf
// CHECK: memref.store %{{.*}}, %[[SP]]
// CHECK: memref.store %{{.*}}, %[[SC]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[SC]]
// CHECK: memref.load %[[SV]]
// CHECK: scf.yield
// CHECK: memref.store %{{.*}}, %[[ML]][%[[ST]], %[[KV]], %[[SI]], %{{.*}}, %c0]
// CHECK: memref.store %{{.*}}, %[[ML]][%[[ST]], %[[KV]], %[[SI]], %{{.*}}, %c1]
// CHECK: memref.store %{{.*}}, %[[O]][%[[ST]], %[[KV]], %[[SI]], %{{.*}}, %{{.*}}]
// CHECK: gpu.launch blocks(%[[H:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c8, %{{.*}} = %[[STEPS]], %{{.*}} = %c1)
// CHECK: scf.for %{{.*}} = %c0 to %[[SPLITS]]
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: memref.store %{{.*}}, %arg4[%{{.*}}, %[[H]], %{{.*}}, %{{.*}}]
// CHECK: memref.dealloc %[[ML]]
// CHECK: memref.dealloc %[[O]]
// CHECK-NOT: tfm.attention_kernel
func.func @attention_cache_f16(%q: memref<?x8x?x64xf16>, %kt: memref<?x2x64x?xf16>,
                               %v: memref<?x2x?x64xf16>, %pos: memref<?xi32>,
                               %o: memref<?x8x?x64xf16>) {
  tfm.attention_kernel ins(%q, %kt, %v : memref<?x8x?x64xf16>, memref<?x2x64x?xf16>, memref<?x2x?x64xf16>) positions(%pos : memref<?xi32>) outs(%o : memref<?x8x?x64xf16>) {mask = #tfm.mask<causal>, scale = 0.125 : f64}
  return
}
