//===- LowerGgmlLinearKernel.cpp - GEMM on ggml's block-quantized rows ----===//
//
// tfm.ggml_linear_kernel: out[M, N] = A[M, K] W^T + bias, then the linear's
// epilogue, with W [N, K] in ggml's block-quantized rows of a type chosen
// at load (runtime/include/tfm/ggml_blocks.h: F32, F16, BF16, Q8_0, Q4_0,
// Q4_K, Q5_K, Q6_K). The weight is never expanded in memory: a register
// tile of MR rows of A and NR rows of W walks K by sub-blocks of 32 values.
// F32, F16 and BF16 sub-blocks are widened in vector registers and
// multiplied into f32 accumulators with A unquantized (the product is the
// weight's values times A to f32 rounding). The quantized types multiply
// in integers as llama.cpp does: A is first quantized to bytes per block
// of 32, and each sub-block's byte products (vpmaddubsw / vpmaddwd) are
// scaled by A's and the weight's scales (for K-quants the 6-bit scale of
// the sub-block, for Q6_K one per 16 values; Q4_K's and Q5_K's mins times
// the sum of A's bytes).
//
// From 32 rows of A (a prompt) every type goes another way: each task
// unpacks its rows of W, a chunk of K at a time, into a panel shared by
// many rows of A. With AVX512_VNNI the quantized types' panels are bytes
// (emitBytePanels: A quantized as for a decode, vpdpbusd on 512 bits, 2.0-
// 2.4x the f32 panels' speed on llama1b's prompts); otherwise, and for
// F32, F16 and BF16, the panel is f32 and A stays unquantized
// (emitPanels), which costs little more than f32 weights. The threshold
// comes from the runtime (tfm_ggml_panel_rows: 32, or no limit during a
// decode step, whose rows must each be computed as they are alone whatever
// the batch).
//
// Every kernel of a module calls one function, tfm_ggml_gemm(A, rows,
// type, out), which switches on the type once and runs that type's loop
// nest: tasks of 16 rows of W x 64 rows of A over the threads, tiles of
// 4 x 2 (the prefill: 8 accumulators, each weight vector dequantized once
// for four rows of A) and 1 x 1 (the rows past the last whole tile, and
// decode: the weight's rows one after the other, one stream through
// memory, which measured 1.4x faster than two rows side by side on
// llama1b's Q8_0 decode; one accumulator per vector of a sub-block for
// independent FMA chains). Each row's bytes 4 KB ahead are prefetched
// (12% on the same decode with 1 KB; 4 KB, which reaches past the 4 KB page
// the hardware prefetcher stops at, another 9-11%, and 8 KB no more). The
// epilogue (bias, activation, mul, residual) follows at the call site, over the
// output.
//
//===----------------------------------------------------------------------===//

#include "CpuKernelBuilders.h"
#include "RuntimeFunctions.h"

#include "tfm/ggml_blocks.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::cpu;

namespace {

constexpr StringLiteral kGgmlGemmFn = "tfm_ggml_gemm";
constexpr StringLiteral kGgmlRowFn = "tfm_ggml_row";

/// AVX2's byte dot products: vpsignb, vpmaddubsw (unsigned x signed bytes,
/// pairs summed to i16), vpmaddwd (i16 pairs summed to i32).
constexpr StringLiteral kPsignB = "llvm.x86.avx2.psign.b";
constexpr StringLiteral kPmaddUbSw = "llvm.x86.avx2.pmadd.ub.sw";
constexpr StringLiteral kPmaddWd = "llvm.x86.avx2.pmadd.wd";
/// AVX512_VNNI's (with AVX512VL) byte dot product on 256 bits: acc + the
/// sums of 4 unsigned x signed byte products per i32 lane, which replaces
/// vpmaddubsw + vpmaddwd by ones (the same integers: the pairs' sums never
/// saturate 16 bits here).
constexpr StringLiteral kVpdpbusd256 = "llvm.x86.avx512.vpdpbusd.256";
/// The same on 512 bits (a prompt's byte panels).
constexpr StringLiteral kVpdpbusd512 = "llvm.x86.avx512.vpdpbusd.512";

/// Rows of W (N) and of A (M) a task covers.
constexpr int64_t kTaskRowsW = 16;
constexpr int64_t kTaskRowsA = 64;
/// The depth of the f32 panels of the weight (values of K: whole K-quant
/// super-blocks) and the rows of A a panel task covers (from
/// tfm_ggml_panel_rows() rows of A on).
constexpr int64_t kPanelDepth = 256;
constexpr int64_t kPanelRowsA = 256;
/// The rows of A a byte panel's task covers: a byte panel costs more to
/// fill per multiply than an f32 one, and A's bytes are a quarter of its
/// values (512 rows x a chunk: 128 KB).
constexpr int64_t kBytePanelRowsA = 512;

/// A [M, K] and out [M, N] as the shared function takes them: rows of
/// contiguous values at any row stride and offset.
MemRefType matrixType(MLIRContext *ctx) {
  return MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                         Float32Type::get(ctx),
                         StridedLayoutAttr::get(ctx, ShapedType::kDynamic,
                                                {ShapedType::kDynamic, 1}));
}

MemRefType rowsType(MLIRContext *ctx) {
  return MemRefType::get({ShapedType::kDynamic}, IntegerType::get(ctx, 8));
}

/// A row of K values [K] as tfm_ggml_row takes it.
MemRefType vectorType(MLIRContext *ctx) {
  return MemRefType::get(
      {ShapedType::kDynamic}, Float32Type::get(ctx),
      StridedLayoutAttr::get(ctx, ShapedType::kDynamic, {1}));
}

/// Adds `name`(args) to `module` with a body that switches on the ggml
/// type (argument `typeArg`) and runs `body` for each type the kernels
/// compute.
void defineTypeSwitch(
    ModuleOp module, StringRef name, ArrayRef<Type> args, unsigned typeArg,
    function_ref<void(OpBuilder &, Location, int32_t, Block *)> body) {
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  Location loc = module.getLoc();
  auto fn = func::FuncOp::create(b, loc, name, b.getFunctionType(args, {}));
  fn.setPrivate();
  // Every shape and type at run time: the driver compiles it once per CPU.
  TfmDialect::SharedKernelAttrHelper(ctx).setAttr(fn, UnitAttr::get(ctx));
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  Value which = arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                           entry->getArgument(typeArg));
  SmallVector<int64_t> cases(std::begin(tfm_ggml_blocks_types),
                             std::end(tfm_ggml_blocks_types));
  auto sw = scf::IndexSwitchOp::create(b, loc, TypeRange{}, which, cases,
                                       cases.size());
  for (auto [i, t] : llvm::enumerate(cases)) {
    Block &caseBody = sw.getCaseRegions()[i].emplaceBlock();
    OpBuilder cb = OpBuilder::atBlockBegin(&caseBody);
    body(cb, loc, int32_t(t), entry);
    scf::YieldOp::create(cb, loc);
  }
  // The runtime passes only the types above.
  Block &other = sw.getDefaultRegion().emplaceBlock();
  OpBuilder db = OpBuilder::atBlockBegin(&other);
  scf::YieldOp::create(db, loc);
  b.setInsertionPointToEnd(entry);
  func::ReturnOp::create(b, loc);
}

/// The loop nest of one ggml type, in the shared function.
struct TypeLowering {
  OpBuilder &b;
  Location loc;
  int32_t type;
  int64_t vl;   // f32 lanes of a vector
  bool int8Dot; // AVX512_VNNI's vpdpbusd for Q8_0 and Q4_0
  Value a, w, out, k;
  VectorType vt, bytesT, i32T;

  TypeLowering(OpBuilder &b, Location loc, int32_t type, int64_t vl,
               bool int8Dot, Value a, Value w, Value out, Value k)
      : b(b), loc(loc), type(type), vl(vl), int8Dot(int8Dot), a(a), w(w),
        out(out), k(k) {
    vt = VectorType::get({vl}, b.getF32Type());
    bytesT = VectorType::get({vl}, b.getI8Type());
    i32T = VectorType::get({vl}, b.getI32Type());
  }

  /// Vectors of f32 in a sub-block of 32 values.
  int64_t vectors() const { return 32 / vl; }
  /// Rows of W a prompt's panel task covers: two vectors' worth with
  /// AVX-512 (12 x 2 accumulators: per value of K, 12 broadcasts of A and 2
  /// loads for 24 FMAs), 16 with AVX2 (6 x 2).
  int64_t panelW() const { return vl >= 16 ? 32 : 16; }

  Value idx(OpBuilder &nb, int64_t v) const { return cIdx(nb, loc, v); }
  Value add(OpBuilder &nb, Value x, Value y) const {
    return arith::AddIOp::create(nb, loc, x, y);
  }
  Value addc(OpBuilder &nb, Value x, int64_t c) const {
    return c ? add(nb, x, idx(nb, c)) : x;
  }
  Value mul(OpBuilder &nb, Value x, int64_t c) const {
    return arith::MulIOp::create(nb, loc, x, idx(nb, c));
  }
  Value splatF(OpBuilder &nb, Value s) const {
    return vector::BroadcastOp::create(nb, loc, vt, s);
  }

  /// The byte at `off` as i32, zero-extended.
  Value byteAt(OpBuilder &nb, Value off) const {
    Value v = memref::LoadOp::create(nb, loc, w, off);
    return arith::ExtUIOp::create(nb, loc, nb.getI32Type(), v);
  }
  /// The f16 at `off` as f32.
  Value halfAt(OpBuilder &nb, Value off) const {
    Value two = vector::LoadOp::create(
        nb, loc, VectorType::get({2}, nb.getI8Type()), w, off);
    Value h = vector::BitCastOp::create(
        nb, loc, VectorType::get({1}, nb.getF16Type()), two);
    Value s = vector::ExtractOp::create(nb, loc, h, ArrayRef<int64_t>{0});
    return arith::ExtFOp::create(nb, loc, nb.getF32Type(), s);
  }
  /// `vl` bytes at `off`, zero-extended to i32 lanes.
  Value bytesAt(OpBuilder &nb, Value off, bool isSigned = false) const {
    Value v = vector::LoadOp::create(nb, loc, bytesT, w, off);
    if (isSigned)
      return arith::ExtSIOp::create(nb, loc, i32T, v);
    return arith::ExtUIOp::create(nb, loc, i32T, v);
  }
  Value splatI(OpBuilder &nb, Value s) const {
    return vector::BroadcastOp::create(nb, loc, i32T, s);
  }
  Value splatI(OpBuilder &nb, int64_t c) const {
    return arith::ConstantOp::create(
        nb, loc, i32T, DenseElementsAttr::get(i32T, nb.getI32IntegerAttr(c)));
  }
  Value toI32(OpBuilder &nb, Value index) const {
    return arith::IndexCastOp::create(nb, loc, nb.getI32Type(), index);
  }
  Value toF32(OpBuilder &nb, Value i32Vec) const {
    return arith::SIToFPOp::create(nb, loc, vt, i32Vec);
  }
  /// (q >> shift) & mask on i32 lanes, shift an i32 scalar or vector.
  Value bits(OpBuilder &nb, Value q, Value shift, int64_t mask) const {
    if (!isa<VectorType>(shift.getType()))
      shift = splatI(nb, shift);
    Value s = arith::ShRUIOp::create(nb, loc, q, shift);
    return arith::AndIOp::create(nb, loc, s, splatI(nb, mask));
  }

  /// What a row's sub-block needs for each of its vectors: where its
  /// values lie, and its scale and offset (w = q scale + offset).
  struct SubBlock {
    Value base;          // the block's (or, for F32/F16/BF16, the
                         // sub-block's) first byte
    Value quants, highs; // offsets of the sub-block's nibbles / high bits
    Value shift, highShift;
    Value scale[2], offset[2]; // per 16 values (Q6_K) or the sub-block
  };

  /// A quantized: bytes [M, K] and scales [M, K / 32] (quantizeA, Q8_0's
  /// rounding); for K-quants (quantizeAK, llama.cpp's Q8_K) scales [M, K /
  /// 256] and (hasMins) the sums of the bytes of each 32, [M, K / 32].
  struct QuantizedA {
    Value bytes, scales, sums;
  };

  /// Sub-block `sb` (of 32 values) of the row that starts at byte
  /// `rowBase`, for F32, F16, BF16, Q8_0 and Q4_0.
  SubBlock prepare(OpBuilder &nb, Value rowBase, Value sb) const {
    SubBlock s;
    int64_t blockValues = tfm_ggml_blocks_values(type);
    int64_t blockBytes = tfm_ggml_blocks_bytes(type);
    if (blockValues == 1) {
      s.base = add(nb, rowBase, mul(nb, sb, 32 * blockBytes));
      return s;
    }
    if (blockValues == 32) {
      s.base = add(nb, rowBase, mul(nb, sb, blockBytes));
      Value d = halfAt(nb, s.base);
      s.scale[0] = s.scale[1] = d;
      return s;
    }
    // K-quants: prepareK, one super-block's sub-blocks at a time.
    llvm_unreachable("prepare of a K-quant: use prepareK");
  }

