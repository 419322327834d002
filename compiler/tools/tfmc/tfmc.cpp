//===- tfmc.cpp - the tfm compiler driver ---------------------------------===//
//
// tfmc reads a .tfm model description and emits one of the ordered cut
// points of the pipeline: tokens, ast, json (the resolved description), tfm
// (model-level IR). Errors in the input are reported clang-style with the
// source line and a caret, and tfmc exits with status 1.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/Lexer.h"
#include "tfm/Frontend/MLIRGen.h"
#include "tfm/Frontend/Parser.h"
#include "tfm/Frontend/Sema.h"
#include "tfm/Pipelines/Pipelines.h"
#include "tfm/Target/CpuTarget.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace mlir::tfm;
namespace cl = llvm::cl;

namespace {

enum class Emit {
  Tokens,
  AST,
  JSON,
  Tfm,
  TfmPrimitive,
  TfmFused,
  Linalg,
  Loops,
  Gpu,
  NVVM,
  PTX,
  LLVMMLIR,
  LLVMIR,
  Asm,
  Obj,
  Exe,
};

cl::OptionCategory ioCategory("Input and output");
cl::OptionCategory compileCategory("Compilation");
cl::OptionCategory mlirCategory("MLIR pass manager and printing");

cl::opt<std::string> inputFilename(cl::Positional,
                                   cl::desc("<model.tfm> (- for stdin)"),
                                   cl::init("-"), cl::cat(ioCategory));
cl::opt<std::string> outputFilename("o",
                                    cl::desc("Output file (text "
                                             "defaults to stdout)"),
                                    cl::value_desc("file"), cl::init("-"),
                                    cl::cat(ioCategory));
cl::opt<Emit> emitKind(
    "emit", cl::desc("The stage to emit (default: exe)"), cl::init(Emit::Exe),
    cl::values(
        clEnumValN(Emit::Tokens, "tokens", "the token stream"),
        clEnumValN(Emit::AST, "ast", "the syntax tree"),
        clEnumValN(Emit::JSON, "json",
                   "the resolved description with every default, "
                   "parameters and parameter count"),
        clEnumValN(Emit::Tfm, "tfm", "model-level tfm dialect IR"),
        clEnumValN(Emit::TfmPrimitive, "tfm-primitive",
                   "after tfm-decompose: the textbook primitive ops"),
        clEnumValN(Emit::TfmFused, "tfm-fused",
                   "after tfm-fuse-attention: one tfm.attention per block"),
        clEnumValN(Emit::Linalg, "linalg",
                   "linalg on tensors with the C ABI and kernel ops"),
        clEnumValN(Emit::Loops, "loops",
                   "bufferized loops, vector kernels, parallel loops (cpu)"),
        clEnumValN(Emit::Gpu, "gpu",
                   "the gpu dialect: host code and outlined kernels (cuda)"),
        clEnumValN(Emit::NVVM, "nvvm", "kernels in the NVVM dialect (cuda)"),
        clEnumValN(Emit::PTX, "ptx", "the kernels' PTX (cuda)"),
        clEnumValN(Emit::LLVMMLIR, "llvm-mlir", "the LLVM dialect"),
        clEnumValN(Emit::LLVMIR, "llvm", "LLVM IR after O3"),
        clEnumValN(Emit::Asm, "asm", "x86-64 assembly"),
        clEnumValN(Emit::Obj, "obj", "an object file (as -c, no header)"),
        clEnumValN(Emit::Exe, "exe", "an executable (the default)")),
    cl::cat(ioCategory));
cl::opt<bool> compileOnly("c",
                          cl::desc("Write an object file and a C header "
                                   "(MODEL.o, MODEL.h)"),
                          cl::init(false), cl::cat(ioCategory));
cl::opt<bool> sharedLib("shared", cl::desc("Write a shared library"),
                        cl::init(false), cl::cat(ioCategory));
cl::opt<std::string> cpuName("cpu",
                             cl::desc("Target CPU: native (default), "
                                      "x86-64-v3 (AVX2), x86-64-v4 (AVX-512)"),
                             cl::init("native"), cl::cat(compileCategory));
cl::opt<bool> noAttentionFusion(
    "no-attention-fusion",
    cl::desc("Do not fuse attention: run it as primitive matmul, mask and "
             "softmax ops (for comparison and debugging)"),
    cl::init(false), cl::cat(compileCategory));
cl::opt<std::string> targetName("target",
                                cl::desc("Target: cpu (default) or cuda"),
                                cl::init("cpu"), cl::cat(compileCategory));
cl::opt<std::string> gpuArch("gpu-arch",
                             cl::desc("NVIDIA architecture for --target=cuda: "
                                      "sm_80 or sm_90 (default)"),
                             cl::init("sm_90"), cl::cat(compileCategory));
cl::opt<std::string> dtypeOverride(
    "dtype",
    cl::desc("GPU compute precision, overriding the model's dtype: f32, f16 "
             "or bf16 (--target=cuda)"),
    cl::init(""), cl::cat(compileCategory));
cl::opt<std::string> modelName("model",
                               cl::desc("The model to compile when the file "
                                        "holds several"),
                               cl::value_desc("NAME"), cl::init(""),
                               cl::cat(compileCategory));
cl::opt<bool> verifyDiagnostics(
    "verify-diagnostics",
    cl::desc("Check diagnostics against expected-error lines in the input "
             "(for lit tests)"),
    cl::init(false), cl::cat(ioCategory));

/// Prints diagnostics clang-style, but leaves out the source line and caret
/// when the line is longer than a terminal could show (a 100k-character line
/// would otherwise be printed under every diagnostic).
class TfmcDiagnosticHandler : public SourceMgrDiagnosticHandler {
public:
  TfmcDiagnosticHandler(llvm::SourceMgr &sm, MLIRContext *ctx)
      : SourceMgrDiagnosticHandler(sm, ctx) {
    setHandler([this](Diagnostic &diag) {
      show(diag.getLocation(), diag.str(), diag.getSeverity());
      for (Diagnostic &note : diag.getNotes())
        show(note.getLocation(), note.str(), note.getSeverity());
    });
  }

private:
  static constexpr size_t kMaxShownLine = 1000;

