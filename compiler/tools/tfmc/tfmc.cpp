//===- tfmc.cpp - the tfm compiler driver ---------------------------------===//
//
// tfmc reads a .tfm model description (or hand-written tfm IR in a .mlir
// file) and emits one of the ordered stages of the compiler, from the token
// stream to a linked executable. The work is done by the driver library
// (tfm/Driver/Driver.h); this file turns the command line into its options.
// Errors in the input are reported clang-style with the source line and a
// caret, and tfmc exits with status 1.
//
//===----------------------------------------------------------------------===//

#include "ImportCommand.h"
#include "tfm/Driver/Driver.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "tfm/Dialect/TfmOps.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace mlir::tfm;
namespace cl = llvm::cl;

namespace {

/// A `cl::values` parser that does not stop the command line at an unknown
/// value but records it, so that it is reported like every other error, with
/// the values the option accepts.
template <typename T>
class EnumParser : public cl::parser<T> {
public:
  using cl::parser<T>::parser;
  bool parse(cl::Option &, StringRef, StringRef arg, T &value) {
    for (const auto &v : this->Values)
      if (v.Name == arg) {
        value = v.V.getValue();
        return false;
      }
    unknown = arg.str();
    return false;
  }
  /// The unknown value given, if any.
  std::optional<std::string> unknown;
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
cl::opt<Stage> emitStage("emit", cl::desc("The stage to emit (default: exe)"),
                         cl::init(Stage::Exe), cl::cat(ioCategory));
cl::opt<bool> compileOnly("c",
                          cl::desc("Write an object file and a C header "
                                   "(MODEL.o, MODEL.h)"),
                          cl::init(false), cl::cat(ioCategory));
cl::opt<bool> sharedLib("shared", cl::desc("Write a shared library"),
                        cl::init(false), cl::cat(ioCategory));
cl::opt<cl::boolOrDefault> progress(
    "progress",
    cl::desc("Print progress lines on stderr (default: when stderr is a "
             "terminal and the compile takes over a second)"),
    cl::cat(ioCategory));
cl::opt<bool> verifyDiagnostics(
    "verify-diagnostics",
    cl::desc("Check diagnostics against expected-error lines in the input "
             "(for lit tests)"),
    cl::init(false), cl::cat(ioCategory));

cl::opt<TargetKind, false, EnumParser<TargetKind>>
    target("target", cl::desc("Target (default: cpu)"),
           cl::init(TargetKind::CPU),
           cl::values(clEnumValN(TargetKind::CPU, "cpu", "x86-64"),
                      clEnumValN(TargetKind::CUDA, "cuda", "NVIDIA GPUs")),
           cl::cat(compileCategory));
cl::opt<CpuModel, false, EnumParser<CpuModel>>
    cpu("cpu", cl::desc("Target CPU (default: native, the CPU tfmc runs on)"),
        cl::init(CpuModel::Native),
        cl::values(clEnumValN(CpuModel::Native, "native", ""),
                   clEnumValN(CpuModel::X86_64_V3, "x86-64-v3", "AVX2"),
                   clEnumValN(CpuModel::X86_64_V4, "x86-64-v4", "AVX-512")),
        cl::cat(compileCategory));
cl::opt<GpuArch, false, EnumParser<GpuArch>> gpuArch(
    "gpu-arch",
    cl::desc("NVIDIA architecture for --target=cuda (default: sm_90)"),
    cl::init(GpuArch::SM90),
    cl::values(clEnumValN(GpuArch::SM80, "sm_80", "Ampere (A100)"),
               clEnumValN(GpuArch::SM90, "sm_90", "Hopper (H100, H200)")),
    cl::cat(compileCategory));
cl::opt<ComputeType, false, EnumParser<ComputeType>>
    dtype("dtype",
          cl::desc("GPU compute precision, overriding the model's dtype "
                   "(--target=cuda)"),
          cl::values(clEnumValN(ComputeType::f32, "f32", "32-bit float"),
                     clEnumValN(ComputeType::f16, "f16", "16-bit float"),
                     clEnumValN(ComputeType::bf16, "bf16", "bfloat16")),
          cl::cat(compileCategory));
cl::opt<Quantize, false, EnumParser<Quantize>> quantize(
    "quantize",
    cl::desc("Store the weights of linear layers quantized (CPU; the "
             "runtime quantizes f32, f16 or bf16 checkpoints as it loads "
             "them)"),
    cl::init(Quantize::None),
    cl::values(clEnumValN(Quantize::None, "none", "as the model's dtype says"),
               clEnumValN(Quantize::Int8, "int8",
                          "int8 with a scale per output column, multiplied "
                          "with AVX512_VNNI by activations quantized per "
                          "row"),
               clEnumValN(Quantize::Q8_0, "q8_0",
                          "ggml's Q8_0 blocks (an f16 scale per 32 int8 "
                          "values), dequantized in registers; tensors a "
                          "GGUF file stores quantized stay as they are"),
               clEnumValN(Quantize::Q4_0, "q4_0",
                          "ggml's Q4_0 blocks (an f16 scale per 32 4-bit "
                          "values), likewise"),
               clEnumValN(Quantize::Q4_K, "q4_k",
                          "ggml's Q4_K super-blocks (256 4-bit values, "
                          "6-bit scales and mins per 32), likewise; rows "
                          "not of whole super-blocks as Q8_0"),
               clEnumValN(Quantize::Q5_K, "q5_k",
                          "ggml's Q5_K super-blocks (5-bit values), "
                          "likewise"),
               clEnumValN(Quantize::Q6_K, "q6_k",
                          "ggml's Q6_K super-blocks (6-bit values, 8-bit "
                          "scales per 16), likewise")),
    cl::cat(compileCategory));
cl::opt<ComputeType, false, EnumParser<ComputeType>> kvCache(
    "kv-cache",
    cl::desc("The element type of the KV caches (CPU): keys and values are "
             "rounded to it as they are written, read back as f32"),
    cl::init(ComputeType::f32),
    cl::values(clEnumValN(ComputeType::f32, "f32", "32-bit float"),
               clEnumValN(ComputeType::f16, "f16",
                          "16-bit float (half "
                          "the cache's bytes)"),
               clEnumValN(ComputeType::bf16, "bf16", "bfloat16")),
    cl::cat(compileCategory));
cl::opt<int64_t> kvBlock(
    "kv-block",
    cl::desc("Positions per block of the paged KV cache (CPU; a multiple of "
             "64): sequences hold whole blocks of a shared pool"),
    cl::init(128), cl::cat(compileCategory));
cl::opt<bool> noAttentionFusion(
    "no-attention-fusion",
    cl::desc("Do not fuse attention: run it as primitive matmul, mask and "
             "softmax ops (for comparison and debugging)"),
    cl::init(false), cl::cat(compileCategory));
cl::opt<bool> noEpilogueFusion(
    "no-epilogue-fusion",
    cl::desc("Do not fold activations, gated products and residual adds "
             "into the linear that produces them (CPU; for comparison)"),
    cl::init(false), cl::cat(compileCategory));
cl::opt<bool> noNormFusion(
    "no-norm-fusion",
    cl::desc("Run norms as linalg (three passes over the rows) and pack "
             "bf16/int8 linears' inputs in each linear (CPU; for "
             "comparison)"),
    cl::init(false), cl::cat(compileCategory));
cl::opt<unsigned> codegenThreads(
    "codegen-threads",
    cl::desc("Generate the machine code of a large model in N partitions at "
             "once, merged into one object (default 0: the cores, at most 4; "
             "1: one partition)"),
    cl::init(0), cl::cat(compileCategory));
cl::opt<bool> noKernelCache(
    "no-kernel-cache",
    cl::desc("Compile the kernels inside the model's own code instead of "
             "each once into the kernel cache ($TFM_CACHE_DIR, else "
             "$XDG_CACHE_HOME/tfm or ~/.cache/tfm) and linking them from "
             "there"),
    cl::init(false), cl::cat(compileCategory));
cl::opt<int64_t> tensorParallel(
    "tensor-parallel",
    cl::desc("Split the model over N processes started by mpirun (heads, FFN "
             "units and vocabulary; Open MPI)"),
    cl::value_desc("N"), cl::init(1), cl::cat(compileCategory));
cl::opt<std::string> modelName("model",
                               cl::desc("The model to compile when the file "
                                        "holds several"),
                               cl::value_desc("NAME"), cl::init(""),
                               cl::cat(compileCategory));

/// The expected values of an enum option, as "a, b or c", with their
/// descriptions in parentheses when `withHelp`.
template <typename T>
std::string expectedValues(const EnumParser<T> &parser, bool withHelp) {
  std::string list;
  unsigned n = parser.getNumOptions();
  for (unsigned i = 0; i < n; ++i) {
    if (i != 0)
      list += i + 1 == n ? " or " : ", ";
    list += parser.getOption(i);
    StringRef help = parser.getDescription(i);
    if (withHelp && !help.empty())
      list += (" (" + help + ")").str();
  }
  return list;
}

/// Reports an unknown value of an enum option.
template <typename T, typename Opt>
LogicalResult checkEnum(MLIRContext &ctx, Opt &option, bool withHelp) {
  const EnumParser<T> &parser = option.getParser();
  if (!parser.unknown)
    return success();
  return emitError(UnknownLoc::get(&ctx))
         << "unknown --" << option.ArgStr << " '" << *parser.unknown
         << "'; expected " << expectedValues(parser, withHelp);
}

/// The command line as driver options; errors are reported through `ctx`.
FailureOr<CompileOptions> readOptions(MLIRContext &ctx) {
  if (failed(checkEnum<TargetKind>(ctx, target, false)) ||
      failed(checkEnum<CpuModel>(ctx, cpu, true)) ||
      failed(checkEnum<GpuArch>(ctx, gpuArch, false)) ||
      failed(checkEnum<ComputeType>(ctx, dtype, false)) ||
      failed(checkEnum<Quantize>(ctx, quantize, false)) ||
      failed(checkEnum<ComputeType>(ctx, kvCache, false)))
    return failure();
  Location loc = UnknownLoc::get(&ctx);
  if ((compileOnly || sharedLib) && emitStage != Stage::Exe)
    return emitError(loc, "-c and --shared write binaries; they do not "
                          "combine with --emit");
  if (compileOnly && sharedLib)
    return emitError(loc, "-c and --shared exclude each other");
  CompileOptions options;
  options.inputFilename = inputFilename;
  options.outputFilename = outputFilename;
  options.emit = emitStage;
  options.artifact = compileOnly ? ArtifactKind::Object
                     : sharedLib ? ArtifactKind::Shared
                                 : ArtifactKind::Executable;
  options.target = target;
  options.cpu = cpu;
  options.gpuArch = gpuArch;
  if (dtype.getNumOccurrences())
    options.gpuDType = dtype;
  options.fuseAttention = !noAttentionFusion;
  options.fuseEpilogues = !noEpilogueFusion;
  options.fuseNorms = !noNormFusion;
  options.quantize = quantize;
  options.kvCache = kvCache;
  options.kvBlock = kvBlock;
  options.modelName = modelName;
  options.tensorParallel = tensorParallel;
  options.codegenThreads = codegenThreads;
  options.useKernelCache = !noKernelCache;
  if (progress != cl::BOU_UNSET)
    options.progress = progress == cl::BOU_TRUE;
  if (failed(verifyOptions(ctx, options)))
    return failure();
  return options;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  if (argc > 1 && StringRef(argv[1]) == "import")
    return runImportCommand(argc, argv);
  registerAllPasses();
  registerTfmPipelines();
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  for (const StageInfo &info : getStageTable())
    emitStage.getParser().addLiteralOption(info.flag, info.stage, info.help);
  // Show only the options a tfmc user needs, grouped.
  for (auto &opt : cl::getRegisteredOptions()) {
    StringRef name = opt.first;
    if (name.starts_with("mlir-print-ir") || name == "mlir-timing" ||
        name == "mlir-timing-display" || name == "mlir-pass-statistics" ||
        name == "mlir-disable-threading" || name == "mlir-print-debuginfo" ||
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
      "  tfmc --shared model.tfm        libMODEL.so\n"
      "  tfmc model.tfm --mlir-timing   where the compile time goes\n");

  // With no input named, tfmc reads stdin; on a terminal that would wait
  // for typing that nobody means to do.
  if (inputFilename.getNumOccurrences() == 0 &&
      llvm::sys::Process::StandardInIsUserInput()) {
    llvm::errs() << "tfmc: error: no input file\n"
                 << "usage: tfmc model.tfm [-o OUT] [--emit=STAGE] [-c | "
                    "--shared] (tfmc --help for all options;\n"
                    "       tfmc - reads the model from stdin)\n";
    return 1;
  }

  DialectRegistry registry;
  registerDriverDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadDialect<TfmDialect, func::FuncDialect>();

  llvm::SourceMgr sourceMgr;
  DriverDiagnosticHandler handler(sourceMgr, &ctx, "tfmc");
  FailureOr<CompileOptions> options = readOptions(ctx);
  if (failed(options))
    return 1;

  std::string errorMessage;
  auto file = openInputFile(inputFilename, &errorMessage);
  if (!file) {
    emitError(UnknownLoc::get(&ctx))
        << "cannot read '" << inputFilename << "': " << errorMessage;
    return 1;
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  // Binaries are written by the driver under names of their own (and
  // checked against the input there).
  bool binary = emitStage == Stage::Exe || emitStage == Stage::Obj;
  if (!binary && failed(checkNotInput(ctx, *options, outputFilename)))
    return 1;
  auto output =
      openOutputFile(binary ? std::string("-") : outputFilename, &errorMessage);
  if (!output) {
    emitError(UnknownLoc::get(&ctx))
        << "cannot write '" << outputFilename << "': " << errorMessage;
    return 1;
  }

  DefaultTimingManager timing;
  applyDefaultTimingManagerCLOptions(timing);
  TimingScope root = timing.getRootScope();
  if (verifyDiagnostics) {
    SourceMgrDiagnosticVerifierHandler verifier(sourceMgr, &ctx);
    (void)compile(ctx, sourceMgr, *options, output->os(), root);
    return failed(verifier.verify()) ? 1 : 0;
  }
  if (failed(compile(ctx, sourceMgr, *options, output->os(), root)))
    return 1;
  output->keep();
  return 0;
}
