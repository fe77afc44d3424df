#include "tuner/calibration_set.h"

#include <openssl/evp.h>

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/error.h"
#include "core/json_text.h"
#include "core/tensor_file.h"

namespace attntune {

namespace {

const char kFormatHint[] =
    "expected F32 tensors q.<l> [B,Hq,L,d], k.<l> and v.<l> [B,Hkv,L,d] per captured layer l, "
    "as scripts/capture_qkv.py writes them";

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t n = 0; n < shape.size(); ++n) text += (n ? "," : "") + std::to_string(shape[n]);
  return text + "]";
}

// The layer of a tensor named "<prefix>.<layer>" for prefix q, k or v; -1 for any other
// name (a captured output o.<l>, say, is left alone); UserError for q.x.
int64_t LayerOf(const std::string& name, const std::string& where) {
  if (name.size() < 3 || name[1] != '.' || (name[0] != 'q' && name[0] != 'k' && name[0] != 'v'))
    return -1;
  const std::string digits = name.substr(2);
  const bool number = !digits.empty() && digits.size() <= 6 &&
                      std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!number)
    throw UserError(where + ": tensor '" + name + "' is not named " + name.substr(0, 1) +
                    ".<layer> (" + kFormatHint + ")");
  return std::stoll(digits);
}

// The tensor `name` of `file`, F32 of rank 4, else UserError.
const StTensor& Rank4(const StFile& file, const std::string& name, const std::string& where) {
  auto it = file.find(name);
  if (it == file.end())
    throw UserError(where + ": missing tensor '" + name + "' (each captured layer l needs q.l, "
                    "k.l and v.l)");
  const StTensor& t = it->second;
  if (t.dtype != "F32" || t.shape.size() != 4)
    throw UserError(where + ": tensor '" + name + "' is " + t.dtype + " " + ShapeText(t.shape) +
                    ", expected F32 [B,H,L,d]");
  return t;
}

// One layer's q, k, v of `file` checked against each other and the model.
Tensors ReadLayer(const StFile& file, int64_t layer, const ModelGeometry& model,
                  const std::string& where) {
  const std::string l = std::to_string(layer);
  const StTensor& q = Rank4(file, "q." + l, where);
  const StTensor& k = Rank4(file, "k." + l, where);
  const StTensor& v = Rank4(file, "v." + l, where);
  if (k.shape != v.shape || q.shape[0] != k.shape[0] || q.shape[2] != k.shape[2] ||
      q.shape[3] != k.shape[3])
    throw UserError(where + ": layer " + l + ": q is " + ShapeText(q.shape) + ", k " +
                    ShapeText(k.shape) + ", v " + ShapeText(v.shape) +
                    " (expected [B,Hq,L,d] and [B,Hkv,L,d] with the same B, L and d)");
  if (q.shape[0] == 0 || q.shape[2] == 0)
    throw UserError(where + ": layer " + l + " holds no tokens (q is " + ShapeText(q.shape) + ")");
  if (q.shape[1] != model.q_heads || k.shape[1] != model.kv_heads)
    throw UserError(where + ": layer " + l + " has " + std::to_string(q.shape[1]) +
                    " query and " + std::to_string(k.shape[1]) + " KV heads, but the model " +
                    model.name + " has " + std::to_string(model.q_heads) + " and " +
                    std::to_string(model.kv_heads));
  if (q.shape[3] != model.head_dim)
    throw UserError(where + ": layer " + l + " has head dim " + std::to_string(q.shape[3]) +
                    ", but the model " + model.name + " has " + std::to_string(model.head_dim));
  Tensors t;
  t.shape = Shape{q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3], true};
  t.q = q.AsF32();
  t.k = k.AsF32();
  t.v = v.AsF32();
  CheckAttentionInputs(t, where + ": layer " + l);
  return t;
}

