//===- TfmKernelOps.td - tfm dialect kernel-level ops ------*- tablegen -*-===//
//
// The kernel level of the tfm dialect: destination-style ops, on tensors and
// then on buffers, that convert-tfm-to-linalg forms from the model-level ops
// (TfmOps.td) and that the kernel lowerings consume: tfm-lower-kernels (the
// CPU GEMM, norm and attention kernels, the collectives' runtime calls) and
// tfm-gpu-lower-kernels. Their reference is docs/KernelOps.md. Weights in
// panels (tfm.linear_kernel's `weight_p`) and packed rows (tfm.norm_kernel's
// output) are laid out as runtime/include/tfm/packed_layout.h describes.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_KERNEL_OPS_TD
#define TFM_KERNEL_OPS_TD

include "tfm/Dialect/TfmDialect.td"
include "tfm/Dialect/TfmAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/OpBase.td"
// With the interface defined, ODS gives an op whose result types are known
// (tfm.tp_rank's i32) InferTypeOpInterface, which its assembly format needs.
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"

class Tfm_KernelOp<string mnemonic, list<Trait> traits = []>
    : Tfm_Op<mnemonic, !listconcat(traits, [DestinationStyleOpInterface,
                                            DeclareOpInterfaceMethods<
                                                MemoryEffectsOpInterface>])> {
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputMutable();
    }
  }];
  let hasVerifier = 1;
}

def Tfm_LinearKernelOp
    : Tfm_KernelOp<"linear_kernel", [AttrSizedOperandSegments]> {
  let summary = "output = act(input x weight^T + bias) * mul + residual";
  let description = [{
    `input` [M, K] times the weight, packed in panels `weight_p` [P, K, W]
    (N <= P * W; for f32 `input` also bf16 pairs [P, ceil(K / 2), 2 W] or
    int8 quads [P, ceil(K / 4) + 2, 4 W]: the layouts of
    `runtime/include/tfm/packed_layout.h`), plus `bias` [N], then the
    optional epilogue of tfm.linear (`activation`, `mul` [M, N],
    `residual` [M, N]), written to `output` [M, N]. On tensors it returns
    the result (the output operand is only a destination); One-Shot
    Bufferize turns it into the buffer form, which tfm-lower-kernels lowers
    to a register-blocked vector micro-kernel that applies the epilogue to
    its registers before it stores them. The panel width W is static; on
    f32 panels P, K and N may be dynamic too (the loop nest reads them at
    run time: tfm-outline-kernels shares one function among every shape),
    while bf16 pairs and int8 quads need them static.

    ```mlir
    %y = tfm.linear_kernel ins(%x, %wp, %b : tensor<?x16xf32>, tensor<2x16x32xf32>, tensor<64xf32>) outs(%init : tensor<?x64xf32>) -> tensor<?x64xf32>
    tfm.linear_kernel ins(%xm, %wm : memref<?x16xf32>, memref<2x16x32xf32>) residual(%rm : memref<?x64xf32>) outs(%ym : memref<?x64xf32>) {activation = #tfm.activation<silu>}
    ```
  }];
  let arguments = (ins AnyShaped:$input, AnyShaped:$weight_p,
      Optional<AnyShaped>:$bias, Optional<AnyShaped>:$mul,
      Optional<AnyShaped>:$residual, AnyShaped:$output,
      OptionalAttr<Tfm_ActivationAttr>:$activation);
  let results = (outs Variadic<AnyRankedTensor>:$result);
  let assemblyFormat = [{
    `ins` `(` $input `,` $weight_p (`,` $bias^)? `:` type($input) `,`
    type($weight_p) (`,` type($bias)^)? `)`
    (`mul` `(` $mul^ `:` type($mul) `)`)?
    (`residual` `(` $residual^ `:` type($residual) `)`)?
    `outs` `(` $output `:` type($output) `)` attr-dict (`->` type($result)^)?
  }];
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputMutable();
    }
    /// Whether anything follows the biased product.
    bool hasEpilogue() {
      return getActivation() || getMul() || getResidual();
    }
    /// A unit attribute: the kernel is one task of its caller's parallel
    /// loop (tfm.moe_kernel's experts), so its own loops stay serial.
    static constexpr ::llvm::StringLiteral kSerialAttrName = "tfm.serial";
  }];
}

