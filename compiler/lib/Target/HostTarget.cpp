//===- HostTarget.cpp - entry points, description, header, x86-64 code ----===//

#include "tfm/Target/HostTarget.h"

#include "tfm/Dialect/TfmOps.h"
#include "tfm/runtime.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/StandardInstrumentations.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/IPO/MergeFunctions.h"
#include "llvm/Transforms/Utils/Cloning.h"

using namespace mlir;
using namespace mlir::tfm;

FailureOr<std::vector<AbiArg>> mlir::tfm::readAbi(ModuleOp module,
                                                  StringRef funcName) {
  auto func = module.lookupSymbol<func::FuncOp>(funcName);
  auto *tfm = module.getContext()->getLoadedDialect<TfmDialect>();
  if (!func || !tfm)
    return failure();
  IntegerAttr numInputsAttr = tfm->getNumInputsAttrHelper().getAttr(func);
  if (!tfm->getParamsAttrHelper().isAttrPresent(func) || !numInputsAttr)
    return failure();
  int64_t numInputs = numInputsAttr.getInt();
  std::vector<AbiArg> abi;
  for (auto [i, t] : llvm::enumerate(func.getFunctionType().getInputs())) {
    auto mt = cast<MemRefType>(t);
    AbiArg a;
    int64_t idx = static_cast<int64_t>(i);
    if (idx < numInputs) {
      a.kind = AbiArg::Input;
      a.index = idx;
    } else if (idx == numInputs) {
      a.kind = AbiArg::Output;
      a.index = 0;
    } else {
      a.kind = AbiArg::Param;
      a.index = idx - numInputs - 1;
    }
    for (int64_t d : mt.getShape())
      a.shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
    Type elt = mt.getElementType();
    if (auto fp = dyn_cast<FloatType>(elt))
      a.dtype =
          fp.isBF16() ? "bfloat16" : "float" + std::to_string(fp.getWidth());
    else if (auto it = dyn_cast<IntegerType>(elt))
      a.dtype = "int" + std::to_string(it.getWidth());
    else
      a.dtype = "int64"; // index
    abi.push_back(a);
  }
  return abi;
}

FailureOr<HostCpu> mlir::tfm::resolveHostCpu(StringRef name,
                                             std::string &error) {
  HostCpu t;
  if (name == "native") {
    t.cpu = llvm::sys::getHostCPUName().str();
    llvm::StringMap<bool> feats = llvm::sys::getHostCPUFeatures();
    std::vector<std::string> list;
    for (auto &f : feats)
      list.push_back((f.second ? "+" : "-") + f.first().str());
    llvm::sort(list);
    t.features = llvm::join(list, ",");
    t.vectorWidth =
        feats.lookup("avx512f") ? 16 : (feats.lookup("avx") ? 8 : 4);
    t.bf16Dot = t.vectorWidth == 16 && feats.lookup("avx512bf16");
    t.int8Dot = t.vectorWidth == 16 && feats.lookup("avx512vnni");
  } else if (name == "x86-64-v4") {
    t.cpu = "x86-64-v4";
    t.vectorWidth = 16;
  } else if (name == "x86-64-v3") {
    t.cpu = "x86-64-v3";
    t.vectorWidth = 8;
  } else {
    error = ("unknown --cpu '" + name +
             "'; expected native, x86-64-v3 (AVX2) or x86-64-v4 (AVX-512)")
                .str();
    return failure();
  }
  return t;
}