  /// Sub-block `j` (known here: offsets and the scales' bits are constants)
  /// of super-block `block` of a K-quant row that starts at byte `rowBase`.
  SubBlock prepareK(OpBuilder &nb, Value rowBase, Value block,
                    int64_t j) const {
    SubBlock s = kOffsets(
        nb, add(nb, rowBase, mul(nb, block, tfm_ggml_blocks_bytes(type))), j);
    auto c32 = [&](int64_t v) -> Value {
      return arith::ConstantOp::create(nb, loc, nb.getI32IntegerAttr(v));
    };
    if (type == TFM_GGML_BLOCKS_Q6_K) {
      int64_t h = j / 4, t = j % 4;
      Value d = halfAt(nb, addc(nb, s.base, 208));
      for (int64_t half = 0; half < 2; ++half) {
        Value sc = memref::LoadOp::create(
            nb, loc, w, addc(nb, s.base, 192 + h * 8 + t * 2 + half));
        Value scF = arith::SIToFPOp::create(nb, loc, nb.getF32Type(), sc);
        s.scale[half] = arith::MulFOp::create(nb, loc, d, scF);
      }
      return s;
    }
    // Q4_K and Q5_K: ggml's get_scale_min_k4(j) on the 12 scale bytes.
    Value d = halfAt(nb, s.base), dmin = halfAt(nb, addc(nb, s.base, 2));
    auto scaleByte = [&](int64_t i) {
      return byteAt(nb, addc(nb, s.base, 4 + i));
    };
    auto andc = [&](Value x, int64_t m) -> Value {
      return arith::AndIOp::create(nb, loc, x, c32(m));
    };
    auto shr = [&](Value x, int64_t n) -> Value {
      return arith::ShRUIOp::create(nb, loc, x, c32(n));
    };
    auto shl = [&](Value x, int64_t n) -> Value {
      return arith::ShLIOp::create(nb, loc, x, c32(n));
    };
    Value sc, m;
    if (j < 4) {
      sc = andc(scaleByte(j), 63);
      m = andc(scaleByte(j + 4), 63);
    } else {
      Value b4 = scaleByte(j + 4);
      sc = arith::OrIOp::create(nb, loc, andc(b4, 15),
                                shl(shr(scaleByte(j - 4), 6), 4));
      m = arith::OrIOp::create(nb, loc, shr(b4, 4),
                               shl(shr(scaleByte(j), 6), 4));
    }
    Type f32 = nb.getF32Type();
    s.scale[0] = s.scale[1] = arith::MulFOp::create(
        nb, loc, d, arith::UIToFPOp::create(nb, loc, f32, sc));
    Value minv = arith::MulFOp::create(
        nb, loc, dmin, arith::UIToFPOp::create(nb, loc, f32, m));
    s.offset[0] = s.offset[1] =
        arith::NegFOp::create(nb, loc, minv).getResult();
    return s;
  }

  /// Where sub-block `j` of the K-quant super-block at byte `base` keeps
  /// its values: the base, quants / highs offsets and shifts of a SubBlock.
  SubBlock kOffsets(OpBuilder &nb, Value base, int64_t j) const {
    SubBlock s;
    s.base = base;
    auto c32 = [&](int64_t v) -> Value {
      return arith::ConstantOp::create(nb, loc, nb.getI32IntegerAttr(v));
    };
    if (type == TFM_GGML_BLOCKS_Q6_K) {
      // ql[128], qh[64], scales[16], d: half h = j / 4, quarter t = j % 4.
      int64_t h = j / 4, t = j % 4;
      s.quants = addc(nb, base, h * 64 + (t % 2) * 32);
      s.shift = c32((t / 2) * 4);
      s.highs = addc(nb, base, 128 + h * 32);
      s.highShift = c32(t * 2);
      return s;
    }
    // Q4_K and Q5_K: d, dmin, scales[12], then (Q5_K) qh[32] and qs[128].
    int64_t qs = type == TFM_GGML_BLOCKS_Q5_K ? 48 : 16;
    s.quants = addc(nb, base, qs + (j / 2) * 32);
    s.shift = c32((j % 2) * 4);
    if (type == TFM_GGML_BLOCKS_Q5_K) {
      s.highs = addc(nb, base, 16);
      s.highShift = c32(j);
    }
    return s;
  }

  /// A K-quant super-block's integer scales as i16 lanes, from its bytes
  /// at once: Q4_K's and Q5_K's 8 scales then 8 mins (ggml's
  /// get_scale_min_k4 on the three words of the 12 packed bytes, as its
  /// dot products unpack them), Q6_K's 16 signed scales.
  Value kScales(OpBuilder &nb, Value base) const {
    auto i16x16 = VectorType::get({16}, nb.getI16Type());
    if (type == TFM_GGML_BLOCKS_Q6_K) {
      Value raw =
          vector::LoadOp::create(nb, loc, VectorType::get({16}, nb.getI8Type()),
                                 w, addc(nb, base, 192));
      return arith::ExtSIOp::create(nb, loc, i16x16, raw);
    }
    Value raw = vector::LoadOp::create(
        nb, loc, VectorType::get({12}, nb.getI8Type()), w, addc(nb, base, 4));
    Value words = vector::BitCastOp::create(
        nb, loc, VectorType::get({3}, nb.getI32Type()), raw);
    auto word = [&](int64_t i) -> Value {
      return vector::ExtractOp::create(nb, loc, words, ArrayRef<int64_t>{i});
    };
    auto c32 = [&](uint32_t v) -> Value {
      return arith::ConstantOp::create(
          nb, loc, nb.getI32IntegerAttr(static_cast<int32_t>(v)));
    };
    auto andc = [&](Value x, uint32_t m) -> Value {
      return arith::AndIOp::create(nb, loc, x, c32(m));
    };
    auto shr = [&](Value x, int64_t n) -> Value {
      return arith::ShRUIOp::create(nb, loc, x, c32(n));
    };
    auto shl = [&](Value x, int64_t n) -> Value {
      return arith::ShLIOp::create(nb, loc, x, c32(n));
    };
    auto orr = [&](Value x, Value y) -> Value {
      return arith::OrIOp::create(nb, loc, x, y);
    };
    const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
    Value u0 = word(0), u1 = word(1), u2 = word(2);
    // Scales of sub-blocks 0-3, 4-7, then mins of 0-3, 4-7.
    Value sc03 = andc(u0, low6);
    Value sc47 = orr(andc(u2, low4), shl(andc(shr(u0, 6), low2), 4));
    Value m03 = andc(u1, low6);
    Value m47 = orr(andc(shr(u2, 4), low4), shl(andc(shr(u1, 6), low2), 4));
    Value all = vector::FromElementsOp::create(
        nb, loc, VectorType::get({4}, nb.getI32Type()),
        ValueRange{sc03, sc47, m03, m47});
    Value bytes = vector::BitCastOp::create(
        nb, loc, VectorType::get({16}, nb.getI8Type()), all);
    return arith::ExtUIOp::create(nb, loc, i16x16, bytes);
  }

  /// `body(sub-block, sb)` for the sub-blocks [sb0, sb1) of the row at byte
  /// `rowBase`: K-quants a super-block at a time, its 8 sub-blocks unrolled
  /// (prepareK; sb0 and sb1 multiples of 8), the others one by one.
  void forEachSubBlock(
      OpBuilder &nb, Value rowBase, Value sb0, Value sb1,
      function_ref<void(OpBuilder &, const SubBlock &, Value)> body) const {
    if (!isKQuant()) {
      forRange(nb, loc, sb0, sb1, idx(nb, 1),
               [&](OpBuilder &fb, Location, Value sb) {
                 body(fb, prepare(fb, rowBase, sb), sb);
               });
      return;
    }
    Value blk0 = arith::DivUIOp::create(nb, loc, sb0, idx(nb, 8));
    Value blk1 = arith::DivUIOp::create(nb, loc, sb1, idx(nb, 8));
    forRange(nb, loc, blk0, blk1, idx(nb, 1),
             [&](OpBuilder &fb, Location, Value block) {
               for (int64_t sj = 0; sj < 8; ++sj)
                 body(fb, prepareK(fb, rowBase, block, sj),
                      addc(fb, mul(fb, block, 8), sj));
             });
  }

  /// The LLVM intrinsic `fn`(args) of result type `t` (AVX2's byte dot
  /// products).
  Value intrinsic(OpBuilder &nb, Type t, StringRef fn, ValueRange args) const {
    return LLVM::CallIntrinsicOp::create(nb, loc, t, nb.getStringAttr(fn), args)
        .getResult(0);
  }

  /// `body(m, block, col0)` for every block of `values` columns of every
  /// row m of A (col0 = its first column), rows in parallel: the skeleton
  /// of A's quantizations.
  void forEachBlockOfA(
      Value mRows, int64_t values,
      function_ref<void(OpBuilder &, Value, Value, Value)> body) const {
    auto par = scf::ParallelOp::create(
        b, loc, ValueRange{idx(b, 0)}, ValueRange{mRows}, ValueRange{idx(b, 1)},
        [&](OpBuilder &pb, Location, ValueRange ivs) {
          Value blocks = arith::DivUIOp::create(pb, loc, k, idx(pb, values));
          forRange(pb, loc, idx(pb, 0), blocks, idx(pb, 1),
                   [&](OpBuilder &fb, Location, Value blk) {
                     body(fb, ivs[0], blk, mul(fb, blk, values));
                   });
          scf::ReduceOp::create(pb, loc);
        });
    markKeepParallel(par);
  }

  bool isKQuant() const {
    return type == TFM_GGML_BLOCKS_Q4_K || type == TFM_GGML_BLOCKS_Q5_K ||
           type == TFM_GGML_BLOCKS_Q6_K;
  }

  /// The bytes of a row of W (K values in the type's blocks).
  Value bytesOfRow() const {
    return mul(
        b,
        arith::DivUIOp::create(b, loc, k, idx(b, tfm_ggml_blocks_values(type))),
        tfm_ggml_blocks_bytes(type));
  }

  /// Prefetches the weight's bytes kPrefetchBytes ahead of sub-block `sb`
  /// of the row at `rowBase`: a tile reads its rows side by side, short
  /// streams the hardware prefetcher locks on to late (a hint: no fault
  /// past the end).
  void prefetchAhead(OpBuilder &nb, Value rowBase, Value sb) const {
    constexpr int64_t kPrefetchBytes = 4096;
    int64_t perSub =
        tfm_ggml_blocks_bytes(type) * 32 / tfm_ggml_blocks_values(type);
    Value at = addc(nb, add(nb, rowBase, mul(nb, sb, perSub)), kPrefetchBytes);
    memref::PrefetchOp::create(nb, loc, w, ValueRange{at}, /*isWrite=*/false,
                               /*localityHint=*/3, /*isDataCache=*/true);
  }