def Tfm_GgmlLinearKernelOp
    : Tfm_KernelOp<"ggml_linear_kernel", [AttrSizedOperandSegments]> {
  let summary = "tfm.linear_kernel on a weight in ggml's block-quantized rows";
  let description = [{
    `input` [M, K] (f32) times the weight [N, K] that `rows` holds as N
    rows of ggml blocks of the type `ggml_type` ([1] i32) names (the operands of
    `tfm.ggml_weight`, layouts of `runtime/include/tfm/ggml_blocks.h`),
    plus `bias` [N], then the epilogue of tfm.linear (`activation`, `mul`
    [M, N], `residual` [M, N]), written to `output` [M, N] (f32). The
    activations stay f32. tfm-lower-kernels lowers the buffer form to a
    call of one function per module, `tfm_ggml_gemm`, which switches on the
    type once and runs that type's loop nest: register tiles of rows of
    `input` times rows of the weight, each 32-value sub-block of the weight
    dequantized into vector registers (its scale and min applied there)
    and multiplied into vector accumulators, the row sums reduced at the
    end; then the epilogue over the output.

    ```mlir
    tfm.ggml_linear_kernel ins(%x, %rows, %type : memref<?x64xf32>, memref<8192xi8>, memref<1xi32>) outs(%y : memref<?x32xf32>) {activation = #tfm.activation<silu>}
    ```
  }];
  let arguments = (ins AnyShaped:$input, AnyShaped:$rows, AnyShaped:$ggml_type,
      Optional<AnyShaped>:$bias, Optional<AnyShaped>:$mul,
      Optional<AnyShaped>:$residual, AnyShaped:$output,
      OptionalAttr<Tfm_ActivationAttr>:$activation);
  let results = (outs Variadic<AnyRankedTensor>:$result);
  let assemblyFormat = [{
    `ins` `(` $input `,` $rows `,` $ggml_type (`,` $bias^)? `:` type($input)
    `,` type($rows) `,` type($ggml_type) (`,` type($bias)^)? `)`
    (`mul` `(` $mul^ `:` type($mul) `)`)?
    (`residual` `(` $residual^ `:` type($residual) `)`)?
    `outs` `(` $output `:` type($output) `)` attr-dict (`->` type($result)^)?
  }];
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputMutable();
    }
  }];
  let hasVerifier = 1;
}

def Tfm_GgmlEmbedKernelOp : Tfm_KernelOp<"ggml_embed_kernel"> {
  let summary = "tfm.embed of a table in ggml's block-quantized rows";
  let description = [{
    The rows of the table [V, K] that `rows` holds in ggml blocks of the
    type `ggml_type` ([1] i32) names (the operands of `tfm.ggml_weight`)
    for the token ids `tokens` [B, T], dequantized into `output` [B, T, K]
    (f32), times `scale` when given (tfm.embed's sqrt(d_model)). A table
    that the LM head also reads (tied embeddings) is thus stored once, in
    its blocks. tfm-lower-kernels lowers the buffer form to a call of
    `tfm_ggml_row` per token, one function per module that switches on the
    type and dequantizes a row a sub-block at a time, as
    `tfm.ggml_linear_kernel` reads it.

    ```mlir
    tfm.ggml_embed_kernel ins(%ids, %rows, %type : memref<?x?xi32>, memref<8192xi8>, memref<1xi32>) outs(%x : memref<?x?x64xf32>) {scale = 8.0 : f64}
    ```
  }];
  let arguments = (ins AnyShaped:$tokens, AnyShaped:$rows, AnyShaped:$ggml_type,
      AnyShaped:$output, OptionalAttr<F64Attr>:$scale);
  let results = (outs Variadic<AnyRankedTensor>:$result);
  let assemblyFormat = [{
    `ins` `(` $tokens `,` $rows `,` $ggml_type `:` type($tokens) `,`
    type($rows) `,` type($ggml_type) `)`
    `outs` `(` $output `:` type($output) `)` attr-dict (`->` type($result)^)?
  }];
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputMutable();
    }
  }];
  let hasVerifier = 1;
}