std::unique_ptr<llvm::TargetMachine>
mlir::tfm::createTargetMachine(const HostCpu &target, std::string &error) {
  // Once per process: the kernel cache's misses create target machines on
  // several threads, and LLVM's target registration is not thread-safe (two
  // threads registering x86-64 at once put it in the registry twice, and
  // lookupTarget then fails with "Cannot choose between targets", or link
  // it to itself, and lookupTarget never returns).
  static const bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *t = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!t)
    return nullptr;
  llvm::TargetOptions opts;
  opts.AllowFPOpFusion = llvm::FPOpFusion::Fast;
  // Constructors (a CUDA artifact's module load) in .init_array, as clang
  // emits them: LLVM's default is the legacy .ctors, which GNU ld folds into
  // .init_array but lld (what executables link with) leaves where nothing
  // runs it.
  opts.UseInitArray = true;
  return std::unique_ptr<llvm::TargetMachine>(t->createTargetMachine(
      triple, target.cpu, target.features, opts,
      // Position independent: objects go into PIE executables and shared
      // libraries alike.
      llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
}

/// Serializes `root` with the fields of `target` added.
static std::string serialize(llvm::json::Object root,
                             const llvm::json::Object &target) {
  // What lowering decided overrides any field of the same name.
  root["description_version"] =
      llvm::formatv("{0}.{1}", TFM_DESCRIPTION_VERSION_MAJOR,
                    TFM_DESCRIPTION_VERSION_MINOR)
          .str();
  for (const auto &kv : target)
    root[kv.first] = kv.second;
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::json::Value(std::move(root));
  return out;
}

FailureOr<std::vector<AbiParam>>
mlir::tfm::resolveAbiParams(const ModelDescription &model, ArrayAttr abiParams,
                            Location loc) {
  std::vector<AbiParam> out;
  for (Attribute a : abiParams) {
    auto d = dyn_cast<DictionaryAttr>(a);
    auto name = d ? d.getAs<StringAttr>("name") : StringAttr();
    auto panel = d ? d.getAs<IntegerAttr>("panel") : IntegerAttr();
    bool pairs = d && d.get("bf16_pairs");
    bool quads = d && d.get("int8_quads");
    auto ggml = d ? d.getAs<StringAttr>("ggml") : StringAttr();
    if (!name || !panel)
      return emitError(loc) << "malformed entry in the entry point's "
                               "parameter list: "
                            << a;
    std::optional<unsigned> index = model.indexOf(name.getValue());
    if (!index)
      return emitError(loc)
             << "the entry point takes parameter '" << name.getValue()
             << "', which is not in the model's parameter table";
    out.push_back(
        {*index, panel.getInt(), pairs, quads, ggml ? ggml.str() : ""});
  }
  return out;
}

std::string mlir::tfm::modelMetadata(const ModelDescription &model,
                                     ArrayRef<AbiParam> abiParams,
                                     const llvm::json::Object &target) {
  llvm::json::Object root = model.json;
  llvm::json::Array abi;
  for (const AbiParam &a : abiParams) {
    llvm::json::Object entry{{"name", model.params[a.index].name},
                             {"index", int64_t(a.index)},
                             {"panel", a.panel}};
    if (a.bf16Pairs)
      entry["bf16_pairs"] = true;
    if (a.int8Quads)
      entry["int8_quads"] = true;
    if (!a.ggml.empty())
      entry["ggml"] = a.ggml;
    abi.push_back(std::move(entry));
  }
  root["abi_params"] = std::move(abi);
  return serialize(std::move(root), target);
}

std::string mlir::tfm::functionMetadata(StringRef name, ArrayRef<AbiArg> abi,
                                        const llvm::json::Object &target) {
  llvm::json::Array inputs, outputs;
  for (const AbiArg &a : abi) {
    if (a.kind == AbiArg::Param)
      continue;
    llvm::json::Array shape;
    for (int64_t d : a.shape)
      shape.push_back(d);
    llvm::json::Object t{{"name", a.kind == AbiArg::Output
                                      ? std::string("output")
                                      : "input" + std::to_string(a.index)},
                         {"dtype", a.dtype},
                         {"shape", std::move(shape)}};
    // Hand-written IR takes plain feature tensors: no vocabulary, no
    // lengths.
    if (a.kind == AbiArg::Input)
      t["usage"] = "features";
    (a.kind == AbiArg::Output ? outputs : inputs).push_back(std::move(t));
  }
  llvm::json::Object root{{"name", name.str()},
                          {"inputs", std::move(inputs)},
                          {"outputs", std::move(outputs)},
                          {"parameters", llvm::json::Array{}},
                          {"abi_params", llvm::json::Array{}},
                          {"parameter_count", 0}};
  return serialize(std::move(root), target);
}

llvm::StructType *mlir::tfm::getTensorStructType(llvm::LLVMContext &ctx) {
  // runtime.h: struct tfm_tensor { void *data; int32_t dtype; int32_t rank;
  //                                int64_t shape[TFM_MAX_RANK]; }
  llvm::Type *i32 = llvm::Type::getInt32Ty(ctx);
  llvm::Type *i64 = llvm::Type::getInt64Ty(ctx);
  llvm::Type *ptr = llvm::PointerType::get(ctx, 0);
  return llvm::StructType::get(
      ctx, {ptr, i32, i32, llvm::ArrayType::get(i64, TFM_MAX_RANK)});
}

/// Marks the entry body (MODEL_forward_body) for shortenEntryBody.
static constexpr llvm::StringLiteral kEntryBodyAttr = "tfm-entry-body";

/// Adds `entry` (int32_t entry(void *const *params, const tfm_tensor
/// *inputs, tfm_tensor *output)) running the lowered function `implName`
/// on the memref descriptors `abi` describes.
static llvm::Function *addWrapper(llvm::Module &module, StringRef implName,
                                  const llvm::Twine &entry,
                                  ArrayRef<AbiArg> abi, std::string &error) {
  llvm::LLVMContext &ctx = module.getContext();
  llvm::Function *impl = module.getFunction(implName);
  if (!impl) {
    error = ("lowered model function '" + implName + "' not found").str();
    return nullptr;
  }
  impl->setLinkage(llvm::GlobalValue::InternalLinkage);
  llvm::Type *i32 = llvm::Type::getInt32Ty(ctx);
  llvm::Type *i64 = llvm::Type::getInt64Ty(ctx);
  llvm::Type *ptr = llvm::PointerType::get(ctx, 0);
  llvm::StructType *tensorTy = getTensorStructType(ctx);

  // MODEL_forward runs MODEL_forward_body (the arguments unpacked into
  // memref descriptors, the model function called) through the runtime's
  // tfm_forward_guarded, which turns a failed allocation into
  // TFM_FORWARD_OUT_OF_MEMORY (runtime/src/forward.c).
  auto *bodyTy = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx),
                                         {ptr, ptr, ptr}, false);
  auto *body = llvm::Function::Create(
      bodyTy, llvm::GlobalValue::InternalLinkage, entry + "_body", module);
  llvm::Argument *params = body->getArg(0), *inputs = body->getArg(1),
                 *output = body->getArg(2);
  params->setName("params");
  inputs->setName("inputs");
  output->setName("output");
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", body));

  SmallVector<llvm::Value *> args;
  for (const AbiArg &a : abi) {
    int64_t rank = static_cast<int64_t>(a.shape.size());
    llvm::Value *data;
    SmallVector<llvm::Value *> sizes;
    if (a.kind == AbiArg::Param) {
      llvm::Value *slot = b.CreateConstInBoundsGEP1_64(ptr, params, a.index);
      data = b.CreateLoad(ptr, slot);
      for (int64_t d : a.shape)
        sizes.push_back(b.getInt64(d));
    } else {
      llvm::Value *t =
          a.kind == AbiArg::Input
              ? b.CreateConstInBoundsGEP1_64(tensorTy, inputs, a.index)
              : static_cast<llvm::Value *>(output);
      data = b.CreateLoad(ptr, b.CreateStructGEP(tensorTy, t, 0));
      for (int64_t i = 0; i < rank; ++i) {
        if (a.shape[i] >= 0) {
          sizes.push_back(b.getInt64(a.shape[i]));
          continue;
        }
        llvm::Value *p = b.CreateInBoundsGEP(
            tensorTy, t, {b.getInt32(0), b.getInt32(3), b.getInt32(i)});
        sizes.push_back(b.CreateLoad(i64, p));
      }
    }
    SmallVector<llvm::Value *> strides(rank);
    llvm::Value *stride = b.getInt64(1);
    for (int64_t i = rank - 1; i >= 0; --i) {
      strides[i] = stride;
      stride = b.CreateMul(stride, sizes[i]);
    }
    args.push_back(data); // allocated
    args.push_back(data); // aligned
    args.push_back(b.getInt64(0));
    args.append(sizes.begin(), sizes.end());
    args.append(strides.begin(), strides.end());
  }
  if (args.size() != impl->arg_size()) {
    error = llvm::formatv("ABI mismatch: {0} arguments for {1} parameters",
                          args.size(), impl->arg_size())
                .str();
    return nullptr;
  }
  llvm::CallInst *call = b.CreateCall(impl, args);
  b.CreateRetVoid();
  // The model function takes every parameter as a memref descriptor: with
  // many layers, one call of tens of thousands of arguments, on which O3's
  // CalledValuePropagation is quadratic (512 layers: 250 s). Inlined, the
  // arguments are loads in the body and the compile stays linear in depth.
  llvm::InlineFunctionInfo inlineInfo;
  llvm::InlineResult inlined = llvm::InlineFunction(*call, inlineInfo);
  if (!inlined.isSuccess()) {
    error = ("cannot inline the model function '" + implName +
             "' into its entry point: " + inlined.getFailureReason())
                .str();
    return nullptr;
  }
  impl->eraseFromParent();
  body->addFnAttr(kEntryBodyAttr);

  auto *fnTy = llvm::FunctionType::get(i32, {ptr, ptr, ptr}, false);
  auto *fn = llvm::Function::Create(fnTy, llvm::GlobalValue::ExternalLinkage,
                                    entry, module);
  llvm::FunctionCallee guarded = module.getOrInsertFunction(
      "tfm_forward_guarded",
      llvm::FunctionType::get(i32, {ptr, ptr, ptr, ptr}, false));
  fn->getArg(0)->setName("params");
  fn->getArg(1)->setName("inputs");
  fn->getArg(2)->setName("output");
  llvm::IRBuilder<> e(llvm::BasicBlock::Create(ctx, "entry", fn));
  e.CreateRet(e.CreateCall(
      guarded, {body, fn->getArg(0), fn->getArg(1), fn->getArg(2)}));

  return fn;
}

