//===- KernelCacheTest.cpp - the driver's kernel cache --------------------===//
//
// The functions marked tfm.shared_kernel leave the model's module for one
// of their own, under names that carry a key: the same for the same IR,
// CPU and tfmc, another when any of them differs (a new tfmc never links an
// old one's object). A cache entry counts only if it is an object that
// defines every one of them. test/gguf/kernel-cache.test checks the
// compiles end to end.
//
//===----------------------------------------------------------------------===//

#include "KernelCache.h"

#include "tfm/Dialect/TfmDialect.h"
#include "tfm/Target/HostTarget.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Parser/Parser.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::driver;

namespace {

constexpr const char *kModule = R"mlir(
module {
  func.func @model(%x: memref<?xf32>) {
    call @kern(%x) : (memref<?xf32>) -> ()
    return
  }
  func.func private @kern(%x: memref<?xf32>) attributes {tfm.shared_kernel} {
    %c0 = arith.constant 0 : index
    %v = arith.constant BODY : f32
    memref.store %v, %x[%c0] : memref<?xf32>
    return
  }
}
)mlir";

class KernelCacheTest : public ::testing::Test {
protected:
  KernelCacheTest() {
    ctx.loadDialect<func::FuncDialect, memref::MemRefDialect,
                    arith::ArithDialect, TfmDialect>();
  }
  OwningOpRef<ModuleOp> parse(StringRef body = "1.0") {
    std::string text(kModule);
    text.replace(text.find("BODY"), 4, body.str());
    return parseSourceString<ModuleOp>(text, &ctx);
  }
  /// The key of the module with `body`, for `target` and `tool`.
  std::string keyOf(StringRef body, StringRef target, StringRef tool) {
    OwningOpRef<ModuleOp> m = parse(body);
    auto k = extractSharedKernels(*m, target, tool);
    EXPECT_TRUE(succeeded(k) && k->size() == 1);
    return succeeded(k) && k->size() == 1 ? (*k)[0].key : "";
  }
  MLIRContext ctx;
};

TEST_F(KernelCacheTest, MovesAndRenames) {
  OwningOpRef<ModuleOp> m = parse();
  ASSERT_TRUE(m);
  auto k = extractSharedKernels(*m, "znver3 +avx2", "tfmc-1");
  ASSERT_TRUE(succeeded(k) && k->size() == 1);
  const SharedKernels &shared = (*k)[0];
  std::string name = "kern_" + shared.key;
  ASSERT_EQ(shared.symbols, std::vector<std::string>{name});
  // The model keeps a declaration, called under the new name.
  auto decl = m->lookupSymbol<func::FuncOp>(name);
  ASSERT_TRUE(decl);
  EXPECT_TRUE(decl.isExternal());
  EXPECT_TRUE(decl.isPrivate());
  EXPECT_FALSE(m->lookupSymbol("kern"));
  std::string text;
  llvm::raw_string_ostream os(text);
  m->print(os);
  EXPECT_NE(text.find("call @" + name), std::string::npos) << text;
  // The kernels' module defines it, public.
  auto def = shared.module.get().lookupSymbol<func::FuncOp>(name);
  ASSERT_TRUE(def);
  EXPECT_FALSE(def.isExternal());
  EXPECT_TRUE(def.isPublic());
}

TEST_F(KernelCacheTest, KeyFollowsIrTargetAndTool) {
  std::string key = keyOf("1.0", "znver3 +avx2", "tfmc-1");
  EXPECT_EQ(keyOf("1.0", "znver3 +avx2", "tfmc-1"), key);
  EXPECT_NE(keyOf("2.0", "znver3 +avx2", "tfmc-1"), key);
  EXPECT_NE(keyOf("1.0", "x86-64-v3 +avx2", "tfmc-1"), key);
  EXPECT_NE(keyOf("1.0", "znver3 +avx2", "tfmc-2"), key);
}

TEST_F(KernelCacheTest, NothingToMove) {
  OwningOpRef<ModuleOp> m =
      parseSourceString<ModuleOp>("func.func @model() { return }", &ctx);
  auto k = extractSharedKernels(*m, "cpu", "tool");
  ASSERT_TRUE(succeeded(k));
  EXPECT_TRUE(k->empty());
}

