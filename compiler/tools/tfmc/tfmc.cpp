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

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace mlir::tfm;
namespace cl = llvm::cl;

namespace {

enum class Emit { Tokens, AST, JSON, Tfm };

cl::OptionCategory ioCategory("Input and output");
cl::OptionCategory compileCategory("Compilation");
cl::OptionCategory mlirCategory("MLIR pass manager and printing");

cl::opt<std::string> inputFilename(cl::Positional,
                                   cl::desc("<model.tfm> (- for stdin)"),
                                   cl::init("-"), cl::cat(ioCategory));
cl::opt<std::string> outputFilename("o", cl::desc("Output file (text "
                                                  "defaults to stdout)"),
                                    cl::value_desc("file"), cl::init("-"),
                                    cl::cat(ioCategory));
cl::opt<Emit> emitKind(
    "emit", cl::desc("The stage to emit"), cl::init(Emit::Tfm),
    cl::values(clEnumValN(Emit::Tokens, "tokens", "the token stream"),
               clEnumValN(Emit::AST, "ast", "the syntax tree"),
               clEnumValN(Emit::JSON, "json",
                          "the resolved description with every default, "
                          "parameters and parameter count"),
               clEnumValN(Emit::Tfm, "tfm", "model-level tfm dialect IR")),
    cl::cat(ioCategory));
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

/// Runs the front end and writes the requested stage. Returns failure on a
/// user error (already reported through the diagnostic engine).
LogicalResult compile(MLIRContext &ctx, llvm::SourceMgr &sm,
                      DiagEmitter &diags, llvm::raw_ostream &os) {
  if (emitKind == Emit::Tokens) {
    printTokens(sm, diags, os);
    return success(diags.errorCount() == 0);
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
  OwningOpRef<ModuleOp> module = buildModule(ctx, *spec, diags.loc(decl->loc));
  if (!module)
    return failure();
  PassManager pm(&ctx);
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  if (failed(pm.run(*module)))
    return failure();
  module->print(os);
  return success();
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  // Show only the options a tfmc user needs, grouped.
  for (auto &opt : cl::getRegisteredOptions()) {
    llvm::StringRef name = opt.first;
    if (name.starts_with("mlir-print-ir") || name == "mlir-timing" ||
        name == "mlir-pass-statistics" || name == "mlir-disable-threading" ||
        name == "mlir-print-debuginfo" || name == "mlir-elide-elementsattrs-if-larger")
      opt.second->addCategory(mlirCategory);
  }
  cl::HideUnrelatedOptions({&ioCategory, &compileCategory, &mlirCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "tfmc: compile a transformer model description (.tfm)\n\n"
      "  tfmc model.tfm --emit=json     the resolved description\n"
      "  tfmc model.tfm --emit=tfm      model-level tfm IR\n");

  MLIRContext ctx;
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

  auto output = openOutputFile(outputFilename, &errorMessage);
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