LogicalResult mlir::tfm::addEntryPoints(llvm::Module &module, StringRef name,
                                        StringRef metadataJson,
                                        ArrayRef<AbiArg> abi, bool exeAliases,
                                        std::string &error,
                                        const std::vector<AbiArg> *stepAbi,
                                        const std::vector<AbiArg> *encodeAbi) {
  llvm::LLVMContext &ctx = module.getContext();
  llvm::Function *fn = addWrapper(module, name, name + "_forward", abi, error);
  if (!fn)
    return failure();
  llvm::SmallPtrSet<llvm::Function *, 4> entries{fn};
  if (stepAbi) {
    llvm::Function *step = addWrapper(module, (name + "_cached").str(),
                                      name + "_step", *stepAbi, error);
    if (!step)
      return failure();
    entries.insert(step);
    if (exeAliases)
      llvm::GlobalAlias::create("tfm_model_step", step);
  }
  if (encodeAbi) {
    llvm::Function *encode = addWrapper(module, (name + "_encoder").str(),
                                        name + "_encode", *encodeAbi, error);
    if (!encode)
      return failure();
    entries.insert(encode);
    if (exeAliases)
      llvm::GlobalAlias::create("tfm_model_encode", encode);
  }
  auto *init = llvm::ConstantDataArray::getString(ctx, metadataJson, true);
  auto *gv = new llvm::GlobalVariable(module, init->getType(), true,
                                      llvm::GlobalValue::ExternalLinkage, init,
                                      name + "_model_json");
  if (exeAliases) {
    llvm::GlobalAlias::create("tfm_model_forward", fn);
    llvm::GlobalAlias::create("tfm_model_json", gv);
  }
  // The entry points are the artifact's interface; every other function
  // it defines is its own (dealloc_helper, which the buffer deallocation
  // pipeline adds to every module, would clash between two models' objects
  // linked into one program).
  for (llvm::Function &f : module)
    if (!f.isDeclaration() && f.hasExternalLinkage() && !entries.contains(&f))
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
  if (llvm::verifyModule(module, &llvm::errs())) {
    error = "the generated LLVM module does not verify";
    return failure();
  }
  return success();
}

