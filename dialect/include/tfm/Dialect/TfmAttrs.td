//===- TfmAttrs.td - tfm dialect attributes ----------------*- tablegen -*-===//

#ifndef TFM_ATTRS_TD
#define TFM_ATTRS_TD

include "tfm/Dialect/TfmDialect.td"
include "mlir/IR/EnumAttr.td"

def Tfm_MaskKind : I32EnumAttr<"MaskKind", "attention mask kind", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"causal", 1>,
    I32EnumAttrCase<"sliding", 2>]> {
  let cppNamespace = "::mlir::tfm";
  let genSpecializedAttr = 0;
}
def Tfm_MaskKindAttr : EnumAttr<Tfm_Dialect, Tfm_MaskKind, "mask"> {
  let assemblyFormat = "`<` $value `>`";
}

def Tfm_NormKind : I32EnumAttr<"NormKind", "normalisation kind", [
    I32EnumAttrCase<"layernorm", 0>, I32EnumAttrCase<"rmsnorm", 1>]> {
  let cppNamespace = "::mlir::tfm";
  let genSpecializedAttr = 0;
}
def Tfm_NormKindAttr : EnumAttr<Tfm_Dialect, Tfm_NormKind, "norm"> {
  let assemblyFormat = "`<` $value `>`";
}

def Tfm_Activation : I32EnumAttr<"Activation", "activation function", [
    I32EnumAttrCase<"relu", 0>, I32EnumAttrCase<"gelu", 1>,
    I32EnumAttrCase<"gelu_tanh", 2>, I32EnumAttrCase<"silu", 3>,
    I32EnumAttrCase<"swiglu", 4>, I32EnumAttrCase<"geglu", 5>,
    I32EnumAttrCase<"geglu_tanh", 6>, I32EnumAttrCase<"quick_gelu", 7>,
    I32EnumAttrCase<"sigmoid", 8>, I32EnumAttrCase<"swiglu_clamp", 9>,
    I32EnumAttrCase<"swiglu_clamp_gate", 10>,
    I32EnumAttrCase<"swiglu_clamp_up", 11>]> {
  let cppNamespace = "::mlir::tfm";
  let genSpecializedAttr = 0;
}
def Tfm_ActivationAttr : EnumAttr<Tfm_Dialect, Tfm_Activation, "activation"> {
  let assemblyFormat = "`<` $value `>`";
}

def Tfm_RouterKind : I32EnumAttr<"RouterKind", "mixture-of-experts router", [
    I32EnumAttrCase<"softmax", 0>, I32EnumAttrCase<"topk_softmax", 1>,
    I32EnumAttrCase<"sigmoid", 2>]> {
  let cppNamespace = "::mlir::tfm";
  let genSpecializedAttr = 0;
}
def Tfm_RouterKindAttr : EnumAttr<Tfm_Dialect, Tfm_RouterKind, "router"> {
  let assemblyFormat = "`<` $value `>`";
}

def Tfm_RopeStyle : I32EnumAttr<"RopeStyle", "rotary embedding pairing", [
    I32EnumAttrCase<"half", 0>, I32EnumAttrCase<"interleaved", 1>]> {
  let cppNamespace = "::mlir::tfm";
  let genSpecializedAttr = 0;
}
def Tfm_RopeStyleAttr : EnumAttr<Tfm_Dialect, Tfm_RopeStyle, "rope_style"> {
  let assemblyFormat = "`<` $value `>`";
}

def Tfm_PositionKind : I32EnumAttr<"PositionKind", "absolute position kind", [
    I32EnumAttrCase<"learned", 0>, I32EnumAttrCase<"sinusoidal", 1>]> {
  let cppNamespace = "::mlir::tfm";
  let genSpecializedAttr = 0;
}
def Tfm_PositionKindAttr : EnumAttr<Tfm_Dialect, Tfm_PositionKind, "position"> {
  let assemblyFormat = "`<` $value `>`";
}

def Tfm_PoolKind : I32EnumAttr<"PoolKind", "sequence pooling kind", [
    I32EnumAttrCase<"cls", 0>, I32EnumAttrCase<"mean", 1>]> {
  let cppNamespace = "::mlir::tfm";
  let genSpecializedAttr = 0;
}
def Tfm_PoolKindAttr : EnumAttr<Tfm_Dialect, Tfm_PoolKind, "pool"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // TFM_ATTRS_TD
