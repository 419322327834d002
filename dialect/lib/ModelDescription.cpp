//===- ModelDescription.cpp - the tfm.model attribute ---------------------===//

#include "tfm/Dialect/ModelDescription.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// Reads the JSON description and the dictionary around it, reporting the
/// first problem through `emitError`.
class Reader {
public:
  explicit Reader(llvm::function_ref<InFlightDiagnostic()> emitError)
      : emitError(emitError) {}

  FailureOr<ModelDescription> read(Attribute attr);

private:
  InFlightDiagnostic error() {
    return emitError() << "'" << ModelDescription::kAttrName << "' ";
  }
  LogicalResult readJSON(StringRef text, ModelDescription &d);
  LogicalResult readTensors(const llvm::json::Object &root, StringRef key,
                            std::vector<ModelDescription::Tensor> &out);
  LogicalResult readParams(const llvm::json::Object &root, ModelDescription &d);
  FailureOr<std::vector<int64_t>> readShape(const llvm::json::Value *v,
                                            StringRef what);
  FailureOr<std::string> readEntry(DictionaryAttr dict, StringRef key);
  FailureOr<int64_t> readPositive(DictionaryAttr dict, StringRef key,
                                  StringRef where);
  FailureOr<CacheLayout> readCache(Attribute attr);

  llvm::function_ref<InFlightDiagnostic()> emitError;
};

} // namespace

FailureOr<std::vector<int64_t>> Reader::readShape(const llvm::json::Value *v,
                                                  StringRef what) {
  const llvm::json::Array *a = v ? v->getAsArray() : nullptr;
  if (!a)
    return error() << "description: " << what << " has no \"shape\" array";
  std::vector<int64_t> shape;
  for (const llvm::json::Value &d : *a) {
    // The batch, sequence and source dimensions are named.
    std::optional<StringRef> dim = d.getAsString();
    std::optional<int64_t> n = !dim          ? d.getAsInteger()
                               : *dim == "B" ? std::optional<int64_t>(-1)
                               : *dim == "T" ? std::optional<int64_t>(-2)
                               : *dim == "S" ? std::optional<int64_t>(-3)
                                             : std::nullopt;
    if (!n)
      return error() << "description: " << what
                     << "'s shape holds something other than an integer, "
                        "\"B\", \"T\" or \"S\"";
    shape.push_back(*n);
  }
  return shape;
}

LogicalResult Reader::readTensors(const llvm::json::Object &root, StringRef key,
                                  std::vector<ModelDescription::Tensor> &out) {
  const llvm::json::Array *a = root.getArray(key);
  if (!a)
    return error() << "description has no \"" << key << "\" array";
  for (const llvm::json::Value &v : *a) {
    const llvm::json::Object *o = v.getAsObject();
    std::optional<StringRef> name = o ? o->getString("name") : std::nullopt;
    std::optional<StringRef> dtype = o ? o->getString("dtype") : std::nullopt;
    if (!name || !dtype)
      return error() << "description: an entry of \"" << key
                     << "\" lacks its \"name\" or \"dtype\"";
    FailureOr<std::vector<int64_t>> shape =
        readShape(o->get("shape"), ("'" + *name + "'").str());
    if (failed(shape))
      return failure();
    out.push_back({name->str(), dtype->str(), std::move(*shape)});
  }
  return success();
}

LogicalResult Reader::readParams(const llvm::json::Object &root,
                                 ModelDescription &d) {
  const llvm::json::Array *a = root.getArray("parameters");
  if (!a)
    return error() << "description has no \"parameters\" array";
  for (const llvm::json::Value &v : *a) {
    const llvm::json::Object *o = v.getAsObject();
    std::optional<StringRef> name = o ? o->getString("name") : std::nullopt;
    if (!name || name->empty())
      return error() << "description: a parameter has no name";
    if (!d.paramIndex.try_emplace(*name, d.params.size()).second)
      return error() << "description: parameter '" << *name
                     << "' is listed twice";
    FailureOr<std::vector<int64_t>> shape =
        readShape(o->get("shape"), ("parameter '" + *name + "'").str());
    if (failed(shape))
      return failure();
    if (llvm::any_of(*shape, [](int64_t d) { return d < 0; }))
      return error() << "description: parameter '" << *name
                     << "' has a negative dimension";
    d.params.push_back({name->str(), std::move(*shape)});
  }
  return success();
}

