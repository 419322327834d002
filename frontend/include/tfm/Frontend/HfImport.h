//===- HfImport.h - .tfm descriptions from Hugging Face configs -*- C++ -*-===//
//
// `tfmc import` reads the config.json of a Hugging Face model and writes the
// .tfm description of the same network (language version 2, with
// `checkpoint = huggingface(type = T)`). Every field of the config either
// maps to a key, is listed in the written file's header comment as not part
// of the forward pass, or is an error when it changes the math in a way the
// language cannot express. A field the importer does not know is an error
// (it may change the forward pass), or, with `allowUnknown`, a warning listed
// in the header. Nothing is dropped silently, and nothing is approximated.
//
// Both forms of the RoPE settings are read: transformers 4's top-level
// `rope_theta` / `rope_scaling` / `partial_rotary_factor`, and transformers
// 5's `rope_parameters` (one dict, or one per layer type).
//
//===----------------------------------------------------------------------===//

#ifndef TFM_FRONTEND_HFIMPORT_H
#define TFM_FRONTEND_HFIMPORT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include <optional>
#include <string>

namespace mlir::tfm {

enum class HfSeverity { Error, Warning };

/// Receives each diagnostic of an import. Messages start with the file they
/// are about ("config.json: rope_scaling.type = yarn is not supported"); the
/// caller adds the tool prefix.
using HfDiagnosticFn =
    llvm::function_ref<void(HfSeverity, const llvm::Twine &message)>;

/// The `model_type`s the importer reads, in the order the docs list them
/// (the rows of ModelTypes.def: the same list as hfCheckpointTypes()).
llvm::ArrayRef<llvm::StringRef> getHfImportModelTypes();

/// The config.json that `path` names: `path` itself, or `path/config.json`
/// when `path` is a folder. Reports an error and returns nothing when there is
/// none.
std::optional<std::string> findHfConfig(llvm::StringRef path,
                                        HfDiagnosticFn diag);

/// Options of an import.
struct HfImportOptions {
  /// A field the importer does not know is a warning (listed in the header
  /// comment) instead of an error.
  bool allowUnknown = false;
};

/// Translates the text of a config.json into a .tfm file. `filename` names the
/// config in messages and in the header comment; the model is named after
/// the folder holding it (or its model_type). Returns nothing after an error.
std::optional<std::string> importHfConfig(llvm::StringRef filename,
                                          llvm::StringRef json,
                                          HfDiagnosticFn diag,
                                          const HfImportOptions &options = {});

} // namespace mlir::tfm

#endif // TFM_FRONTEND_HFIMPORT_H
