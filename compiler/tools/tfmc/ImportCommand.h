//===- ImportCommand.h - tfmc import ----------------------------*- C++ -*-===//
//
// `tfmc import PATH [-o OUT.tfm]`: the .tfm description of a Hugging Face
// model from its config.json (tfm/Frontend/HfImport.h).
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TOOLS_TFMC_IMPORTCOMMAND_H
#define TFM_TOOLS_TFMC_IMPORTCOMMAND_H

/// Runs `tfmc import`; argv[1] is "import". Returns the exit status.
int runImportCommand(int argc, char **argv);

#endif // TFM_TOOLS_TFMC_IMPORTCOMMAND_H
