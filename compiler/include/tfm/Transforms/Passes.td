//===- Passes.td - tfm transformation passes ---------------*- tablegen -*-===//

#ifndef TFM_TRANSFORMS_PASSES_TD
#define TFM_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def TfmDecompose : Pass<"tfm-decompose", "func::FuncOp"> {
  let summary = "Decompose model-level attention and FFN into primitive ops";
  let description = [{
    `tfm.multi_head_attention` becomes the textbook form: projections
    (`tfm.linear`), `tfm.split_heads`, the Q/K norms (`tfm.norm` per head),
    `tfm.rope`, `tfm.repeat_kv`, `tfm.matmul` (Q K^T), `tfm.scale`, the score
    modifiers `tfm.softcap`, `tfm.alibi` and `tfm.relative_bias`, `tfm.mask`,
    `tfm.softmax`, `tfm.matmul` (P V), `tfm.merge_heads` and the output
    projection. `tfm.ffn` becomes linears, `tfm.activation` and (gated kinds)
    `tfm.mul`. `tfm.moe` becomes the router's linear, `tfm.route`,
    `tfm.moe_experts` and the shared expert's linears; with `dense-experts`
    `tfm.moe_experts` becomes every expert's ffn over every row, weighted by
    `tfm.row_scale` (the reference form; the CUDA pipeline's).
    `tfm.latent_attention` becomes DeepSeek's absorbed form (one KV head of
    latents); with `naive-latent-prefill`, a step of enough query rows over
    its cache (T at least the static break-even, and the cache's slots at
    most 4 T) expands the cached latents into each head's keys and values
    and attends in the naive form instead, chosen at run time (`scf.if`).
  }];
  let options = [
    Option<"denseExperts", "dense-experts", "bool", /*default=*/"false",
           "Rewrite tfm.moe_experts into every expert's ffn over all rows">,
    Option<"naiveLatentPrefill", "naive-latent-prefill", "bool",
           /*default=*/"false",
           "Latent attention over many query rows in the naive form (each "
           "head's keys and values expanded from the cache), chosen at run "
           "time">
  ];
  let dependentDialects = ["::mlir::tfm::TfmDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def TfmFuseAttention : Pass<"tfm-fuse-attention", "func::FuncOp"> {
  let summary = "Fuse softmax-scaled attention into tfm.attention";
  let description = [{
    Recognises softmax(Q K^T * s + M) V, with the scale on the scores
    (tfm.scale, or multiply/divide by a constant) or folded into Q, K
    transposed explicitly or by the matmul flag, the mask as tfm.mask, and
    K/V repeated for grouped-query attention, and replaces it by one
    `tfm.attention` that reads the shared K/V heads directly.
  }];
  let dependentDialects = ["::mlir::tfm::TfmDialect"];
}

def TfmFuseEpilogues : Pass<"tfm-fuse-epilogues", "func::FuncOp"> {
  let summary = "Fold activations, gated products and residual adds into "
                "the linear that produces them";
  let description = [{
    `tfm.activation` of a `tfm.linear`, then `tfm.mul` and `tfm.add` with
    one, become that linear's epilogue (`activation`, `mul`, `residual`)
    when the linear has no other use: act(x W^T + b) * m + r in one op, which
    the matmul kernels apply to their registers before they store them, so
    that the activation, the gated FFN's product and the residual
    connection cost no pass over memory of their own. An epilogue is
    applied in that order, so an op that would have to come before one the
    linear already has (an activation after a product) is not folded.
  }];
  let dependentDialects = ["::mlir::tfm::TfmDialect"];
}

