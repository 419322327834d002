//===- TfmAttrs.h - tfm dialect enums and attributes -----------*- C++ -*-===//
//
// The enums (mask, norm, activation, ...) and their attributes, which ops
// of both levels take (TfmOps.h, TfmKernelOps.h).
//
//===----------------------------------------------------------------------===//

#ifndef TFM_DIALECT_TFMATTRS_H
#define TFM_DIALECT_TFMATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "tfm/Dialect/TfmDialect.h"
#include "tfm/Dialect/TfmEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tfm/Dialect/TfmAttrs.h.inc"

#endif // TFM_DIALECT_TFMATTRS_H
