//===- KernelCache.cpp - model-independent kernels, compiled once ---------===//

#include "KernelCache.h"
#include "Artifacts.h"

#include "tfm/Dialect/TfmDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MD5.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::driver;

std::string driver::tfmcIdentity() {
  static const std::string identity = [] {
    std::string exe = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
    llvm::ErrorOr<llvm::MD5::MD5Result> hash = llvm::sys::fs::md5_contents(exe);
    // Without its own bytes nothing identifies this build: the path alone
    // (never a hit across rebuilds that keep the path) would be wrong, so
    // every compile gets an entry of its own.
    if (!hash)
      return std::string("unreadable-") +
             std::to_string(llvm::sys::Process::getProcessId());
    return hash->digest().str().str();
  }();
  return identity;
}

/// Moves the functions `group` into a module of their own with copies of
/// the external declarations they call, and names them after its key.
static FailureOr<SharedKernels> extractGroup(ModuleOp module,
                                             ArrayRef<func::FuncOp> group,
                                             StringRef target, StringRef tool) {
  SharedKernels out;
  Location loc = module.getLoc();
  out.module = ModuleOp::create(loc, StringRef("tfm_kernels"));
  Block *body = out.module->getBody();
  llvm::StringSet<> inGroup, declared;
  for (func::FuncOp fn : group)
    inGroup.insert(fn.getSymName());
  for (func::FuncOp fn : group) {
    // The runtime functions it calls (tfm_get_threads), declared beside it.
    if (std::optional<SymbolTable::UseRange> uses =
            SymbolTable::getSymbolUses(fn))
      for (const SymbolTable::SymbolUse &use : *uses) {
        StringRef callee = use.getSymbolRef().getRootReference();
        if (inGroup.contains(callee) || !declared.insert(callee).second)
          continue;
        auto decl = module.lookupSymbol<func::FuncOp>(callee);
        if (!decl || !decl.isExternal())
          return fn.emitError()
                 << "internal: shared kernel '" << fn.getSymName()
                 << "' references '" << callee
                 << "', which is neither a shared kernel nor a declaration";
        body->push_back(decl.clone());
      }
    // A declaration where the definition was.
    OpBuilder b(fn);
    auto decl =
        func::FuncOp::create(b, loc, fn.getSymName(), fn.getFunctionType());
    decl.setPrivate();
    fn->remove();
    body->push_back(fn);
    fn.setPublic();
  }

  // The key: the kernels as tfm-outline-kernels made them (kernel ops, not
  // yet lowered: a hit costs no lowering), what their machine code is
  // generated for (with the lowering's options), and by what.
  std::string text;
  {
    llvm::raw_string_ostream os(text);
    out.module->print(os);
  }
  std::string triple = llvm::sys::getDefaultTargetTriple();
  llvm::MD5 md5;
  for (StringRef part :
       {StringRef("tfm kernel cache 3"), StringRef(LLVM_VERSION_STRING), tool,
        StringRef(triple), target, StringRef(text)}) {
    md5.update(part);
    md5.update(StringRef("\0", 1));
  }
  llvm::MD5::MD5Result result;
  md5.final(result);
  out.key = result.digest().str().substr(0, 20);

  for (func::FuncOp fn : group) {
    std::string name = (fn.getSymName() + "_" + out.key).str();
    auto newName = StringAttr::get(module.getContext(), name);
    if (failed(SymbolTable::replaceAllSymbolUses(fn.getSymNameAttr(), newName,
                                                 module)) ||
        failed(SymbolTable::replaceAllSymbolUses(fn.getSymNameAttr(), newName,
                                                 *out.module)))
      return fn.emitError("internal: cannot rename a shared kernel");
    auto decl = module.lookupSymbol<func::FuncOp>(fn.getSymNameAttr());
    decl.setSymName(name);
    fn.setSymName(name);
    out.symbols.push_back(name);
  }
  return out;
}

FailureOr<std::vector<SharedKernels>>
driver::extractSharedKernels(ModuleOp module, StringRef target,
                             StringRef tool) {
  SmallVector<func::FuncOp> shared;
  llvm::StringMap<unsigned> index;
  for (auto fn : module.getOps<func::FuncOp>())
    if (TfmDialect::SharedKernelAttrHelper(module.getContext())
            .isAttrPresent(fn) &&
        !fn.isExternal()) {
      index[fn.getSymName()] = shared.size();
      shared.push_back(fn);
    }
  // Groups: the shared kernels that call one another (union-find).
  SmallVector<unsigned> parent(shared.size());
  for (unsigned i = 0; i < shared.size(); ++i)
    parent[i] = i;
  auto find = [&](unsigned i) {
    while (parent[i] != i)
      i = parent[i] = parent[parent[i]];
    return i;
  };
  for (unsigned i = 0; i < shared.size(); ++i)
    if (std::optional<SymbolTable::UseRange> uses =
            SymbolTable::getSymbolUses(shared[i]))
      for (const SymbolTable::SymbolUse &use : *uses) {
        auto it = index.find(use.getSymbolRef().getRootReference());
        if (it != index.end())
          parent[find(i)] = find(it->second);
      }
  llvm::MapVector<unsigned, SmallVector<func::FuncOp>> groups;
  for (unsigned i = 0; i < shared.size(); ++i)
    groups[find(i)].push_back(shared[i]);
  std::vector<SharedKernels> out;
  for (auto &[root, group] : groups) {
    FailureOr<SharedKernels> k = extractGroup(module, group, target, tool);
    if (failed(k))
      return failure();
    out.push_back(std::move(*k));
  }
  return out;
}

std::string driver::kernelCacheDir() {
  if (std::optional<std::string> dir =
          llvm::sys::Process::GetEnv("TFM_CACHE_DIR"))
    return *dir;
  SmallString<256> dir;
  if (std::optional<std::string> xdg =
          llvm::sys::Process::GetEnv("XDG_CACHE_HOME");
      xdg && llvm::sys::path::is_absolute(*xdg))
    dir = *xdg;
  else if (std::optional<std::string> home = llvm::sys::Process::GetEnv("HOME");
           home && llvm::sys::path::is_absolute(*home))
    llvm::sys::path::append(dir, *home, ".cache");
  else
    return "";
  llvm::sys::path::append(dir, "tfm");
  return dir.str().str();
}

std::string driver::kernelCachePath(StringRef dir, StringRef key) {
  SmallString<256> path(dir);
  llvm::sys::path::append(path, "kernels-" + key + ".o");
  return path.str().str();
}

bool driver::definesSymbols(StringRef path,
                            const std::vector<std::string> &symbols) {
  llvm::StringSet<> missing;
  for (const std::string &s : symbols)
    missing.insert(s);
  if (!forEachObjectSymbol(path, [&](StringRef name, bool defined) {
        if (defined)
          missing.erase(name);
      }))
    return false;
  return missing.empty();
}
