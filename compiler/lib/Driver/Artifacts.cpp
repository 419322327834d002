//===- Artifacts.cpp - LLVM IR, objects, headers and linked binaries ------===//

#include "Artifacts.h"
#include "KernelCache.h"

#include "tfm/Dialect/TfmOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/ObjCopy/ConfigManager.h"
#include "llvm/ObjCopy/ObjCopy.h"
#include "llvm/Object/Binary.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MD5.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/StringSaver.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/Utils/SplitModule.h"
#include <atomic>
#include <thread>

#include <fmt/format.h>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::driver;

//===----------------------------------------------------------------------===//
// Progress
//===----------------------------------------------------------------------===//

Progress::Progress(std::optional<bool> mode)
    : mode(mode), terminal(llvm::sys::Process::StandardErrIsDisplayed()),
      start(std::chrono::steady_clock::now()) {}

void Progress::step(StringRef model, StringRef what) {
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  bool show = mode ? *mode : terminal && seconds > 1.0;
  if (!show)
    return;
  std::string line = fmt::format("tfmc: {:6.2f} s  {}: {}\n", seconds,
                                 model.str(), what.str());
  llvm::errs() << line;
  llvm::errs().flush();
}

//===----------------------------------------------------------------------===//
// The interface
//===----------------------------------------------------------------------===//

FailureOr<HostInterface>
driver::readInterface(ModuleOp module, const ModelDescription *model,
                      StringRef name, const llvm::json::Object &target) {
  FailureOr<std::vector<AbiArg>> abi = readAbi(module, name);
  auto func = module.lookupSymbol<func::FuncOp>(name);
  if (failed(abi) || !func)
    return emitError(module.getLoc(), "internal: no lowered model function");
  HostInterface iface;
  iface.abi = std::move(*abi);
  if (!model) {
    iface.metadata = functionMetadata(name, iface.abi, target);
    return iface;
  }
  auto paramsOf = [&](func::FuncOp f) {
    return module.getContext()
        ->getLoadedDialect<TfmDialect>()
        ->getParamsAttrHelper()
        .getAttr(f);
  };
  ArrayAttr paramsAttr = paramsOf(func);
  if (!paramsAttr)
    return emitError(func.getLoc(), "internal: no tfm.params on the model");
  auto params = resolveAbiParams(*model, paramsAttr, func.getLoc());
  if (failed(params))
    return failure();
  iface.params = std::move(*params);
  llvm::json::Object fields(target);
  // An extra entry point over the forward pass's parameter table (the step
  // function, the encoder): its ABI, parameters renumbered as the forward
  // pass's; none when the model has no such function.
  auto readExtra =
      [&](StringRef fn) -> FailureOr<std::optional<std::vector<AbiArg>>> {
    if (fn.empty())
      return std::optional<std::vector<AbiArg>>();
    auto extra = module.lookupSymbol<func::FuncOp>(fn);
    FailureOr<std::vector<AbiArg>> extraAbi =
        extra ? readAbi(module, fn) : FailureOr<std::vector<AbiArg>>();
    ArrayAttr extraParams = extra ? paramsOf(extra) : ArrayAttr();
    if (failed(extraAbi) || !extraParams)
      return emitError(extra ? extra.getLoc() : module.getLoc(),
                       "internal: no lowered '")
             << fn << "'";
    auto resolved = resolveAbiParams(*model, extraParams, extra.getLoc());
    if (failed(resolved))
      return failure();
    for (AbiArg &a : *extraAbi) {
      if (a.kind != AbiArg::Param)
        continue;
      const AbiParam &p = (*resolved)[a.index];
      auto it = llvm::find_if(iface.params, [&](const AbiParam &f) {
        return f.index == p.index && f.panel == p.panel &&
               f.bf16Pairs == p.bf16Pairs && f.int8Quads == p.int8Quads &&
               f.ggml == p.ggml;
      });
      if (it == iface.params.end())
        return emitError(extra.getLoc(), "internal: '")
               << fn << "' reads '" << model->params[p.index].name
               << "' in a layout the forward pass does not";
      a.index = it - iface.params.begin();
    }
    return std::optional<std::vector<AbiArg>>(std::move(*extraAbi));
  };
  auto stepAbi = readExtra(model->step);
  auto encodeAbi = readExtra(model->encode);
  if (failed(stepAbi) || failed(encodeAbi))
    return failure();
  iface.encodeAbi = std::move(*encodeAbi);
  if (*stepAbi) {
    iface.stepAbi = std::move(**stepAbi);
    const CacheLayout &c = *model->cache;
    llvm::json::Array windows;
    for (int64_t w : c.windows)
      windows.push_back(w);
    llvm::json::Object generation{{"entry", (name + "_step").str()},
                                  {"layers", c.layers},
                                  {"kv_heads", c.kvHeads},
                                  {"head_dim", c.headDim},
                                  {"windows", std::move(windows)}};
    // Latent attention: one cache per layer (the latents, as a key cache).
    if (c.latent)
      generation["latent"] = true;
    // A paged cache: the positions of a block (the step function takes the
    // block table before the caches).
    if (c.block)
      generation["block"] = c.block;
    // The caches' element type when it is not f32 (--kv-cache): the step
    // function's first cache input, after the tokens, the positions, an
    // encoder-decoder's source lengths and the block table.
    int64_t firstCache = (iface.encodeAbi ? 3 : 2) + (c.block ? 1 : 0);
    for (const AbiArg &a : *iface.stepAbi)
      if (a.kind == AbiArg::Input && a.index == firstCache &&
          a.dtype != "float32")
        generation["cache_dtype"] = a.dtype;
    // An encoder-decoder: the entry point that encodes the source and the
    // cross-attention caches' sizes (one pair per decoder layer).
    if (iface.encodeAbi)
      generation["encoder"] =
          llvm::json::Object{{"entry", (name + "_encode").str()},
                             {"kv_heads", c.encoder->kvHeads},
                             {"head_dim", c.encoder->headDim},
                             {"d_model", c.encoder->dModel},
                             {"lengths", c.encoder->lengths}};
    fields["generation"] = std::move(generation);
  }
  iface.metadata = modelMetadata(*model, iface.params, fields);
  return iface;
}

