//===- ImportCommand.cpp - tfmc import ------------------------------------===//
//
// Reads a Hugging Face config.json (or the model folder holding one) and
// writes the .tfm description of the model, to stdout or to -o. The output
// never replaces the config it was read from.
//
//===----------------------------------------------------------------------===//

#include "ImportCommand.h"

#include "tfm/Frontend/GgufCheckpoint.h"
#include "tfm/Frontend/GgufImport.h"
#include "tfm/Frontend/HfImport.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace mlir::tfm;
namespace cl = llvm::cl;

namespace {

cl::SubCommand importCommand("import",
                             "Write the .tfm description of a Hugging Face "
                             "model (its config.json)");
cl::opt<std::string> importPath(cl::Positional, cl::Required,
                                cl::desc("<config.json, model folder or "
                                         "model.gguf>"),
                                cl::sub(importCommand));
cl::opt<std::string> importOutput("o",
                                  cl::desc("Output .tfm file (default: "
                                           "stdout)"),
                                  cl::value_desc("file"), cl::init("-"),
                                  cl::sub(importCommand));

cl::opt<bool> allowUnknown(
    "allow-unknown",
    cl::desc("Accept config fields tfmc import does not know (a warning, "
             "and listed in the header) after checking that they do not "
             "change the model"),
    cl::init(false), cl::sub(importCommand));

void report(HfSeverity severity, const llvm::Twine &message) {
  if (severity == HfSeverity::Error)
    llvm::WithColor::error(llvm::errs(), "tfmc") << message << "\n";
  else
    llvm::WithColor::warning(llvm::errs(), "tfmc") << message << "\n";
}

} // namespace

int runImportCommand(int argc, char **argv) {
  cl::ParseCommandLineOptions(
      argc, argv,
      "tfmc import: the .tfm description of a Hugging Face model\n\n"
      "  tfmc import path/to/model-folder -o model.tfm\n"
      "  tfmc import config.json          (writes to stdout)\n"
      "  tfmc import model.gguf -o model.tfm   (llama.cpp's GGUF: " +
          [] {
            std::string list;
            for (llvm::StringRef a : ggufCheckpointArchs())
              list += (list.empty() ? "" : ", ") + a.str();
            return list;
          }() +
          ")\n\n"
          "Supported model_type values: " +
          [] {
            std::string list;
            for (llvm::StringRef t : getHfImportModelTypes())
              list += (list.empty() ? "" : ", ") + t.str();
            return list;
          }() +
          "\n");

  // A GGUF file: its metadata and tensor infos.
  if (isGgufPath(importPath)) {
    if (importOutput != "-" && llvm::sys::fs::exists(importOutput) &&
        llvm::sys::fs::equivalent(importPath, importOutput)) {
      report(HfSeverity::Error, "-o " + importOutput +
                                    " is the file being read; write the .tfm "
                                    "to another file");
      return 1;
    }
    std::optional<std::string> tfm = importGguf(importPath, report);
    if (!tfm)
      return 1;
    std::error_code ec;
    llvm::ToolOutputFile output(importOutput, ec, llvm::sys::fs::OF_Text);
    if (ec) {
      report(HfSeverity::Error,
             "cannot write '" + importOutput + "': " + ec.message());
      return 1;
    }
    output.os() << *tfm;
    output.keep();
    return 0;
  }
  std::optional<std::string> config = findHfConfig(importPath, report);
  if (!config)
    return 1;
  if (importOutput != "-" && llvm::sys::fs::exists(importOutput) &&
      llvm::sys::fs::equivalent(*config, importOutput)) {
    report(HfSeverity::Error,
           "-o " + importOutput +
               " is the config being read; write the .tfm to another file");
    return 1;
  }
  auto buffer = llvm::MemoryBuffer::getFile(*config, /*IsText=*/true);
  if (!buffer) {
    report(HfSeverity::Error,
           "cannot read '" + *config + "': " + buffer.getError().message());
    return 1;
  }
  std::optional<std::string> tfm = importHfConfig(
      *config, (*buffer)->getBuffer(), report, HfImportOptions{allowUnknown});
  if (!tfm)
    return 1;

  std::error_code ec;
  llvm::ToolOutputFile output(importOutput, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    report(HfSeverity::Error,
           "cannot write '" + importOutput + "': " + ec.message());
    return 1;
  }
  output.os() << *tfm;
  output.keep();
  return 0;
}