// A metadata field that names another model than `model`: "" when the file agrees (or
// says nothing), else why.
std::string OtherModel(const StMetadata& meta, const ModelGeometry& model) {
  auto get = [&](const char* key) {
    auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
  };
  const std::string id = get("model").empty() ? "another model" : "'" + get("model") + "'";
  const std::string type = get("model_type");
  if (!type.empty() && !model.model_type.empty() && type != model.model_type)
    return "captured from " + id + " (model_type " + type + "), but the model " + model.name +
           " is model_type " + model.model_type;
  const std::string layers = get("num_hidden_layers");
  if (!layers.empty() && model.layers > 0 && layers != std::to_string(model.layers))
    return "captured from " + id + " (" + layers + " layers), but the model " + model.name +
           " has " + std::to_string(model.layers) + " layers";
  return "";
}

// The file's captured layers, ascending.
std::vector<int64_t> LayersOf(const StFile& file, const std::string& where) {
  std::set<int64_t> layers;
  for (const auto& [name, tensor] : file) {
    const int64_t layer = LayerOf(name, where);
    if (layer >= 0) layers.insert(layer);
  }
  if (layers.empty()) throw UserError(where + ": no captured layers (" + kFormatHint + ")");
  return {layers.begin(), layers.end()};
}

CalibrationSample ReadSample(const std::string& path, const ModelGeometry& model,
                             const std::string& what, std::vector<int64_t>* layers) {
  const std::string where = what + ": " + path;
  CalibrationSample sample;
  sample.path = path;
  StFile file;
  try {
    file = ReadSafetensors(path, &sample.metadata);
  } catch (const UserError& e) {
    throw UserError(what + ": " + e.what());
  }
  if (const std::string other = OtherModel(sample.metadata, model); !other.empty())
    throw UserError(where + ": " + other);
  *layers = LayersOf(file, where);
  if (model.layers > 0 && layers->back() >= model.layers)
    throw UserError(where + ": layer " + std::to_string(layers->back()) + " is beyond the " +
                    std::to_string(model.layers) + " layers of the model " + model.name);
  for (int64_t layer : *layers) {
    sample.layers.push_back(ReadLayer(file, layer, model, where));
    // One capture is one batch of sequences through every layer: a layer of other tokens
    // would be cropped past its end (an internal check ended tune and bench).
    const Shape& first = sample.layers.front().shape;
    const Shape& s = sample.layers.back().shape;
    if (s.B != first.B || s.Lk != first.Lk)
      throw UserError(where + ": layer " + std::to_string(layer) + " holds " +
                      std::to_string(s.B) + " x " + std::to_string(s.Lk) + " tokens, layer " +
                      std::to_string(layers->front()) + " " + std::to_string(first.B) + " x " +
                      std::to_string(first.Lk) + " (every layer of a capture holds the same)");
  }
  return sample;
}

// SHA-256 over one sample's tensors: each layer's name, shape and bytes, in layer order.
std::string SampleHash(const CalibrationSample& sample, const std::vector<int64_t>& layers) {
  std::string bytes;
  for (size_t n = 0; n < layers.size(); ++n) {
    const Tensors& t = sample.layers[n];
    bytes += "layer " + std::to_string(layers[n]) + " " + t.shape.ToString() + "\n";
    for (const TensorData<float>* x : {&t.q, &t.k, &t.v})
      bytes.append(reinterpret_cast<const char*>(x->data()), x->size() * sizeof(float));
  }
  return Sha256Hex(bytes);
}

}  // namespace

std::string Sha256Hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  ATTNTUNE_CHECK(EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr) == 1);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int n = 0; n < size; ++n) {
    hex += kHex[digest[n] >> 4];
    hex += kHex[digest[n] & 15];
  }
  return hex;
}