  /// Vector `v` (values v vl .. v vl + vl - 1) of a prepared sub-block, as
  /// f32.
  Value vectorOf(OpBuilder &nb, const SubBlock &s, int64_t v) const {
    int64_t e0 = v * vl;
    switch (type) {
    case TFM_GGML_BLOCKS_F32: {
      Value raw = vector::LoadOp::create(
          nb, loc, VectorType::get({4 * vl}, nb.getI8Type()), w,
          addc(nb, s.base, 4 * e0));
      return vector::BitCastOp::create(nb, loc, vt, raw);
    }
    case TFM_GGML_BLOCKS_F16: {
      Value raw = vector::LoadOp::create(
          nb, loc, VectorType::get({2 * vl}, nb.getI8Type()), w,
          addc(nb, s.base, 2 * e0));
      Value h = vector::BitCastOp::create(
          nb, loc, VectorType::get({vl}, nb.getF16Type()), raw);
      return arith::ExtFOp::create(nb, loc, vt, h);
    }
    case TFM_GGML_BLOCKS_BF16: {
      Value raw = vector::LoadOp::create(
          nb, loc, VectorType::get({2 * vl}, nb.getI8Type()), w,
          addc(nb, s.base, 2 * e0));
      Value h = vector::BitCastOp::create(
          nb, loc, VectorType::get({vl}, nb.getI16Type()), raw);
      Value x = arith::ExtUIOp::create(nb, loc, i32T, h);
      x = arith::ShLIOp::create(nb, loc, x, splatI(nb, 16));
      return vector::BitCastOp::create(nb, loc, vt, x);
    }
    default:
      break;
    }
    Value q;
    int64_t half = e0 / 16; // the 16 values of a Q6_K scale
    switch (type) {
    case TFM_GGML_BLOCKS_Q8_0:
      q = bytesAt(nb, addc(nb, s.base, 2 + e0), /*isSigned=*/true);
      break;
    case TFM_GGML_BLOCKS_Q4_0:
      // q - 8 in integers (as ggml does): exact, where a product with the
      // scale less 8 scales would cancel.
      q = bits(nb, bytesAt(nb, addc(nb, s.base, 2 + e0 % 16)),
               splatI(nb, e0 < 16 ? 0 : 4), 15);
      q = arith::SubIOp::create(nb, loc, q, splatI(nb, 8));
      break;
    case TFM_GGML_BLOCKS_Q4_K:
      q = bits(nb, bytesAt(nb, addc(nb, s.quants, e0)), s.shift, 15);
      break;
    case TFM_GGML_BLOCKS_Q5_K: {
      q = bits(nb, bytesAt(nb, addc(nb, s.quants, e0)), s.shift, 15);
      Value hi = bits(nb, bytesAt(nb, addc(nb, s.highs, e0)), s.highShift, 1);
      q = arith::OrIOp::create(
          nb, loc, q, arith::ShLIOp::create(nb, loc, hi, splatI(nb, 4)));
      break;
    }
    case TFM_GGML_BLOCKS_Q6_K: {
      q = bits(nb, bytesAt(nb, addc(nb, s.quants, e0)), s.shift, 15);
      Value hi = bits(nb, bytesAt(nb, addc(nb, s.highs, e0)), s.highShift, 3);
      q = arith::OrIOp::create(
          nb, loc, q, arith::ShLIOp::create(nb, loc, hi, splatI(nb, 4)));
      q = arith::SubIOp::create(nb, loc, q, splatI(nb, 32));
      break;
    }
    default:
      llvm_unreachable("a ggml type the kernel does not compute");
    }
    Value qf = toF32(nb, q);
    Value scale = splatF(nb, s.scale[half]);
    if (!s.offset[half])
      return arith::MulFOp::create(nb, loc, qf, scale);
    return vector::FMAOp::create(nb, loc, qf, scale,
                                 splatF(nb, s.offset[half]));
  }

  /// The register tile: rows [m, m + mr) of A times rows [n, n + nr) of W
  /// over all of K, the sums stored in out. With `split`, each vector of a
  /// sub-block has accumulators of its own (more independent FMA chains
  /// for a tile of few rows).
  void tile(OpBuilder &nb, Value m, int64_t mr, Value n, int64_t nr, bool split,
            Value rowBytes) const {
    int64_t nv = split ? vectors() : 1;
    int64_t count = mr * nr * nv;
    auto accIndex = [&](int64_t i, int64_t j, int64_t v) {
      return (i * nr + j) * nv + (split ? v : 0);
    };
    Value zero = arith::ConstantOp::create(
        nb, loc, vt, DenseElementsAttr::get(vt, nb.getF32FloatAttr(0)));
    SmallVector<Value> init(count, zero);
    Value subBlocks = arith::DivUIOp::create(nb, loc, k, idx(nb, 32));
    SmallVector<Value> rowBase, rowA;
    for (int64_t j = 0; j < nr; ++j)
      rowBase.push_back(
          arith::MulIOp::create(nb, loc, addc(nb, n, j), rowBytes));
    for (int64_t i = 0; i < mr; ++i)
      rowA.push_back(addc(nb, m, i));
    auto loop = scf::ForOp::create(
        nb, loc, idx(nb, 0), subBlocks, idx(nb, 1), init,
        [&](OpBuilder &fb, Location, Value sb, ValueRange acc) {
          SmallVector<Value> next(acc.begin(), acc.end());
          Value col0 = mul(fb, sb, 32);
          for (int64_t j = 0; j < nr; ++j)
            prefetchAhead(fb, rowBase[j], sb);
          for (int64_t j = 0; j < nr; ++j) {
            SubBlock s = prepare(fb, rowBase[j], sb);
            for (int64_t v = 0; v < vectors(); ++v) {
              Value wv = vectorOf(fb, s, v);
              Value col = addc(fb, col0, v * vl);
              for (int64_t i = 0; i < mr; ++i) {
                Value av = vector::LoadOp::create(fb, loc, vt, a,
                                                  ValueRange{rowA[i], col});
                int64_t at = accIndex(i, j, v);
                next[at] = vector::FMAOp::create(fb, loc, av, wv, next[at]);
              }
            }
          }
          scf::YieldOp::create(fb, loc, next);
        });
    for (int64_t i = 0; i < mr; ++i)
      for (int64_t j = 0; j < nr; ++j) {
        Value sum = loop.getResult(accIndex(i, j, 0));
        for (int64_t v = 1; v < nv; ++v)
          sum = arith::AddFOp::create(nb, loc, sum,
                                      loop.getResult(accIndex(i, j, v)));
        Value r = vector::ReductionOp::create(nb, loc,
                                              vector::CombiningKind::ADD, sum);
        memref::StoreOp::create(nb, loc, r, out,
                                ValueRange{rowA[i], addc(nb, n, j)});
      }
  }

  /// Rows [m, m + mr) of A times rows [n0, n1) of W: tiles of 2 rows of W,
  /// then one of 1.
  void rowsOfW(OpBuilder &nb, Value m, int64_t mr, Value n0, Value n1,
               bool split, Value rowBytes, const QuantizedA &qa) const {
    auto anyTile = [&](OpBuilder &tb, Value n, int64_t nr) {
      if (qa.bytes && isKQuant())
        tileKQuant(tb, qa, m, mr, n, nr, rowBytes);
      else if (qa.bytes)
        tileInt8(tb, qa, m, mr, n, nr, rowBytes);
      else
        tile(tb, m, mr, n, nr, split, rowBytes);
    };
    // A single row of A reads the weight's rows one after the other: one
    // stream through memory.
    if (mr == 1) {
      forRange(nb, loc, n0, n1, idx(nb, 1),
               [&](OpBuilder &fb, Location, Value n) { anyTile(fb, n, 1); });
      return;
    }
    Value span = arith::SubIOp::create(nb, loc, n1, n0);
    Value pairsEnd = add(
        nb, n0, mul(nb, arith::DivUIOp::create(nb, loc, span, idx(nb, 2)), 2));
    forRange(nb, loc, n0, pairsEnd, idx(nb, 2),
             [&](OpBuilder &fb, Location, Value n) { anyTile(fb, n, 2); });
    Value odd =
        arith::CmpIOp::create(nb, loc, arith::CmpIPredicate::ult, pairsEnd, n1);
    scf::IfOp::create(nb, loc, odd, [&](OpBuilder &ib, Location) {
      anyTile(ib, pairsEnd, 1);
      scf::YieldOp::create(ib, loc);
    });
  }

  /// Row `row` of the weight, dequantized into `dst` [K] (the embedding's
  /// gather).
  void emitRow(Value row, Value dst) const {
    Value rowBytes = bytesOfRow();
    Value rowBase = arith::MulIOp::create(b, loc, row, rowBytes);
    Value subBlocks = arith::DivUIOp::create(b, loc, k, idx(b, 32));
    forEachSubBlock(b, rowBase, idx(b, 0), subBlocks,
                    [&](OpBuilder &fb, const SubBlock &s, Value sb) {
                      Value col0 = mul(fb, sb, 32);
                      for (int64_t v = 0; v < vectors(); ++v)
                        vector::StoreOp::create(fb, loc, vectorOf(fb, s, v),
                                                dst, addc(fb, col0, v * vl));
                    });
  }

  /// Few rows of A (decode): Q8_0, Q4_0 and the K-quants multiply in
  /// integers as llama.cpp does, A quantized to bytes (Q8_0 and Q4_0: per
  /// block of 32, scale max |x| / 127, rounded to nearest even, llama.cpp's
  /// Q8_0; K-quants: per block of 256, llama.cpp's Q8_K), each block's byte
  /// products summed by vpmaddubsw / vpmaddwd and scaled by the two blocks'
  /// scales. F32, F16 and BF16 multiply A unquantized.
  bool int8Path() const {
    return type == TFM_GGML_BLOCKS_Q8_0 || type == TFM_GGML_BLOCKS_Q4_0 ||
           type == TFM_GGML_BLOCKS_Q4_K || type == TFM_GGML_BLOCKS_Q5_K ||
           type == TFM_GGML_BLOCKS_Q6_K;
  }
  /// Q4_K and Q5_K: w = q scale - min with q unsigned, so a sub-block's
  /// product also needs the sum of A's bytes (llama.cpp's bsums).
  bool hasMins() const {
    return type == TFM_GGML_BLOCKS_Q4_K || type == TFM_GGML_BLOCKS_Q5_K;
  }