std::string driver::findCudaToolkit() {
  auto ptxas = llvm::sys::findProgramByName("ptxas", {"/usr/local/cuda/bin"});
  if (!ptxas)
    ptxas = llvm::sys::findProgramByName("ptxas");
  if (!ptxas)
    return "";
  return llvm::sys::path::parent_path(llvm::sys::path::parent_path(*ptxas))
      .str();
}

//===----------------------------------------------------------------------===//
// Host emission
//===----------------------------------------------------------------------===//

std::string HostEmitter::outputPath(StringRef name) const {
  if (options.outputFilename != "-")
    return options.outputFilename;
  if (options.emit == Stage::Obj || options.artifact == ArtifactKind::Object)
    return (name + ".o").str();
  if (options.artifact == ArtifactKind::Shared)
    return ("lib" + name + ".so").str();
  return name.str();
}

/// The header `-c` writes beside the object at `objectPath`.
static std::string headerPath(StringRef objectPath) {
  SmallString<256> header(objectPath);
  llvm::sys::path::replace_extension(header, "h");
  return header.str().str();
}

LogicalResult HostEmitter::checkOutputs(StringRef name) {
  if (options.emit != Stage::Exe && options.emit != Stage::Obj)
    return success();
  std::string out = outputPath(name);
  if (failed(checkNotInput(ctx, options, out)))
    return failure();
  if (options.emit != Stage::Exe || options.artifact != ArtifactKind::Object)
    return success();
  std::string header = headerPath(out);
  if (header == out)
    return error() << "-c writes an object and a header named after it "
                      "with '.h': -o '"
                   << out << "' would be both; name the object FILE.o";
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(out, status) &&
      status.type() != llvm::sys::fs::file_type::regular_file)
    return error() << "-c writes a header beside the object, and '" << out
                   << "' is not a regular file; give -o FILE.o (or "
                      "--emit=obj for the object alone)";
  return checkNotInput(ctx, options, header);
}

static std::string findTool(ArrayRef<StringRef> names);