def TfmModelAbi : Pass<"tfm-model-abi", "ModuleOp"> {
  let summary = "Give the model function its destination-passing C ABI";
  let description = [{
    Rewrites each model function so that its inputs, its output and every
    `tfm.param` are memref arguments: inputs first, then the output buffer,
    then the parameters in first-use order. Linear weights are passed packed
    in panels of `panel-width` output columns ([ceil(out / W), in, W],
    zero-padded; see tfm.unpack_weight) so that the matmul kernel streams
    each panel contiguously. The `tfm.params` attribute on the function
    lists (name, panel) pairs for the runtime (panel 0: as stored).

    With `bf16-pairs`, packed weights are bf16 in pairs of K, the operand
    order of AVX512_BF16's vdpbf16ps ([ceil(out / W), ceil(in / 2), 2 W]);
    their `tfm.params` entries say `bf16_pairs`.

    With `int8-quads`, the weights of tfm.linear are int8 with a scale per
    output column (weight-only quantization), in quads of K, the operand
    order of AVX512_VNNI's vpdpbusd ([ceil(out / W), ceil(in / 4) + 2, 4 W]
    bytes: the quads, then a row of the columns' scales and one of their
    sums); their `tfm.params` entries say `int8_quads`.

    `runtime/include/tfm/packed_layout.h` describes these layouts element
    by element: the runtime packs by it and the dialect's verifiers check
    it.

    With `ggml-blocks`, the f32 weights [N, K] of tfm.linear with K a
    multiple of 32 are passed in ggml's block-quantized rows instead
    (GGUF's layout: `runtime/include/tfm/ggml_blocks.h`), as two
    parameters: the rows (i8, sized for the widest type) and their ggml
    type ([1] i32), which the runtime sets when it loads the weights;
    `tfm.ggml_weight` views them as the weight. Their `tfm.params` entries
    say `ggml = "rows"` and `ggml = "type"`. An embedding's table (its
    whole vocabulary) comes so too: a tied table is stored once.
  }];
  let options = [
    Option<"panelWidth", "panel-width", "int64_t", /*default=*/"32",
           "output columns per packed weight panel (2 vector registers)">,
    Option<"bf16Pairs", "bf16-pairs", "bool", /*default=*/"false",
           "pack linear weights as bf16 in pairs of K (vdpbf16ps)">,
    Option<"int8Quads", "int8-quads", "bool", /*default=*/"false",
           "pack tfm.linear weights as int8 in quads of K with per-column "
           "scales (vpdpbusd)">,
    Option<"ggmlBlocks", "ggml-blocks", "bool", /*default=*/"false",
           "pass tfm.linear weights in ggml's block-quantized rows, their "
           "type chosen at load (tfm.ggml_weight)">
  ];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::tfm::TfmDialect"];
}

