//===- Driver.cpp - from a .tfm file to the requested stage ---------------===//
//
// compile() runs the front end (tokens, syntax tree, description, model IR),
// then the target's MLIR pipeline up to the requested stage. Binaries stop
// the pipeline once the model function is on buffers, read its interface
// (the ABI and the parameter table, which the LLVM dialect would erase),
// finish the pipeline and hand the module to the host back end
// (Artifacts.cpp). The CPU and CUDA targets differ only in the rows of the
// pipeline's stage table and in the description's target fields.
//
//===----------------------------------------------------------------------===//

#include "tfm/Driver/Driver.h"

#include "Artifacts.h"
#include "KernelCache.h"

#include "tfm/Dialect/ModelDescription.h"
#include "tfm/Dialect/TfmOps.h"
#include "tfm/Frontend/AST.h"
#include "tfm/Frontend/Lexer.h"
#include "tfm/Frontend/MLIRGen.h"
#include "tfm/Frontend/Parser.h"
#include "tfm/Frontend/Sema.h"
#include "tfm/Transforms/Transforms.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/WithColor.h"

#include <functional>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::driver;

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

ArrayRef<StageInfo> mlir::tfm::getStageTable() {
  static constexpr StringLiteral kNeedCuda =
      "--emit=gpu, nvvm and ptx need --target=cuda";
  static const StageInfo table[] = {
      {Stage::Tokens, "tokens", "the token stream", ""},
      {Stage::AST, "ast", "the syntax tree", ""},
      {Stage::JSON, "json",
       "the resolved description with every default, parameters and "
       "parameter count",
       ""},
      {Stage::Tfm, "tfm", "model-level tfm dialect IR", ""},
      {Stage::Primitive, "tfm-primitive",
       "after tfm-decompose: the textbook primitive ops", ""},
      {Stage::Fused, "tfm-fused",
       "after tfm-fuse-attention: one tfm.attention per block", ""},
      {Stage::Linalg, "linalg",
       "linalg on tensors with the C ABI and kernel ops", ""},
      {Stage::Loops, "loops",
       "bufferized loops, vector kernels, parallel loops (cpu)",
       "--emit=loops is a CPU stage; with --target=cuda use --emit=gpu"},
      {Stage::Gpu, "gpu",
       "the gpu dialect: host code and outlined kernels (cuda)", kNeedCuda},
      {Stage::NVVM, "nvvm", "kernels in the NVVM dialect (cuda)", kNeedCuda},
      {Stage::PTX, "ptx", "the kernels' PTX (cuda)", kNeedCuda},
      {Stage::LLVMDialect, "llvm-mlir", "the LLVM dialect", ""},
      {Stage::LLVMIR, "llvm", "LLVM IR after O3", ""},
      {Stage::Asm, "asm", "x86-64 assembly", ""},
      {Stage::Obj, "obj", "an object file (as -c, no header)", ""},
      {Stage::Exe, "exe", "an executable (the default)", ""},
  };
  return table;
}

static const StageInfo &getStageInfo(Stage stage) {
  for (const StageInfo &info : getStageTable())
    if (info.stage == stage)
      return info;
  llvm_unreachable("every stage has a row");
}

StringRef mlir::tfm::getCpuName(CpuModel cpu) {
  switch (cpu) {
  case CpuModel::Native:
    return "native";
  case CpuModel::X86_64_V3:
    return "x86-64-v3";
  case CpuModel::X86_64_V4:
    return "x86-64-v4";
  }
  llvm_unreachable("unknown CpuModel");
}

StringRef mlir::tfm::getGpuArchName(GpuArch arch) {
  return arch == GpuArch::SM80 ? "sm_80" : "sm_90";
}

/// Whether `--quantize` stores the linears' weights in ggml's blocks.
static bool isGgmlQuantize(Quantize q) {
  return q == Quantize::Q8_0 || q == Quantize::Q4_0 || q == Quantize::Q4_K ||
         q == Quantize::Q5_K || q == Quantize::Q6_K;
}