TEST_F(KernelCacheTest, OneModulePerGroupWithTheDeclarationsItCalls) {
  // kern_a calls kern_b (one group); kern_c stands alone and calls the
  // runtime's tfm_get_threads, whose declaration goes with it.
  OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(R"mlir(
    func.func private @tfm_get_threads() -> i32
    func.func @model() {
      call @kern_a() : () -> ()
      call @kern_c() : () -> ()
      return
    }
    func.func private @kern_a() attributes {tfm.shared_kernel} {
      call @kern_b() : () -> ()
      return
    }
    func.func private @kern_b() attributes {tfm.shared_kernel} { return }
    func.func private @kern_c() attributes {tfm.shared_kernel} {
      %n = call @tfm_get_threads() : () -> i32
      return
    }
  )mlir",
                                                        &ctx);
  ASSERT_TRUE(m);
  auto k = extractSharedKernels(*m, "cpu", "tool");
  ASSERT_TRUE(succeeded(k));
  ASSERT_EQ(k->size(), 2u);
  const SharedKernels &ab = (*k)[0], &c = (*k)[1];
  EXPECT_NE(ab.key, c.key);
  EXPECT_EQ(ab.symbols,
            (std::vector<std::string>{"kern_a_" + ab.key, "kern_b_" + ab.key}));
  EXPECT_EQ(c.symbols, std::vector<std::string>{"kern_c_" + c.key});
  auto decl = c.module.get().lookupSymbol<func::FuncOp>("tfm_get_threads");
  ASSERT_TRUE(decl);
  EXPECT_TRUE(decl.isExternal());
  EXPECT_FALSE(ab.module.get().lookupSymbol("tfm_get_threads"));
  // The model keeps its declaration and declares the three kernels.
  EXPECT_TRUE(m->lookupSymbol<func::FuncOp>("tfm_get_threads"));
  for (const std::string &name : {ab.symbols[0], ab.symbols[1], c.symbols[0]})
    EXPECT_TRUE(m->lookupSymbol<func::FuncOp>(name).isExternal()) << name;
}

TEST_F(KernelCacheTest, RefusesAKernelThatCallsTheModel) {
  OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(R"mlir(
    func.func private @helper() { return }
    func.func private @kern() attributes {tfm.shared_kernel} {
      call @helper() : () -> ()
      return
    }
  )mlir",
                                                        &ctx);
  std::string message;
  ScopedDiagnosticHandler handler(&ctx,
                                  [&](Diagnostic &d) { message = d.str(); });
  EXPECT_TRUE(failed(extractSharedKernels(*m, "cpu", "tool")));
  EXPECT_NE(message.find("references 'helper', which is neither a shared "
                         "kernel nor a declaration"),
            std::string::npos)
      << message;
}

/// An object defining `symbol` (a function returning nothing), at `path`.
void writeObject(StringRef path, StringRef symbol) {
  std::string error;
  FailureOr<HostCpu> cpu = resolveHostCpu("x86-64-v3", error);
  ASSERT_TRUE(succeeded(cpu)) << error;
  auto tm = createTargetMachine(*cpu, error);
  ASSERT_TRUE(tm) << error;
  llvm::LLVMContext llvmCtx;
  llvm::Module module("m", llvmCtx);
  module.setDataLayout(tm->createDataLayout());
  module.setTargetTriple(tm->getTargetTriple());
  auto *fn = llvm::Function::Create(
      llvm::FunctionType::get(llvm::Type::getVoidTy(llvmCtx), false),
      llvm::GlobalValue::WeakODRLinkage, symbol, module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(llvmCtx, "entry", fn));
  b.CreateRetVoid();
  std::error_code ec;
  llvm::raw_fd_ostream f(path, ec);
  ASSERT_FALSE(ec);
  ASSERT_TRUE(succeeded(emitMachineCode(module, *tm, false, f, error)))
      << error;
}

TEST(KernelCacheEntry, WholeObjectsOnly) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tfm-kernel-cache", dir));
  std::string path = kernelCachePath(dir, "0123abcd");
  EXPECT_NE(path.find("kernels-0123abcd.o"), std::string::npos);
  EXPECT_FALSE(definesSymbols(path, {"kern_0123abcd"})); // no file
  writeObject(path, "kern_0123abcd");
  EXPECT_TRUE(definesSymbols(path, {"kern_0123abcd"}));
  EXPECT_FALSE(definesSymbols(path, {"kern_0123abcd", "row_0123abcd"}));
  // Cut short, as a full disk would leave it.
  auto buffer = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(buffer);
  {
    std::error_code ec;
    llvm::raw_fd_ostream f(path, ec);
    f << (*buffer)->getBuffer().take_front(200);
  }
  EXPECT_FALSE(definesSymbols(path, {"kern_0123abcd"}));
  llvm::sys::fs::remove_directories(dir);
}

/// Restores an environment variable when it goes.
struct SavedEnv {
  explicit SavedEnv(const char *name) : name(name) {
    if (const char *v = ::getenv(name))
      value = v;
  }
  ~SavedEnv() {
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  const char *name;
  std::optional<std::string> value;
};

TEST(KernelCacheDir, FromTheEnvironment) {
  SavedEnv cache("TFM_CACHE_DIR"), xdg("XDG_CACHE_HOME"), home("HOME");
  ::setenv("TFM_CACHE_DIR", "/some/dir", 1);
  EXPECT_EQ(kernelCacheDir(), "/some/dir");
  ::setenv("TFM_CACHE_DIR", "", 1);
  EXPECT_EQ(kernelCacheDir(), "");
  ::unsetenv("TFM_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(kernelCacheDir(), "/xdg/tfm");
  ::setenv("XDG_CACHE_HOME", "relative", 1);
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(kernelCacheDir(), "/home/u/.cache/tfm");
  ::unsetenv("XDG_CACHE_HOME");
  ::unsetenv("HOME");
  EXPECT_EQ(kernelCacheDir(), "");
}

} // namespace