  /// A quantized to bytes for the integer products (quantizeA: Q8_0 and
  /// Q4_0; quantizeAK: the K-quants), in buffers of its own (freeQuantized
  /// frees them), with the sums of its bytes per `sumsPer` values (0:
  /// none; per 32 for the K-quants, quantizeAK's own).
  QuantizedA quantizeForDots(Value mRows, int64_t sumsPer) const {
    auto dyn2 = [&](Type t) {
      return MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, t);
    };
    auto per = [&](int64_t values) -> Value {
      return arith::DivUIOp::create(b, loc, k, idx(b, values));
    };
    QuantizedA qa;
    qa.bytes =
        memref::AllocOp::create(b, loc, dyn2(b.getI8Type()),
                                ValueRange{mRows, k}, b.getI64IntegerAttr(64));
    qa.scales =
        memref::AllocOp::create(b, loc, dyn2(b.getF32Type()),
                                ValueRange{mRows, per(isKQuant() ? 256 : 32)});
    if (sumsPer)
      qa.sums = memref::AllocOp::create(b, loc, dyn2(b.getF32Type()),
                                        ValueRange{mRows, per(sumsPer)});
    bool ownSums = isKQuant() && sumsPer == 32;
    QuantizedA into = qa;
    if (!ownSums)
      into.sums = Value();
    if (isKQuant())
      quantizeAK(mRows, into);
    else
      quantizeA(mRows, into);
    if (sumsPer && !ownSums)
      sumBytesOfA(mRows, qa, sumsPer);
    return qa;
  }
  void freeQuantized(const QuantizedA &qa) const {
    for (Value buffer : {qa.bytes, qa.scales, qa.sums})
      if (buffer)
        memref::DeallocOp::create(b, loc, buffer);
  }

  /// Quantizes A into `qa` as llama.cpp's Q8_K (quantize_row_q8_K) for the
  /// K-quants' dot products: per block of 256, the value x of largest |x|,
  /// iscale = -127 / x, bytes min(round(iscale v), 127) (to nearest even),
  /// scale 1 / iscale (0 for a zero block); the sums of the bytes per 32.
  /// Rows in parallel.
  void quantizeAK(Value mRows, const QuantizedA &qa) const {
    auto v8 = VectorType::get({8}, b.getF32Type());
    forEachBlockOfA(
        mRows, 256, [&](OpBuilder &fb, Value m, Value blk, Value col0) {
          SmallVector<Value> x;
          Value vmax, vmin;
          for (int64_t v = 0; v < 32; ++v) {
            x.push_back(vector::LoadOp::create(
                fb, loc, v8, a, ValueRange{m, addc(fb, col0, 8 * v)}));
            vmax = vmax ? arith::MaximumFOp::create(fb, loc, vmax, x[v]) : x[v];
            vmin = vmin ? arith::MinimumFOp::create(fb, loc, vmin, x[v]) : x[v];
          }
          Value hi = vector::ReductionOp::create(
              fb, loc, vector::CombiningKind::MAXIMUMF, vmax);
          Value lo = vector::ReductionOp::create(
              fb, loc, vector::CombiningKind::MINIMUMF, vmin);
          Value negLo = arith::NegFOp::create(fb, loc, lo);
          Value hiWins = arith::CmpFOp::create(
              fb, loc, arith::CmpFPredicate::OGE, hi, negLo);
          Value xmax = arith::SelectOp::create(fb, loc, hiWins, hi, lo);
          Value amax = arith::SelectOp::create(fb, loc, hiWins, hi, negLo);
          Value nonzero = arith::CmpFOp::create(
              fb, loc, arith::CmpFPredicate::OGT, amax, cF32(fb, loc, 0));
          Value safeMax =
              arith::SelectOp::create(fb, loc, nonzero, xmax, cF32(fb, loc, 1));
          Value iscale = arith::SelectOp::create(
              fb, loc, nonzero,
              arith::DivFOp::create(fb, loc, cF32(fb, loc, -127), safeMax),
              cF32(fb, loc, 0));
          Value d = arith::SelectOp::create(
              fb, loc, nonzero,
              arith::DivFOp::create(fb, loc, cF32(fb, loc, 1), iscale),
              cF32(fb, loc, 0));
          Value isv = vector::BroadcastOp::create(fb, loc, v8, iscale);
          Value top =
              vector::BroadcastOp::create(fb, loc, v8, cF32(fb, loc, 127));
          Value sum;
          for (int64_t v = 0; v < 32; ++v) {
            Value q = math::RoundEvenOp::create(
                fb, loc, arith::MulFOp::create(fb, loc, x[v], isv));
            q = arith::MinimumFOp::create(fb, loc, q, top);
            sum = v % 4 ? arith::AddFOp::create(fb, loc, sum, q) : q;
            Value qi = arith::FPToSIOp::create(
                fb, loc, VectorType::get({8}, fb.getI32Type()), q);
            Value qb = arith::TruncIOp::create(
                fb, loc, VectorType::get({8}, fb.getI8Type()), qi);
            vector::StoreOp::create(fb, loc, qb, qa.bytes,
                                    ValueRange{m, addc(fb, col0, 8 * v)});
            if (v % 4 == 3 && qa.sums) {
              Value total = vector::ReductionOp::create(
                  fb, loc, vector::CombiningKind::ADD, sum);
              memref::StoreOp::create(
                  fb, loc, total, qa.sums,
                  ValueRange{m, addc(fb, mul(fb, blk, 8), v / 4)});
            }
          }
          memref::StoreOp::create(fb, loc, d, qa.scales, ValueRange{m, blk});
        });
  }

  /// The K-quants' integer register tile, as llama.cpp's
  /// ggml_vec_dot_q{4,5,6}_K_q8_K: per super-block, each sub-block's byte
  /// products (vpmaddubsw) times its integer scale (vpmaddwd: one per 32,
  /// Q6_K's per 16 on the lanes of its halves) summed in i32, then scaled
  /// by the weight's d and A's block scale into f32 accumulators; Q4_K's
  /// and Q5_K's mins times the sums of A's bytes, by dmin.
  void tileKQuant(OpBuilder &nb, const QuantizedA &qa, Value m, int64_t mr,
                  Value n, int64_t nr, Value rowBytes) const {
    auto b32 = VectorType::get({32}, nb.getI8Type());
    auto i16x16 = VectorType::get({16}, nb.getI16Type());
    auto i32x8 = VectorType::get({8}, nb.getI32Type());
    auto f32x8 = VectorType::get({8}, nb.getF32Type());
    bool mins = hasMins();
    int64_t tiles = mr * nr;
    Value zeroF = arith::ConstantOp::create(
        nb, loc, f32x8, DenseElementsAttr::get(f32x8, nb.getF32FloatAttr(0)));
    Value zeroI = arith::ConstantOp::create(
        nb, loc, i32x8, DenseElementsAttr::get(i32x8, nb.getI32IntegerAttr(0)));
    // f32 accumulators, then (mins) those of the mins' part.
    SmallVector<Value> init(mins ? 2 * tiles : tiles, zeroF), rowBase, rowA;
    for (int64_t j = 0; j < nr; ++j)
      rowBase.push_back(
          arith::MulIOp::create(nb, loc, addc(nb, n, j), rowBytes));
    for (int64_t i = 0; i < mr; ++i)
      rowA.push_back(addc(nb, m, i));
    Value blocks = arith::DivUIOp::create(nb, loc, k, idx(nb, 256));
    auto loop = scf::ForOp::create(
        nb, loc, idx(nb, 0), blocks, idx(nb, 1), init,
        [&](OpBuilder &fb, Location, Value blk, ValueRange acc) {
          SmallVector<Value> next(acc.begin(), acc.end());
          SmallVector<Value> isum(tiles, zeroI), da, base, dw, dmw, scales;
          for (int64_t i = 0; i < mr; ++i)
            da.push_back(memref::LoadOp::create(fb, loc, qa.scales,
                                                ValueRange{rowA[i], blk}));
          // Each row of W's super-block: its d (and dmin) and scales.
          for (int64_t j = 0; j < nr; ++j) {
            base.push_back(
                add(fb, rowBase[j], mul(fb, blk, tfm_ggml_blocks_bytes(type))));
            dw.push_back(halfAt(fb, type == TFM_GGML_BLOCKS_Q6_K
                                        ? addc(fb, base[j], 208)
                                        : base[j]));
            if (mins)
              dmw.push_back(halfAt(fb, addc(fb, base[j], 2)));
            scales.push_back(kScales(fb, base[j]));
          }
          for (int64_t sj = 0; sj < 8; ++sj) {
            Value sb = addc(fb, mul(fb, blk, 8), sj);
            Value col0 = mul(fb, sb, 32);
            for (int64_t j = 0; j < nr; ++j)
              prefetchAhead(fb, rowBase[j], sb);
            SmallVector<Value> av;
            for (int64_t i = 0; i < mr; ++i)
              av.push_back(vector::LoadOp::create(fb, loc, b32, qa.bytes,
                                                  ValueRange{rowA[i], col0}));
            // The sub-block's scale in every i16 lane (Q6_K: one per 16
            // values, the lanes of each half of vpmaddubsw's sums).
            SmallVector<int64_t> lanes;
            for (int64_t e = 0; e < 16; ++e)
              lanes.push_back(type == TFM_GGML_BLOCKS_Q6_K ? 2 * sj + e / 8
                                                           : sj);
            for (int64_t j = 0; j < nr; ++j) {
              Value q = kQuantBytes(fb, kOffsets(fb, base[j], sj));
              Value sc = vector::ShuffleOp::create(fb, loc, scales[j],
                                                   scales[j], lanes);
              Value wabs;
              if (!mins)
                wabs = intrinsic(fb, b32, kPsignB, {q, q});
              for (int64_t i = 0; i < mr; ++i) {
                Value p16 = mins ? intrinsic(fb, i16x16, kPmaddUbSw, {q, av[i]})
                                 : intrinsic(fb, i16x16, kPmaddUbSw,
                                             {wabs, intrinsic(fb, b32, kPsignB,
                                                              {av[i], q})});
                Value p32 = intrinsic(fb, i32x8, kPmaddWd, {p16, sc});
                isum[i * nr + j] =
                    arith::AddIOp::create(fb, loc, isum[i * nr + j], p32);
              }
            }
          }
          for (int64_t i = 0; i < mr; ++i) {
            // A's sums of bytes per 32 of this super-block, for the mins.
            Value sums;
            if (mins)
              sums =
                  vector::LoadOp::create(fb, loc, f32x8, qa.sums,
                                         ValueRange{rowA[i], mul(fb, blk, 8)});
            for (int64_t j = 0; j < nr; ++j) {
              int64_t at = i * nr + j;
              Value f = arith::SIToFPOp::create(fb, loc, f32x8, isum[at]);
              Value s = vector::BroadcastOp::create(
                  fb, loc, f32x8, arith::MulFOp::create(fb, loc, dw[j], da[i]));
              next[at] = vector::FMAOp::create(fb, loc, f, s, next[at]);
              if (!mins)
                continue;
              // The 8 mins (the upper half of the scales' lanes) times the
              // sums, by dmin and A's scale.
              SmallVector<int64_t> upper{8, 9, 10, 11, 12, 13, 14, 15};
              Value m8 = vector::ShuffleOp::create(fb, loc, scales[j],
                                                   scales[j], upper);
              Value mf = arith::UIToFPOp::create(fb, loc, f32x8, m8);
              Value ms = vector::BroadcastOp::create(
                  fb, loc, f32x8,
                  arith::MulFOp::create(fb, loc, dmw[j], da[i]));
              next[tiles + at] = vector::FMAOp::create(
                  fb, loc, arith::MulFOp::create(fb, loc, mf, sums), ms,
                  next[tiles + at]);
            }
          }
          scf::YieldOp::create(fb, loc, next);
        });
    for (int64_t i = 0; i < mr; ++i)
      for (int64_t j = 0; j < nr; ++j) {
        int64_t at = i * nr + j;
        Value sum = loop.getResult(at);
        if (mins)
          sum = arith::SubFOp::create(nb, loc, sum, loop.getResult(tiles + at));
        Value r = vector::ReductionOp::create(nb, loc,
                                              vector::CombiningKind::ADD, sum);
        memref::StoreOp::create(nb, loc, r, out,
                                ValueRange{rowA[i], addc(nb, n, j)});
      }
  }

  /// Quantizes A into `qa`, rows in parallel.
  void quantizeA(Value mRows, const QuantizedA &qa) const {
    auto v8 = VectorType::get({8}, b.getF32Type());
    forEachBlockOfA(
        mRows, 32, [&](OpBuilder &fb, Value m, Value sb, Value col0) {
          SmallVector<Value> x;
          Value amax;
          for (int64_t v = 0; v < 4; ++v) {
            x.push_back(vector::LoadOp::create(
                fb, loc, v8, a, ValueRange{m, addc(fb, col0, 8 * v)}));
            Value ab = math::AbsFOp::create(fb, loc, x.back());
            amax = amax ? arith::MaximumFOp::create(fb, loc, amax, ab) : ab;
          }
          Value mx = vector::ReductionOp::create(
              fb, loc, vector::CombiningKind::MAXIMUMF, amax);
          Value d = arith::DivFOp::create(fb, loc, mx, cF32(fb, loc, 127));
          Value pos = arith::CmpFOp::create(fb, loc, arith::CmpFPredicate::OGT,
                                            mx, cF32(fb, loc, 0));
          Value id = arith::SelectOp::create(
              fb, loc, pos,
              arith::DivFOp::create(fb, loc, cF32(fb, loc, 127), mx),
              cF32(fb, loc, 0));
          Value idv = vector::BroadcastOp::create(fb, loc, v8, id);
          for (int64_t v = 0; v < 4; ++v) {
            Value q = math::RoundEvenOp::create(
                fb, loc, arith::MulFOp::create(fb, loc, x[v], idv));
            Value qi = arith::FPToSIOp::create(
                fb, loc, VectorType::get({8}, fb.getI32Type()), q);
            Value qb = arith::TruncIOp::create(
                fb, loc, VectorType::get({8}, fb.getI8Type()), qi);
            vector::StoreOp::create(fb, loc, qb, qa.bytes,
                                    ValueRange{m, addc(fb, col0, 8 * v)});
          }
          memref::StoreOp::create(fb, loc, d, qa.scales, ValueRange{m, sb});
        });
  }

  /// A prepared K-quant sub-block's 32 values as bytes: Q4_K's 4 bits and
  /// Q5_K's 5 (unsigned), Q6_K's 6 less 32 (signed).
  Value kQuantBytes(OpBuilder &nb, const SubBlock &s,
                    bool unsignedQ6 = false) const {
    auto b32 = VectorType::get({32}, nb.getI8Type());
    auto splat8 = [&](int64_t c) -> Value {
      return arith::ConstantOp::create(
          nb, loc, b32, DenseElementsAttr::get(b32, nb.getI8IntegerAttr(c)));
    };
    // (bytes at off >> shift) & mask, shift an i32 scalar.
    auto field = [&](Value off, Value shift, int64_t mask) -> Value {
      Value x = vector::LoadOp::create(nb, loc, b32, w, off);
      Value s8 = arith::TruncIOp::create(nb, loc, nb.getI8Type(), shift);
      Value sv = vector::BroadcastOp::create(nb, loc, b32, s8);
      return arith::AndIOp::create(
          nb, loc, arith::ShRUIOp::create(nb, loc, x, sv), splat8(mask));
    };
    Value q = field(s.quants, s.shift, 15);
    if (type == TFM_GGML_BLOCKS_Q4_K)
      return q;
    int64_t highBits = type == TFM_GGML_BLOCKS_Q5_K ? 1 : 3;
    Value hi = field(s.highs, s.highShift, highBits);
    q = arith::OrIOp::create(nb, loc, q,
                             arith::ShLIOp::create(nb, loc, hi, splat8(4)));
    if (type == TFM_GGML_BLOCKS_Q6_K && !unsignedQ6)
      q = arith::SubIOp::create(nb, loc, q, splat8(32));
    return q;
  }

  /// The 32 nibbles of the Q4_0 block at byte `base` as bytes 0..15: the
  /// low nibbles are values 0..15, the high ones 16..31.
  Value q4_0Nibbles(OpBuilder &nb, Value base) const {
    auto b16 = VectorType::get({16}, nb.getI8Type());
    Value qs = vector::LoadOp::create(nb, loc, b16, w, addc(nb, base, 2));
    auto splat16 = [&](int64_t c) -> Value {
      return arith::ConstantOp::create(
          nb, loc, b16, DenseElementsAttr::get(b16, nb.getI8IntegerAttr(c)));
    };
    Value lo = arith::AndIOp::create(nb, loc, qs, splat16(15));
    Value hi = arith::ShRUIOp::create(nb, loc, qs, splat16(4));
    SmallVector<int64_t> order;
    for (int64_t i = 0; i < 32; ++i)
      order.push_back(i);
    return vector::ShuffleOp::create(nb, loc, lo, hi, order);
  }

  /// The 32 signed weight bytes of Q8_0 / Q4_0 sub-block `sb` of the row
  /// at `rowBase`, and their scale.
  std::pair<Value, Value> weightBytes(OpBuilder &nb, Value rowBase,
                                      Value sb) const {
    auto b32 = VectorType::get({32}, nb.getI8Type());
    Value base = add(nb, rowBase, mul(nb, sb, tfm_ggml_blocks_bytes(type)));
    Value d = halfAt(nb, base);
    if (type == TFM_GGML_BLOCKS_Q8_0)
      return {vector::LoadOp::create(nb, loc, b32, w, addc(nb, base, 2)), d};
    // Q4_0: the nibbles less 8.
    Value q = q4_0Nibbles(nb, base);
    Value eight = arith::ConstantOp::create(
        nb, loc, b32, DenseElementsAttr::get(b32, nb.getI8IntegerAttr(8)));
    return {arith::SubIOp::create(nb, loc, q, eight), d};
  }

  /// The integer register tile of Q8_0 / Q4_0: rows [m, m + mr) of qa
  /// times rows [n, n + nr) of W, one f32 accumulator vector each.
  void tileInt8(OpBuilder &nb, const QuantizedA &qa, Value m, int64_t mr,
                Value n, int64_t nr, Value rowBytes) const {
    auto b32 = VectorType::get({32}, nb.getI8Type());
    auto i16x16 = VectorType::get({16}, nb.getI16Type());
    auto i32x8 = VectorType::get({8}, nb.getI32Type());
    auto f32x8 = VectorType::get({8}, nb.getF32Type());
    Value zero = arith::ConstantOp::create(
        nb, loc, f32x8, DenseElementsAttr::get(f32x8, nb.getF32FloatAttr(0)));
    Value ones = arith::ConstantOp::create(
        nb, loc, i16x16,
        DenseElementsAttr::get(i16x16, nb.getI16IntegerAttr(1)));
    Value zeroI32 = arith::ConstantOp::create(
        nb, loc, i32x8, DenseElementsAttr::get(i32x8, nb.getI32IntegerAttr(0)));
    SmallVector<Value> init(mr * nr, zero), rowBase, rowA;
    for (int64_t j = 0; j < nr; ++j)
      rowBase.push_back(
          arith::MulIOp::create(nb, loc, addc(nb, n, j), rowBytes));
    for (int64_t i = 0; i < mr; ++i)
      rowA.push_back(addc(nb, m, i));
    Value subBlocks = arith::DivUIOp::create(nb, loc, k, idx(nb, 32));
    auto loop = scf::ForOp::create(
        nb, loc, idx(nb, 0), subBlocks, idx(nb, 1), init,
        [&](OpBuilder &fb, Location, Value sb, ValueRange acc) {
          SmallVector<Value> next(acc.begin(), acc.end());
          Value col0 = mul(fb, sb, 32);
          for (int64_t j = 0; j < nr; ++j)
            prefetchAhead(fb, rowBase[j], sb);
          SmallVector<Value> av, ad;
          for (int64_t i = 0; i < mr; ++i) {
            av.push_back(vector::LoadOp::create(fb, loc, b32, qa.bytes,
                                                ValueRange{rowA[i], col0}));
            ad.push_back(memref::LoadOp::create(fb, loc, qa.scales,
                                                ValueRange{rowA[i], sb}));
          }
          for (int64_t j = 0; j < nr; ++j) {
            auto [wv, dw] = weightBytes(fb, rowBase[j], sb);
            // vpmaddubsw takes its first operand unsigned: |w|, w's sign
            // moved onto A.
            Value wabs = intrinsic(fb, b32, kPsignB, {wv, wv});
            for (int64_t i = 0; i < mr; ++i) {
              Value ax = intrinsic(fb, b32, kPsignB, {av[i], wv});
              Value p32;
              if (int8Dot) {
                p32 = intrinsic(fb, i32x8, kVpdpbusd256, {zeroI32, wabs, ax});
              } else {
                Value p16 = intrinsic(fb, i16x16, kPmaddUbSw, {wabs, ax});
                p32 = intrinsic(fb, i32x8, kPmaddWd, {p16, ones});
              }
              Value f = arith::SIToFPOp::create(fb, loc, f32x8, p32);
              Value sc = vector::BroadcastOp::create(
                  fb, loc, f32x8, arith::MulFOp::create(fb, loc, dw, ad[i]));
              next[i * nr + j] =
                  vector::FMAOp::create(fb, loc, f, sc, next[i * nr + j]);
            }
          }
          scf::YieldOp::create(fb, loc, next);
        });
    for (int64_t i = 0; i < mr; ++i)
      for (int64_t j = 0; j < nr; ++j) {
        Value r = vector::ReductionOp::create(
            nb, loc, vector::CombiningKind::ADD, loop.getResult(i * nr + j));
        memref::StoreOp::create(nb, loc, r, out,
                                ValueRange{rowA[i], addc(nb, n, j)});
      }
  }

  /// The product: a prompt's many rows of A (tfm_ggml_panel_rows()) by
  /// panels of f32, a decode's few by the register tiles on the blocks.
  void emit(Value mRows, Value nRows) const {
    auto call = func::CallOp::create(b, loc, kGgmlPanelRowsFn,
                                     TypeRange{b.getI64Type()}, ValueRange{});
    declareRuntimeFunction(b, call, kGgmlPanelRowsFn,
                           b.getFunctionType({}, {b.getI64Type()}));
    Value minRows =
        arith::IndexCastOp::create(b, loc, b.getIndexType(), call.getResult(0));
    Value many = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, mRows,
                                       minRows);
    auto ifOp = scf::IfOp::create(b, loc, many, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    if (bytePanels())
      emitBytePanels(mRows, nRows);
    else
      emitPanels(mRows, nRows);
    b.setInsertionPointToStart(ifOp.elseBlock());
    emitTiles(mRows, nRows);
  }

  /// Many rows of A: tasks of panelW() rows of W x kPanelRowsA rows of
  /// A over the threads. A task walks K by chunks of kPanelDepth values: it
  /// dequantizes its rows of W there into an f32 panel [kPanelDepth,
  /// panelW()] on its stack (32 KB with AVX-512, 16 with AVX2; each value
  /// converted once for all its rows of A: a sub-block's vectors along K go
  /// to the panel's columns), then multiplies its rows of A by the panel in
  /// register tiles of mr rows of A x the panel's columns (AVX-512: 12 x 2
  /// vectors, AVX2: 6 x 2): per value of K, mr broadcasts of A and 2 loads
  /// of the panel for 2 mr FMAs, the tile added to the output at the end of
  /// the chunk. A stays f32: the product is the weight's values times A to
  /// f32 rounding. (With AVX-512, 32 columns instead of 16, one vector, took
  /// llama1b's 128-token prompt from 44-48 to 62-69 tokens/s at Q8_0: a
  /// tile of one vector loads more than it multiplies.)
  void emitPanels(Value mRows, Value nRows) const {
    const int64_t nv = panelW() / vl, mr = vl >= 16 ? 12 : 6;
    Value rowBytes = bytesOfRow();
    Value panel, stage;
    forEachPanelTask(
        mRows, nRows, kPanelRowsA, mr,
        [&](OpBuilder &pb) {
          panel = memref::AllocaOp::create(
              pb, loc,
              MemRefType::get({kPanelDepth, panelW()}, pb.getF32Type()),
              ValueRange{}, pb.getI64IntegerAttr(64));
          // AVX-512's fill goes through a stage of 16 rows (16 KB).
          stage = Value();
          if (vl == 16)
            stage = memref::AllocaOp::create(
                pb, loc, MemRefType::get({16, kPanelDepth}, pb.getF32Type()),
                ValueRange{}, pb.getI64IntegerAttr(64));
        },
        [&](OpBuilder &cb, Value n0, Value kc, Value kEnd) {
          fillPanel(cb, panel, stage, n0, nRows, rowBytes, kc, kEnd);
        },
        [&](OpBuilder &tb, Value n0, Value m, int64_t rows, Value kc,
            Value depth, Value first) {
          panelTile(tb, panel, m, rows, nv, n0, nRows, kc, depth, first);
        });
  }

  /// The loop nest of a prompt's panels: tasks of panelW() rows of W x
  /// `rowsA` rows of A over the threads. A task first allocates its
  /// buffers (`task`), then walks K by chunks [kc, kEnd) of kPanelDepth
  /// values: `fill` fills its panel of W there, and `tile(tb, n0, m, rows,
  /// kc, depth, first)` multiplies its rows of A by it, `mr` rows at a time
  /// and the rest one by one (`first`: the chunk at the start of K).
  void
  forEachPanelTask(Value mRows, Value nRows, int64_t rowsA, int64_t mr,
                   function_ref<void(OpBuilder &)> task,
                   function_ref<void(OpBuilder &, Value, Value, Value)> fill,
                   function_ref<void(OpBuilder &, Value, Value, int64_t, Value,
                                     Value, Value)>
                       tile) const {
    Value tasksW = arith::CeilDivUIOp::create(b, loc, nRows, idx(b, panelW()));
    Value tasksA = arith::CeilDivUIOp::create(b, loc, mRows, idx(b, rowsA));
    auto par = scf::ParallelOp::create(
        b, loc, ValueRange{idx(b, 0), idx(b, 0)}, ValueRange{tasksW, tasksA},
        ValueRange{idx(b, 1), idx(b, 1)},
        [&](OpBuilder &pb, Location, ValueRange ivs) {
          Value n0 = mul(pb, ivs[0], panelW());
          Value m0 = mul(pb, ivs[1], rowsA);
          Value m1 =
              arith::MinUIOp::create(pb, loc, addc(pb, m0, rowsA), mRows);
          Value span = arith::SubIOp::create(pb, loc, m1, m0);
          Value fullEnd = add(
              pb, m0,
              mul(pb, arith::DivUIOp::create(pb, loc, span, idx(pb, mr)), mr));
          task(pb);
          forRange(pb, loc, idx(pb, 0), k, idx(pb, kPanelDepth),
                   [&](OpBuilder &cb, Location, Value kc) {
                     Value kEnd = arith::MinUIOp::create(
                         cb, loc, addc(cb, kc, kPanelDepth), k);
                     Value depth = arith::SubIOp::create(cb, loc, kEnd, kc);
                     Value first = arith::CmpIOp::create(
                         cb, loc, arith::CmpIPredicate::eq, kc, idx(cb, 0));
                     fill(cb, n0, kc, kEnd);
                     forRange(cb, loc, m0, fullEnd, idx(cb, mr),
                              [&](OpBuilder &tb, Location, Value m) {
                                tile(tb, n0, m, mr, kc, depth, first);
                              });
                     forRange(cb, loc, fullEnd, m1, idx(cb, 1),
                              [&](OpBuilder &tb, Location, Value m) {
                                tile(tb, n0, m, 1, kc, depth, first);
                              });
                   });
          scf::ReduceOp::create(pb, loc);
        });
    markKeepParallel(par);
  }

  /// Walks rows [n0, n0 + count) of W over K's [kc, kEnd): `put(fb, j, at,
  /// v, x)` gets vector v of each sub-block of row n0 + j (values at + v vl
  /// .. of the chunk), zero for rows past nRows. (Chunks are whole
  /// super-blocks: kPanelDepth % 256 = 0.)
  void forEachPanelRow(
      OpBuilder &cb, Value n0, int64_t count, Value nRows, Value rowBytes,
      Value kc, Value kEnd,
      function_ref<void(OpBuilder &, Value, Value, int64_t, Value)> put) const {
    Value zeroV = arith::ConstantOp::create(
        cb, loc, vt, DenseElementsAttr::get(vt, cb.getF32FloatAttr(0)));
    forEachRowOfW(
        cb, n0, count, nRows, rowBytes,
        [&](OpBuilder &jb, Value j, Value inside, Value rowBase) {
          auto store = [&](OpBuilder &fb, const SubBlock &sub, Value sb) {
            Value at = arith::SubIOp::create(fb, loc, mul(fb, sb, 32), kc);
            for (int64_t v = 0; v < vectors(); ++v)
              put(fb, j, at, v,
                  arith::SelectOp::create(fb, loc, inside, vectorOf(fb, sub, v),
                                          zeroV));
          };
          forEachSubBlock(
              jb, rowBase, arith::DivUIOp::create(jb, loc, kc, idx(jb, 32)),
              arith::DivUIOp::create(jb, loc, kEnd, idx(jb, 32)), store);
        });
  }

  /// Walks rows [n0, n0 + count) of W: `body(jb, j, inside, rowBase)` for
  /// row n0 + j, `inside` whether it is below nRows, `rowBase` its first
  /// byte (row 0's for rows past nRows, whose values the body replaces by
  /// zeros).
  void forEachRowOfW(
      OpBuilder &cb, Value n0, int64_t count, Value nRows, Value rowBytes,
      function_ref<void(OpBuilder &, Value, Value, Value)> body) const {
    forRange(cb, loc, idx(cb, 0), idx(cb, count), idx(cb, 1),
             [&](OpBuilder &jb, Location, Value j) {
               Value n = add(jb, n0, j);
               Value inside = arith::CmpIOp::create(
                   jb, loc, arith::CmpIPredicate::ult, n, nRows);
               Value rowBase = arith::MulIOp::create(
                   jb, loc,
                   arith::SelectOp::create(jb, loc, inside, n, idx(jb, 0)),
                   rowBytes);
               body(jb, j, inside, rowBase);
             });
  }

  /// The panel of W's rows [n0, n0 + panelW()) over K's [kc, kEnd):
  /// panel[k - kc][j] = W[n0 + j][k], 0 for rows past nRows.
  void fillPanel(OpBuilder &cb, Value panel, Value stage, Value n0, Value nRows,
                 Value rowBytes, Value kc, Value kEnd) const {
    if (stage)
      return fillPanelByBlocks(cb, panel, stage, n0, nRows, rowBytes, kc, kEnd);
    // Each sub-block's vectors stored down column j.
    forEachPanelRow(
        cb, n0, panelW(), nRows, rowBytes, kc, kEnd,
        [&](OpBuilder &fb, Value j, Value at, int64_t v, Value x) {
          for (int64_t e = 0; e < vl; ++e)
            memref::StoreOp::create(
                fb, loc,
                vector::ExtractOp::create(fb, loc, x, ArrayRef<int64_t>{e}),
                panel, ValueRange{addc(fb, at, v * vl + e), j});
        });
  }

  /// fillPanel with AVX-512: 16 rows of W at a time are dequantized into
  /// a stage [16, kPanelDepth] along K (whole vectors stored), and each 16 x
  /// 16 block of the stage goes to the panel transposed in registers: four
  /// rounds of 16 two-vector shuffles, round b exchanging bit b of the row
  /// with bit b of the column (b = 8, 4, 2, 1). The element-wise stores
  /// this replaces were a fifth of a prompt's time.
  void fillPanelByBlocks(OpBuilder &cb, Value panel, Value stage, Value n0,
                         Value nRows, Value rowBytes, Value kc,
                         Value kEnd) const {
    Value depth = arith::SubIOp::create(cb, loc, kEnd, kc);
    for (int64_t g = 0; g < panelW() / 16; ++g) {
      forEachPanelRow(
          cb, addc(cb, n0, g * 16), 16, nRows, rowBytes, kc, kEnd,
          [&](OpBuilder &fb, Value r, Value at, int64_t v, Value x) {
            vector::StoreOp::create(fb, loc, x, stage,
                                    ValueRange{r, addc(fb, at, v * vl)});
          });
      // (depth is a multiple of 32: rows are whole blocks of 32 values.)
      forRange(cb, loc, idx(cb, 0), depth, idx(cb, 16),
               [&](OpBuilder &tb, Location, Value k0) {
                 transposeBlock(tb, stage, panel, k0, g * 16, vt);
               });
    }
  }

  /// dst[k0 + i][col0 + c] = stage[c][k0 + i] for i, c < 16 (16 values of
  /// 32 bits a vector `t`): the block is transposed in registers by four
  /// rounds of 16 two-vector shuffles, round b exchanging bit b of the row
  /// with bit b of the column (b = 8, 4, 2, 1).
  void transposeBlock(OpBuilder &tb, Value stage, Value dst, Value k0,
                      int64_t col0, VectorType t) const {
    SmallVector<Value, 16> rows;
    for (int64_t i = 0; i < 16; ++i)
      rows.push_back(vector::LoadOp::create(tb, loc, t, stage,
                                            ValueRange{idx(tb, i), k0}));
    for (int64_t bit = 8; bit >= 1; bit /= 2) {
      SmallVector<int64_t, 16> lo, hi;
      for (int64_t c = 0; c < 16; ++c) {
        lo.push_back(c & bit ? 16 + c - bit : c);
        hi.push_back(c & bit ? 16 + c : c + bit);
      }
      for (int64_t i = 0; i < 16; ++i) {
        if (i & bit)
          continue;
        Value x = rows[i], y = rows[i + bit];
        rows[i] = vector::ShuffleOp::create(tb, loc, x, y, lo);
        rows[i + bit] = vector::ShuffleOp::create(tb, loc, x, y, hi);
      }
    }
    for (int64_t i = 0; i < 16; ++i)
      vector::StoreOp::create(tb, loc, rows[i], dst,
                              ValueRange{addc(tb, k0, i), idx(tb, col0)});
  }

  /// Rows [m, m + mr) of A times the panel (W's rows n0 .. n0 + panelW() - 1)
  /// over the chunk [kc, kc + depth) of K: mr x nv vector accumulators, stored
  /// into out (`first` chunk) or added to it; columns past nRows are left.
  void panelTile(OpBuilder &nb, Value panel, Value m, int64_t mr, int64_t nv,
                 Value n0, Value nRows, Value kc, Value depth,
                 Value first) const {
    Value zero = arith::ConstantOp::create(
        nb, loc, vt, DenseElementsAttr::get(vt, nb.getF32FloatAttr(0)));
    SmallVector<Value> init(mr * nv, zero), rows;
    for (int64_t i = 0; i < mr; ++i)
      rows.push_back(addc(nb, m, i));
    auto loop = scf::ForOp::create(
        nb, loc, idx(nb, 0), depth, idx(nb, 1), init,
        [&](OpBuilder &fb, Location, Value kk, ValueRange acc) {
          SmallVector<Value> next(acc.begin(), acc.end()), wv;
          Value col = add(fb, kc, kk);
          for (int64_t v = 0; v < nv; ++v)
            wv.push_back(vector::LoadOp::create(
                fb, loc, vt, panel, ValueRange{kk, idx(fb, v * vl)}));
          for (int64_t i = 0; i < mr; ++i) {
            Value ai = splatF(fb, memref::LoadOp::create(
                                      fb, loc, a, ValueRange{rows[i], col}));
            for (int64_t v = 0; v < nv; ++v)
              next[i * nv + v] =
                  vector::FMAOp::create(fb, loc, ai, wv[v], next[i * nv + v]);
          }
          scf::YieldOp::create(fb, loc, next);
        });
    SmallVector<Value> sums(loop.getResults());
    storeTile(nb, sums, rows, nv, n0, nRows, first);
  }

  /// Adds a tile's sums (`sums[i * nv + v]`: row rows[i] of A, columns n0 +
  /// v vl ..) to out, or stores them there (`first` chunk of K); columns
  /// past nRows are left.
  void storeTile(OpBuilder &nb, ArrayRef<Value> sums, ArrayRef<Value> rows,
                 int64_t nv, Value n0, Value nRows, Value first) const {
    int64_t mr = rows.size();
    Value whole = arith::CmpIOp::create(nb, loc, arith::CmpIPredicate::ule,
                                        addc(nb, n0, panelW()), nRows);
    auto ifOp = scf::IfOp::create(nb, loc, whole, /*withElseRegion=*/true);
    {
      // All the panel's columns inside: vectors.
      OpBuilder tb = OpBuilder::atBlockBegin(ifOp.thenBlock());
      for (int64_t i = 0; i < mr; ++i)
        for (int64_t v = 0; v < nv; ++v) {
          SmallVector<Value, 2> at{rows[i], addc(tb, n0, v * vl)};
          Value r = sums[i * nv + v];
          Value old = vector::LoadOp::create(tb, loc, vt, out, at);
          Value sum = arith::AddFOp::create(tb, loc, old, r);
          vector::StoreOp::create(
              tb, loc, arith::SelectOp::create(tb, loc, first, r, sum), out,
              at);
        }
    }
    {
      // The last panel of W's rows: element by element up to nRows.
      OpBuilder eb = OpBuilder::atBlockBegin(ifOp.elseBlock());
      for (int64_t i = 0; i < mr; ++i)
        for (int64_t v = 0; v < nv; ++v)
          for (int64_t e = 0; e < vl; ++e) {
            Value n = addc(eb, n0, v * vl + e);
            Value inside = arith::CmpIOp::create(
                eb, loc, arith::CmpIPredicate::ult, n, nRows);
            scf::IfOp::create(eb, loc, inside, [&](OpBuilder &ib, Location) {
              SmallVector<Value, 2> at{rows[i], n};
              Value r = vector::ExtractOp::create(ib, loc, sums[i * nv + v],
                                                  ArrayRef<int64_t>{e});
              Value old = memref::LoadOp::create(ib, loc, out, at);
              Value sum = arith::AddFOp::create(ib, loc, old, r);
              memref::StoreOp::create(
                  ib, loc, arith::SelectOp::create(ib, loc, first, r, sum), out,
                  at);
              scf::YieldOp::create(ib, loc);
            });
          }
    }
  }

  /// Whether a prompt multiplies in bytes: AVX512_VNNI's vpdpbusd on 512
  /// bits for the quantized types (emitBytePanels), else f32 panels.
  bool bytePanels() const { return int8Dot && vl == 16 && int8Path(); }
  /// Values of K that share a weight scale in a byte panel: Q6_K's 16,
  /// else a sub-block.
  int64_t groupValues() const { return type == TFM_GGML_BLOCKS_Q6_K ? 16 : 32; }

  /// Many rows of A with VNNI (the f32 panels of emitPanels in bytes). A
  /// is quantized to bytes once as for a decode (Q8_0's per 32 values for
  /// Q8_0 and Q4_0, llama.cpp's Q8_K per 256 for the K-quants), with the
  /// sums of its bytes per group of groupValues(). Each task fills, a
  /// chunk of K at a time, a panel of its 32 rows of W as unsigned bytes in
  /// quads of K ([kPanelDepth / 4, 32] words: word [q, j] holds W[n0 + j]'s
  /// values 4q .. 4q + 3 of the chunk as u, with w = s u - o), and per
  /// group each row's s and o ([groups, 32] f32). The register tile is mr
  /// rows of A x the 32 rows of W, i32 accumulators per group: per quad of
  /// K, 2 loads of the panel and 2 mr vpdpbusd (A's 4 bytes broadcast),
  /// then per group the sums scaled into f32 accumulators: acc += da (s
  /// sum(u q) - o sum(q)), da A's scale. Exact in integers within a group:
  /// the product is a decode's integer dot product, grouped as a panel is.
  void emitBytePanels(Value mRows, Value nRows) const {
    const int64_t nv = panelW() / vl, mr = 6, g = groupValues();
    Value rowBytes = bytesOfRow();
    QuantizedA qa = quantizeForDots(mRows, g);
    BytePanel panel;
    Value stage;
    forEachPanelTask(
        mRows, nRows, kBytePanelRowsA, mr,
        [&](OpBuilder &pb) {
          auto panelOf = [&](int64_t rows, Type t) -> Value {
            return memref::AllocaOp::create(
                pb, loc, MemRefType::get({rows, panelW()}, t), ValueRange{},
                pb.getI64IntegerAttr(64));
          };
          panel.words = panelOf(kPanelDepth / 4, pb.getI32Type());
          panel.scales = panelOf(kPanelDepth / g, pb.getF32Type());
          panel.offsets = panelOf(kPanelDepth / g, pb.getF32Type());
          stage = memref::AllocaOp::create(
              pb, loc, MemRefType::get({16, kPanelDepth / 4}, pb.getI32Type()),
              ValueRange{}, pb.getI64IntegerAttr(64));
        },
        [&](OpBuilder &cb, Value n0, Value kc, Value kEnd) {
          fillBytePanel(cb, panel, stage, n0, nRows, rowBytes, kc, kEnd);
        },
        [&](OpBuilder &tb, Value n0, Value m, int64_t rows, Value kc,
            Value depth, Value first) {
          bytePanelTile(tb, panel, qa, m, rows, nv, n0, nRows, kc, depth,
                        first);
        });
    freeQuantized(qa);
  }

  /// A task's byte panel: the words of W's bytes, each group's s and o.
  struct BytePanel {
    Value words, scales, offsets;
  };

  /// qa.sums[m, i] = the sum of qa.bytes[m, i g .. i g + g - 1], rows in
  /// parallel.
  void sumBytesOfA(Value mRows, const QuantizedA &qa, int64_t g) const {
    auto bytes = VectorType::get({g}, b.getI8Type());
    auto ints = VectorType::get({g}, b.getI32Type());
    forEachBlockOfA(
        mRows, g, [&](OpBuilder &fb, Value m, Value blk, Value col0) {
          Value x = vector::LoadOp::create(fb, loc, bytes, qa.bytes,
                                           ValueRange{m, col0});
          Value sum = vector::ReductionOp::create(
              fb, loc, vector::CombiningKind::ADD,
              arith::ExtSIOp::create(fb, loc, ints, x));
          memref::StoreOp::create(
              fb, loc, arith::SIToFPOp::create(fb, loc, fb.getF32Type(), sum),
              qa.sums, ValueRange{m, blk});
        });
  }

  /// A Q8_0 or Q4_0 sub-block's 32 values as unsigned bytes u, and the
  /// offset o of w = d u - o: Q8_0's bytes plus 128 (o = 128 d), Q4_0's
  /// nibbles (o = 8 d).
  std::pair<Value, Value> unsignedBytes(OpBuilder &nb,
                                        const SubBlock &s) const {
    Value d = s.scale[0];
    if (type == TFM_GGML_BLOCKS_Q4_0)
      return {q4_0Nibbles(nb, s.base),
              arith::MulFOp::create(nb, loc, d, cF32(nb, loc, 8))};
    auto b32 = VectorType::get({32}, nb.getI8Type());
    Value q = vector::LoadOp::create(nb, loc, b32, w, addc(nb, s.base, 2));
    Value flip = arith::ConstantOp::create(
        nb, loc, b32, DenseElementsAttr::get(b32, nb.getI8IntegerAttr(-128)));
    return {arith::XOrIOp::create(nb, loc, q, flip),
            arith::MulFOp::create(nb, loc, d, cF32(nb, loc, 128))};
  }

  /// The byte panel of W's rows [n0, n0 + panelW()) over K's [kc, kEnd)
  /// (rows past nRows: zeros). 16 rows at a time go to `stage` [16,
  /// kPanelDepth / 4] of words, each sub-block's bytes stored as a vector,
  /// and each 16 x 16 block of words to the panel transposed in registers
  /// (transposeBlock). The K-quants' scales and offsets come a super-block
  /// at a time, from its packed scale bytes unpacked at once (kScales).
  void fillBytePanel(OpBuilder &cb, const BytePanel &p, Value stage, Value n0,
                     Value nRows, Value rowBytes, Value kc, Value kEnd) const {
    auto b32 = VectorType::get({32}, cb.getI8Type());
    auto w8 = VectorType::get({8}, cb.getI32Type());
    auto w16 = VectorType::get({16}, cb.getI32Type());
    int64_t g = groupValues();
    Value quads = arith::DivUIOp::create(
        cb, loc, arith::SubIOp::create(cb, loc, kEnd, kc), idx(cb, 4));
    for (int64_t half = 0; half < panelW() / 16; ++half) {
      forEachRowOfW(
          cb, addc(cb, n0, half * 16), 16, nRows, rowBytes,
          [&](OpBuilder &jb, Value r, Value inside, Value rowBase) {
            Value j = addc(jb, r, half * 16);
            Value zeroB = arith::ConstantOp::create(
                jb, loc, b32,
                DenseElementsAttr::get(b32, jb.getI8IntegerAttr(0)));
            Value zeroF = cF32(jb, loc, 0);
            // Sub-block sb's bytes u into the stage's row r.
            auto putBytes = [&](OpBuilder &fb, Value u, Value sb) {
              Value at = arith::SubIOp::create(fb, loc, mul(fb, sb, 32), kc);
              Value words = vector::BitCastOp::create(
                  fb, loc, w8,
                  arith::SelectOp::create(fb, loc, inside, u, zeroB));
              vector::StoreOp::create(
                  fb, loc, words, stage,
                  ValueRange{r,
                             arith::DivUIOp::create(fb, loc, at, idx(fb, 4))});
            };
            // Group `grp` of the chunk's s and o for column j.
            auto putScale = [&](OpBuilder &fb, Value sc, Value o, Value grp) {
              memref::StoreOp::create(
                  fb, loc, arith::SelectOp::create(fb, loc, inside, sc, zeroF),
                  p.scales, ValueRange{grp, j});
              memref::StoreOp::create(
                  fb, loc, arith::SelectOp::create(fb, loc, inside, o, zeroF),
                  p.offsets, ValueRange{grp, j});
            };
            if (!isKQuant()) {
              forRange(jb, loc,
                       arith::DivUIOp::create(jb, loc, kc, idx(jb, 32)),
                       arith::DivUIOp::create(jb, loc, kEnd, idx(jb, 32)),
                       idx(jb, 1), [&](OpBuilder &fb, Location, Value sb) {
                         SubBlock sub = prepare(fb, rowBase, sb);
                         auto [u, o] = unsignedBytes(fb, sub);
                         putBytes(fb, u, sb);
                         putScale(fb, sub.scale[0], o,
                                  arith::SubIOp::create(
                                      fb, loc, sb,
                                      arith::DivUIOp::create(fb, loc, kc,
                                                             idx(fb, 32))));
                       });
              return;
            }
            forRange(
                jb, loc, arith::DivUIOp::create(jb, loc, kc, idx(jb, 256)),
                arith::DivUIOp::create(jb, loc, kEnd, idx(jb, 256)), idx(jb, 1),
                [&](OpBuilder &fb, Location, Value blk) {
                  Value base = add(fb, rowBase,
                                   mul(fb, blk, tfm_ggml_blocks_bytes(type)));
                  // Every group's s and o from the super-block's scales at
                  // once.
                  Value lanes = kScales(fb, base);
                  int64_t groups = 256 / g;
                  auto fv = VectorType::get({groups}, fb.getF32Type());
                  Value sv, ov;
                  if (type == TFM_GGML_BLOCKS_Q6_K) {
                    Value d = vector::BroadcastOp::create(
                        fb, loc, fv, halfAt(fb, addc(fb, base, 208)));
                    sv = arith::MulFOp::create(
                        fb, loc, arith::SIToFPOp::create(fb, loc, fv, lanes),
                        d);
                    ov = arith::MulFOp::create(
                        fb, loc, sv,
                        vector::BroadcastOp::create(fb, loc, fv,
                                                    cF32(fb, loc, 32)));
                  } else {
                    // Q4_K / Q5_K: lanes 0..7 the groups' scales, 8..15
                    // their mins.
                    SmallVector<int64_t> low, high;
                    for (int64_t i = 0; i < 8; ++i) {
                      low.push_back(i);
                      high.push_back(8 + i);
                    }
                    auto lanes8 = [&](ArrayRef<int64_t> which) -> Value {
                      return arith::UIToFPOp::create(
                          fb, loc, fv,
                          vector::ShuffleOp::create(fb, loc, lanes, lanes,
                                                    which));
                    };
                    sv = arith::MulFOp::create(
                        fb, loc, lanes8(low),
                        vector::BroadcastOp::create(fb, loc, fv,
                                                    halfAt(fb, base)));
                    ov = arith::MulFOp::create(
                        fb, loc, lanes8(high),
                        vector::BroadcastOp::create(
                            fb, loc, fv, halfAt(fb, addc(fb, base, 2))));
                  }
                  Value grp0 = arith::DivUIOp::create(
                      fb, loc,
                      arith::SubIOp::create(fb, loc, mul(fb, blk, 256), kc),
                      idx(fb, g));
                  for (int64_t i = 0; i < groups; ++i)
                    putScale(fb,
                             vector::ExtractOp::create(fb, loc, sv,
                                                       ArrayRef<int64_t>{i}),
                             vector::ExtractOp::create(fb, loc, ov,
                                                       ArrayRef<int64_t>{i}),
                             addc(fb, grp0, i));
                  for (int64_t sj = 0; sj < 8; ++sj)
                    putBytes(fb,
                             kQuantBytes(fb, kOffsets(fb, base, sj),
                                         /*unsignedQ6=*/true),
                             addc(fb, mul(fb, blk, 8), sj));
                });
          });
      // (The chunk's quads are a multiple of 8; a block past them carries
      // what the stage held, into panel words no group reads.)
      forRange(cb, loc, idx(cb, 0), quads, idx(cb, 16),
               [&](OpBuilder &tb, Location, Value k0) {
                 transposeBlock(tb, stage, p.words, k0, half * 16, w16);
               });
    }
  }

  /// Rows [m, m + mr) of qa times the byte panel over the chunk [kc, kc +
  /// depth) of K, into out (emitBytePanels).
  void bytePanelTile(OpBuilder &nb, const BytePanel &p, const QuantizedA &qa,
                     Value m, int64_t mr, int64_t nv, Value n0, Value nRows,
                     Value kc, Value depth, Value first) const {
    auto i32x16 = VectorType::get({16}, nb.getI32Type());
    auto b64 = VectorType::get({64}, nb.getI8Type());
    auto b4 = VectorType::get({4}, nb.getI8Type());
    auto w1 = VectorType::get({1}, nb.getI32Type());
    int64_t g = groupValues(), aBlock = isKQuant() ? 256 : 32;
    Value zeroF = arith::ConstantOp::create(
        nb, loc, vt, DenseElementsAttr::get(vt, nb.getF32FloatAttr(0)));
    Value zeroI = arith::ConstantOp::create(
        nb, loc, i32x16,
        DenseElementsAttr::get(i32x16, nb.getI32IntegerAttr(0)));
    SmallVector<Value> init(mr * nv, zeroF), rows;
    for (int64_t i = 0; i < mr; ++i)
      rows.push_back(addc(nb, m, i));
    Value groups = arith::DivUIOp::create(nb, loc, depth, idx(nb, g));
    auto loop = scf::ForOp::create(
        nb, loc, idx(nb, 0), groups, idx(nb, 1), init,
        [&](OpBuilder &fb, Location, Value gi, ValueRange acc) {
          SmallVector<Value> next(acc.begin(), acc.end());
          SmallVector<Value> isum(mr * nv, zeroI);
          Value col = add(fb, kc, mul(fb, gi, g));
          for (int64_t q = 0; q < g / 4; ++q) {
            Value qi = addc(fb, mul(fb, gi, g / 4), q);
            SmallVector<Value> wv;
            for (int64_t v = 0; v < nv; ++v)
              wv.push_back(vector::BitCastOp::create(
                  fb, loc, b64,
                  vector::LoadOp::create(fb, loc, i32x16, p.words,
                                         ValueRange{qi, idx(fb, v * vl)})));
            for (int64_t i = 0; i < mr; ++i) {
              Value four = vector::LoadOp::create(
                  fb, loc, b4, qa.bytes,
                  ValueRange{rows[i], addc(fb, col, 4 * q)});
              Value word = vector::ExtractOp::create(
                  fb, loc, vector::BitCastOp::create(fb, loc, w1, four),
                  ArrayRef<int64_t>{0});
              Value ab = vector::BitCastOp::create(
                  fb, loc, b64,
                  vector::BroadcastOp::create(fb, loc, i32x16, word));
              for (int64_t v = 0; v < nv; ++v)
                isum[i * nv + v] = intrinsic(fb, i32x16, kVpdpbusd512,
                                             {isum[i * nv + v], wv[v], ab});
            }
          }
          SmallVector<Value> sv, ov;
          for (int64_t v = 0; v < nv; ++v) {
            sv.push_back(vector::LoadOp::create(
                fb, loc, vt, p.scales, ValueRange{gi, idx(fb, v * vl)}));
            ov.push_back(vector::LoadOp::create(
                fb, loc, vt, p.offsets, ValueRange{gi, idx(fb, v * vl)}));
          }
          for (int64_t i = 0; i < mr; ++i) {
            Value da = memref::LoadOp::create(
                fb, loc, qa.scales,
                ValueRange{rows[i], arith::DivUIOp::create(fb, loc, col,
                                                           idx(fb, aBlock))});
            Value sa = memref::LoadOp::create(
                fb, loc, qa.sums,
                ValueRange{rows[i],
                           arith::DivUIOp::create(fb, loc, col, idx(fb, g))});
            Value dav = splatF(fb, da);
            Value minus = splatF(
                fb, arith::NegFOp::create(
                        fb, loc, arith::MulFOp::create(fb, loc, sa, da)));
            for (int64_t v = 0; v < nv; ++v) {
              Value f = toF32(fb, isum[i * nv + v]);
              Value scaled = arith::MulFOp::create(fb, loc, sv[v], dav);
              Value x =
                  vector::FMAOp::create(fb, loc, f, scaled, next[i * nv + v]);
              next[i * nv + v] =
                  vector::FMAOp::create(fb, loc, ov[v], minus, x);
            }
          }
          scf::YieldOp::create(fb, loc, next);
        });
    SmallVector<Value> sums(loop.getResults());
    storeTile(nb, sums, rows, nv, n0, nRows, first);
  }

  /// Few rows of A: tasks of kTaskRowsW rows of W x kTaskRowsA rows of A
  /// over the threads, register tiles on the blocks.
  void emitTiles(Value mRows, Value nRows) const {
    Value rowBytes = bytesOfRow();
    QuantizedA qa;
    if (int8Path())
      qa = quantizeForDots(mRows, hasMins() ? 32 : 0);
    Value tasksW =
        arith::CeilDivUIOp::create(b, loc, nRows, idx(b, kTaskRowsW));
    Value tasksA =
        arith::CeilDivUIOp::create(b, loc, mRows, idx(b, kTaskRowsA));
    auto par = scf::ParallelOp::create(
        b, loc, ValueRange{idx(b, 0), idx(b, 0)}, ValueRange{tasksW, tasksA},
        ValueRange{idx(b, 1), idx(b, 1)},
        [&](OpBuilder &pb, Location, ValueRange ivs) {
          Value n0 = mul(pb, ivs[0], kTaskRowsW);
          Value n1 =
              arith::MinUIOp::create(pb, loc, addc(pb, n0, kTaskRowsW), nRows);
          Value m0 = mul(pb, ivs[1], kTaskRowsA);
          Value m1 =
              arith::MinUIOp::create(pb, loc, addc(pb, m0, kTaskRowsA), mRows);
          Value span = arith::SubIOp::create(pb, loc, m1, m0);
          Value fullEnd = add(
              pb, m0,
              mul(pb, arith::DivUIOp::create(pb, loc, span, idx(pb, 4)), 4));
          forRange(pb, loc, m0, fullEnd, idx(pb, 4),
                   [&](OpBuilder &fb, Location, Value m) {
                     rowsOfW(fb, m, 4, n0, n1, /*split=*/false, rowBytes, qa);
                   });
          forRange(pb, loc, fullEnd, m1, idx(pb, 1),
                   [&](OpBuilder &fb, Location, Value m) {
                     rowsOfW(fb, m, 1, n0, n1, /*split=*/true, rowBytes, qa);
                   });
          scf::ReduceOp::create(pb, loc);
        });
    markKeepParallel(par);
    freeQuantized(qa);
  }
};

} // namespace