/// After O3, the loads of a deep model's entry body (a parameter's pointer
/// from the table, read by one layer call) all sit at the top of one block
/// of tens of thousands of instructions, live until their call: instruction
/// selection, a block at a time, grows quadratically with such a block (1024
/// layers: 100 s). Each load moves down to its call, and each call starts a
/// block, so the blocks stay the size of one layer's arguments.
static void shortenEntryBody(llvm::Function &body) {
  SmallVector<llvm::CallInst *> calls;
  for (llvm::BasicBlock &block : body)
    for (llvm::Instruction &inst : block)
      if (auto *call = dyn_cast<llvm::CallInst>(&inst))
        if (llvm::Function *f = call->getCalledFunction();
            f && !f->isDeclaration())
          calls.push_back(call);
  llvm::Argument *params = body.getArg(0);
  for (llvm::CallInst *call : calls) {
    for (llvm::Use &arg : call->args()) {
      auto *load = dyn_cast<llvm::LoadInst>(arg.get());
      // Only the table's loads: nothing writes the table during a pass.
      // From the call's block or the entry block (which dominates it: the
      // calls of a forward function that allocates between its layers are
      // in blocks of their own).
      if (!load || !load->hasOneUse() ||
          (load->getParent() != call->getParent() &&
           load->getParent() != &body.getEntryBlock()) ||
          load->getPointerOperand()->stripInBoundsConstantOffsets() != params)
        continue;
      load->moveBefore(call->getIterator());
      // Its address (params + a constant) moves with it.
      auto *gep = dyn_cast<llvm::GetElementPtrInst>(load->getPointerOperand());
      if (gep && gep->hasOneUse() && gep->getPointerOperand() == params &&
          (gep->getParent() == call->getParent() ||
           gep->getParent() == &body.getEntryBlock()))
        gep->moveBefore(load->getIterator());
    }
  }
  for (llvm::CallInst *call : calls) {
    llvm::Instruction *first = call;
    while (llvm::Instruction *prev = first->getPrevNode()) {
      auto *load = dyn_cast<llvm::LoadInst>(prev);
      auto *gep = dyn_cast<llvm::GetElementPtrInst>(prev);
      if (!(load && load->hasOneUse() && load->user_back() == call) &&
          !(gep && gep->hasOneUse() && isa<llvm::LoadInst>(gep->user_back()) &&
            gep->user_back()->getParent() == call->getParent()))
        break;
      first = prev;
    }
    first->getParent()->splitBasicBlock(first);
  }
}