CalibrationSet ReadCalibrationSet(const std::vector<std::string>& paths,
                                  const ModelGeometry& model, const std::string& what) {
  if (paths.empty()) throw UserError(what + ": no calibration file given");
  CalibrationSet set;
  std::string model_file;  // the file that named set.model
  std::vector<std::string> hashes;
  for (const std::string& path : paths) {
    std::vector<int64_t> layers;
    CalibrationSample sample = ReadSample(path, model, what, &layers);
    if (set.samples.empty()) {
      set.layers = layers;
    } else if (layers != set.layers) {
      throw UserError(what + ": " + path + ": holds layers " + LayerList(layers) + ", but " +
                      paths.front() + " holds " + LayerList(set.layers) +
                      " (every file of a calibration set holds the same layers)");
    }
    // The model named by the first file that names one; a file naming none agrees with
    // any (the order of the files does not matter).
    const auto named = sample.metadata.find("model");
    if (named != sample.metadata.end() && !named->second.empty()) {
      if (set.model.empty()) {
        set.model = named->second;
        model_file = path;
      } else if (named->second != set.model) {
        throw UserError(what + ": " + path + ": captured from '" + named->second + "', but " +
                        model_file + " from '" + set.model +
                        "' (a calibration set is one model's)");
      }
    }
    const int64_t tokens = sample.layers.front().shape.Lk;
    set.tokens = set.samples.empty() ? tokens : std::min(set.tokens, tokens);
    hashes.push_back(SampleHash(sample, layers));
    set.samples.push_back(std::move(sample));
  }
  // The order the files are given in does not change the set.
  std::sort(hashes.begin(), hashes.end());
  std::string joined;
  for (const std::string& h : hashes) joined += h + "\n";
  set.hash = Sha256Hex(joined);
  return set;
}

CalibrationRecord CalibrationSet::Record() const {
  CalibrationRecord record;
  record.content_hash = hash;
  record.model = model;
  std::string layer_text;
  for (int64_t l : layers) layer_text += (layer_text.empty() ? "" : ",") + std::to_string(l);
  record.layers = layer_text;
  record.tokens = tokens;
  nlohmann::json files = nlohmann::json::array();
  for (const CalibrationSample& s : samples) files.push_back(s.path);
  record.files_json = JsonText(files);
  return record;
}

std::string CalibrationSet::Describe() const {
  return hash.substr(0, 12) + " (" + (model.empty() ? std::string("model not named") : model) +
         ", layers " + LayerList(layers) + ", " + std::to_string(tokens) + " tokens)";
}

std::string LayerList(const std::vector<int64_t>& layers) {
  bool contiguous = layers.size() > 2;
  for (size_t n = 1; n < layers.size(); ++n) contiguous = contiguous && layers[n] == layers[n - 1] + 1;
  if (contiguous) return std::to_string(layers.front()) + "-" + std::to_string(layers.back());
  std::string text;
  for (int64_t l : layers) text += (text.empty() ? "" : ",") + std::to_string(l);
  return text;
}

Tensors CropTokens(const Tensors& t, int64_t length) {
  const Shape& s = t.shape;
  ATTNTUNE_CHECK(s.Lq == s.Lk && length >= 1 && length <= s.Lk);
  if (length == s.Lk) return t;
  Tensors c;
  c.shape = s;
  c.shape.Lq = c.shape.Lk = length;
  auto crop = [&](const TensorData<float>& x, int64_t heads) {
    const size_t keep = static_cast<size_t>(length * s.d), row = static_cast<size_t>(s.Lk * s.d);
    std::vector<float> out;
    for (int64_t bh = 0; bh < s.B * heads; ++bh)
      out.insert(out.end(), x.begin() + static_cast<std::ptrdiff_t>(bh * row),
                 x.begin() + static_cast<std::ptrdiff_t>(bh * row + keep));
    return TensorData<float>(std::move(out));
  };
  c.q = crop(t.q, s.Hq);
  c.k = crop(t.k, s.Hkv);
  c.v = crop(t.v, s.Hkv);
  return c;
}

}  // namespace attntune
