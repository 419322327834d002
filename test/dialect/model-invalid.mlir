// RUN: tfm-opt %s -split-input-file -verify-diagnostics
// The `tfm.model` attribute a model's module describes itself with
// (tfm/Dialect/ModelDescription.h): what the verifier refuses.

// A well-formed one.
module @ok attributes {tfm.model = {description = "{\22name\22:\22m\22,\22dtype\22:\22f32\22,\22parameter_count\22:8,\22inputs\22:[{\22name\22:\22tokens\22,\22dtype\22:\22int32\22,\22shape\22:[\22B\22,\22T\22]}],\22outputs\22:[{\22name\22:\22logits\22,\22dtype\22:\22float32\22,\22shape\22:[\22B\22,\22T\22,4]}],\22parameters\22:[{\22name\22:\22w\22,\22shape\22:[2,4]}]}", forward = @m, step = @m_cached, generation = {layers = 2 : i64, kv_heads = 1 : i64, head_dim = 4 : i64, windows = array<i64: 0, 3>}}} {
  func.func @m() { return }
  func.func @m_cached() { return }
}

// -----

// expected-error @below {{'func.func' op 'tfm.model' belongs on a module}}
func.func @f() attributes {tfm.model = {}} { return }

// -----

// expected-error @below {{'tfm.model' needs 'description', the JSON description as a string}}
module attributes {tfm.model = {forward = @m}} {
  func.func @m() { return }
}

// -----

// expected-error @below {{'tfm.model' has an unknown field 'backward'}}
module attributes {tfm.model = {backward = @m}} {
  func.func @m() { return }
}

// -----

// expected-error @below {{'tfm.model' description is not JSON}}
module attributes {tfm.model = {description = "{name", forward = @m}} {
  func.func @m() { return }
}

// -----

// expected-error @below {{'tfm.model' description's "dtype" must be f32, f16 or bf16}}
module attributes {tfm.model = {description = "{\22name\22:\22m\22,\22dtype\22:\22f64\22}", forward = @m}} {
  func.func @m() { return }
}

// -----

// expected-error @below {{'tfm.model' description: parameter 'w' is listed twice}}
module attributes {tfm.model = {description = "{\22name\22:\22m\22,\22dtype\22:\22f32\22,\22parameter_count\22:0,\22inputs\22:[],\22outputs\22:[],\22parameters\22:[{\22name\22:\22w\22,\22shape\22:[2]},{\22name\22:\22w\22,\22shape\22:[2]}]}", forward = @m}} {
  func.func @m() { return }
}

// -----

// expected-error @below {{'tfm.model' description: 'tokens''s shape holds something other than an integer, "B", "T" or "S"}}
module attributes {tfm.model = {description = "{\22name\22:\22m\22,\22dtype\22:\22f32\22,\22parameter_count\22:0,\22inputs\22:[{\22name\22:\22tokens\22,\22dtype\22:\22int32\22,\22shape\22:[\22X\22]}],\22outputs\22:[],\22parameters\22:[]}", forward = @m}} {
  func.func @m() { return }
}

// -----

// expected-error @below {{'tfm.model' has 'generation' exactly when it has a 'step' function}}
module attributes {tfm.model = {description = "{\22name\22:\22m\22,\22dtype\22:\22f32\22,\22parameter_count\22:0,\22inputs\22:[],\22outputs\22:[],\22parameters\22:[]}", forward = @m, step = @m}} {
  func.func @m() { return }
}

// -----

// expected-error @below {{'tfm.model' 'generation' needs 'windows', one non-negative i64 per layer (2)}}
module attributes {tfm.model = {description = "{\22name\22:\22m\22,\22dtype\22:\22f32\22,\22parameter_count\22:0,\22inputs\22:[],\22outputs\22:[],\22parameters\22:[]}", forward = @m, step = @m, generation = {layers = 2 : i64, kv_heads = 1 : i64, head_dim = 4 : i64, windows = array<i64: 0>}}} {
  func.func @m() { return }
}

// -----

// expected-error @below {{'tfm.model' has an 'encode' function without 'generation.encoder'}}
module attributes {tfm.model = {description = "{\22name\22:\22m\22,\22dtype\22:\22f32\22,\22parameter_count\22:0,\22inputs\22:[],\22outputs\22:[],\22parameters\22:[]}", forward = @m, step = @m, encode = @m, generation = {layers = 1 : i64, kv_heads = 1 : i64, head_dim = 4 : i64, windows = array<i64: 0>}}} {
  func.func @m() { return }
}

// -----

// expected-error @below {{'tfm.model' names function @m_cached as its step entry point, which the module does not define}}
module attributes {tfm.model = {description = "{\22name\22:\22m\22,\22dtype\22:\22f32\22,\22parameter_count\22:0,\22inputs\22:[],\22outputs\22:[],\22parameters\22:[]}", forward = @m, step = @m_cached, generation = {layers = 1 : i64, kv_heads = 1 : i64, head_dim = 4 : i64, windows = array<i64: 0>}}} {
  func.func @m() { return }
}
