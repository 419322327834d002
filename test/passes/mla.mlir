// Multi-head latent attention through the passes: tfm-decompose writes
// DeepSeek's absorbed form (the latent [c_kv, k_rope] as one KV head of
// kv_rank + rope_dim values written into the transposed latent cache, the
// query [q_nope W_uk[h], q_rope], the values the cache's c_kv rows, the
// output o W_uv[h]^T), which the CPU pipeline then compiles.
// RUN: tfm-opt %s --tfm-decompose | FileCheck %s
// RUN: tfm-opt %s --tfm-decompose --convert-tfm-to-linalg="transposed-values" | FileCheck %s --check-prefix=INPLACE
// RUN: tfm-opt %s --tfm-decompose --convert-tfm-to-linalg | FileCheck %s --check-prefix=COPY
// RUN: tfm-opt %s --tfm-decompose=naive-latent-prefill | FileCheck %s --check-prefix=NAIVE
// RUN: tfm-opt %s --tfm-cpu-pipeline="vector-width=8" | FileCheck %s --check-prefix=LLVM
// The values are rows of the transposed latent cache: the CPU kernels take
// them in place (transposed-values: the decode kernel reads V^T rows, the
// prefill kernel a transposed copy), others a transposed copy.
func.func @step(%x: tensor<?x?x16xf32>, %wqa: tensor<6x16xf32>, %qn: tensor<6xf32>, %wq: tensor<12x6xf32>, %wkva: tensor<10x16xf32>, %n: tensor<8xf32>, %wkvb: tensor<16x8xf32>, %wo: tensor<16x8xf32>, %c: tensor<?x1x10x?xf32>, %p: tensor<?xi32>) -> (tensor<?x?x16xf32>, tensor<?x1x10x?xf32> {tfm.cache_of = 8 : i64}) {
  %y, %c2 = tfm.latent_attention %x weights(%wq, %wkva, %n, %wkvb, %wo) query_latent(%wqa, %qn) cache(%c) positions(%p)
         {heads = 2 : i64, head_dim = 6 : i64, rope_dim = 2 : i64, value_dim = 4 : i64, kv_rank = 8 : i64,
          mask = #tfm.mask<causal>, scale = 0.4 : f64, rope_inv_freq = array<f64: 1.0>, rope_style = #tfm.rope_style<interleaved>,
          norm_kind = #tfm.norm<rmsnorm>, norm_eps = 1.0e-06 : f64}
         : (tensor<?x?x16xf32>, tensor<12x6xf32>, tensor<10x16xf32>, tensor<8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<6x16xf32>, tensor<6xf32>, tensor<?x1x10x?xf32>, tensor<?xi32>) -> (tensor<?x?x16xf32>, tensor<?x1x10x?xf32>)
  return %y, %c2 : tensor<?x?x16xf32>, tensor<?x1x10x?xf32>
}

// CHECK-LABEL: func @step
// CHECK: %[[QA:.*]] = tfm.linear %arg0, %arg1
// CHECK: %[[QN:.*]] = tfm.norm %[[QA]], %arg2
// CHECK: %[[Q:.*]] = tfm.linear %[[QN]], %arg3
// CHECK: %[[QH:.*]] = tfm.split_heads %[[Q]] {heads = 2 : i64} : (tensor<?x?x12xf32>) -> tensor<?x2x?x6xf32>
// CHECK: %[[NOPE:.*]] = tensor.extract_slice %[[QH]][0, 0, 0, 0] [%{{.*}}, 2, %{{.*}}, 4]
// CHECK: %[[QROT:.*]] = tensor.extract_slice %[[QH]][0, 0, 0, 4] [%{{.*}}, 2, %{{.*}}, 2]
// CHECK: %[[C:.*]] = tfm.linear %arg0, %arg4 : (tensor<?x?x16xf32>, tensor<10x16xf32>) -> tensor<?x?x10xf32>
// CHECK: %[[CKV:.*]] = tensor.extract_slice %[[C]][0, 0, 0] [%{{.*}}, %{{.*}}, 8]
// CHECK: tfm.norm %[[CKV]], %arg5
// CHECK: tensor.extract_slice %[[C]][0, 0, 8] [%{{.*}}, %{{.*}}, 2]
// CHECK: %[[QR:.*]] = tfm.rope %[[QROT]] positions(%arg9
// CHECK: %[[KR:.*]] = tfm.rope %{{.*}} positions(%arg9 {{.*}} : tensor<?x1x?x2xf32>
// CHECK: %[[LAT0:.*]] = tensor.insert_slice %{{.*}} into %{{.*}}[0, 0, 0, 0] [%{{.*}}, 1, %{{.*}}, 8]
// CHECK: %[[LAT:.*]] = tensor.insert_slice %[[KR]] into %[[LAT0]][0, 0, 0, 8] [%{{.*}}, 1, %{{.*}}, 2]
// CHECK: %[[W:.*]] = tensor.expand_shape %arg6 {{\[\[}}0, 1], [2]] output_shape [2, 8, 8]
// CHECK: %[[WUK:.*]] = tensor.extract_slice %[[W]][0, 0, 0] [2, 4, 8]
// CHECK: %[[WUV:.*]] = tensor.extract_slice %[[W]][0, 4, 0] [2, 4, 8]
// CHECK: %[[KC:.*]] = tfm.cache_write %[[LAT]] into %arg8 at %arg9 {transposed} : tensor<?x1x?x10xf32> into tensor<?x1x10x?xf32>
// CHECK: %[[VT:.*]] = tensor.extract_slice %[[KC]][0, 0, 0, 0] [%{{.*}}, 1, 8, %{{.*}}]
// CHECK: tfm.transpose %[[NOPE]]
// CHECK: tfm.matmul %{{.*}}, %[[WUK]] : (tensor<2x?x4xf32>, tensor<2x4x8xf32>) -> tensor<2x?x8xf32>
// CHECK: %[[QFULL:.*]] = tensor.insert_slice %[[QR]] into %{{.*}}[0, 0, 0, 8] [%{{.*}}, 2, %{{.*}}, 2]
// CHECK: %[[O:.*]] = tfm.attention %[[QFULL]], %[[KC]], %[[VT]] positions(%arg9) {key_transposed, mask = #tfm.mask<causal>, scale = 4.000000e-01 : f64, value_transposed} : (tensor<?x2x?x10xf32>, tensor<?x1x10x?xf32>, tensor<?x1x8x?xf32>, tensor<?xi32>) -> tensor<?x2x?x8xf32>
// CHECK: tfm.transpose %[[O]]
// CHECK: tfm.matmul %{{.*}}, %[[WUV]] {transpose_rhs} : (tensor<2x?x8xf32>, tensor<2x4x8xf32>) -> tensor<2x?x4xf32>
// CHECK: %[[M:.*]] = tfm.merge_heads %{{.*}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x8xf32>
// CHECK: %[[Y:.*]] = tfm.linear %[[M]], %arg7
// CHECK: return %[[Y]], %[[KC]]

// INPLACE: %[[VT:.*]] = tensor.extract_slice %{{.*}}[0, 0, 0, 0] [%{{.*}}, 1, 8, %{{.*}}] [1, 1, 1, 1] : tensor<?x1x10x?xf32> to tensor<?x1x8x?xf32>
// INPLACE: tfm.attention_kernel ins(%{{.*}}, %{{.*}}, %[[VT]] : tensor<?x2x?x10xf32>, tensor<?x1x10x?xf32>, tensor<?x1x8x?xf32>) {{.*}}value_transposed

// COPY: %[[VT:.*]] = tensor.extract_slice %{{.*}}[0, 0, 0, 0] [%{{.*}}, 1, 8, %{{.*}}] [1, 1, 1, 1] : tensor<?x1x10x?xf32> to tensor<?x1x8x?xf32>
// COPY: %[[V:.*]] = linalg.transpose ins(%[[VT]] : tensor<?x1x8x?xf32>) {{.*}} permutation = [0, 1, 3, 2]
// COPY: tfm.attention_kernel ins(%{{.*}}, %{{.*}}, %[[V]] : tensor<?x2x?x10xf32>, tensor<?x1x10x?xf32>, tensor<?x1x?x8xf32>)
// COPY-NOT: value_transposed

// With naive-latent-prefill, T >= 8 query rows (= (4 + 4) x 8 / ((2 x 8 +
// 2) - (6 + 4)), the break-even) over at most 4 T slots take the naive
// form: the cached latents of the batch's sequences expanded by kv_b into
// each head's keys [k_nope, k_rope] and values.
// NAIVE: %[[T:.*]] = tensor.dim %arg0, %c1
// NAIVE: %[[ENOUGH:.*]] = arith.cmpi sge, %[[T]], %c8
// NAIVE: %[[KC:.*]] = tfm.cache_write
// NAIVE: %[[S:.*]] = tensor.dim %[[KC]], %c3
// NAIVE: %[[T4:.*]] = arith.muli %[[T]], %c4
// NAIVE: %[[DENSE:.*]] = arith.cmpi sle, %[[S]], %[[T4]]
// NAIVE: %[[COND:.*]] = arith.andi %[[ENOUGH]], %[[DENSE]]
// NAIVE: scf.if %[[COND]] -> (tensor<?x2x?x4xf32>)
// NAIVE: tfm.transpose %{{.*}} {permutation = array<i64: 0, 1, 3, 2>} : (tensor<?x1x8x?xf32>) -> tensor<?x1x?x8xf32>
// NAIVE: %[[KV:.*]] = tfm.linear %{{.*}}, %arg6 : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
// NAIVE: tfm.split_heads %[[KV]] {heads = 2 : i64} : (tensor<?x?x16xf32>) -> tensor<?x2x?x8xf32>
// NAIVE: tfm.repeat_kv %{{.*}} {repeats = 2 : i64} : (tensor<?x1x?x2xf32>) -> tensor<?x2x?x2xf32>
// NAIVE: %[[O:.*]] = tfm.attention %{{.*}}, %{{.*}}, %{{.*}} positions(%arg9) {mask = #tfm.mask<causal>, scale = 4.000000e-01 : f64} : (tensor<?x2x?x6xf32>, tensor<?x2x?x6xf32>, tensor<?x2x?x4xf32>, tensor<?xi32>) -> tensor<?x2x?x4xf32>
// NAIVE: scf.yield %[[O]]
// NAIVE: } else {
// NAIVE: tfm.attention {{.*}}value_transposed
// NAIVE: scf.yield

// LLVM: llvm.func @step