def Tfm_MoeKernelOp : Tfm_KernelOp<"moe_kernel", [AttrSizedOperandSegments]> {
  let summary = "a mixture of experts' routed experts, destination style";
  let description = [{
    The kernel form of `tfm.moe_experts` on rows: `input` [M, D] (f32),
    `weights` [M, E] (the routing weights, 0 for an expert a row does not
    run), the experts' weights packed weight by weight as
    `tfm.linear_kernel`'s (`up_p` and, for gated activations, `gate_p`
    [E, P, D, W]; `down_p` [E, P', F, W']; f32 panels, bf16 pairs or int8
    quads, one packing for the three), `biases` none or up [E, F], gate
    [E, F] (gated), down [E, D]; `output` [M, D] is sum over e of
    weights[m, e] * ffn_e(input[m]). tfm-lower-kernels lowers the buffer
    form to a counting sort of the (row, expert) pairs of nonzero weight
    by expert, then for each expert with rows its GEMMs over its rows
    only, gathered (each expert's weights read once, none of an expert no
    row chose), then the weighted sum of each row's experts in expert
    order.

    ```mlir
    tfm.moe_kernel ins(%x, %w : memref<?x16xf32>, memref<?x4xf32>) up(%up : memref<4x1x16x32xf32>) gate(%gate : memref<4x1x16x32xf32>) down(%down : memref<4x1x32x32xf32>) outs(%y : memref<?x16xf32>) {hidden = 32 : i64, activation = #tfm.activation<swiglu>}
    ```
  }];
  let arguments = (ins AnyShaped:$input, AnyShaped:$weights, AnyShaped:$up_p,
      Optional<AnyShaped>:$gate_p, AnyShaped:$down_p,
      Variadic<AnyShaped>:$biases, AnyShaped:$output, I64Attr:$hidden,
      Tfm_ActivationAttr:$activation);
  let results = (outs Variadic<AnyRankedTensor>:$result);
  let assemblyFormat = [{
    `ins` `(` $input `,` $weights `:` type($input) `,` type($weights) `)`
    `up` `(` $up_p `:` type($up_p) `)`
    (`gate` `(` $gate_p^ `:` type($gate_p) `)`)?
    `down` `(` $down_p `:` type($down_p) `)`
    (`biases` `(` $biases^ `:` type($biases) `)`)?
    `outs` `(` $output `:` type($output) `)` attr-dict (`->` type($result)^)?
  }];
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputMutable();
    }
  }];
}