void mlir::tfm::optimizeModule(llvm::Module &module, llvm::TargetMachine &tm) {
  for (llvm::Function &f : module) {
    if (f.isDeclaration())
      continue;
    f.addFnAttr("target-cpu", tm.getTargetCPU());
    if (!tm.getTargetFeatureString().empty())
      f.addFnAttr("target-features", tm.getTargetFeatureString());
  }
  module.setDataLayout(tm.createDataLayout());
  module.setTargetTriple(tm.getTargetTriple());
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  // --time-passes reports the optimization pipeline's passes too (the
  // instrumentation only then: a kernel-cache miss compiles many modules).
  llvm::PassInstrumentationCallbacks pic;
  std::optional<llvm::StandardInstrumentations> si;
  if (llvm::TimePassesIsEnabled) {
    si.emplace(module.getContext(), /*DebugLogging=*/false);
    si->registerCallbacks(pic, &mam);
  }
  llvm::PassBuilder pb(&tm, pto, std::nullopt, &pic);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  // Identical functions merged first: the forward pass and the KV-cache
  // step function have their own layer bodies, but the parallel loop bodies
  // OpenMP outlines from them (the GEMM, norm and attention kernels) are
  // often the same code; O3 and the code generator then see each once
  // (GPT-2: a third less IR).
  llvm::ModulePassManager mpm;
  mpm.addPass(llvm::MergeFunctionsPass());
  mpm.addPass(pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3));
  mpm.run(module, mam);
  for (llvm::Function &f : module)
    if (f.hasFnAttribute(kEntryBodyAttr))
      shortenEntryBody(f);
}

LogicalResult mlir::tfm::emitMachineCode(llvm::Module &module,
                                         llvm::TargetMachine &tm, bool assembly,
                                         llvm::raw_pwrite_stream &os,
                                         std::string &error) {
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr,
                             assembly ? llvm::CodeGenFileType::AssemblyFile
                                      : llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit this file type";
    return failure();
  }
  pm.run(module);
  return success();
}

static std::string cIdent(StringRef s) {
  std::string out;
  for (char c : s)
    out += llvm::isAlnum(c) ? llvm::toUpper(c) : '_';
  return out;
}