/// The `--quantize` value of a ggml block type, as the description's
/// "ggml_quantize" names it too.
static StringRef getGgmlQuantizeName(Quantize q) {
  switch (q) {
  case Quantize::Q8_0:
    return "q8_0";
  case Quantize::Q4_0:
    return "q4_0";
  case Quantize::Q4_K:
    return "q4_k";
  case Quantize::Q5_K:
    return "q5_k";
  case Quantize::Q6_K:
    return "q6_k";
  default:
    return "";
  }
}

LogicalResult mlir::tfm::verifyOptions(MLIRContext &ctx,
                                       const CompileOptions &options) {
  Location loc = UnknownLoc::get(&ctx);
  if (options.gpuDType && options.target != TargetKind::CUDA)
    return emitError(loc, "--dtype selects the GPU precision and needs "
                          "--target=cuda (the CPU computes in f32)");
  if (options.quantize != Quantize::None && options.target == TargetKind::CUDA)
    return emitError(loc, "--quantize is CPU-only for now (--target=cuda "
                          "computes in the model's or --dtype's precision)");
  if (options.tensorParallel < 1)
    return emitError(loc) << "--tensor-parallel takes a number of processes "
                             "(at least 1), got "
                          << options.tensorParallel;
  if (options.tensorParallel > 1 && isGgmlQuantize(options.quantize))
    return emitError(loc) << "--quantize="
                          << getGgmlQuantizeName(options.quantize)
                          << " does not split over --tensor-parallel "
                             "processes yet";
  if (options.tensorParallel > 1 && options.target == TargetKind::CUDA)
    return emitError(loc, "--tensor-parallel is CPU-only for now (the "
                          "collectives are not lowered for --target=cuda)");
  if (options.kvCache != ComputeType::f32 && options.target == TargetKind::CUDA)
    return emitError(loc, "--kv-cache is CPU-only for now (CUDA artifacts "
                          "have no KV-cache entry point)");
  // The CPU kernels read a block of keys (at most 4 vectors of 16) from
  // one page.
  if (options.kvBlock < 64 || options.kvBlock % 64 != 0 ||
      options.kvBlock > (1 << 20))
    return emitError(loc) << "--kv-block=" << options.kvBlock
                          << ": the positions per block of the KV cache "
                             "must be a multiple of 64 up to 2^20";
  return success();
}

LogicalResult mlir::tfm::checkNotInput(MLIRContext &ctx,
                                       const CompileOptions &options,
                                       StringRef path) {
  if (path == "-" || options.inputFilename == "-")
    return success();
  bool same = false;
  // Both must exist to be the same file; a new output cannot be the input.
  if (llvm::sys::fs::equivalent(options.inputFilename, path, same) || !same)
    return success();
  return emitError(UnknownLoc::get(&ctx))
         << "refusing to write '" << path << "': it is the input file '"
         << options.inputFilename << "'";
}

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

DriverDiagnosticHandler::DriverDiagnosticHandler(llvm::SourceMgr &sourceMgr,
                                                 MLIRContext *ctx,
                                                 StringRef tool)
    : SourceMgrDiagnosticHandler(sourceMgr, ctx), tool(tool) {
  setHandler([this](Diagnostic &diag) {
    show(diag.getLocation(), diag.str(), diag.getSeverity());
    for (Diagnostic &note : diag.getNotes())
      show(note.getLocation(), note.str(), note.getSeverity());
  });
}