/// Defines tfm_ggml_gemm(A, rows, type, out) in `module` (once): out = A W^T
/// for W in the rows of the ggml type `type`.
void cpu::defineGgmlGemm(ModuleOp module, int64_t vl, bool int8Dot) {
  if (module.lookupSymbol<func::FuncOp>(kGgmlGemmFn))
    return;
  MLIRContext *ctx = module.getContext();
  Type i32 = IntegerType::get(ctx, 32);
  defineTypeSwitch(
      module, kGgmlGemmFn,
      {matrixType(ctx), rowsType(ctx), i32, matrixType(ctx)}, 2,
      [&](OpBuilder &b, Location loc, int32_t type, Block *entry) {
        Value a = entry->getArgument(0), w = entry->getArgument(1),
              out = entry->getArgument(3);
        Value m = dim(b, loc, a, 0), k = dim(b, loc, a, 1),
              n = dim(b, loc, out, 1);
        TypeLowering(b, loc, type, vl, int8Dot, a, w, out, k).emit(m, n);
      });
}

/// Defines tfm_ggml_row(rows, type, row, out) in `module` (once): row `row`
/// of the weight in the rows of ggml type `type`, dequantized into out [K].
void cpu::defineGgmlRow(ModuleOp module, int64_t vl) {
  if (module.lookupSymbol<func::FuncOp>(kGgmlRowFn))
    return;
  MLIRContext *ctx = module.getContext();
  defineTypeSwitch(
      module, kGgmlRowFn,
      {rowsType(ctx), IntegerType::get(ctx, 32), IndexType::get(ctx),
       vectorType(ctx)},
      1, [&](OpBuilder &b, Location loc, int32_t type, Block *entry) {
        Value w = entry->getArgument(0), row = entry->getArgument(2),
              out = entry->getArgument(3);
        Value k = dim(b, loc, out, 0);
        TypeLowering(b, loc, type, vl, false, Value(), w, Value(), k)
            .emitRow(row, out);
      });
}

