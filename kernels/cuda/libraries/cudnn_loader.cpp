// cudnn_loader.h: the cuDNN C functions the cuDNN frontend calls, defined here and
// forwarded to a libcudnn opened at run time (the list is what the frontend's objects
// leave undefined: `nm -u cudnn_sdpa.cpp.o | grep cudnn`).
#include "kernels/cuda/libraries/cudnn_loader.h"

#include <cudnn.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#ifndef ATTNTUNE_CUDNN_BUILD_LIBRARY
#define ATTNTUNE_CUDNN_BUILD_LIBRARY ""
#endif

namespace attntune {
namespace cudnn_loader {
namespace {

struct Library {
  void* handle = nullptr;
  std::string error;
};

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown error";
}

// dlopen of `path`; "" or why not. A library of another major version is refused: the
// frontend was compiled against cuDNN 9's backend API.
std::string Open(const std::string& path, void** handle) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return DlError();
  auto version = reinterpret_cast<size_t (*)()>(dlsym(h, "cudnnGetVersion"));
  if (version == nullptr) {
    dlclose(h);
    return path + " has no cudnnGetVersion";
  }
  const size_t v = version();
  if (v / 10000 != CUDNN_MAJOR) {
    dlclose(h);
    return path + " is cuDNN " + std::to_string(v) + ", not cuDNN " + std::to_string(CUDNN_MAJOR);
  }
  *handle = h;
  return "";
}

Library Load() {
  Library lib;
  const std::string soname = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
  const char* chosen = std::getenv("ATTNTUNE_CUDNN_LIBRARY");
  if (chosen != nullptr && chosen[0] != '\0') {
    const std::string why = Open(chosen, &lib.handle);
    if (!why.empty()) {
      lib.error = "cudnn: " + soname + " not found (ATTNTUNE_CUDNN_LIBRARY=" + chosen + ": " + why + ")";
    }
    return lib;
  }
  const std::string why = Open(soname, &lib.handle);
  if (why.empty()) return lib;
  const std::string built = ATTNTUNE_CUDNN_BUILD_LIBRARY;
  if (!built.empty() && Open(built, &lib.handle).empty()) return lib;
  lib.error = "cudnn: " + soname + " not found (" + why +
              "; pip install nvidia-cudnn-cu13, or set ATTNTUNE_CUDNN_LIBRARY to its full path)";
  return lib;
}

const Library& TheLibrary() {
  static const Library* lib = new Library(Load());  // kept open for the process
  return *lib;
}

// The loaded library's `name`, or nullptr.
void* Symbol(const char* name) {
  const Library& lib = TheLibrary();
  return lib.handle == nullptr ? nullptr : dlsym(lib.handle, name);
}

}  // namespace

std::string LoadError() { return TheLibrary().error; }

}  // namespace cudnn_loader
}  // namespace attntune

namespace {
template <class F>
F Fn(const char* name) {
  return reinterpret_cast<F>(attntune::cudnn_loader::Symbol(name));
}
}  // namespace

// Each forwards to the loaded library; without one, a cuDNN status (the callers check
// LoadError first and never get here).
#define ATTNTUNE_CUDNN_FORWARD(name, params, args)                              \
  extern "C" cudnnStatus_t name params {                                        \
    auto f = Fn<decltype(&name)>(#name);                                        \
    return f != nullptr ? f args : CUDNN_STATUS_NOT_INITIALIZED;                \
  }

ATTNTUNE_CUDNN_FORWARD(cudnnCreate, (cudnnHandle_t* handle), (handle))
ATTNTUNE_CUDNN_FORWARD(cudnnSetStream, (cudnnHandle_t handle, cudaStream_t stream),
                       (handle, stream))
ATTNTUNE_CUDNN_FORWARD(cudnnGetStream, (cudnnHandle_t handle, cudaStream_t* stream),
                       (handle, stream))
ATTNTUNE_CUDNN_FORWARD(cudnnBackendCreateDescriptor,
                       (cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t* descriptor),
                       (type, descriptor))
ATTNTUNE_CUDNN_FORWARD(cudnnBackendDestroyDescriptor, (cudnnBackendDescriptor_t descriptor),
                       (descriptor))
ATTNTUNE_CUDNN_FORWARD(cudnnBackendFinalize, (cudnnBackendDescriptor_t descriptor), (descriptor))
ATTNTUNE_CUDNN_FORWARD(cudnnBackendExecute,
                       (cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                        cudnnBackendDescriptor_t pack),
                       (handle, plan, pack))
ATTNTUNE_CUDNN_FORWARD(cudnnBackendSetAttribute,
                       (cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t name,
                        cudnnBackendAttributeType_t type, int64_t count, const void* elements),
                       (descriptor, name, type, count, elements))
ATTNTUNE_CUDNN_FORWARD(cudnnBackendGetAttribute,
                       (cudnnBackendDescriptor_t const descriptor,
                        cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                        int64_t requested, int64_t* count, void* elements),
                       (descriptor, name, type, requested, count, elements))
ATTNTUNE_CUDNN_FORWARD(cudnnGetExecutionPlanWorkspaceSize,
                       (cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                        cudnnBackendDescriptor_t pack, size_t* bytes),
                       (handle, plan, pack, bytes))

extern "C" size_t cudnnGetVersion(void) {
  auto f = Fn<decltype(&cudnnGetVersion)>("cudnnGetVersion");
  return f != nullptr ? f() : 0;
}

extern "C" const char* cudnnGetErrorString(cudnnStatus_t status) {
  auto f = Fn<decltype(&cudnnGetErrorString)>("cudnnGetErrorString");
  return f != nullptr ? f(status) : "cuDNN is not loaded";
}

extern "C" void cudnnGetLastErrorString(char* message, size_t max_size) {
  auto f = Fn<decltype(&cudnnGetLastErrorString)>("cudnnGetLastErrorString");
  if (f != nullptr) {
    f(message, max_size);
  } else if (max_size > 0) {
    message[0] = '\0';
  }
}

// NVRTC: the frontend's experimental engines (its Sm100 RMSNorm-SiLU) compile kernels with
// NVRTC; attntune builds none of them, so NVRTC is neither linked nor loaded and these
// answer that it is not available.
#include <nvrtc.h>

extern "C" nvrtcResult nvrtcCreateProgram(nvrtcProgram*, const char*, const char*, int,
                                          const char* const*, const char* const*) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}
extern "C" nvrtcResult nvrtcDestroyProgram(nvrtcProgram*) { return NVRTC_ERROR_INTERNAL_ERROR; }
extern "C" nvrtcResult nvrtcCompileProgram(nvrtcProgram, int, const char* const*) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}
extern "C" nvrtcResult nvrtcGetCUBINSize(nvrtcProgram, size_t*) { return NVRTC_ERROR_INTERNAL_ERROR; }
extern "C" nvrtcResult nvrtcGetCUBIN(nvrtcProgram, char*) { return NVRTC_ERROR_INTERNAL_ERROR; }
extern "C" nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram, size_t*) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}
extern "C" nvrtcResult nvrtcGetProgramLog(nvrtcProgram, char*) { return NVRTC_ERROR_INTERNAL_ERROR; }