void DriverDiagnosticHandler::show(Location loc, const std::string &message,
                                   DiagnosticSeverity severity) {
  static constexpr size_t kMaxShownLine = 1000;
  auto fileLoc = loc->findInstanceOf<FileLineColLoc>();
  if (!fileLoc) {
    // Not about a place in the input: an option, a file, the toolchain.
    llvm::raw_ostream &os = llvm::errs();
    if (severity == DiagnosticSeverity::Error)
      llvm::WithColor::error(os, tool);
    else if (severity == DiagnosticSeverity::Warning)
      llvm::WithColor::warning(os, tool);
    else
      llvm::WithColor::note(os, tool);
    os << message << "\n";
    return;
  }
  bool display = true;
  if (mgr.getNumBuffers() != 0) {
    unsigned mainID = mgr.getMainFileID();
    const llvm::MemoryBuffer *buf = mgr.getMemoryBuffer(mainID);
    llvm::SMLoc start =
        mgr.FindLocForLineAndColumn(mainID, fileLoc.getLine(), 1);
    if (start.isValid()) {
      StringRef rest(start.getPointer(),
                     buf->getBufferEnd() - start.getPointer());
      size_t eol = rest.find('\n');
      display = eol == StringRef::npos ? rest.size() <= kMaxShownLine
                                       : eol <= kMaxShownLine;
    }
  }
  emitDiagnostic(loc, message, severity, display);
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

void mlir::tfm::registerDriverDialects(DialectRegistry &registry) {
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerOpenMPDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registry.insert<TfmDialect>();
  registerBufferizableOpInterfaceExternalModels(registry);
}

//===----------------------------------------------------------------------===//
// The pipeline
//===----------------------------------------------------------------------===//

namespace {

/// One compile: the options, the diagnostics, the timers and the progress
/// lines.
class Compilation {
public:
  Compilation(MLIRContext &ctx, const CompileOptions &options,
              llvm::raw_ostream &os, TimingScope &timing)
      : ctx(ctx), options(options), os(os), timing(timing),
        progress(options.progress) {}

  LogicalResult compileSource(llvm::SourceMgr &sourceMgr);

private:
  LogicalResult compileMLIR(llvm::SourceMgr &sourceMgr);
  LogicalResult compileTfm(llvm::SourceMgr &sourceMgr);
  /// What IR cannot be compiled with: parameters in an artifact without a
  /// description (`hasModel`: the module has one), types the target does
  /// not compute in.
  LogicalResult checkIR(ModuleOp module, bool hasModel);
  /// Runs the pipeline on `module` (described by `model`, or a hand-written
  /// function `name` when it is null) and writes the requested stage.
  LogicalResult lower(const ModelDescription *model, StringRef name,
                      ModuleOp module);
  LogicalResult runPipeline(ModuleOp module, const PipelineConfig &config,
                            Stage first, Stage last);
  /// Moves the shared kernels out of `module` (on buffers) and adds their
  /// objects to `objects`: from the kernel cache, or compiled (and stored
  /// there); temporary files (added to `temporaries`) where there is no
  /// cache.
  LogicalResult sharedKernelObjects(ModuleOp module,
                                    const PipelineConfig &config,
                                    const HostCpu &cpu, HostEmitter &emitter,
                                    SmallVectorImpl<std::string> &objects,
                                    SmallVectorImpl<std::string> &temporaries);
  InFlightDiagnostic error() { return emitError(UnknownLoc::get(&ctx)); }

  MLIRContext &ctx;
  const CompileOptions &options;
  llvm::raw_ostream &os;
  TimingScope &timing;
  Progress progress;
};

} // namespace

/// Prints the token stream, one token per line with its position.
static void printTokens(llvm::SourceMgr &sourceMgr, DiagEmitter &diags,
                        llvm::raw_ostream &os) {
  StringRef buf =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer();
  Lexer lexer(buf, diags);
  // Track line and column incrementally: a lookup per token would be
  // quadratic on long lines.
  const char *pos = buf.begin();
  unsigned line = 1, col = 1;
  while (true) {
    Token tok = lexer.lex();
    for (; pos < tok.spelling.data(); ++pos) {
      if (*pos == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    os << line << ":" << col << " " << kindName(tok.kind);
    if (!tok.is(TokenKind::newline) && !tok.is(TokenKind::eof))
      os << " '" << tok.spelling << "'";
    os << "\n";
    if (tok.is(TokenKind::eof))
      break;
  }
}

LogicalResult Compilation::compileSource(llvm::SourceMgr &sourceMgr) {
  if (StringRef(options.inputFilename).ends_with(".mlir"))
    return compileMLIR(sourceMgr);
  return compileTfm(sourceMgr);
}

LogicalResult Compilation::compileMLIR(llvm::SourceMgr &sourceMgr) {
  // A model's module as `--emit=tfm` printed it (it carries `tfm.model`),
  // compiled as the .tfm file it came from; or hand-written tfm IR: one
  // public function with tensor arguments and one tensor result, compiled
  // like a model without parameters.
  if (options.emit <= Stage::JSON)
    return error() << "--emit=tokens, ast and json need a .tfm input";
  if (options.tensorParallel > 1)
    return error() << "--tensor-parallel splits a model described in a .tfm "
                      "file; an .mlir input is compiled as written (a "
                      "model's module says how it is split)";
  if (options.kvCache != ComputeType::f32)
    return error() << "--kv-cache sets the caches of a model described in a "
                      ".tfm file; an .mlir input is compiled as written (its "
                      "step function's arguments are the caches' types)";
  // MLIR's parser has no nesting limit: deep enough IR overflows its stack.
  const llvm::MemoryBuffer *buf =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  if (std::optional<size_t> at = findExcessiveNesting(buf->getBuffer())) {
    DiagEmitter diags(sourceMgr, &ctx);
    diags.error(llvm::SMLoc::getFromPointer(buf->getBufferStart() + *at),
                llvm::formatv("brackets nested more than {0} levels deep",
                              kMaxIRNesting)
                    .str());
    return failure();
  }
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &ctx);
  if (!module)
    return failure();
  FailureOr<std::optional<ModelDescription>> model =
      ModelDescription::read(*module);
  if (failed(model))
    return failure();
  if (*model) {
    if (options.emit == Stage::Tfm) {
      module->print(os);
      return success();
    }
    if (failed(checkIR(*module, /*hasModel=*/true)))
      return failure();
    return lower(&**model, (*model)->forward, *module);
  }
  SmallVector<func::FuncOp> funcs;
  for (auto f : module->getOps<func::FuncOp>())
    if (!f.isExternal())
      funcs.push_back(f);
  if (funcs.size() != 1)
    return emitError(module->getLoc(),
                     "an .mlir input must define exactly one function, found ")
           << funcs.size();
  if (options.emit == Stage::Tfm) {
    module->print(os);
    return success();
  }
  if (failed(checkIR(*module, /*hasModel=*/false)))
    return failure();
  std::string name = funcs[0].getName().str();
  return lower(nullptr, name, *module);
}

/// Whether `v`, an operand or result of `op`, is a KV cache (or a fresh
/// one, or one the step function returns), which may hold f16 or bf16
/// (--kv-cache) where everything else computes in f32.
static bool isKvCache(Operation *op, Value v) {
  if (auto mha = dyn_cast<MultiHeadAttentionOp>(op))
    return llvm::is_contained(mha.getCache(), v) ||
           llvm::is_contained(mha.getCacheOut(), v);
  if (auto mla = dyn_cast<LatentAttentionOp>(op))
    return llvm::is_contained(mla.getCache(), v) ||
           llvm::is_contained(mla.getCacheOut(), v);
  if (auto write = dyn_cast<CacheWriteOp>(op))
    return v == write.getCache() || v == write.getResult();
  if (auto att = dyn_cast<AttentionOp>(op))
    return att.getPositions() && (v == att.getKey() || v == att.getValue());
  if (isa<bufferization::AllocTensorOp>(op))
    return llvm::all_of(v.getUses(), [](OpOperand &use) {
      return isKvCache(use.getOwner(), use.get());
    });
  if (auto ret = dyn_cast<func::ReturnOp>(op)) {
    auto func = dyn_cast<func::FuncOp>(ret->getParentOp());
    for (OpOperand &operand : ret->getOpOperands())
      if (operand.get() == v && func &&
          func.getResultAttr(operand.getOperandNumber(), "tfm.cache_of"))
        return true;
  }
  return false;
}

LogicalResult Compilation::checkIR(ModuleOp module, bool hasModel) {
  // An artifact passes its weights by the description's parameter table,
  // which hand-written IR does not have: its tensors are its arguments.
  if (!hasModel && (options.emit == Stage::Obj || options.emit == Stage::Exe)) {
    WalkResult params =
        module.walk([](ParamOp param) {
          param.emitOpError()
              << "'" << param.getName()
              << "': hand-written IR compiles to an artifact without "
                 "parameters (its tensors are the function's arguments); a "
                 "model with weights is written as a .tfm description";
          return WalkResult::interrupt();
        });
    if (params.wasInterrupted())
      return failure();
  }
  // The CPU stages compute in f32, as the runtime passes inputs and
  // outputs; f16 and bf16 compute on the GPU.
  if (options.target != TargetKind::CPU || options.emit <= Stage::Fused)
    return success();
  WalkResult types = module.walk([](Operation *op) {
    auto notF32 = [](Type t) -> FloatType {
      auto shaped = dyn_cast<ShapedType>(t);
      auto f = dyn_cast<FloatType>(shaped ? shaped.getElementType() : t);
      return f && !f.isF32() ? f : FloatType();
    };
    for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults()))
      if (FloatType f = notF32(v.getType()); f && !isKvCache(op, v)) {
        op->emitOpError() << "computes in " << f
                          << ", which the CPU target does not support (it "
                             "computes in f32); compile f16 and bf16 with "
                             "--target=cuda";
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(types.wasInterrupted());
}

static DType toDType(ComputeType type) {
  switch (type) {
  case ComputeType::f32:
    return DType::f32;
  case ComputeType::f16:
    return DType::f16;
  case ComputeType::bf16:
    return DType::bf16;
  }
  llvm_unreachable("unknown ComputeType");
}

LogicalResult Compilation::compileTfm(llvm::SourceMgr &sourceMgr) {
  DiagEmitter diags(sourceMgr, &ctx);
  if (options.emit == Stage::Tokens) {
    printTokens(sourceMgr, diags, os);
    return success(diags.errorCount() == 0);
  }
  TimingScope frontEnd = timing.nest("front end");
  StringRef buf =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer();
  FileAST ast = parseFile(buf, diags);
  if (options.emit == Stage::AST) {
    printAST(ast, os);
    return success(diags.errorCount() == 0);
  }
  // Check every model of the file (all errors in one run), then pick one.
  std::vector<ModelSpec> specs = analyzeFile(ast, diags);
  if (diags.errorCount() != 0)
    return failure();
  const ModelDecl *decl = selectModel(ast, options.modelName, diags);
  if (!decl)
    return failure();
  const ModelSpec *spec = nullptr;
  for (const ModelSpec &s : specs)
    if (s.name == decl->name)
      spec = &s;
  if (!spec)
    return failure();
  // --tensor-parallel N: what one of N processes holds and computes.
  ModelSpec sharded;
  if (options.tensorParallel > 1) {
    std::string problem = spec->tensorParallelProblem(options.tensorParallel);
    if (!problem.empty())
      return emitError(diags.loc(decl->loc))
             << "model '" << spec->name << "' cannot be split over "
             << options.tensorParallel
             << " processes (--tensor-parallel): " << problem;
    sharded = *spec;
    sharded.tensorParallel = options.tensorParallel;
    spec = &sharded;
  }
  if (options.emit == Stage::JSON) {
    os << llvm::formatv("{0:2}", spec->toJSON()) << "\n";
    return success();
  }
  // The CPU computes in f32 whatever the model's dtype: weights are
  // converted when they are loaded. The GPU computes in the model's dtype
  // (or --dtype). The KV-cache entry points are CPU-only for now: their
  // attention is not lowered for CUDA yet. Without attention fusion, the
  // forward function keeps the primitive attention the user asked for.
  ModuleOptions built;
  if (options.target != TargetKind::CUDA)
    built.computeType = DType::f32;
  else if (options.gpuDType)
    built.computeType = toDType(*options.gpuDType);
  built.cacheEntryPoints = options.target != TargetKind::CUDA;
  built.forwardThroughCaches = options.fuseAttention;
  if (built.cacheEntryPoints)
    built.kvBlock = options.kvBlock;
  if (options.kvCache != ComputeType::f32) {
    if (spec->mainStack().attention.latent())
      return emitError(diags.loc(decl->loc))
             << "--kv-cache="
             << (options.kvCache == ComputeType::f16 ? "f16" : "bf16")
             << ": model '" << spec->name
             << "' has latent attention (kv_rank), whose cache is "
                "f32 only for now";
    built.cacheType = toDType(options.kvCache);
  }
  OwningOpRef<ModuleOp> module =
      buildModule(ctx, *spec, diags.loc(decl->loc), built);
  if (!module)
    return failure();
  frontEnd.stop();
  if (options.emit == Stage::Tfm) {
    module->print(os);
    return success();
  }
  // From here on, the module is all there is: a .mlir file that `--emit=tfm`
  // printed takes the same path.
  FailureOr<std::optional<ModelDescription>> model =
      ModelDescription::read(*module);
  if (failed(model) || !*model)
    return emitError(module->getLoc(), "internal: no model description");
  return lower(&**model, (*model)->forward, *module);
}

/// What `name` computes in: the element type of its first float result
/// (f32 when it has none).
static std::string computeTypeOf(ModuleOp module, StringRef name) {
  auto func = module.lookupSymbol<func::FuncOp>(name);
  for (Type t : func ? func.getResultTypes() : ArrayRef<Type>())
    if (auto shaped = dyn_cast<ShapedType>(t))
      if (auto f = dyn_cast<FloatType>(shaped.getElementType()))
        return f.isF16() ? "f16" : f.isBF16() ? "bf16" : "f32";
  return "f32";
}

LogicalResult Compilation::runPipeline(ModuleOp module,
                                       const PipelineConfig &config,
                                       Stage first, Stage last) {
  PassManager pm(&ctx);
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  TimingScope scope = timing.nest(
      llvm::formatv("MLIR pipeline to {0}", getStageInfo(last).flag).str());
  pm.enableTiming(scope);
  buildTfmPipeline(pm, config, first, last);
  return pm.run(module);
}

LogicalResult Compilation::lower(const ModelDescription *model, StringRef name,
                                 ModuleOp module) {
  const StageInfo &info = getStageInfo(options.emit);
  if (!stageRunsOn(options.emit, options.target))
    return error() << info.otherTargetError;
  std::string message;
  FailureOr<HostCpu> host = resolveHostCpu(getCpuName(options.cpu), message);
  if (failed(host))
    return error() << message;

  PipelineConfig config;
  config.target = options.target;
  config.vectorWidth = host->vectorWidth;
  config.fuseAttention = options.fuseAttention;
  config.fuseEpilogues = options.fuseEpilogues;
  config.fuseNorms = options.fuseNorms;
  // Kernels are functions of their own for the kernel cache to share.
  config.outlineKernels = options.useKernelCache;
  llvm::json::Object targetFields;
  bool cuda = options.target == TargetKind::CUDA;
  // A bf16 model keeps its linear weights in bf16 on a CPU that multiplies
  // them (AVX512_BF16); elsewhere they are converted to f32 at load.
  config.bf16Weights =
      !cuda && model && model->dtype == "bf16" && host->bf16Dot;
  config.int8Dot = !cuda && host->int8Dot;
  // --quantize=int8: the linears' weights in int8 where the CPU multiplies
  // them (AVX512_VNNI); elsewhere they stay as they were, with a warning.
  if (options.quantize == Quantize::Int8 && model) {
    if (host->int8Dot) {
      config.int8Weights = true;
      config.bf16Weights = false;
    } else {
      emitWarning(UnknownLoc::get(&ctx))
          << "--quantize=int8 needs a CPU with AVX512_VNNI, which --cpu="
          << getCpuName(options.cpu) << " does not promise; the weights "
          << "stay " << (config.bf16Weights ? "bf16" : "f32");
    }
  }
  // --quantize=q8_0 / q4_0 / q4_k / q5_k / q6_k: the linears' weights in
  // ggml's blocks, the runtime quantizing unquantized tensors to that type
  // (K-quants on rows not of whole super-blocks of 256 as Q8_0). A model that
  // reads a GGUF file (checkpoint = gguf(...)) multiplies the file's blocks as
  // they are, whatever their types, unless another --quantize says
  // otherwise.
  const llvm::json::Object *checkpoint =
      model ? model->json.getObject("checkpoint") : nullptr;
  std::optional<StringRef> format =
      checkpoint ? checkpoint->getString("format") : std::nullopt;
  if (format && *format == "gguf" && options.quantize == Quantize::None &&
      !cuda && options.tensorParallel == 1 && !config.bf16Weights)
    config.ggmlWeights = true;
  if (isGgmlQuantize(options.quantize) && model && !cuda) {
    config.ggmlWeights = true;
    config.bf16Weights = false;
    targetFields["ggml_quantize"] = getGgmlQuantizeName(options.quantize);
  }
  if (cuda) {
    config.chip = getGpuArchName(options.gpuArch).str();
    // With ptxas the kernels are embedded as a fatbin (cubin + PTX); without
    // it as PTX that the driver compiles when the module is loaded.
    std::string toolkit = findCudaToolkit();
    config.format =
        toolkit.empty() || options.emit == Stage::PTX ? "isa" : "fatbin";
    if (!toolkit.empty())
      config.toolkit = toolkit;
    // The runtime reads the target to upload weights and run on the GPU.
    targetFields["target"] = "cuda";
    targetFields["compute_dtype"] =
        model ? computeTypeOf(module, name) : std::string("f32");
  }

  HostEmitter emitter(ctx, options, timing, progress);
  if (failed(emitter.checkOutputs(name)))
    return failure();

  progress.step(name, "lowering");
  if (options.emit <= Stage::LLVMDialect) {
    if (failed(runPipeline(module, config, Stage::Primitive, options.emit)))
      return failure();
    module.print(os);
    return success();
  }
  if (options.emit == Stage::PTX) {
    if (failed(
            runPipeline(module, config, Stage::Primitive, Stage::LLVMDialect)))
      return failure();
    for (auto bin : module.getOps<gpu::BinaryOp>())
      for (Attribute o : bin.getObjects())
        os << cast<gpu::ObjectAttr>(o).getObject().getValue();
    return success();
  }
  // The model function's interface is read on buffers, the stage before the
  // LLVM dialect on every target.
  Stage onBuffers = cuda ? Stage::NVVM : Stage::Loops;
  // With the kernel cache, the outlined kernels stay kernel ops through the
  // loops stage: only those the cache lacks are lowered (and compiled).
  bool kernelCache = !cuda && options.useKernelCache && emitter.takesObjects();
  config.lowerSharedKernels = !kernelCache;
  if (failed(runPipeline(module, config, Stage::Primitive, onBuffers)))
    return failure();
  FailureOr<HostInterface> iface =
      readInterface(module, model, name, targetFields);
  if (failed(iface))
    return failure();
  // The kernels, each compiled once per CPU and tfmc.
  SmallVector<std::string> objects, temporaries;
  llvm::scope_exit removeKernels([&] {
    for (const std::string &t : temporaries)
      llvm::sys::fs::remove(t);
  });
  if (kernelCache && failed(sharedKernelObjects(module, config, *host, emitter,
                                                objects, temporaries)))
    return failure();
  if (failed(
          runPipeline(module, config, Stage::LLVMDialect, Stage::LLVMDialect)))
    return failure();
  return emitter.emit(model, name, module, *host, *iface, os, objects);
}

LogicalResult
Compilation::sharedKernelObjects(ModuleOp module, const PipelineConfig &config,
                                 const HostCpu &cpu, HostEmitter &emitter,
                                 SmallVectorImpl<std::string> &objects,
                                 SmallVectorImpl<std::string> &temporaries) {
  TimingScope scope = timing.nest("shared kernels");
  // The key's target: the CPU, and the lowering's options (which follow
  // from it).
  FailureOr<std::vector<SharedKernels>> kernels = extractSharedKernels(
      module,
      llvm::formatv("{0} {1} vector-width={2} int8-dot={3}", cpu.cpu,
                    cpu.features, config.vectorWidth, config.int8Dot)
          .str(),
      tfmcIdentity());
  if (failed(kernels))
    return failure();
  if (kernels->empty())
    return success();
  std::string dir = kernelCacheDir();
  // A directory that cannot be made or written (a read-only home) is no
  // cache: the compile goes on without it.
  if (!dir.empty() &&
      (llvm::sys::fs::create_directories(dir) ||
       llvm::sys::fs::access(dir, llvm::sys::fs::AccessMode::Write)))
    dir.clear();
  StringRef model = module.getSymName().value_or("model");
  size_t hits = 0;
  SmallVector<HostEmitter::KernelObject> misses;
  // The misses' pass managers, built once: building a pipeline (its pattern
  // sets, its conversion targets) costs more than running it on a small
  // kernel, and a model new to the cache misses dozens. Each run's passes
  // are timed in a scope started for it: the timing instrumentation refers
  // to the variable, and a scope nested again under the same name adds to
  // the same timer.
  struct KernelPipeline {
    KernelPipeline(const char *name, std::function<void(OpPassManager &)> build)
        : name(name), build(std::move(build)) {}
    const char *name;
    std::function<void(OpPassManager &)> build;
    std::optional<PassManager> pm;
    TimingScope timer;
  };
  KernelPipeline lowering{"lowering shared kernels", [&](OpPassManager &pm) {
                            buildCpuSharedKernelLowering(pm, config);
                          }};
  KernelPipeline toLLVM{"shared kernels to llvm-mlir", [&](OpPassManager &pm) {
                          buildTfmPipeline(pm, config, Stage::LLVMDialect,
                                           Stage::LLVMDialect);
                        }};
  auto run = [&](KernelPipeline &p, ModuleOp kernel) -> LogicalResult {
    p.timer = scope.nest(p.name);
    if (!p.pm) {
      p.pm.emplace(&ctx);
      if (failed(applyPassManagerCLOptions(*p.pm)))
        return failure();
      p.pm->enableTiming(p.timer);
      p.build(*p.pm);
    }
    LogicalResult result = p.pm->run(kernel);
    p.timer.stop();
    return result;
  };
  for (SharedKernels &k : *kernels) {
    std::string path;
    if (!dir.empty()) {
      path = kernelCachePath(dir, k.key);
      if (definesSymbols(path, k.symbols)) {
        objects.push_back(path);
        ++hits;
        continue;
      }
    } else {
      // No cache (none configured, or its directory cannot be made or
      // written): a temporary object for this compile alone.
      SmallString<128> tmp;
      if (llvm::sys::fs::createTemporaryFile("tfm-kernels", "o", tmp))
        return error() << "cannot create a temporary file";
      path = tmp.str().str();
      temporaries.push_back(path);
    }
    progress.step(model, "compiling a shared kernel into " + path);
    // Its kernel ops and strided copies lowered (the ggml functions the
    // model's lowering defined are lowered already), then the LLVM dialect.
    bool toLower = k.module
                       ->walk([](Operation *op) {
                         return isa_and_present<TfmDialect>(op->getDialect()) ||
                                        isStridedCopy(op)
                                    ? WalkResult::interrupt()
                                    : WalkResult::advance();
                       })
                       .wasInterrupted();
    if ((toLower && failed(run(lowering, *k.module))) ||
        failed(run(toLLVM, *k.module)))
      return failure();
    FailureOr<HostEmitter::KernelObject> object =
        emitter.translateSharedKernels(*k.module, k.symbols, path);
    if (failed(object))
      return failure();
    misses.push_back(std::move(*object));
    objects.push_back(path);
  }
  // The misses' machine code, on threads of their own.
  if (!misses.empty() && failed(emitter.writeSharedKernels(misses, cpu)))
    return failure();
  progress.step(model, std::to_string(hits) + " of " +
                           std::to_string(kernels->size()) +
                           " shared kernels from the cache" +
                           (dir.empty() ? "" : " in " + dir));
  return success();
}

LogicalResult mlir::tfm::compile(MLIRContext &ctx, llvm::SourceMgr &sourceMgr,
                                 const CompileOptions &options,
                                 llvm::raw_ostream &os, TimingScope &timing) {
  Compilation compilation(ctx, options, os, timing);
  return compilation.compileSource(sourceMgr);
}