def TfmOutlineLayers : Pass<"tfm-outline-layers", "ModuleOp"> {
  let summary = "Move each layer into a function shared by equal layers";
  let description = [{
    Groups the ops of a model function by the layer named in their location
    (`loc("layers.3"(...))`, set by MLIRGen), moves each layer into a private
    function (constants and `tensor.empty` cloned, other outside values
    passed as arguments) and calls it. Layers whose functions are
    structurally equal share one, so that the code, and the time LLVM spends
    on it, does not grow with the number of layers. Runs on tensors, before
    bufferization (which then needs `bufferize-function-boundaries`).
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def TfmOutlineKernels : Pass<"tfm-outline-kernels", "ModuleOp"> {
  let summary = "Move each CPU kernel op into a shared function of its own";
  let description = [{
    Moves every `tfm.linear_kernel`, `tfm.norm_kernel`,
    `tfm.attention_kernel` and `tfm.moe_kernel` on buffers into a private
    function named after a hash of its IR (`tfm_kernel_<hash>`: equal
    kernels share one) and calls it, its operands (buffers) as arguments.
    A `tfm.linear_kernel` on f32 panels takes its buffers with every size
    dynamic but the panel width (`memref.cast` at the call), so one
    function serves every M, N and K; a `tfm.attention_kernel` takes its
    head counts dynamic, over a KV cache with the query heads per KV head
    that its decode kernel unrolls in `tfm.kv_group`. The functions are marked
    `tfm.shared_kernel`, so the driver compiles each once per CPU and tfmc
    into its kernel cache. Runs before `tfm-lower-kernels`.

    With `loop-nests` (the default), the model's own loop nests go the same
    way: each outermost `scf.parallel` without results whose body only
    loads, stores and computes (the head split and merge, rotary
    embeddings, KV-cache writes, elementwise ops) becomes a shared function
    too, taking the values it uses from above as arguments (their types as
    they are) and a copy of the constants it uses, so its code is the code
    it was. So does each `memref.copy` into or out of a view (the halves of
    a concatenation, a window of a KV cache), which `tfm-lower-kernels`
    makes a loop nest over its rows (vectors along contiguous rows, the
    last partial one masked; elements otherwise): left among a layer's code, those nests cost LLVM's
    loop strength reduction most of an encoder-decoder's machine code time.
  }];
  let options = [
    Option<"loopNests", "loop-nests", "bool", /*default=*/"true",
           "outline the model's own parallel loop nests and strided copies too">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
}

def TfmLowerKernels : Pass<"tfm-lower-kernels", "ModuleOp"> {
  let summary = "Lower tfm kernel ops on buffers to vector loop nests";
  let description = [{
    `tfm.linear_kernel` becomes a register-blocked, vectorized matmul
    (broadcast-FMA micro-kernel over the transposed weight) parallel over
    column blocks; `tfm.attention_kernel` a tiled online-softmax loop nest
    parallel over batch x heads x query rows. Over a KV cache (`positions`)
    it also gets a decode kernel for few query rows (flash decoding: the
    query heads of a KV group together, keys split across threads, partial
    results merged), which asks the runtime for the thread count: a module
    pass, because it declares `tfm_get_threads` in the module.

    With `skip-shared-kernels`, the functions that `tfm-outline-kernels`
    marked `tfm.shared_kernel` are left as they are: the driver lowers
    only those its kernel cache does not hold, in a module of their own.
  }];
  let options = [
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"16",
           "f32 lanes of a vector register (16 for AVX-512, 8 for AVX2)">,
    Option<"int8Dot", "int8-dot", "bool", /*default=*/"false",
           "the CPU has AVX512_VNNI: the byte dot products of the GEMMs on "
           "ggml's Q8_0 and Q4_0 blocks use vpdpbusd">,
    Option<"skipSharedKernels", "skip-shared-kernels", "bool",
           /*default=*/"false",
           "leave the kernel ops of functions marked tfm.shared_kernel as "
           "they are (the driver lowers those its kernel cache lacks)">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::x86vector::X86VectorDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::tfm::TfmDialect"];
}

def TfmParallelizeOuter : Pass<"tfm-parallelize-outer", "func::FuncOp"> {
  let summary = "Keep only outer loop dimensions parallel";
  let description = [{
    Nested `scf.parallel` loops become `scf.for`; the innermost dimension of
    a multi-dimensional `scf.parallel` becomes an `scf.for` (so that it
    vectorizes) and one-dimensional parallel loops become sequential. What
    remains parallel is turned into OpenMP by `convert-scf-to-openmp`.
    Loops marked `tfm.keep_parallel` (the kernels' own distribution) and
    loops with reductions are left as they are.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::tfm::TfmDialect"];
}

def TfmSerialSmallParallel : Pass<"tfm-serial-small-parallel", "func::FuncOp"> {
  let summary = "Run OpenMP parallel regions of little work on one thread";
  let description = [{
    Gives each `omp.parallel` around an `omp.wsloop` an `if` clause: the
    region forks only when its loop has at least two iterations and its
    estimated work reaches `min-work`, and otherwise runs on the calling
    thread (libomp's serialized region: no fork, no wake-up of sleeping
    threads, no spinning). The work is the loop's iterations times its
    body's cost: one per operation, times the iterations of the `scf.for`
    loops inside, whose bounds may be run-time values from outside the
    region. The estimate is computed at run time where the sizes are
    dynamic (a decode step's one row, a prefill's many). A region whose
    body has a loop with bounds computed inside it, a call, or an operation
    with regions other than `scf.for`, `scf.if` and `memref.alloca_scope`
    is left as it is (always parallel), as is one that has an `if` already.
  }];
  let options = [
    Option<"minWork", "min-work", "int64_t", /*default=*/"32768",
           "Estimated operations below which a region runs on one thread">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::omp::OpenMPDialect"];
}

def TfmExpandShapeToCast : Pass<"tfm-expand-shape-to-cast", "func::FuncOp"> {
  let summary = "Rewrite memref.expand_shape of contiguous buffers as casts";
  let description = [{
    A memref.expand_shape of an identity-layout buffer becomes a
    memref.reinterpret_cast with row-major strides computed from the output
    shape. expand-strided-metadata in LLVM 22 crashes on expand_shape ops
    that split one dynamic dimension into several dynamic ones
    ([B*T, N] -> [B, T, N]), which every linear layer produces. Also inlines
    the memref.alloca_scope ops that convert-scf-to-openmp puts around loop
    bodies (they must stay single-block, which scf-to-cf would break); a
    scope's allocas are freed by llvm.intr.stacksave before its body and
    llvm.intr.stackrestore after it.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def TfmExpandMath : Pass<"tfm-expand-math", "func::FuncOp"> {
  let summary = "Expand exp, tanh and erf into vectorizable polynomials";
  let dependentDialects = ["::mlir::math::MathDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::vector::VectorDialect"];
}

def TfmGpuLowerKernels : Pass<"tfm-gpu-lower-kernels", "func::FuncOp"> {
  let summary = "Lower buffer-level kernel ops to GPU kernels (gpu.launch)";
  let description = [{
    tfm.attention_kernel becomes a flash-attention kernel: one thread block
    per (query block, head, batch), K/V tiles staged in shared memory, the
    online softmax in registers. For f16/bf16 with head dimensions that are
    multiples of 16 the products run on tensor cores (nvvm.mma.sync
    m16n8k16, f32 accumulation; four warps of 16 query rows, P reused from
    the S accumulators as the A operand); otherwise (f32) one thread per
    query row computes in f32. Key tiles above the causal diagonal, outside
    the sliding window or past the key lengths are skipped. Over a KV cache
    (`positions`), split-K flash decoding instead: a block per (key split,
    KV head, sequence x query step) for the rows of the group's query heads,
    partial softmax results merged by a second kernel.

    tfm.linear_kernel becomes a tiled GEMM: 64x64 output tiles, K in steps
    of 32 staged in shared memory, tensor-core mma.sync for f16/bf16 and an
    8x4 register block per thread for f32. The weight must come packed in
    64-column panels (tfm-model-abi panel-width=64).

    memref.copy becomes linalg.copy, so that it runs as a kernel too.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::math::MathDialect"];
}

def TfmGpuMapLoops : Pass<"tfm-gpu-map-loops", "func::FuncOp"> {
  let summary = "Run parallel loops as GPU kernels on device buffers";
  let description = [{
    Every outermost scf.parallel of a host function becomes a gpu.launch of
    256-thread blocks over its linearized iteration space (nested parallel
    loops run sequentially inside a thread); memref.alloc / dealloc become
    gpu.alloc / dealloc, and constant globals are copied to the device where
    they are used. All memrefs of the function are device buffers: a load
    or store left on the host is an error.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
}

def TfmGpuMergeModules : Pass<"tfm-gpu-merge-modules", "ModuleOp"> {
  let summary = "Gather the outlined kernels into one gpu.module";
  let description = [{
    gpu-kernel-outlining puts every kernel in a gpu.module of its own. This
    pass moves them into one module, `@<function>_kernels`, each kernel
    taking its old module's (unique) name, and retargets the
    gpu.launch_func ops, so that the program carries one PTX / cubin image
    and loads one CUDA module. Kernels that are identical (the same one
    outlined from every layer) are kept once.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

#endif // TFM_TRANSFORMS_PASSES_TD