LogicalResult Reader::readJSON(StringRef text, ModelDescription &d) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    return error() << "description is not JSON: "
                   << llvm::toString(parsed.takeError());
  llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return error() << "description is not a JSON object";
  std::optional<StringRef> name = root->getString("name");
  std::optional<StringRef> dtype = root->getString("dtype");
  if (!name || name->empty())
    return error() << "description has no \"name\"";
  if (!dtype || !llvm::is_contained({"f32", "f16", "bf16"}, *dtype))
    return error() << "description's \"dtype\" must be f32, f16 or bf16";
  d.name = name->str();
  d.dtype = dtype->str();
  std::optional<int64_t> count = root->getInteger("parameter_count");
  if (!count || *count < 0)
    return error() << "description has no \"parameter_count\"";
  d.parameterCount = *count;
  if (const llvm::json::Value *tp = root->get("tensor_parallel")) {
    std::optional<int64_t> n = tp->getAsInteger();
    if (!n || *n < 1)
      return error() << "description's \"tensor_parallel\" must be a "
                        "positive integer";
    d.tensorParallel = *n;
  }
  if (failed(readTensors(*root, "inputs", d.inputs)) ||
      failed(readTensors(*root, "outputs", d.outputs)) ||
      failed(readParams(*root, d)))
    return failure();
  d.json = std::move(*root);
  return success();
}

FailureOr<std::string> Reader::readEntry(DictionaryAttr dict, StringRef key) {
  Attribute a = dict.get(key);
  if (!a)
    return std::string();
  auto ref = dyn_cast<FlatSymbolRefAttr>(a);
  if (!ref)
    return error() << "'" << key << "' must be a function symbol, got " << a;
  return ref.getValue().str();
}

FailureOr<int64_t> Reader::readPositive(DictionaryAttr dict, StringRef key,
                                        StringRef where) {
  auto n = dict.getAs<IntegerAttr>(key);
  if (!n || !n.getType().isSignlessInteger(64) || n.getInt() <= 0)
    return error() << where << " needs '" << key << "', a positive i64";
  return n.getInt();
}

FailureOr<CacheLayout> Reader::readCache(Attribute attr) {
  auto dict = dyn_cast<DictionaryAttr>(attr);
  if (!dict)
    return error() << "'generation' must be a dictionary, got " << attr;
  CacheLayout c;
  FailureOr<int64_t> layers = readPositive(dict, "layers", "'generation'");
  FailureOr<int64_t> kv = readPositive(dict, "kv_heads", "'generation'");
  FailureOr<int64_t> hd = readPositive(dict, "head_dim", "'generation'");
  if (failed(layers) || failed(kv) || failed(hd))
    return failure();
  c.layers = *layers;
  c.kvHeads = *kv;
  c.headDim = *hd;
  auto windows = dict.getAs<DenseI64ArrayAttr>("windows");
  if (!windows || windows.size() != c.layers ||
      llvm::any_of(windows.asArrayRef(), [](int64_t w) { return w < 0; }))
    return error() << "'generation' needs 'windows', one non-negative i64 "
                      "per layer ("
                   << c.layers << ")";
  c.windows.assign(windows.asArrayRef().begin(), windows.asArrayRef().end());
  size_t known = 4;
  if (Attribute latent = dict.get("latent")) {
    ++known;
    if (!isa<UnitAttr>(latent) || c.kvHeads != 1)
      return error() << "'generation.latent' is a unit attribute, with "
                        "kv_heads = 1";
    c.latent = true;
  }
  if (dict.get("block")) {
    ++known;
    FailureOr<int64_t> block = readPositive(dict, "block", "'generation'");
    if (failed(block))
      return failure();
    c.block = *block;
  }
  if (Attribute enc = dict.get("encoder")) {
    ++known;
    auto e = dyn_cast<DictionaryAttr>(enc);
    if (!e)
      return error() << "'generation.encoder' must be a dictionary";
    FailureOr<int64_t> ekv = readPositive(e, "kv_heads", "'encoder'");
    FailureOr<int64_t> ehd = readPositive(e, "head_dim", "'encoder'");
    FailureOr<int64_t> dm = readPositive(e, "d_model", "'encoder'");
    auto lengths = e.getAs<BoolAttr>("lengths");
    if (failed(ekv) || failed(ehd) || failed(dm))
      return failure();
    if (!lengths || e.size() != 4)
      return error() << "'generation.encoder' must be {kv_heads, head_dim, "
                        "d_model, lengths = true|false}";
    c.encoder = CacheLayout::Encoder{*ekv, *ehd, *dm, lengths.getValue()};
  }
  if (dict.size() != known)
    return error() << "'generation' has a field other than layers, "
                      "kv_heads, head_dim, windows, latent, block and "
                      "encoder";
  return c;
}