LogicalResult HostEmitter::emit(const ModelDescription *model, StringRef name,
                                ModuleOp module, const HostCpu &cpu,
                                const HostInterface &iface,
                                llvm::raw_ostream &os,
                                ArrayRef<std::string> objects) {
  std::string message;
  llvm::LLVMContext llvmCtx;
  TimingScope translate = timing.nest("translate to LLVM IR");
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmCtx, name);
  if (!llvmModule)
    return error() << "translation to LLVM IR failed";
  bool exe = options.emit == Stage::Exe &&
             options.artifact == ArtifactKind::Executable;
  if (failed(addEntryPoints(*llvmModule, name, iface.metadata, iface.abi, exe,
                            message, iface.stepAbi ? &*iface.stepAbi : nullptr,
                            iface.encodeAbi ? &*iface.encodeAbi : nullptr)))
    return error() << message;
  translate.stop();
  auto tm = createTargetMachine(cpu, message);
  if (!tm)
    return error() << message;
  progress.step(name, "optimizing LLVM IR (O3)");
  {
    TimingScope o3 = timing.nest("LLVM O3");
    optimizeModule(*llvmModule, *tm);
  }
  if (options.emit == Stage::LLVMIR) {
    llvmModule->print(os, nullptr);
    return success();
  }
  progress.step(name, "generating machine code");
  if (options.emit == Stage::Asm) {
    TimingScope codegen = timing.nest("machine code");
    SmallString<0> text;
    llvm::raw_svector_ostream ss(text);
    if (failed(emitMachineCode(*llvmModule, *tm, true, ss, message)))
      return error() << message;
    os << text;
    return success();
  }
  // An object, then the header (-c) or a link (executable, shared library).
  std::string out = outputPath(name);
  bool objectOnly =
      options.emit == Stage::Obj || options.artifact == ArtifactKind::Object;
  std::string objectPath = out;
  if (!objectOnly) {
    SmallString<128> tmp;
    if (llvm::sys::fs::createTemporaryFile("tfm-" + name, "o", tmp))
      return error() << "cannot create a temporary file";
    objectPath = tmp.str().str();
  }
  // An object the user gets is one file: the model's partitions merged,
  // then `objects` merged in. Objects to link may be several.
  bool withObjects = objectOnly && !objects.empty();
  if (withObjects) {
    SmallString<128> tmp;
    if (llvm::sys::fs::createTemporaryFile("tfm-" + name, "o", tmp))
      return error() << "cannot create a temporary file";
    objectPath = tmp.str().str();
  }
  FailureOr<SmallVector<std::string>> own =
      writeObjects(*llvmModule, *tm, objectPath, /*merge=*/objectOnly);
  if (failed(own))
    return failure();
  llvm::scope_exit removeOwn([&] {
    if (objectOnly && !withObjects)
      return;
    llvm::sys::fs::remove(objectPath);
    for (const std::string &object : *own)
      llvm::sys::fs::remove(object);
  });
  SmallVector<std::string> all(*own);
  all.append(objects.begin(), objects.end());
  if (withObjects &&
      failed(mergeObjects(findTool({"clang-22", "clang"}), all, out)))
    return failure();
  if (options.artifact == ArtifactKind::Object)
    return writeHeader(model, name, iface, out);
  if (objectOnly)
    return success();
  progress.step(name, "linking " + out);
  return link(all, out);
}

bool HostEmitter::takesObjects() const {
  // Printed LLVM IR and assembly hold every function.
  if (options.emit != Stage::Exe && options.emit != Stage::Obj)
    return false;
  bool objectOnly =
      options.emit == Stage::Obj || options.artifact == ArtifactKind::Object;
  return !objectOnly || !findTool({"clang-22", "clang"}).empty();
}

FailureOr<HostEmitter::KernelObject> HostEmitter::translateSharedKernels(
    ModuleOp module, const std::vector<std::string> &symbols, StringRef path) {
  KernelObject k;
  k.ctx = std::make_unique<llvm::LLVMContext>();
  k.module = translateModuleToLLVMIR(module, *k.ctx, "tfm_kernels");
  if (!k.module)
    return error() << "translation of the shared kernels to LLVM IR failed";
  for (const std::string &symbol : symbols) {
    llvm::Function *fn = k.module->getFunction(symbol);
    if (!fn || fn->isDeclaration())
      return error() << "internal: the shared kernel " << symbol
                     << " is not defined";
    // One copy per program, whichever model's object it comes from, and
    // never exported from a shared library.
    fn->setLinkage(llvm::GlobalValue::WeakODRLinkage);
    fn->setVisibility(llvm::GlobalValue::HiddenVisibility);
  }
  k.path = path.str();
  return k;
}

/// Optimizes `k` with `tm` (its thread's own) and writes its object (no
/// diagnostics: a thread of its own calls it); the problem, or "".
static std::string compileKernelObject(HostEmitter::KernelObject &k,
                                       llvm::TargetMachine &tm) {
  std::string message;
  optimizeModule(*k.module, tm);
  // One partition: a partition's local symbols become hidden globals,
  // which could meet the same names in a model's partitions at the link.
  SmallString<256> tmp;
  int fd;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueFile(k.path + ".%%%%%%.tmp", fd, tmp))
    return "cannot write '" + tmp.str().str() + "': " + ec.message();
  {
    llvm::raw_fd_ostream f(fd, /*shouldClose=*/true);
    if (failed(emitMachineCode(*k.module, tm, false, f, message))) {
      llvm::sys::fs::remove(tmp);
      return message;
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, k.path)) {
    llvm::sys::fs::remove(tmp);
    return "cannot write '" + k.path + "': " + ec.message();
  }
  return "";
}