  void show(Location loc, const std::string &msg, DiagnosticSeverity kind) {
    bool display = true;
    if (auto fileLoc = dyn_cast<FileLineColLoc>(loc)) {
      const llvm::MemoryBuffer *buf = mgr.getMemoryBuffer(mgr.getMainFileID());
      llvm::SMLoc start = mgr.FindLocForLineAndColumn(mgr.getMainFileID(),
                                                      fileLoc.getLine(), 1);
      if (start.isValid()) {
        llvm::StringRef rest(start.getPointer(),
                             buf->getBufferEnd() - start.getPointer());
        display = rest.find('\n') <= kMaxShownLine ||
                  (rest.find('\n') == llvm::StringRef::npos &&
                   rest.size() <= kMaxShownLine);
      }
    }
    emitDiagnostic(loc, msg, kind, display);
  }
};

void printTokens(llvm::SourceMgr &sm, DiagEmitter &diags,
                 llvm::raw_ostream &os) {
  llvm::StringRef buf = sm.getMemoryBuffer(sm.getMainFileID())->getBuffer();
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

std::string findTool(ArrayRef<StringRef> names) {
  for (StringRef n : names)
    if (auto p = llvm::sys::findProgramByName(n))
      return *p;
  return "";
}

/// Links `object` into an executable or shared library with the runtime.
LogicalResult link(StringRef object, StringRef output, bool shared) {
  std::string driver = findTool({"clang-22", "clang", "cc", "gcc"});
  if (driver.empty()) {
    llvm::errs() << "tfmc: error: no C compiler driver (clang-22, cc) found "
                    "to link the executable\n";
    return failure();
  }
  std::string exe = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
  SmallString<256> libDir(
      llvm::sys::path::parent_path(llvm::sys::path::parent_path(exe)));
  llvm::sys::path::append(libDir, "lib");
  SmallString<256> runtime(libDir), mainObj(libDir);
  llvm::sys::path::append(runtime, "libtfm_runtime.a");
  llvm::sys::path::append(mainObj, "tfm_main.o");
  if (!llvm::sys::fs::exists(runtime)) {
    llvm::errs() << "tfmc: error: the runtime library is missing: " << runtime
                 << "\n";
    return failure();
  }
  std::vector<std::string> args{driver};
  if (shared)
    args.push_back("-shared");
  args.push_back(object.str());
  if (shared) {
    args.push_back("-Wl,--whole-archive");
    args.push_back(runtime.str().str());
    args.push_back("-Wl,--no-whole-archive");
  } else {
    args.push_back(mainObj.str().str());
    args.push_back(runtime.str().str());
  }
  // Executables take the static jansson (nothing extra at run time);
  // Debian's libjansson.a is not position independent, so a shared library
  // links libjansson.so.4 instead.
  args.push_back(shared ? "-ljansson" : TFM_JANSSON_STATIC);
  for (const char *a :
       {"-L" TFM_OMP_DIR, "-lomp", "-Wl,-rpath," TFM_OMP_DIR, "-lm", "-o"})
    args.push_back(a);
  args.push_back(output.str());
  SmallVector<StringRef> refs(args.begin(), args.end());
  std::string err;
  int rc =
      llvm::sys::ExecuteAndWait(driver, refs, std::nullopt, {}, 0, 0, &err);
  if (rc != 0) {
    llvm::errs() << "tfmc: error: linking " << output << " failed"
                 << (err.empty() ? "" : ": " + err) << "\n";
    return failure();
  }
  return success();
}

std::string defaultOutput(StringRef name) {
  if (outputFilename != "-")
    return outputFilename;
  if (compileOnly || emitKind == Emit::Obj)
    return (name + ".o").str();
  if (sharedLib)
    return ("lib" + name + ".so").str();
  return name.str();
}

/// What the entry points need from the model function once it is lowered to
/// buffers (before the LLVM dialect erases its signature).
struct HostInterface {
  std::vector<AbiArg> abi;
  ParamTable table;
  std::vector<AbiParam> params;
  std::string metadata; ///< the description embedded in the artifact
};

FailureOr<HostInterface> readInterface(ModuleOp module, const ModelSpec *spec,
                                       StringRef name,
                                       const llvm::json::Object &target = {}) {
  FailureOr<std::vector<AbiArg>> abi = readAbi(module, name);
  auto func = module.lookupSymbol<func::FuncOp>(name);
  if (failed(abi) || !func) {
    llvm::errs() << "tfmc: error: internal: no lowered model function\n";
    return failure();
  }
  HostInterface iface;
  iface.abi = std::move(*abi);
  if (!spec) {
    iface.metadata = functionMetadata(name, iface.abi, target);
    return iface;
  }
  iface.table = spec->params();
  auto params = resolveAbiParams(
      iface.table, cast<ArrayAttr>(func->getAttr("tfm.params")), func.getLoc());
  if (failed(params))
    return failure();
  iface.params = std::move(*params);
  iface.metadata = modelMetadata(*spec, iface.table, iface.params, target);
  return iface;
}

LogicalResult emitHost(const ModelSpec *spec, StringRef name, ModuleOp module,
                       const CpuTarget &cpu, const HostInterface &iface,
                       llvm::raw_ostream &os);

/// Runs the CPU pipeline from the model-level IR and writes the requested
/// stage or artifact. `spec` is null for hand-written IR (an .mlir input).
LogicalResult lowerAndEmit(MLIRContext &ctx, const ModelSpec *spec,
                           StringRef name, ModuleOp module,
                           llvm::raw_ostream &os) {
  std::string error;
  FailureOr<CpuTarget> target = resolveCpu(cpuName, error);
  if (failed(target)) {
    llvm::errs() << "tfmc: error: " << error << "\n";
    return failure();
  }
  CpuPipelineOptions options;
  options.vectorWidth = target->vectorWidth;
  options.fuseAttention = !noAttentionFusion;
  auto run = [&](CpuStage first, CpuStage last) -> LogicalResult {
    PassManager pm(&ctx);
    if (failed(applyPassManagerCLOptions(pm)))
      return failure();
    buildTfmCpuPipeline(pm, options, first, last);
    return pm.run(module);
  };
  std::optional<CpuStage> textStage;
  switch (emitKind) {
  case Emit::TfmPrimitive:
    textStage = CpuStage::Primitive;
    break;
  case Emit::TfmFused:
    textStage = CpuStage::Fused;
    break;
  case Emit::Linalg:
    textStage = CpuStage::Linalg;
    break;
  case Emit::Loops:
    textStage = CpuStage::Loops;
    break;
  case Emit::LLVMMLIR:
    textStage = CpuStage::LLVM;
    break;
  case Emit::Gpu:
  case Emit::NVVM:
  case Emit::PTX:
    llvm::errs() << "tfmc: error: --emit=gpu, nvvm and ptx need "
                    "--target=cuda\n";
    return failure();
  default:
    break;
  }
  if (textStage) {
    if (failed(run(CpuStage::Primitive, *textStage)))
      return failure();
    module.print(os);
    return success();
  }
  if (failed(run(CpuStage::Primitive, CpuStage::Loops)))
    return failure();
  FailureOr<HostInterface> iface = readInterface(module, spec, name);
  if (failed(iface) || failed(run(CpuStage::LLVM, CpuStage::LLVM)))
    return failure();
  return emitHost(spec, name, module, *target, *iface, os);
}

/// Translates the lowered host module to LLVM IR, adds the entry points and
/// writes the requested artifact (LLVM IR, assembly, object, header,
/// executable or shared library).
LogicalResult emitHost(const ModelSpec *spec, StringRef name, ModuleOp module,
                       const CpuTarget &cpu, const HostInterface &iface,
                       llvm::raw_ostream &os) {
  std::string error;
  llvm::LLVMContext llvmCtx;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmCtx, name);
  if (!llvmModule) {
    llvm::errs() << "tfmc: error: translation to LLVM IR failed\n";
    return failure();
  }
  bool exe = !compileOnly && !sharedLib && emitKind == Emit::Exe;
  if (failed(addEntryPoints(*llvmModule, name, iface.metadata, iface.abi, exe,
                            error))) {
    llvm::errs() << "tfmc: error: " << error << "\n";
    return failure();
  }
  auto tm = createTargetMachine(cpu, error);
  if (!tm) {
    llvm::errs() << "tfmc: error: " << error << "\n";
    return failure();
  }
  optimizeModule(*llvmModule, *tm);
  if (emitKind == Emit::LLVMIR) {
    llvmModule->print(os, nullptr);
    return success();
  }
  if (emitKind == Emit::Asm) {
    SmallString<0> text;
    llvm::raw_svector_ostream ss(text);
    if (failed(emitMachineCode(*llvmModule, *tm, true, ss, error))) {
      llvm::errs() << "tfmc: error: " << error << "\n";
      return failure();
    }
    os << text;
    return success();
  }
  // Object, then (for exe / shared) link.
  std::string out = defaultOutput(name);
  std::string objPath = out;
  SmallString<128> tmp;
  if (!(compileOnly || emitKind == Emit::Obj)) {
    if (llvm::sys::fs::createTemporaryFile("tfm-" + name, "o", tmp)) {
      llvm::errs() << "tfmc: error: cannot create a temporary file\n";
      return failure();
    }
    objPath = tmp.str().str();
  }
  {
    std::error_code ec;
    llvm::raw_fd_ostream f(objPath, ec, llvm::sys::fs::OF_None);
    if (ec) {
      llvm::errs() << "tfmc: error: cannot write '" << objPath
                   << "': " << ec.message() << "\n";
      return failure();
    }
    if (failed(emitMachineCode(*llvmModule, *tm, false, f, error))) {
      llvm::errs() << "tfmc: error: " << error << "\n";
      return failure();
    }
  }
  if (compileOnly) {
    SmallString<256> header(out);
    llvm::sys::path::replace_extension(header, "h");
    std::error_code ec;
    llvm::raw_fd_ostream h(header, ec, llvm::sys::fs::OF_Text);
    if (ec) {
      llvm::errs() << "tfmc: error: cannot write '" << header
                   << "': " << ec.message() << "\n";
      return failure();
    }
    if (spec)
      h << generateHeader(*spec, iface.table, iface.params);
    else
      h << "/* " << name << ": generated by tfmc from hand-written IR. */\n"
        << "#include \"tfm/runtime.h\"\n"
        << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n"
        << "extern const char " << name << "_model_json[];\n"
        << "int32_t " << name << "_forward(void *const *params, "
        << "const tfm_tensor *inputs, tfm_tensor *output);\n"
        << "#ifdef __cplusplus\n}\n#endif\n";
    return success();
  }
  if (emitKind == Emit::Obj)
    return success();
  LogicalResult linked = link(objPath, out, sharedLib);
  llvm::sys::fs::remove(objPath);
  return linked;
}

/// The directory holding ptxas and fatbinary, or "" when there is none.
std::string findCudaToolkit() {
  auto ptxas = llvm::sys::findProgramByName("ptxas", {"/usr/local/cuda/bin"});
  if (!ptxas)
    ptxas = llvm::sys::findProgramByName("ptxas");
  if (!ptxas)
    return "";
  return llvm::sys::path::parent_path(llvm::sys::path::parent_path(*ptxas))
      .str();
}

/// Runs the CUDA pipeline and writes the requested stage or artifact.
LogicalResult lowerAndEmitCuda(MLIRContext &ctx, const ModelSpec *spec,
                               StringRef name, StringRef dtype, ModuleOp module,
                               llvm::raw_ostream &os) {
  std::string error;
  FailureOr<CpuTarget> host = resolveCpu(cpuName, error);
  if (failed(host)) {
    llvm::errs() << "tfmc: error: " << error << "\n";
    return failure();
  }
  CudaPipelineOptions options;
  options.chip = gpuArch.getValue();
  options.fuseAttention = !noAttentionFusion;
  std::string toolkit = findCudaToolkit();
  // With ptxas the kernels are embedded as a fatbin (cubin + PTX); without
  // it as PTX that the driver compiles when the module is loaded.
  options.format = toolkit.empty() ? "isa" : "fatbin";
  if (!toolkit.empty())
    options.toolkit = toolkit;
  auto run = [&](GpuStage first, GpuStage last) -> LogicalResult {
    PassManager pm(&ctx);
    if (failed(applyPassManagerCLOptions(pm)))
      return failure();
    buildTfmCudaPipeline(pm, options, first, last);
    return pm.run(module);
  };
  std::optional<GpuStage> textStage;
  switch (emitKind) {
  case Emit::TfmPrimitive:
    textStage = GpuStage::Primitive;
    break;
  case Emit::TfmFused:
    textStage = GpuStage::Fused;
    break;
  case Emit::Linalg:
    textStage = GpuStage::Linalg;
    break;
  case Emit::Gpu:
    textStage = GpuStage::Gpu;
    break;
  case Emit::NVVM:
    textStage = GpuStage::NVVM;
    break;
  case Emit::LLVMMLIR:
    textStage = GpuStage::LLVM;
    break;
  case Emit::Loops:
    llvm::errs() << "tfmc: error: --emit=loops is a CPU stage; with "
                    "--target=cuda use --emit=gpu\n";
    return failure();
  default:
    break;
  }
  if (textStage) {
    if (failed(run(GpuStage::Primitive, *textStage)))
      return failure();
    module.print(os);
    return success();
  }
  if (emitKind == Emit::PTX) {
    options.format = "isa";
    if (failed(run(GpuStage::Primitive, GpuStage::LLVM)))
      return failure();
    for (auto bin : module.getOps<gpu::BinaryOp>())
      for (Attribute o : bin.getObjects())
        os << cast<gpu::ObjectAttr>(o).getObject().getValue();
    return success();
  }
  if (failed(run(GpuStage::Primitive, GpuStage::NVVM)))
    return failure();
  // The runtime reads the target to upload weights and run on the GPU.
  FailureOr<HostInterface> iface = readInterface(
      module, spec, name,
      llvm::json::Object{{"target", "cuda"}, {"compute_dtype", dtype.str()}});
  if (failed(iface) || failed(run(GpuStage::LLVM, GpuStage::LLVM)))
    return failure();
  return emitHost(spec, name, module, *host, *iface, os);
}

/// Runs the front end and writes the requested stage. Returns failure on a
/// user error (already reported through the diagnostic engine).
bool isCuda() { return targetName == "cuda"; }

/// Checks --target, --gpu-arch and --dtype.
LogicalResult checkTargetOptions() {
  if (targetName != "cpu" && targetName != "cuda") {
    llvm::errs() << "tfmc: error: unknown --target '" << targetName
                 << "'; expected cpu or cuda\n";
    return failure();
  }
  if (isCuda() && gpuArch != "sm_80" && gpuArch != "sm_90") {
    llvm::errs() << "tfmc: error: unknown --gpu-arch '" << gpuArch
                 << "'; expected sm_80 or sm_90\n";
    return failure();
  }
  if (!dtypeOverride.empty()) {
    if (dtypeOverride != "f32" && dtypeOverride != "f16" &&
        dtypeOverride != "bf16") {
      llvm::errs() << "tfmc: error: unknown --dtype '" << dtypeOverride
                   << "'; expected f32, f16 or bf16\n";
      return failure();
    }
    if (!isCuda()) {
      llvm::errs() << "tfmc: error: --dtype selects the GPU precision and "
                      "needs --target=cuda (the CPU computes in f32)\n";
      return failure();
    }
  }
  return success();
}

LogicalResult compile(MLIRContext &ctx, llvm::SourceMgr &sm, DiagEmitter &diags,
                      llvm::raw_ostream &os) {
  if (emitKind == Emit::Tokens) {
    printTokens(sm, diags, os);
    return success(diags.errorCount() == 0);
  }
  if (StringRef(inputFilename).ends_with(".mlir")) {
    // Hand-written tfm IR: one public function with tensor arguments and one
    // tensor result, compiled like a model without parameters.
    OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sm, &ctx);
    if (!module)
      return failure();
    SmallVector<func::FuncOp> funcs;
    for (auto f : module->getOps<func::FuncOp>())
      if (!f.isExternal())
        funcs.push_back(f);
    if (funcs.size() != 1) {
      emitError(module->getLoc(), "an .mlir input must define exactly one "
                                  "function, found ")
          << funcs.size();
      return failure();
    }
    if (emitKind == Emit::Tokens || emitKind == Emit::AST ||
        emitKind == Emit::JSON) {
      llvm::errs() << "tfmc: error: --emit=tokens, ast and json need a .tfm "
                      "input\n";
      return failure();
    }
    if (emitKind == Emit::Tfm) {
      module->print(os);
      return success();
    }
    std::string name = funcs[0].getName().str();
    if (isCuda())
      return lowerAndEmitCuda(ctx, nullptr, name, "f32", *module, os);
    return lowerAndEmit(ctx, nullptr, name, *module, os);
  }
  llvm::StringRef buf = sm.getMemoryBuffer(sm.getMainFileID())->getBuffer();
  FileAST ast = parseFile(buf, diags);
  if (emitKind == Emit::AST) {
    printAST(ast, os);
    return success(diags.errorCount() == 0);
  }
  // Check every model of the file (all errors in one run), then pick one.
  std::vector<ModelSpec> specs = analyzeFile(ast, diags);
  if (diags.errorCount() != 0)
    return failure();
  const ModelDecl *decl = selectModel(ast, modelName, diags);
  if (!decl)
    return failure();
  const ModelSpec *spec = nullptr;
  for (const ModelSpec &s : specs)
    if (s.name == decl->name)
      spec = &s;
  if (!spec)
    return failure();
  if (emitKind == Emit::JSON) {
    os << llvm::formatv("{0:2}", spec->toJSON()) << "\n";
    return success();
  }
  // The CPU computes in f32 whatever the model's dtype: weights are
  // converted when they are loaded. The GPU computes in the model's dtype
  // (or --dtype).
  ModelSpec lowered = *spec;
  if (isCuda()) {
    if (!dtypeOverride.empty())
      lowered.dtype = dtypeOverride == "f32"   ? DType::f32
                      : dtypeOverride == "f16" ? DType::f16
                                               : DType::bf16;
  } else if (emitKind != Emit::Tfm) {
    lowered.dtype = DType::f32;
  }
  OwningOpRef<ModuleOp> module =
      buildModule(ctx, lowered, diags.loc(decl->loc));
  if (!module)
    return failure();
  if (emitKind == Emit::Tfm) {
    module->print(os);
    return success();
  }
  if (isCuda())
    return lowerAndEmitCuda(ctx, spec, spec->name,
                            stringifyDType(lowered.dtype), *module, os);
  return lowerAndEmit(ctx, spec, spec->name, *module, os);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  registerAllPasses();
  registerTfmPipelines();
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  // Show only the options a tfmc user needs, grouped.
  for (auto &opt : cl::getRegisteredOptions()) {
    llvm::StringRef name = opt.first;
    if (name.starts_with("mlir-print-ir") || name == "mlir-timing" ||
        name == "mlir-pass-statistics" || name == "mlir-disable-threading" ||
        name == "mlir-print-debuginfo" ||
        name == "mlir-elide-elementsattrs-if-larger")
      opt.second->addCategory(mlirCategory);
  }
  cl::HideUnrelatedOptions({&ioCategory, &compileCategory, &mlirCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "tfmc: compile a transformer model description (.tfm)\n\n"
      "  tfmc model.tfm --emit=json     the resolved description\n"
      "  tfmc model.tfm --emit=tfm      model-level tfm IR\n"
      "  tfmc model.tfm -o model        an executable (see ./model --help)\n"
      "  tfmc -c model.tfm              model.o and model.h for C programs\n"
      "  tfmc --shared model.tfm        libMODEL.so\n");

  DialectRegistry registry;
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
  MLIRContext ctx(registry);
  ctx.loadDialect<TfmDialect, func::FuncDialect>();
  std::string errorMessage;
  auto file = openInputFile(inputFilename, &errorMessage);
  if (!file) {
    llvm::errs() << "tfmc: error: cannot read '" << inputFilename
                 << "': " << errorMessage << "\n";
    return 1;
  }
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  DiagEmitter diags(sm, &ctx);

  if (failed(checkTargetOptions()))
    return 1;
  bool binary = emitKind == Emit::Exe || emitKind == Emit::Obj || compileOnly ||
                sharedLib;
  if (compileOnly || sharedLib) {
    if (emitKind != Emit::Exe) {
      llvm::errs() << "tfmc: error: -c and --shared write binaries; they do "
                      "not combine with --emit\n";
      return 1;
    }
    if (compileOnly && sharedLib) {
      llvm::errs() << "tfmc: error: -c and --shared exclude each other\n";
      return 1;
    }
  }
  auto output = openOutputFile(
      binary ? std::string("-") : outputFilename.getValue(), &errorMessage);
  if (!output) {
    llvm::errs() << "tfmc: error: cannot write '" << outputFilename
                 << "': " << errorMessage << "\n";
    return 1;
  }

  if (verifyDiagnostics) {
    SourceMgrDiagnosticVerifierHandler handler(sm, &ctx);
    (void)compile(ctx, sm, diags, output->os());
    return failed(handler.verify()) ? 1 : 0;
  }
  TfmcDiagnosticHandler handler(sm, &ctx);
  if (failed(compile(ctx, sm, diags, output->os())))
    return 1;
  output->keep();
  return 0;
}