std::string mlir::tfm::generateHeader(const ModelDescription &model,
                                      ArrayRef<AbiParam> abiParams) {
  std::string h;
  llvm::raw_string_ostream os(h);
  std::string guard = "TFM_MODEL_" + cIdent(model.name) + "_H";
  std::string up = cIdent(model.name);
  os << "/* " << model.name << ": generated by tfmc. Do not edit. */\n"
     << "#ifndef " << guard << "\n#define " << guard << "\n\n"
     << "#include <stdint.h>\n#include \"tfm/runtime.h\"\n\n"
     << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  if (model.tensorParallel > 1)
    os << "/* Compiled with --tensor-parallel " << model.tensorParallel
       << ": the model runs as " << model.tensorParallel
       << " MPI ranks\n   (mpirun -np " << model.tensorParallel
       << "), each holding its block of the sharded parameters. Link the\n"
          "   object with libtfm_runtime_mpi.a before libtfm_runtime.a and "
          "with Open MPI\n   (mpicc's libraries). */\n\n";
  os << "/* The resolved description (tfmc --emit=json) plus the entry "
        "point's\n   parameter order (\"abi_params\"); tfm_model_create() "
        "reads it. */\n"
     << "extern const char " << model.name << "_model_json[];\n\n"
     << "/* Runs the forward pass. params[i] points to parameter i of "
     << model.name
     << "_params\n   (f32, row-major; where .panel > 0, a "
        "[out, in] weight packed as\n   [ceil(out / panel), in, panel], "
        "zero-padded); inputs are in the order of "
     << model.name
     << "_inputs; output must be allocated\n   with its full "
        "shape. Returns 0. Inputs are not checked: use tfm_model_run() for "
        "that.\n   Threads: on the CPU the parameters are only read, so "
        "forward passes may\n   run on several threads at once over the same "
        "parameters (a tfm_model with\n   its weights loaded may be shared); "
        "see \"Threads\" in tfm/runtime.h. */\n"
     << "int32_t " << model.name << "_forward(void *const *params, "
     << "const tfm_tensor *inputs, tfm_tensor *output);\n\n";
  if (!model.step.empty())
    os << "/* The forward pass over a KV cache, for generation: give it to "
          "the model\n   with tfm_model_set_step(m, "
       << model.name
       << "_step), then create a session per\n   thread "
          "(tfm_session_create) and call tfm_session_prefill and\n   "
          "tfm_session_decode. Sessions share the model's weights; a "
          "session is\n   used by one thread at a time. */\n"
       << "int32_t " << model.name << "_step(void *const *params, "
       << "const tfm_tensor *inputs, tfm_tensor *output);\n\n";
  if (!model.encode.empty())
    os << "/* Encodes the source once per sequence and caches the "
          "cross-attention keys\n   and values: give it with "
          "tfm_model_set_encoder(m, "
       << model.name
       << "_encode)\n   and call tfm_session_encode before "
          "tfm_session_prefill. */\n"
       << "int32_t " << model.name << "_encode(void *const *params, "
       << "const tfm_tensor *inputs, tfm_tensor *output);\n\n";
  os << "#define " << up << "_NUM_PARAMS " << abiParams.size() << "\n"
     << "#define " << up << "_NUM_INPUTS " << model.inputs.size() << "\n"
     << "#define " << up << "_PARAMETER_COUNT " << model.parameterCount
     << "LL\n\n";
  os << "static const tfm_param_info " << model.name << "_params[] = {\n";
  for (const AbiParam &a : abiParams) {
    const ModelDescription::Param &p = model.params[a.index];
    const std::vector<int64_t> &shape = p.shape;
    os << "  {\"" << p.name << "\", " << a.panel << ", " << shape.size()
       << ", {";
    for (size_t i = 0; i < shape.size(); ++i)
      os << (i ? ", " : "") << shape[i];
    os << "}},\n";
  }
  os << "};\n\n/* Inputs and output; -1 = batch B, -2 = sequence T, "
        "-3 = source S. */\n";
  auto tensors = [&](StringRef what,
                     const std::vector<ModelDescription::Tensor> &ts) {
    os << "static const tfm_io_info " << model.name << "_" << what
       << "[] = {\n";
    for (const ModelDescription::Tensor &t : ts) {
      os << "  {\"" << t.name << "\", \"" << t.dtype << "\", " << t.shape.size()
         << ", {";
      for (size_t i = 0; i < t.shape.size(); ++i)
        os << (i ? ", " : "") << t.shape[i];
      os << "}},\n";
    }
    os << "};\n";
  };
  tensors("inputs", model.inputs);
  tensors("outputs", model.outputs);
  os << "\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* " << guard << " */\n";
  return h;
}