def Tfm_NormKernelOp : Tfm_KernelOp<"norm_kernel"> {
  let summary = "tfm.norm over rows, destination style, optionally packed";
  let description = [{
    The kernel form of `tfm.norm` (`kind`, `eps`, `offset` as there) on the
    rows of `input` [..., K] (f32; M rows in all) with `weight` [K] and,
    for layernorm,
    `bias` [K]. tfm-lower-kernels lowers the buffer form to one pass over
    each row (its statistics while the row stays in L1, then the
    normalized values), rows in parallel. `output` is
    - f32 in the input's shape: the normalized rows;
    - bf16 [M, 2 ceil(K / 2)]: the normalized rows rounded to bf16 pairs,
      the `input` of a tfm.linear_kernel with weights in bf16 pairs;
    - i8 [M, 4 ceil(K / 4) + 4]: the normalized rows quantized to quads of
      unsigned bytes with the row's scale (f32 bits) last, the `input` of a
      tfm.linear_kernel with weights in int8 quads
    (the rows of A of `runtime/include/tfm/packed_layout.h`).
    convert-tfm-to-linalg{norm-kernels} forms it and, where every reader of
    a norm is a linear of packed weights, writes the packed form once for
    all of them, so that the normalized f32 rows are never stored.

    ```mlir
    %y = tfm.norm_kernel ins(%x, %w : tensor<?x?x15xf32>, tensor<15xf32>) outs(%init : tensor<?x16xbf16>) {kind = #tfm.norm<rmsnorm>, eps = 1.0e-06 : f64} -> tensor<?x16xbf16>
    ```
  }];
  let arguments = (ins AnyShaped:$input, AnyShaped:$weight,
      Optional<AnyShaped>:$bias, AnyShaped:$output, Tfm_NormKindAttr:$kind,
      F64Attr:$eps, DefaultValuedAttr<F64Attr, "0.0">:$offset);
  let results = (outs Variadic<AnyRankedTensor>:$result);
  let assemblyFormat = [{
    `ins` `(` $input `,` $weight (`,` $bias^)? `:` type($input) `,`
    type($weight) (`,` type($bias)^)? `)`
    `outs` `(` $output `:` type($output) `)` attr-dict (`->` type($result)^)?
  }];
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputMutable();
    }
    /// How the output holds the normalized rows: the packings of
    /// tfm/packed_layout.h.
    enum class Packing {
      None = TFM_PACKING_F32,
      Bf16Pairs = TFM_PACKING_BF16_PAIRS,
      Int8Quads = TFM_PACKING_INT8_QUADS
    };
    Packing getPacking() {
      return packingOf(
          ::llvm::cast<::mlir::ShapedType>(getOutput().getType())
              .getElementType());
    }
    /// The packing that rows of element type `elt` are in: bf16 pairs, i8
    /// quads, or none (f32).
    static Packing packingOf(::mlir::Type elt);
    /// Columns of a row of `k` values packed as `packing`:
    /// tfm_packed_input_columns (K, K padded to even for bf16 pairs, K
    /// padded to a multiple of 4 and the row's 4-byte scale for int8
    /// quads).
    static int64_t packedColumns(Packing packing, int64_t k);
  }];
}