namespace {

/// `v` as the shared function's matrix type: cast where its layout allows,
/// else copied to (`copyBack`: from) a fresh buffer.
Value asMatrix(OpBuilder &b, Location loc, Value v, bool copyBack,
               SmallVectorImpl<std::pair<Value, Value>> &copies) {
  MemRefType target = matrixType(b.getContext());
  if (memref::CastOp::areCastCompatible(v.getType(), target))
    return memref::CastOp::create(b, loc, target, v);
  auto mt = cast<MemRefType>(v.getType());
  SmallVector<Value> sizes;
  for (int64_t i = 0; i < 2; ++i)
    if (mt.isDynamicDim(i))
      sizes.push_back(dim(b, loc, v, i));
  Value buf = memref::AllocOp::create(
      b, loc, MemRefType::get(mt.getShape(), mt.getElementType()), sizes);
  if (!copyBack)
    memref::CopyOp::create(b, loc, v, buf);
  else
    copies.push_back({buf, v});
  return memref::CastOp::create(b, loc, target, buf);
}

struct LowerGgmlLinearKernel : OpRewritePattern<GgmlLinearKernelOp> {
  LowerGgmlLinearKernel(MLIRContext *ctx, int64_t vl)
      : OpRewritePattern(ctx), vl(vl) {}
  int64_t vl;

