// attntune._attntune: the Python binding of the C ABI (attntune/attntune_c.h). Tensors
// come in as numpy arrays (buffer protocol) or as any object with __dlpack__ (PyTorch,
// JAX, CuPy, numpy), and are passed to the library as pointers: no copy is made. The
// Python-facing function is attntune.attention (attntune/__init__.py).
#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attntune/attntune_c.h"

namespace py = pybind11;

namespace {

struct ErrorTag {};
struct UserErrorTag {};

PyObject* g_error = nullptr;       // attntune.Error (RuntimeError)
PyObject* g_user_error = nullptr;  // attntune.UserError (Error, ValueError)

[[noreturn]] void Raise(attntune_status status, const std::string& line) {
  PyErr_SetString(status == ATTNTUNE_USER_ERROR ? g_user_error : g_error, line.c_str());
  throw py::error_already_set();
}

[[noreturn]] void RaiseUser(const std::string& what) { Raise(ATTNTUNE_USER_ERROR, "attntune: error: " + what); }

// Arguments checked by hand, so that a wrong Python type is one UserError line rather than
// pybind11's several-line TypeError.
std::string TypeName(const py::handle& x) { return py::str(py::type::of(x).attr("__name__")); }

std::string StrArg(const py::handle& x, const std::string& what) {
  if (!py::isinstance<py::str>(x)) RaiseUser(what + ": a str is expected, not " + TypeName(x));
  // As the file system sees it (os.fsencode: a name that is not UTF-8 keeps its bytes,
  // where a cast to std::string raised pybind11's RuntimeError).
  const py::bytes bytes = py::module_::import("os").attr("fsencode")(x);
  std::string text = bytes;
  // A NUL would end the text the C API reads ("swa\0junk" ran swa).
  if (text.find('\0') != std::string::npos) RaiseUser(what + ": holds a NUL character");
  return text;
}

// Python's bool or numpy's (numpy.bool_, named "bool" since numpy 2).
bool IsBool(const py::handle& x) {
  if (py::isinstance<py::bool_>(x)) return true;
  const std::string type = TypeName(x);
  return (type == "bool_" || type == "bool") &&
         std::string(py::str(py::type::of(x).attr("__module__"))) == "numpy";
}

bool BoolArg(const py::handle& x, const std::string& what) {
  if (!IsBool(x)) RaiseUser(what + ": True or False is expected, not " + TypeName(x));
  return py::bool_(x.cast<py::object>());
}

// An int, or an integer that says so (__index__: numpy's integers); never a bool.
int IntArg(const py::handle& x, const std::string& what) {
  const bool integer = py::isinstance<py::int_>(x) || py::hasattr(x, "__index__");
  if (!integer || IsBool(x)) {
    RaiseUser(what + ": an int is expected, not " + TypeName(x));
  }
  const py::int_ v = py::reinterpret_steal<py::int_>(PyNumber_Index(x.ptr()));
  if (!v) throw py::error_already_set();
  if (v < py::int_(INT_MIN) || v > py::int_(INT_MAX)) {
    RaiseUser(what + ": " + std::string(py::str(py::object(v))) + " is out of range");
  }
  return v.cast<int>();
}

// A real number: int, float or one that converts (__float__: numpy's floats); no bool or
// text.
double FloatArg(const py::handle& x, const std::string& what) {
  const bool number = py::isinstance<py::int_>(x) || py::isinstance<py::float_>(x) ||
                      py::hasattr(x, "__float__");
  if (!number || IsBool(x) || py::isinstance<py::str>(x)) {
    RaiseUser(what + ": a number is expected, not " + TypeName(x));
  }
  const double value = PyFloat_AsDouble(x.ptr());  // an int past double's range: OverflowError
  if (value == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    RaiseUser(what + ": " + std::string(py::str(x)).substr(0, 40) + " is out of range");
  }
  return value;
}

// A path as str or os.PathLike (pathlib.Path).
std::string PathArg(const py::handle& x, const std::string& what) {
  if (py::isinstance<py::str>(x)) return StrArg(x, what);
  if (!py::hasattr(x, "__fspath__")) {
    RaiseUser(what + ": a str or os.PathLike is expected, not " + TypeName(x));
  }
  return StrArg(x.attr("__fspath__")(), what);
}

void Check(attntune_status status, const attntune_error& error) {
  if (status != ATTNTUNE_OK) Raise(status, error.message);
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t n = 0; n < shape.size(); ++n) text += (n ? ", " : "") + std::to_string(shape[n]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

// A DLPack dtype named as numpy names it ("float64", "int8"); a code DLPack names no
// type for, by its number.
std::string DlpackDtypeName(uint8_t code, uint8_t bits) {
  const char* kind = code == kDLInt       ? "int"
                     : code == kDLUInt    ? "uint"
                     : code == kDLFloat   ? "float"
                     : code == kDLBfloat  ? "bfloat"
                     : code == kDLComplex ? "complex"
                     : code == 6          ? "bool"  // kDLBool, DLPack 0.8
                                          : nullptr;
  if (kind == nullptr) return "with DLPack code " + std::to_string(code);
  return std::string(kind) + (code == 6 ? "" : std::to_string(bits));
}

// One tensor argument seen as a pointer: a numpy array through the buffer protocol, else
// a DLPack capsule (kept until the tensor is released, its deleter then called).
class TensorArg {
 public:
  TensorArg(const std::string& name, py::object obj, bool writable, std::optional<uintptr_t> stream)
      : name_(name), obj_(std::move(obj)) {
    if (py::isinstance<py::array>(obj_)) {
      FromNumpy(writable);
    } else if (py::hasattr(obj_, "__dlpack__")) {
      FromDlpack(stream);
    } else {
      RaiseUser(name_ + ": a numpy array or a tensor with __dlpack__ is expected, not " +
                std::string(py::str(py::type::of(obj_).attr("__name__"))));
    }
  }
  TensorArg(const TensorArg&) = delete;
  TensorArg& operator=(const TensorArg&) = delete;

  void* data() const { return data_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::string& dtype() const { return dtype_; }  // "float32", "float16", "bfloat16", "int32"
  bool on_cuda() const { return cuda_; }
  int device_index() const { return device_index_; }

  void Expect(const std::vector<int64_t>& shape, const std::string& dims, const std::string& dtype) const {
    if (shape_ != shape) {
      RaiseUser(name_ + ": shape " + ShapeText(shape_) + " is not " + dims + " = " + ShapeText(shape));
    }
    if (dtype_ != dtype) RaiseUser(name_ + ": dtype " + dtype_ + " is not " + dtype);
  }

 private:
  void FromNumpy(bool writable) {
    py::array a = py::reinterpret_borrow<py::array>(obj_);
    if (!(a.flags() & py::array::c_style)) {
      RaiseUser(name_ + ": the array is not C-contiguous (np.ascontiguousarray makes a copy that is)");
    }
    if (writable && !a.writeable()) RaiseUser(name_ + ": the array is read-only");
    for (py::ssize_t d = 0; d < a.ndim(); ++d) shape_.push_back(a.shape(d));
    dtype_ = std::string(py::str(a.dtype()));
    data_ = const_cast<void*>(a.data());
  }

  void FromDlpack(std::optional<uintptr_t> stream) {
    py::object capsule;
    try {
      capsule = stream ? obj_.attr("__dlpack__")(py::arg("stream") = *stream)
                       : obj_.attr("__dlpack__")();
    } catch (py::error_already_set& e) {  // the tensor's own refusal, as one line
      std::string why = e.what();
      why = why.substr(0, why.find('\n'));
      RaiseUser(name_ + ": its __dlpack__ refused (" + why + ")");
    }
    PyObject* raw = capsule.ptr();
    if (!PyCapsule_IsValid(raw, "dltensor")) RaiseUser(name_ + ": __dlpack__ did not return a DLPack capsule");
    // Consumed: its deleter is ours to call, also when a check below refuses the tensor
    // (a member, released when the constructor throws: a refused 256 MB tensor leaked).
    managed_.reset(static_cast<DLManagedTensor*>(PyCapsule_GetPointer(raw, "dltensor")));
    PyCapsule_SetName(raw, "used_dltensor");
    const DLTensor& t = managed_->dl_tensor;
    shape_.assign(t.shape, t.shape + t.ndim);
    if (t.strides != nullptr) {  // row-major and compact, or refused
      int64_t expected = 1;
      for (int d = t.ndim - 1; d >= 0; --d) {
        if (t.shape[d] != 1 && t.strides[d] != expected) {
          RaiseUser(name_ + ": the tensor is not contiguous (.contiguous() makes a copy that is)");
        }
        expected *= t.shape[d];
      }
    }
    if (t.dtype.lanes != 1) RaiseUser(name_ + ": vector dtypes are not taken");
    if (t.dtype.code == kDLFloat && t.dtype.bits == 32) dtype_ = "float32";
    else if (t.dtype.code == kDLFloat && t.dtype.bits == 16) dtype_ = "float16";
    else if (t.dtype.code == kDLBfloat && t.dtype.bits == 16) dtype_ = "bfloat16";
    else if (t.dtype.code == kDLInt && t.dtype.bits == 32) dtype_ = "int32";
    else dtype_ = DlpackDtypeName(t.dtype.code, t.dtype.bits);
    if (t.device.device_type == kDLCUDA) {
      cuda_ = true;
      device_index_ = t.device.device_id;
    } else if (t.device.device_type != kDLCPU) {
      RaiseUser(name_ + ": DLPack device type " + std::to_string(t.device.device_type) +
                " is neither the CPU nor CUDA");
    }
    data_ = static_cast<char*>(t.data) + t.byte_offset;
  }

  struct Release {
    void operator()(DLManagedTensor* m) const {
      if (m != nullptr && m->deleter != nullptr) m->deleter(m);
    }
  };
  std::string name_;
  py::object obj_;  // kept alive while its memory is in use
  std::unique_ptr<DLManagedTensor, Release> managed_;
  void* data_ = nullptr;
  std::vector<int64_t> shape_;
  std::string dtype_;
  bool cuda_ = false;
  int device_index_ = 0;
};

class Config {
 public:
  explicit Config(attntune_configuration* handle) : handle_(handle, attntune_config_free) {}
  static Config Create(const std::string& variant, const std::string& implementation,
                       const std::string& params, const std::string& tunables) {
    attntune_error error{};
    attntune_configuration* handle = nullptr;
    Check(attntune_config_create(variant.c_str(), implementation.c_str(), params.c_str(),
                                 tunables.c_str(), &handle, &error),
          error);
    return Config(handle);
  }
  const attntune_configuration* get() const { return handle_.get(); }

 private:
  std::shared_ptr<attntune_configuration> handle_;
};

attntune_config_options ConfigOptions(const std::string& device, bool allow_other_device,
                                      bool allow_other_version, bool quiet) {
  attntune_config_options o = attntune_config_options_init();
  if (device == "cpu") {
    o.device = {ATTNTUNE_CPU, 0};
  } else if (device.rfind("cuda:", 0) == 0 && device.size() > 5 &&
             device.find_first_not_of("0123456789", 5) == std::string::npos && device.size() < 12) {
    o.device = {ATTNTUNE_CUDA, std::stoi(device.substr(5))};
  } else {
    RaiseUser("device: '" + device + "' is not cpu or cuda:N");
  }
  o.allow_other_device = allow_other_device;
  o.allow_other_version = allow_other_version;
  o.quiet = quiet;
  return o;
}

class ConfigFile {
 public:
  ConfigFile(const std::string& path, const std::string& device, bool allow_other_device,
             bool allow_other_version, bool quiet) {
    const attntune_config_options o = ConfigOptions(device, allow_other_device, allow_other_version, quiet);
    attntune_error error{};
    attntune_config_file* handle = nullptr;
    Check(attntune_config_file_load(path.c_str(), &o, &handle, &error), error);
    handle_.reset(handle, attntune_config_file_free);
  }
  Config Lookup(const std::string& variant, const std::string& phase, int head_dim, int seq_len,
                double min_mass_recall) const {
    attntune_error error{};
    attntune_configuration* handle = nullptr;
    Check(attntune_config_file_lookup(handle_.get(), variant.c_str(), phase.c_str(), head_dim,
                                      seq_len, min_mass_recall, &handle, &error),
          error);
    return Config(handle);
  }

 private:
  std::shared_ptr<attntune_config_file> handle_;
};

attntune_dtype DtypeOf(const TensorArg& q) {
  if (q.dtype() == "float32") return ATTNTUNE_FP32;
  if (q.dtype() == "float16") return ATTNTUNE_FP16;
  if (q.dtype() == "bfloat16") return ATTNTUNE_BF16;
  RaiseUser("q: dtype " + q.dtype() + " is not float32, float16 or bfloat16");
}

// Runs `config` on q, k, v into out; the optional tensors may be None.
void Run(const Config& config, py::object q_obj, py::object k_obj, py::object v_obj,
         py::object out_obj, bool causal, py::object scores, py::object delta, py::object a,
         py::object mu, py::object proj, py::object windows, bool check_inputs,
         std::optional<uintptr_t> stream) {
  const TensorArg q("q", q_obj, false, stream), k("k", k_obj, false, stream),
      v("v", v_obj, false, stream), o("out", out_obj, true, stream);
  if (stream && !q.on_cuda()) {
    RaiseUser("stream: given for tensors on the CPU (a CUDA stream orders work on a GPU; "
              "leave it out)");
  }
  if (q.shape().size() != 4) RaiseUser("q: shape " + ShapeText(q.shape()) + " is not [B,Hq,Lq,d]");
  if (k.shape().size() != 4) RaiseUser("k: shape " + ShapeText(k.shape()) + " is not [B,Hkv,Lk,d]");
  const attntune_dtype dtype = DtypeOf(q);
  const int64_t B = q.shape()[0], Hq = q.shape()[1], Lq = q.shape()[2], d = q.shape()[3];
  const int64_t Hkv = k.shape()[1], Lk = k.shape()[2];
  k.Expect({B, Hkv, Lk, d}, "[B,Hkv,Lk,d]", q.dtype());
  v.Expect(k.shape(), "k's shape", q.dtype());
  o.Expect(q.shape(), "q's shape", q.dtype());
  for (const TensorArg* t : {&k, &v, &o}) {
    if (t->on_cuda() != q.on_cuda() || t->device_index() != q.device_index()) {
      RaiseUser("q, k, v and out must be on one device");
    }
  }
  attntune_problem p = attntune_problem_init();
  p.batch = B;
  p.q_heads = Hq;
  p.kv_heads = Hkv;
  p.q_len = Lq;
  p.kv_len = Lk;
  p.head_dim = d;
  p.causal = causal;
  p.dtype = dtype;
  p.device = q.on_cuda() ? attntune_device{ATTNTUNE_CUDA, q.device_index()} : attntune_device{ATTNTUNE_CPU, 0};

  attntune_tensors t = attntune_tensors_init();
  t.q = q.data();
  t.k = k.data();
  t.v = v.data();
  t.o = o.data();
  std::vector<std::unique_ptr<TensorArg>> keep;
  auto optional = [&](const char* name, py::object obj, std::vector<int64_t> shape,
                      const char* dims, const char* dtype) -> const void* {
    if (obj.is_none()) return nullptr;
    keep.push_back(std::make_unique<TensorArg>(name, obj, false, stream));
    const TensorArg& x = *keep.back();
    if (shape.empty()) shape = x.shape();  // proj: its last extent is bits (checked by the library)
    x.Expect(shape, dims, dtype);
    if (x.on_cuda() != q.on_cuda() || x.device_index() != q.device_index())
      RaiseUser(std::string(name) + ": not on q's device");
    return x.data();
  };
  t.scores = static_cast<const float*>(optional("scores", scores, {B, Hkv, Lk}, "[B,Hkv,Lk]", "float32"));
  t.delta = static_cast<const float*>(optional("delta", delta, {Hkv, d}, "[Hkv,d]", "float32"));
  t.a = static_cast<const float*>(optional("a", a, {Hkv}, "[Hkv]", "float32"));
  t.mu = static_cast<const float*>(optional("mu", mu, {Hkv, d}, "[Hkv,d]", "float32"));
  t.proj = static_cast<const float*>(optional("proj", proj, {}, "[Hkv,d,bits]", "float32"));
  if (t.proj != nullptr) {
    const std::vector<int64_t>& s = keep.back()->shape();
    if (s.size() != 3 || s[0] != Hkv || s[1] != d) {
      RaiseUser("proj: shape " + ShapeText(s) + " is not [Hkv,d,bits] with Hkv=" +
                std::to_string(Hkv) + ", d=" + std::to_string(d));
    }
    t.proj_bits = s[2];
  }
  t.windows = static_cast<const int32_t*>(optional("windows", windows, {Hkv}, "[Hkv]", "int32"));

  attntune_run_options options = attntune_run_options_init();
  options.check_inputs = check_inputs;
  options.stream = stream ? reinterpret_cast<void*>(*stream) : nullptr;
  attntune_error error{};
  attntune_status status;
  {
    py::gil_scoped_release release;  // other Python threads run meanwhile
    status = attntune_run(config.get(), &p, &t, &options, &error);
  }
  Check(status, error);
}

}  // namespace

PYBIND11_MODULE(_attntune, m) {
  m.doc() = "attntune's C ABI (attntune/attntune_c.h); use attntune.attention";
  static py::exception<ErrorTag> error(m, "Error", PyExc_RuntimeError);
  g_error = error.ptr();
  PyObject* bases = PyTuple_Pack(2, g_error, PyExc_ValueError);
  static py::exception<UserErrorTag> user_error(m, "UserError", bases);
  Py_DECREF(bases);
  g_user_error = user_error.ptr();
  // numpy's C API looked up now, while only the importing thread runs: looked up at the
  // first call, under a C++ static's lock while the import inside gives the GIL away, two
  // threads' first calls deadlocked. Without numpy, arrays are refused as before.
  try {
    py::detail::npy_api::get();
  } catch (py::error_already_set&) {
    PyErr_Clear();
  }

  m.attr("API_VERSION") = ATTNTUNE_API_VERSION;
  m.def("api_version", &attntune_api_version, "the library's ATTNTUNE_API_VERSION");
  m.def("version", [] { return std::string(attntune_version()); }, "the library's attntune version");
  m.def("device_name", [](py::object device) {
    const attntune_config_options o = ConfigOptions(StrArg(device, "device"), false, false, true);
    char name[256] = {};
    attntune_error error{};
    Check(attntune_device_name(o.device, name, sizeof name, &error), error);
    return std::string(name);
  }, py::arg("device") = "cpu", "the device's name as tuned entries record it");

  py::class_<Config>(m, "Config", "a configuration: variant, implementation, params, tunables")
      .def(py::init([](py::object variant, py::object implementation, py::object params,
                       py::object tunables) {
             return Config::Create(StrArg(variant, "variant"),
                                   StrArg(implementation, "implementation"),
                                   StrArg(params, "params"), StrArg(tunables, "tunables"));
           }),
           py::arg("variant"), py::arg("implementation") = "",
           py::arg("params") = "", py::arg("tunables") = "",
           "a configuration by hand; params and tunables as 'w=256,sink=4'")
      .def_property_readonly("variant", [](const Config& c) { return std::string(attntune_config_variant(c.get())); })
      .def_property_readonly("implementation", [](const Config& c) { return std::string(attntune_config_implementation(c.get())); })
      .def_property_readonly("params", [](const Config& c) { return std::string(attntune_config_params(c.get())); })
      .def_property_readonly("tunables", [](const Config& c) { return std::string(attntune_config_tunables(c.get())); })
      .def_property_readonly("device", [](const Config& c) { return std::string(attntune_config_device(c.get())); })
      .def_property_readonly("warning", [](const Config& c) { return std::string(attntune_config_warning(c.get())); })
      .def("__repr__", [](const Config& c) {
        return "attntune.Config(" + std::string(attntune_config_variant(c.get())) + "/" +
               attntune_config_implementation(c.get()) + ", params='" + attntune_config_params(c.get()) +
               "', tunables='" + attntune_config_tunables(c.get()) + "')";
      });

  py::class_<ConfigFile>(m, "ConfigFile", "an attntune_config.json read at run time")
      .def(py::init([](py::object path, py::object device, py::object allow_other_device,
                       py::object allow_other_version, py::object quiet) {
             return ConfigFile(PathArg(path, "path"), StrArg(device, "device"),
                               BoolArg(allow_other_device, "allow_other_device"),
                               BoolArg(allow_other_version, "allow_other_version"),
                               BoolArg(quiet, "quiet"));
           }),
           py::arg("path"), py::arg("device") = "cpu", py::arg("allow_other_device") = false,
           py::arg("allow_other_version") = false, py::arg("quiet") = false)
      .def("lookup",
           [](const ConfigFile& f, py::object variant, py::object phase, py::object head_dim,
              py::object seq_len, py::object min_mass_recall) {
             return f.Lookup(StrArg(variant, "variant"), StrArg(phase, "phase"),
                             IntArg(head_dim, "head_dim"), IntArg(seq_len, "seq_len"),
                             FloatArg(min_mass_recall, "min_mass_recall"));
           },
           py::arg("variant"), py::arg("phase") = "prefill", py::arg("head_dim"),
           py::arg("seq_len"), py::arg("min_mass_recall") = 0.0,
           "the tuned entry for a shape, by attntune_config.h's Lookup rule");

  m.def("run", &Run, py::arg("config"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"),
        py::arg("causal") = true, py::arg("scores") = py::none(), py::arg("delta") = py::none(),
        py::arg("a") = py::none(), py::arg("mu") = py::none(), py::arg("proj") = py::none(),
        py::arg("windows") = py::none(), py::arg("check_inputs") = true,
        py::arg("stream") = py::none(), "runs a configuration; out is written");
}