def Tfm_TpRankOp : Tfm_Op<"tp_rank", [Pure]> {
  let summary = "this process's tensor-parallel rank";
  let description = [{
    The rank, in [0, N), of the process running the code among the N of
    `tfmc --tensor-parallel N` (convert-tfm-to-linalg uses it to find a
    rank's block of the vocabulary). tfm-lower-kernels lowers it to a call
    of the runtime's `tfm_tp_rank`.

    ```mlir
    %r = tfm.tp_rank
    ```
  }];
  let results = (outs I32:$rank);
  let assemblyFormat = "attr-dict";
}

def Tfm_AllReduceKernelOp : Tfm_KernelOp<"all_reduce_kernel"> {
  let summary = "tfm.all_reduce, destination style";
  let description = [{
    The kernel form of `tfm.all_reduce`: the sum of `input` over the ranks,
    plus `bias` [C] (broadcast over the last dimension), written to `output`
    (the shape of `input`). tfm-lower-kernels lowers the buffer form to a
    call of the runtime's `tfm_tp_all_reduce_f32`.

    ```mlir
    tfm.all_reduce_kernel ins(%x, %b : memref<?x64xf32>, memref<64xf32>) outs(%y : memref<?x64xf32>)
    ```
  }];
  let arguments = (ins AnyShaped:$input, Optional<AnyShaped>:$bias,
      AnyShaped:$output);
  let results = (outs Variadic<AnyRankedTensor>:$result);
  let assemblyFormat = [{
    `ins` `(` $input (`,` $bias^)? `:` type($input) (`,` type($bias)^)? `)`
    `outs` `(` $output `:` type($output) `)` attr-dict (`->` type($result)^)?
  }];
}

def Tfm_AllGatherKernelOp : Tfm_KernelOp<"all_gather_kernel"> {
  let summary = "tfm.all_gather, destination style";
  let description = [{
    The kernel form of `tfm.all_gather`: `input` [R, C] of every rank
    written to `output` [R, N * C], rank k's block at columns
    [k * C, (k + 1) * C). tfm-lower-kernels lowers the buffer form to a call
    of the runtime's `tfm_tp_all_gather_f32`.

    ```mlir
    tfm.all_gather_kernel ins(%x : memref<?x50xf32>) outs(%y : memref<?x100xf32>)
    ```
  }];
  let arguments = (ins AnyShaped:$input, AnyShaped:$output);
  let results = (outs Variadic<AnyRankedTensor>:$result);
  let assemblyFormat = [{
    `ins` `(` $input `:` type($input) `)` `outs` `(` $output `:`
    type($output) `)` attr-dict (`->` type($result)^)?
  }];
}

def Tfm_AttentionKernelOp
    : Tfm_KernelOp<"attention_kernel", [AttrSizedOperandSegments]> {
  let summary = "fused attention, destination style";
  let description = [{
    The kernel form of `tfm.attention`: reads `query` [B, H, T, D], the
    transposed key `key` [B, KV, D, S], `value` [B, KV, S, Dv], optional
    `lengths` [B] and optional `bias` [H, 2 * bias_distance + 1] (f32), writes
    `output` [B, H, T, Dv]. `bias` is a position bias by distance: head h
    adds bias[h, clamp(j - i, -bias_distance, bias_distance) + bias_distance]
    to the score of query i and key j (the T5 relative bias, tabulated per
    distance by convert-tfm-to-linalg). `softcap` and `alibi_slopes` as in
    `tfm.attention`; optional `positions` [B] place query row i of sequence
    b at key position positions[b] + i (otherwise i + S - T); `ring` reads
    the keys as a ring buffer, as `tfm.attention` does; optional `sinks`
    [H] (f32) join each row's softmax denominator as exp(sinks[h]). With
    `value_transposed`, `value` is [B, KV, Dv, S] (the CPU decode kernel
    reads it in place; the others read a transposed copy). Over KV caches
    (`positions`), an f32 attention may read `key` and `value` of f16 or
    bf16 (`tfmc --kv-cache`): the CPU kernels load them as they are stored
    and extend them to f32 in registers. With `block_table` ([B, M] i32, with
    `positions`), `key` and `value` are pools of blocks of BS positions
    ([N, KV, D, BS], [N, KV, BS, Dv] or transposed [N, KV, Dv, BS]) and key
    position j of sequence b is slot j mod BS of block
    block_table[b, j / BS] (a paged KV cache; the CPU kernels need BS to be
    a multiple of their block of keys).

    ```mlir
    %o = tfm.attention_kernel ins(%q, %kt, %v : tensor<?x4x?x8xf32>, tensor<?x2x8x?xf32>, tensor<?x2x?x8xf32>) outs(%init : tensor<?x4x?x8xf32>) {mask = #tfm.mask<causal>, scale = 0.35 : f64} -> tensor<?x4x?x8xf32>
    ```
  }];
  let arguments = (ins AnyShaped:$query, AnyShaped:$key, AnyShaped:$value,
      Optional<AnyShaped>:$lengths, Optional<AnyShaped>:$positions,
      Optional<AnyShaped>:$bias, Optional<AnyShaped>:$sinks,
      Optional<AnyShaped>:$block_table, AnyShaped:$output,
      Tfm_MaskKindAttr:$mask, OptionalAttr<I64Attr>:$window, F64Attr:$scale,
      OptionalAttr<F64Attr>:$softcap,
      OptionalAttr<DenseF64ArrayAttr>:$alibi_slopes,
      OptionalAttr<I64Attr>:$bias_distance, UnitAttr:$ring,
      UnitAttr:$value_transposed);
  let results = (outs Variadic<AnyRankedTensor>:$result);
  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value (`,` $lengths^)? `:` type($query)
    `,` type($key) `,` type($value) (`,` type($lengths)^)? `)`
    (`positions` `(` $positions^ `:` type($positions) `)`)?
    (`bias` `(` $bias^ `:` type($bias) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    (`block_table` `(` $block_table^ `:` type($block_table) `)`)? `outs` `(`
    $output `:` type($output) `)` attr-dict (`->` type($result)^)?
  }];
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputMutable();
    }
    /// Over a KV cache (positions), the query heads per KV head, which the
    /// CPU decode kernel unrolls: `tfm.kv_group` where the head counts are
    /// dynamic (a shared kernel, tfm-outline-kernels), else heads /
    /// kv_heads when both are static; none without a KV cache.
    std::optional<int64_t> getDecodeGroup();
  }];
}

#endif // TFM_KERNEL_OPS_TD