  LogicalResult matchAndRewrite(GgmlLinearKernelOp op,
                                PatternRewriter &b) const override {
    if (!op.hasPureBufferSemantics())
      return b.notifyMatchFailure(op, "not bufferized yet");
    Location loc = op.getLoc();
    auto fn = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
        op, StringAttr::get(op.getContext(), kGgmlGemmFn));
    if (!fn)
      return b.notifyMatchFailure(op, "tfm_ggml_gemm is not defined");
    SmallVector<std::pair<Value, Value>> copies;
    Value a = asMatrix(b, loc, op.getInput(), false, copies);
    Value out = asMatrix(b, loc, op.getOutput(), true, copies);
    Value rows =
        memref::CastOp::create(b, loc, rowsType(b.getContext()), op.getRows());
    Value type = memref::LoadOp::create(b, loc, op.getGgmlType(),
                                        ValueRange{cIdx(b, loc, 0)});
    func::CallOp::create(b, loc, fn, ValueRange{a, rows, type, out});
    for (auto [buf, to] : copies) {
      memref::CopyOp::create(b, loc, buf, to);
      memref::DeallocOp::create(b, loc, buf);
    }
    emitEpilogue(b, loc, op);
    b.eraseOp(op);
    return success();
  }

  /// The bias, activation, product with `mul` and sum with `residual`,
  /// over the output in place, rows over the threads.
  void emitEpilogue(OpBuilder &b, Location loc, GgmlLinearKernelOp op) const {
    if (!op.getBias() && !op.getActivation() && !op.getMul() &&
        !op.getResidual())
      return;
    Value out = op.getOutput();
    auto vt = VectorType::get({vl}, b.getF32Type());
    auto maskT = VectorType::get({vl}, b.getI1Type());
    int64_t n = cast<MemRefType>(out.getType()).getDimSize(1);
    Value zero = arith::ConstantOp::create(
        b, loc, vt, DenseElementsAttr::get(vt, b.getF32FloatAttr(0)));
    auto par = scf::ParallelOp::create(
        b, loc, ValueRange{cIdx(b, loc, 0)}, ValueRange{dim(b, loc, out, 0)},
        ValueRange{cIdx(b, loc, 1)},
        [&](OpBuilder &pb, Location, ValueRange ivs) {
          Value row = ivs[0];
          // Columns [col, col + vl), `mask` (or none) limiting them.
          auto chunk = [&](OpBuilder &cb, Value col, Value mask) {
            auto load = [&](Value from, SmallVector<Value> at) -> Value {
              at.push_back(col);
              if (!mask)
                return vector::LoadOp::create(cb, loc, vt, from, at);
              return vector::MaskedLoadOp::create(cb, loc, vt, from, at, mask,
                                                  zero);
            };
            Value v = load(out, {row});
            if (Value bias = op.getBias())
              v = arith::AddFOp::create(cb, loc, v, load(bias, {}));
            if (auto act = op.getActivation())
              v = buildActivation(cb, loc, *act, v);
            if (Value m = op.getMul())
              v = arith::MulFOp::create(cb, loc, v,
                                        load(m, rowIndices(cb, loc, m, row)));
            if (Value r = op.getResidual())
              v = arith::AddFOp::create(cb, loc, v,
                                        load(r, rowIndices(cb, loc, r, row)));
            if (!mask)
              vector::StoreOp::create(cb, loc, v, out, ValueRange{row, col});
            else
              vector::MaskedStoreOp::create(cb, loc, out, ValueRange{row, col},
                                            mask, v);
          };
          int64_t whole = n / vl * vl;
          forRange(pb, loc, cIdx(pb, loc, 0), cIdx(pb, loc, whole),
                   cIdx(pb, loc, vl), [&](OpBuilder &fb, Location, Value col) {
                     chunk(fb, col, Value());
                   });
          if (whole < n)
            chunk(pb, cIdx(pb, loc, whole),
                  vector::CreateMaskOp::create(
                      pb, loc, maskT, ValueRange{cIdx(pb, loc, n - whole)}));
          scf::ReduceOp::create(pb, loc);
        });
    markKeepParallel(par);
  }
};