LogicalResult
HostEmitter::writeSharedKernels(MutableArrayRef<KernelObject> kernels,
                                const HostCpu &cpu) {
  unsigned threads = options.codegenThreads;
  if (threads == 0)
    threads = std::min(4u, llvm::hardware_concurrency().compute_thread_count());
  threads = std::max(1u, std::min<unsigned>(threads, kernels.size()));
  std::vector<std::string> problems(kernels.size());
  std::atomic<size_t> next{0};
  // A target machine per thread (one is not shared between threads), not
  // per kernel.
  auto work = [&] {
    std::string message;
    auto tm = createTargetMachine(cpu, message);
    for (size_t i; (i = next++) < kernels.size();)
      problems[i] = tm ? compileKernelObject(kernels[i], *tm) : message;
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back(work);
  work();
  for (std::thread &t : pool)
    t.join();
  for (const std::string &p : problems)
    if (!p.empty())
      return error() << p;
  return success();
}

/// Instructions below which one partition is generated: splitting costs a
/// bitcode round trip per partition, which only a large module repays.
static constexpr size_t kParallelCodegenMinInstructions = 10000;

static std::string findTool(ArrayRef<StringRef> names) {
  for (StringRef n : names)
    if (auto p = llvm::sys::findProgramByName(n))
      return *p;
  return "";
}

FailureOr<SmallVector<std::string>>
HostEmitter::writeObjects(llvm::Module &module, llvm::TargetMachine &tm,
                          StringRef path, bool merge) {
  TimingScope codegen = timing.nest("machine code");
  unsigned threads = options.codegenThreads;
  if (threads == 0)
    threads = std::min(4u, llvm::hardware_concurrency().compute_thread_count());
  // Merging the partitions takes the clang driver (`clang -r`); without it
  // the module stays one partition.
  std::string merger = merge ? findTool({"clang-22", "clang"}) : "";
  if (threads > 1 &&
      module.getInstructionCount() >= kParallelCodegenMinInstructions &&
      (!merge || !merger.empty())) {
    FailureOr<SmallVector<std::string>> parts =
        writePartitions(module, tm, threads);
    if (failed(parts))
      return failure();
    if (!merge)
      return parts;
    // The partitions' local symbols, made hidden globals so that they link
    // to each other, are local again: two models' objects link into one
    // program.
    SmallString<128> tmp;
    if (llvm::sys::fs::createTemporaryFile("tfm-merged", "o", tmp))
      return error() << "cannot create a temporary file";
    LogicalResult merged = mergeObjects(merger, *parts, tmp);
    for (const std::string &p : *parts)
      llvm::sys::fs::remove(p);
    merged = succeeded(merged) ? localizeHidden(tmp, path) : failure();
    llvm::sys::fs::remove(tmp);
    if (failed(merged))
      return failure();
    return SmallVector<std::string>{path.str()};
  }
  std::error_code ec;
  llvm::raw_fd_ostream f(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return error() << "cannot write '" << path << "': " << ec.message();
  std::string message;
  if (failed(emitMachineCode(module, tm, false, f, message)))
    return error() << message;
  return SmallVector<std::string>{path.str()};
}

FailureOr<SmallVector<std::string>>
HostEmitter::writePartitions(llvm::Module &module, llvm::TargetMachine &tm,
                             unsigned threads) {
  // SplitModule partitions the optimized module (local symbols become
  // hidden globals so that the partitions link); each partition goes
  // through bitcode into a context of its own, so that its machine code is
  // generated on its own thread.
  SmallVector<SmallString<0>> bitcode;
  llvm::SplitModule(
      module, threads,
      [&](std::unique_ptr<llvm::Module> part) {
        bitcode.emplace_back();
        llvm::raw_svector_ostream os(bitcode.back());
        llvm::WriteBitcodeToFile(*part, os);
      },
      /*PreserveLocals=*/false, /*RoundRobin=*/true);
  SmallVector<std::string> parts;
  llvm::scope_exit removeParts([&] {
    for (const std::string &p : parts)
      llvm::sys::fs::remove(p);
  });
  for (size_t i = 0; i < bitcode.size(); ++i) {
    SmallString<128> tmp;
    if (llvm::sys::fs::createTemporaryFile("tfm-part", "o", tmp))
      return error() << "cannot create a temporary file";
    parts.push_back(tmp.str().str());
  }
  const llvm::Target &target = tm.getTarget();
  llvm::Triple triple = tm.getTargetTriple();
  std::string cpu = tm.getTargetCPU().str(),
              features = tm.getTargetFeatureString().str();
  llvm::TargetOptions targetOptions = tm.Options;
  std::optional<llvm::Reloc::Model> reloc = tm.getRelocationModel();
  llvm::CodeGenOptLevel level = tm.getOptLevel();
  SmallVector<std::string> failures(parts.size());
  std::vector<std::thread> workers;
  for (size_t i = 0; i < parts.size(); ++i)
    workers.emplace_back([&, i] {
      llvm::LLVMContext partCtx;
      auto partModule = llvm::parseBitcodeFile(
          llvm::MemoryBufferRef(bitcode[i].str(), "partition"), partCtx);
      if (!partModule) {
        failures[i] = llvm::toString(partModule.takeError());
        return;
      }
      std::unique_ptr<llvm::TargetMachine> partTm(target.createTargetMachine(
          triple, cpu, features, targetOptions, reloc, std::nullopt, level));
      std::error_code ec;
      llvm::raw_fd_ostream f(parts[i], ec, llvm::sys::fs::OF_None);
      if (ec) {
        failures[i] = "cannot write '" + parts[i] + "': " + ec.message();
        return;
      }
      if (failed(
              emitMachineCode(**partModule, *partTm, false, f, failures[i])) &&
          failures[i].empty())
        failures[i] = "machine code generation failed";
    });
  for (std::thread &w : workers)
    w.join();
  for (const std::string &f : failures)
    if (!f.empty())
      return error() << f;
  removeParts.release();
  return parts;
}

LogicalResult HostEmitter::localizeHidden(StringRef from, StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(from);
  if (!buffer)
    return error() << "cannot read '" << from
                   << "': " << buffer.getError().message();
  llvm::Expected<std::unique_ptr<llvm::object::Binary>> binary =
      llvm::object::createBinary((*buffer)->getMemBufferRef());
  if (!binary)
    return error() << "cannot read '" << from
                   << "': " << llvm::toString(binary.takeError());
  llvm::objcopy::ConfigManager config;
  config.Common.InputFilename = from;
  config.Common.OutputFilename = path;
  config.ELF.LocalizeHidden = true;
  SmallString<0> localized;
  llvm::raw_svector_ostream os(localized);
  if (llvm::Error e =
          llvm::objcopy::executeObjcopyOnBinary(config, **binary, os))
    return error() << "cannot rewrite the symbols of '" << path
                   << "': " << llvm::toString(std::move(e));
  std::error_code ec;
  llvm::raw_fd_ostream f(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return error() << "cannot write '" << path << "': " << ec.message();
  f << localized;
  return success();
}

LogicalResult HostEmitter::mergeObjects(StringRef driver,
                                        ArrayRef<std::string> parts,
                                        StringRef path) {
  std::vector<std::string> args{driver.str(), "-fuse-ld=lld", "-r",
                                "-nostdlib"};
  args.insert(args.end(), parts.begin(), parts.end());
  args.push_back("-o");
  args.push_back(path.str());
  SmallVector<StringRef> refs(args.begin(), args.end());
  std::string message;
  if (llvm::sys::ExecuteAndWait(driver, refs, std::nullopt, {}, 0, 0,
                                &message) == 0)
    return success();
  InFlightDiagnostic diag = error() << "merging the " << parts.size()
                                    << " partitions' objects into '" << path
                                    << "' failed";
  if (!message.empty())
    diag << ": " << message;
  return diag;
}

LogicalResult HostEmitter::writeHeader(const ModelDescription *model,
                                       StringRef name,
                                       const HostInterface &iface,
                                       StringRef objectPath) {
  std::string header = headerPath(objectPath);
  std::error_code ec;
  llvm::raw_fd_ostream h(header, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return error() << "cannot write '" << header << "': " << ec.message();
  if (model) {
    h << generateHeader(*model, iface.params);
    return success();
  }
  h << "/* " << name << ": generated by tfmc from hand-written IR. */\n"
    << "#include \"tfm/runtime.h\"\n"
    << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n"
    << "extern const char " << name << "_model_json[];\n"
    << "int32_t " << name << "_forward(void *const *params, "
    << "const tfm_tensor *inputs, tfm_tensor *output);\n"
    << "#ifdef __cplusplus\n}\n#endif\n";
  return success();
}

bool driver::forEachObjectSymbol(
    StringRef path, function_ref<void(StringRef name, bool defined)> fn) {
  auto file = llvm::object::ObjectFile::createObjectFile(path);
  if (!file) {
    llvm::consumeError(file.takeError());
    return false;
  }
  for (const llvm::object::SymbolRef &sym : file->getBinary()->symbols()) {
    llvm::Expected<StringRef> name = sym.getName();
    llvm::Expected<uint32_t> flags = sym.getFlags();
    if (!name || !flags) {
      llvm::consumeError(name.takeError());
      llvm::consumeError(flags.takeError());
      continue;
    }
    fn(*name, !(*flags & llvm::object::SymbolRef::SF_Undefined));
  }
  return true;
}

/// Whether `object` calls into the runtime's tensor-parallel side
/// (`tfm_tp_*`), as the code of a model compiled with --tensor-parallel N > 1
/// does: only then is the artifact linked with MPI.
static bool callsTensorParallel(StringRef object) {
  bool calls = false;
  forEachObjectSymbol(object, [&](StringRef name, bool defined) {
    calls |= !defined && name.starts_with("tfm_tp_");
  });
  return calls;
}

//===----------------------------------------------------------------------===//
// The link job
//===----------------------------------------------------------------------===//

// A link through the C compiler driver is two programs: the driver, which
// works out the linker's command line (the C library's start files, the
// compiler's own, their search paths, the libraries every program takes),
// and the linker. The driver's part is the same for every link of a kind
// (executable or shared library), so tfmc asks it once (`-###`, with
// placeholders for the search paths and inputs), keeps the linker's
// command line in the cache directory beside the kernels, and from then on
// runs the linker itself, the inputs in the places the driver gives them:
// each link costs one process less (the driver's start, 70-90 ms of CPU).
// The entry is named by the driver's path, size and time and the search
// paths it takes from the environment (LIBRARY_PATH, COMPILER_PATH); one
// whose files are gone (a compiler upgrade) or that cannot be read is
// asked again. Without a cache directory, and for flags the entry does not
// know (a sanitizer's), the driver links as before.

static constexpr StringLiteral kLinkSearch = "-L@tfm-link-search@";
static constexpr StringLiteral kLinkOutput = "@tfm-link-output@";
static constexpr StringLiteral kLinkInputs = "@tfm-link-inputs@";

/// The linker's arguments for the driver's `userArgs` (the inputs and
/// linker flags tfmc passes it, in order), or none for one the cached job
/// does not know: objects and archives, -l, -L (which the driver moves
/// before its own search paths) and -Wl,.
static std::optional<
    std::pair<std::vector<std::string>, std::vector<std::string>>>
linkerArguments(ArrayRef<std::string> userArgs) {
  std::vector<std::string> search, inputs;
  for (const std::string &a : userArgs) {
    StringRef arg(a);
    if (arg.starts_with("-L") && arg.size() > 2) {
      search.push_back(a);
    } else if (arg.consume_front("-Wl,")) {
      SmallVector<StringRef> parts;
      arg.split(parts, ',');
      for (StringRef part : parts)
        inputs.push_back(part.str());
    } else if ((arg.starts_with("-l") && arg.size() > 2) ||
               !arg.starts_with("-")) {
      inputs.push_back(a);
    } else {
      return std::nullopt;
    }
  }
  return std::make_pair(std::move(search), std::move(inputs));
}

/// The linker's command line that `driver` gives for a link of this kind,
/// from the cache directory, or asked of the driver and kept there; none
/// without a cache directory, or where the driver's answer is not one
/// linker command with the placeholders in it.
static std::optional<std::vector<std::string>> cachedLinkJob(StringRef driver,
                                                             bool shared) {
  std::string dir = kernelCacheDir();
  llvm::sys::fs::file_status st;
  if (dir.empty() || llvm::sys::fs::status(driver, st))
    return std::nullopt;
  llvm::MD5 md5;
  md5.update(driver);
  md5.update(
      llvm::formatv(" {0} {1} {2}", st.getSize(),
                    st.getLastModificationTime().time_since_epoch().count(),
                    shared ? "shared" : "executable")
          .str());
  // The environment the driver reads its search paths from.
  for (const char *var : {"LIBRARY_PATH", "COMPILER_PATH"})
    md5.update(llvm::formatv(" {0}={1}", var,
                             llvm::sys::Process::GetEnv(var).value_or("-"))
                   .str());
  llvm::MD5::MD5Result hash;
  md5.final(hash);
  SmallString<256> path(dir);
  llvm::sys::path::append(path,
                          "link-" + hash.digest().str().substr(0, 20) + ".txt");
  // Each argument a line; every absolute path in it must still exist.
  auto valid = [](const std::vector<std::string> &job) {
    if (job.empty() || !llvm::sys::path::is_absolute(job[0]) ||
        !StringRef(llvm::sys::path::filename(job[0])).contains("ld") ||
        llvm::count(job, kLinkSearch.str()) != 1 ||
        llvm::count(job, kLinkOutput.str()) != 1 ||
        llvm::count(job, kLinkInputs.str()) != 1)
      return false;
    return llvm::all_of(job, [](const std::string &a) {
      return !llvm::sys::path::is_absolute(a) || llvm::sys::fs::exists(a);
    });
  };
  if (auto text = llvm::MemoryBuffer::getFile(path)) {
    std::vector<std::string> job;
    SmallVector<StringRef> lines;
    (*text)->getBuffer().split(lines, '\n', -1, false);
    for (StringRef l : lines)
      job.push_back(l.str());
    if (valid(job))
      return job;
  }
  // Ask the driver: an empty object stands for the inputs (the driver
  // checks that its inputs exist).
  if (llvm::sys::fs::create_directories(dir))
    return std::nullopt;
  SmallString<256> probe, answer;
  if (llvm::sys::fs::createTemporaryFile("tfm-link-inputs", "o", probe))
    return std::nullopt;
  llvm::scope_exit removeProbe([&] { llvm::sys::fs::remove(probe); });
  if (llvm::sys::fs::createTemporaryFile("tfm-link-job", "txt", answer))
    return std::nullopt;
  llvm::scope_exit removeAnswer([&] { llvm::sys::fs::remove(answer); });
  SmallVector<StringRef> args{driver, "-fuse-ld=lld"};
  if (shared)
    args.push_back("-shared");
  args.append({"-###", kLinkSearch, probe, "-o", kLinkOutput});
  std::optional<StringRef> redirects[] = {StringRef(""), StringRef(answer),
                                          StringRef(answer)};
  if (llvm::sys::ExecuteAndWait(driver, args, std::nullopt, redirects) != 0)
    return std::nullopt;
  auto text = llvm::MemoryBuffer::getFile(answer);
  if (!text)
    return std::nullopt;
  // The last line is the linker's command, each argument quoted.
  SmallVector<StringRef> lines;
  (*text)->getBuffer().split(lines, '\n', -1, false);
  if (lines.empty())
    return std::nullopt;
  llvm::BumpPtrAllocator alloc;
  llvm::StringSaver saver(alloc);
  SmallVector<const char *> tokens;
  llvm::cl::TokenizeGNUCommandLine(lines.back(), saver, tokens);
  std::vector<std::string> job;
  for (const char *t : tokens)
    job.push_back(StringRef(t) == probe.str() ? kLinkInputs.str() : t);
  if (!valid(job))
    return std::nullopt;
  // Written whole and renamed (another tfmc may read it at once); one that
  // cannot be written is asked again next time.
  llvm::consumeError(llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
    for (const std::string &a : job)
      os << a << "\n";
    return llvm::Error::success();
  }));
  return job;
}

/// Links `inputs` (the inputs and linker flags tfmc gives the driver, in
/// order) into `output` with the linker command `driver` gave for a link
/// of this kind: the linker's exit status, or none where there is no such
/// command or `inputs` holds a flag it does not know.
static std::optional<int> runCachedLinkJob(StringRef driver, bool shared,
                                           ArrayRef<std::string> inputs,
                                           StringRef output,
                                           std::string &message) {
  auto linker = linkerArguments(inputs);
  if (!linker)
    return std::nullopt;
  std::optional<std::vector<std::string>> job = cachedLinkJob(driver, shared);
  if (!job)
    return std::nullopt;
  std::vector<std::string> argv;
  for (const std::string &a : *job) {
    if (a == kLinkSearch)
      argv.insert(argv.end(), linker->first.begin(), linker->first.end());
    else if (a == kLinkInputs)
      argv.insert(argv.end(), linker->second.begin(), linker->second.end());
    else if (a == kLinkOutput)
      argv.push_back(output.str());
    else
      argv.push_back(a);
  }
  SmallVector<StringRef> refs(argv.begin(), argv.end());
  return llvm::sys::ExecuteAndWait(argv[0], refs, std::nullopt, {}, 0, 0,
                                   &message);
}

LogicalResult HostEmitter::link(ArrayRef<std::string> objects,
                                StringRef output) {
  TimingScope linkTimer = timing.nest("link");
  std::string driver = findTool({"clang-22", "clang", "cc", "gcc"});
  if (driver.empty())
    return error() << "no C compiler driver (clang-22, cc) found to link the "
                      "executable";
  // The runtime sits in ../lib next to bin/tfmc, in the build tree as in an
  // install (compiler/cmake/TfmInstall.cmake); a tfmc copied elsewhere alone
  // falls back to the build tree's.
  std::string exe = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
  SmallString<256> libDir(
      llvm::sys::path::parent_path(llvm::sys::path::parent_path(exe)));
  llvm::sys::path::append(libDir, "lib");
  SmallString<256> besideTfmc(libDir);
  llvm::sys::path::append(besideTfmc, "libtfm_runtime.a");
#ifdef TFM_BUILD_LIB_DIR
  if (!llvm::sys::fs::exists(besideTfmc))
    libDir = TFM_BUILD_LIB_DIR;
#endif
  SmallString<256> runtime(libDir), tokenizer(libDir), chat(libDir),
      mainObj(libDir);
  llvm::sys::path::append(runtime, "libtfm_runtime.a");
  llvm::sys::path::append(tokenizer, "libtfm_tokenizer.a");
  llvm::sys::path::append(chat, "libtfm_chat.a");
  llvm::sys::path::append(mainObj, "tfm_main.o");
  if (!llvm::sys::fs::exists(runtime))
    return error() << "the runtime library is missing: " << besideTfmc;
  // The tokenizers and the command line (tfm_main*): executables and shared
  // libraries take text, so both link them, before the core runtime they
  // call. An object (-c) links neither: its program adds the tokenizer
  // library if it tokenizes (docs/Runtime.md).
  if (!llvm::sys::fs::exists(tokenizer))
    return error() << "the tokenizer library is missing: " << tokenizer;
  // The server (--serve) renders chat templates.
  if (!llvm::sys::fs::exists(chat))
    return error() << "the chat template library is missing: " << chat;
  bool shared = options.artifact == ArtifactKind::Shared;
  // Tensor parallelism: the runtime's MPI side, before the runtime (whose
  // weak references it fills), and Open MPI's libraries after it.
  std::vector<std::string> runtimeLibs{tokenizer.str().str(), chat.str().str(),
                                       runtime.str().str()},
      mpiLibs;
  if (llvm::any_of(objects, [](const std::string &object) {
        return callsTensorParallel(object);
      })) {
#ifdef TFM_MPI_LINK
    SmallString<256> mpiRuntime(libDir);
    llvm::sys::path::append(mpiRuntime, "libtfm_runtime_mpi.a");
    if (!llvm::sys::fs::exists(mpiRuntime))
      return error() << "the runtime's MPI library is missing: " << mpiRuntime;
    runtimeLibs.insert(runtimeLibs.end() - 1, mpiRuntime.str().str());
    SmallVector<StringRef> flags;
    StringRef(TFM_MPI_LINK).split(flags, '|', -1, false);
    for (StringRef f : flags)
      mpiLibs.push_back(f.str());
#else
    return error() << "a tensor-parallel model needs Open MPI, and this tfmc "
                      "was built without it (install libopenmpi-dev and "
                      "openmpi-bin, then configure again)";
#endif
  }
  // LLVM's linker where the driver is clang and lld is installed (Debian's
  // lld-22): a model's link took 80 ms with GNU ld, 54 ms with lld.
  bool lld =
      StringRef(llvm::sys::path::filename(driver)).starts_with("clang") &&
      !findTool({"ld.lld-22", "ld.lld"}).empty();
  // The inputs and linker flags, in order (the driver adds its own).
  std::vector<std::string> inputs(objects.begin(), objects.end());
  if (shared) {
    inputs.push_back("-Wl,--whole-archive");
    inputs.insert(inputs.end(), runtimeLibs.begin(), runtimeLibs.end());
    inputs.push_back("-Wl,--no-whole-archive");
  } else {
    inputs.push_back(mainObj.str().str());
    inputs.insert(inputs.end(), runtimeLibs.begin(), runtimeLibs.end());
  }
  inputs.insert(inputs.end(), mpiLibs.begin(), mpiLibs.end());
  // Executables take the static jansson (nothing extra at run time);
  // Debian's libjansson.a is not position independent, so a shared library
  // links libjansson.so.4 instead.
  inputs.push_back(shared ? "-ljansson" : TFM_JANSSON_STATIC);
#ifdef TFM_SANITIZE_LINK
  inputs.push_back(TFM_SANITIZE_LINK);
#endif
  for (const char *a :
       {"-L" TFM_OMP_DIR, "-lomp", "-Wl,-rpath," TFM_OMP_DIR, "-lm"})
    inputs.push_back(a);
  // The runtime's lib/ as a run path: the tokenizers load the SentencePiece
  // bridge (libtfm_sentencepiece.so) from there with dlopen.
  inputs.push_back((Twine("-Wl,-rpath,") + libDir).str());
  std::string message;
  std::optional<int> rc;
  if (lld)
    rc = runCachedLinkJob(driver, shared, inputs, output, message);
  if (!rc) {
    SmallVector<StringRef> args{driver};
    if (lld)
      args.push_back("-fuse-ld=lld");
    if (shared)
      args.push_back("-shared");
    args.append(inputs.begin(), inputs.end());
    args.append({"-o", output});
    rc = llvm::sys::ExecuteAndWait(driver, args, std::nullopt, {}, 0, 0,
                                   &message);
  }
  if (*rc != 0) {
    InFlightDiagnostic diag = error() << "linking " << output << " failed";
    if (!message.empty())
      diag << ": " << message;
    return diag;
  }
  return success();
}
