//===- GgufImport.h - .tfm descriptions from GGUF files ---------*- C++ -*-===//
//
// `tfmc import model.gguf` reads the metadata and tensor infos of a GGUF
// file written for llama.cpp and writes the .tfm description (language
// version 3) of the network llama.cpp runs from it, with `checkpoint =
// gguf(arch = A)`: the hyperparameters of `{A}.*` as llama.cpp's
// load_hparams reads them (with its defaults where a key is absent), what
// llama.cpp's code fixes for the architecture (RoPE pairs, norms, gated
// activations, Gemma's attention scale and softcaps), and from the tensor
// infos what is optional (biases, a tied output). The written description
// is then resolved and every parameter checked against the file's tensors
// (name and shape), and every tensor of the file must be read. A key that
// changes the model in a way the language cannot express, a key the
// importer does not know and an architecture it does not read are errors
// naming the file and the key; nothing falls back to a default silently.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_FRONTEND_GGUFIMPORT_H
#define TFM_FRONTEND_GGUFIMPORT_H

#include "tfm/Frontend/HfImport.h"

namespace mlir::tfm {

/// Whether `path` names a GGUF file (by its extension).
bool isGgufPath(llvm::StringRef path);

/// Translates the GGUF file at `path` into a .tfm file. Messages start with
/// the file's path; returns nothing after an error.
std::optional<std::string> importGguf(llvm::StringRef path,
                                      HfDiagnosticFn diag);

} // namespace mlir::tfm

#endif // TFM_FRONTEND_GGUFIMPORT_H