/// tfm.ggml_embed_kernel: a call of tfm_ggml_row per token (tokens in
/// parallel), then the scale.
struct LowerGgmlEmbedKernel : OpRewritePattern<GgmlEmbedKernelOp> {
  LowerGgmlEmbedKernel(MLIRContext *ctx, int64_t vl)
      : OpRewritePattern(ctx), vl(vl) {}
  int64_t vl;

  LogicalResult matchAndRewrite(GgmlEmbedKernelOp op,
                                PatternRewriter &b) const override {
    if (!op.hasPureBufferSemantics())
      return b.notifyMatchFailure(op, "not bufferized yet");
    auto fn = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
        op, StringAttr::get(op.getContext(), kGgmlRowFn));
    if (!fn)
      return b.notifyMatchFailure(op, "tfm_ggml_row is not defined");
    Location loc = op.getLoc();
    Value out = op.getOutput(), tokens = op.getTokens();
    int64_t k = cast<MemRefType>(out.getType()).getDimSize(2);
    Value rows =
        memref::CastOp::create(b, loc, rowsType(b.getContext()), op.getRows());
    Value type = memref::LoadOp::create(b, loc, op.getGgmlType(),
                                        ValueRange{cIdx(b, loc, 0)});
    auto vt = VectorType::get({vl}, b.getF32Type());
    std::optional<double> scale;
    if (auto s = op.getScaleAttr())
      scale = s.getValueAsDouble();
    auto par = scf::ParallelOp::create(
        b, loc, ValueRange{cIdx(b, loc, 0), cIdx(b, loc, 0)},
        ValueRange{dim(b, loc, tokens, 0), dim(b, loc, tokens, 1)},
        ValueRange{cIdx(b, loc, 1), cIdx(b, loc, 1)},
        [&](OpBuilder &pb, Location, ValueRange ivs) {
          Value id = memref::LoadOp::create(pb, loc, tokens, ivs);
          id = arith::IndexCastOp::create(pb, loc, pb.getIndexType(), id);
          SmallVector<OpFoldResult> offsets{ivs[0], ivs[1], pb.getIndexAttr(0)};
          SmallVector<OpFoldResult> sizes{
              pb.getIndexAttr(1), pb.getIndexAttr(1), pb.getIndexAttr(k)};
          SmallVector<OpFoldResult> strides(3, pb.getIndexAttr(1));
          auto rowType = memref::SubViewOp::inferRankReducedResultType(
              {k}, cast<MemRefType>(out.getType()), offsets, sizes, strides);
          Value dst = memref::SubViewOp::create(
              pb, loc, cast<MemRefType>(rowType), out, offsets, sizes, strides);
          Value row =
              memref::CastOp::create(pb, loc, vectorType(pb.getContext()), dst);
          func::CallOp::create(pb, loc, fn, ValueRange{rows, type, id, row});
          if (scale) {
            Value f = arith::ConstantOp::create(
                pb, loc, vt,
                DenseElementsAttr::get(vt, pb.getF32FloatAttr(*scale)));
            forRange(pb, loc, cIdx(pb, loc, 0), cIdx(pb, loc, k),
                     cIdx(pb, loc, vl), [&](OpBuilder &fb, Location, Value c) {
                       Value v = vector::LoadOp::create(fb, loc, vt, row, c);
                       vector::StoreOp::create(
                           fb, loc, arith::MulFOp::create(fb, loc, v, f), row,
                           c);
                     });
          }
          scf::ReduceOp::create(pb, loc);
        });
    markKeepParallel(par);
    b.eraseOp(op);
    return success();
  }
};

} // namespace

void cpu::populateLowerGgmlLinearKernelPattern(RewritePatternSet &patterns,
                                               int64_t vectorWidth) {
  patterns.add<LowerGgmlLinearKernel, LowerGgmlEmbedKernel>(
      patterns.getContext(), vectorWidth);
}