FailureOr<ModelDescription> Reader::read(Attribute attr) {
  auto dict = dyn_cast<DictionaryAttr>(attr);
  if (!dict)
    return error() << "must be a dictionary, got " << attr;
  for (NamedAttribute field : dict)
    if (!llvm::is_contained(
            {"description", "forward", "step", "encode", "generation"},
            field.getName().getValue()))
      return error() << "has an unknown field '" << field.getName().getValue()
                     << "'";
  ModelDescription d;
  auto text = dict.getAs<StringAttr>("description");
  if (!text)
    return error() << "needs 'description', the JSON description as a string";
  if (failed(readJSON(text.getValue(), d)))
    return failure();
  FailureOr<std::string> forward = readEntry(dict, "forward");
  FailureOr<std::string> step = readEntry(dict, "step");
  FailureOr<std::string> encode = readEntry(dict, "encode");
  if (failed(forward) || failed(step) || failed(encode))
    return failure();
  if (forward->empty())
    return error() << "needs 'forward', the model function";
  d.forward = std::move(*forward);
  d.step = std::move(*step);
  d.encode = std::move(*encode);
  Attribute generation = dict.get("generation");
  if (d.step.empty() != !generation)
    return error() << "has 'generation' exactly when it has a 'step' "
                      "function";
  if (generation) {
    FailureOr<CacheLayout> cache = readCache(generation);
    if (failed(cache))
      return failure();
    d.cache = std::move(*cache);
  }
  if (!d.encode.empty() && (!d.cache || !d.cache->encoder))
    return error() << "has an 'encode' function without "
                      "'generation.encoder'";
  if (d.encode.empty() && d.cache && d.cache->encoder)
    return error() << "has 'generation.encoder' without an 'encode' function";
  return d;
}

std::optional<unsigned> ModelDescription::indexOf(StringRef paramName) const {
  auto it = paramIndex.find(paramName);
  if (it == paramIndex.end())
    return std::nullopt;
  return it->second;
}

FailureOr<ModelDescription>
ModelDescription::parse(Attribute attr,
                        llvm::function_ref<InFlightDiagnostic()> emitError) {
  return Reader(emitError).read(attr);
}

FailureOr<std::optional<ModelDescription>>
ModelDescription::read(ModuleOp module) {
  Attribute attr = module->getAttr(kAttrName);
  if (!attr)
    return std::optional<ModelDescription>();
  FailureOr<ModelDescription> d =
      parse(attr, [&] { return module.emitOpError(); });
  if (failed(d))
    return failure();
  return std::optional<ModelDescription>(std::move(*d));
}

DictionaryAttr
ModelDescription::build(MLIRContext *ctx, StringRef descriptionJson,
                        StringRef forward, StringRef step, StringRef encode,
                        const std::optional<CacheLayout> &cache) {
  Builder b(ctx);
  SmallVector<NamedAttribute> fields{
      b.getNamedAttr("description", b.getStringAttr(descriptionJson)),
      b.getNamedAttr("forward", FlatSymbolRefAttr::get(ctx, forward))};
  if (!step.empty())
    fields.push_back(b.getNamedAttr("step", FlatSymbolRefAttr::get(ctx, step)));
  if (!encode.empty())
    fields.push_back(
        b.getNamedAttr("encode", FlatSymbolRefAttr::get(ctx, encode)));
  if (cache) {
    SmallVector<NamedAttribute> g{
        b.getNamedAttr("layers", b.getI64IntegerAttr(cache->layers)),
        b.getNamedAttr("kv_heads", b.getI64IntegerAttr(cache->kvHeads)),
        b.getNamedAttr("head_dim", b.getI64IntegerAttr(cache->headDim)),
        b.getNamedAttr("windows", b.getDenseI64ArrayAttr(cache->windows))};
    if (cache->latent)
      g.push_back(b.getNamedAttr("latent", b.getUnitAttr()));
    if (cache->block)
      g.push_back(b.getNamedAttr("block", b.getI64IntegerAttr(cache->block)));
    if (const auto &e = cache->encoder)
      g.push_back(b.getNamedAttr(
          "encoder",
          b.getDictionaryAttr(
              {b.getNamedAttr("kv_heads", b.getI64IntegerAttr(e->kvHeads)),
               b.getNamedAttr("head_dim", b.getI64IntegerAttr(e->headDim)),
               b.getNamedAttr("d_model", b.getI64IntegerAttr(e->dModel)),
               b.getNamedAttr("lengths", b.getBoolAttr(e->lengths))})));
    fields.push_back(b.getNamedAttr("generation", b.getDictionaryAttr(g)));
  }
  return b.getDictionaryAttr(fields);
}

LogicalResult mlir::tfm::verifyModelAttribute(Operation *op, Attribute value,
                                              bool checkDescription) {
  auto module = dyn_cast<ModuleOp>(op);
  if (!module)
    return op->emitOpError()
           << "'" << ModelDescription::kAttrName << "' belongs on a module";
  if (checkDescription &&
      failed(ModelDescription::parse(value, [&] { return op->emitOpError(); })))
    return failure();
  for (StringRef entry : {"forward", "step", "encode"}) {
    auto fn = cast<DictionaryAttr>(value).getAs<FlatSymbolRefAttr>(entry);
    if (fn && !SymbolTable::lookupSymbolIn(module, fn.getAttr()))
      return op->emitOpError()
             << "'" << ModelDescription::kAttrName << "' names function " << fn
             << " as its " << entry
             << " entry point, which the module does not define";
  }
  return success();
}
