/* attntune_c.h: the plain C ABI of libattntune (C11 and C++), for bindings.
 *
 * Runs a tuned attention configuration on caller-owned buffers. The C++ API
 * (attntune/attntune.h) is written over these functions; the Python binding calls them.
 *
 * Conventions:
 *  - Every function that can fail returns an attntune_status and, when `error` is not
 *    NULL, writes one line into error->message: "attntune: error: <input>: <what is
 *    wrong, what would be right>" for the caller's mistake (ATTNTUNE_USER_ERROR, the
 *    attntune CLI's exit code 2 and text) or "attntune: failed: <what>" for an internal
 *    or device failure (ATTNTUNE_FAILED, exit code 1).
 *  - Handles (attntune_configuration, attntune_config_file) belong to the caller, who frees
 *    them; a handle is immutable once made, so one may be shared by threads.
 *  - No global state beyond Kokkos: the first CPU run initialises Kokkos once per process
 *    (std::call_once) unless the program already did, and finalises it at exit. A program
 *    that uses Kokkos itself initialises it before its first attntune call.
 *  - Thread safety: calls on different problems may come from several threads at once.
 *    On the CPU the kernels run one at a time (Kokkos' Serial backend shares its team
 *    scratch between launches), so concurrent CPU calls are correct but not parallel.
 *  - Structs that carry api_version are checked against the library's
 *    ATTNTUNE_API_VERSION; initialise them with the *_init() functions below.
 */
#ifndef ATTNTUNE_C_H_
#define ATTNTUNE_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this interface. A caller compiled against another version is refused. */
#define ATTNTUNE_API_VERSION 1
/* The version of attntune_config.h's and attntune_config.json's format this library reads
 * (the header's kSchema, the JSON's "schema"). */
#define ATTNTUNE_CONFIG_SCHEMA 1
/* Bytes of attntune_error.message, terminating NUL included. */
#define ATTNTUNE_ERROR_BYTES 1024

typedef enum attntune_status {
  ATTNTUNE_OK = 0,
  ATTNTUNE_FAILED = 1,     /* internal or device failure: "attntune: failed: ..." */
  ATTNTUNE_USER_ERROR = 2  /* the caller's mistake: "attntune: error: ..." */
} attntune_status;

/* Element type of q, k, v and o (the optional tensors are always fp32, windows int32). */
typedef enum attntune_dtype { ATTNTUNE_FP32 = 0, ATTNTUNE_FP16 = 1, ATTNTUNE_BF16 = 2 } attntune_dtype;

typedef enum attntune_device_kind { ATTNTUNE_CPU = 0, ATTNTUNE_CUDA = 1 } attntune_device_kind;

typedef struct attntune_error {
  char message[ATTNTUNE_ERROR_BYTES];
} attntune_error;

typedef struct attntune_device {
  attntune_device_kind kind;
  int index; /* CUDA device ordinal; 0 on the CPU */
} attntune_device;

/* One attention problem (DESIGN.md s1): Q[B,Hq,Lq,d], K,V[B,Hkv,Lk,d], row-major. */
typedef struct attntune_problem {
  int api_version;
  int64_t batch;
  int64_t q_heads;
  int64_t kv_heads;
  int64_t q_len;
  int64_t kv_len;
  int64_t head_dim;
  int causal; /* nonzero: query row i sits at position kv_len - q_len + i */
  attntune_dtype dtype;
  attntune_device device;
} attntune_problem;

/* The caller's buffers. On the CPU host pointers, on CUDA device pointers. q, k, v and
 * o hold elements of the problem's dtype; o is written. The optional tensors replace the
 * variant's seeded defaults (NULL: not supplied): scores [B,Hkv,Lk] (ks, hax), delta
 * [Hkv,d] and a [Hkv] (dma, dma_decode), mu [Hkv,d] and proj [Hkv,d,proj_bits] (lsh,
 * hax; proj_bits must equal the configuration's bits), windows [Hkv] (hybrid; int32, 0 =
 * full attention). They are host fp32 on the CPU, device fp32 on CUDA. On CUDA q, k, v
 * and o start on a 16-byte boundary and the optional tensors on a 4-byte one (the
 * kernels copy 16 bytes at a time); a buffer that does not is refused in one line. */
typedef struct attntune_tensors {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  const float* scores;
  const float* delta;
  const float* a;
  const float* mu;
  const float* proj;
  int64_t proj_bits;
  const int32_t* windows;
} attntune_tensors;

typedef struct attntune_run_options {
  int api_version;
  /* Nonzero (the default): refuse non-finite inputs, or inputs so large that fp32
   * attention overflows, in one line (one pass over q, k, v on the CPU). Zero skips the
   * pass. CUDA never reads the inputs back to check them: there the caller promises
   * finite inputs either way. */
  int check_inputs;
  /* CUDA: the cudaStream_t the kernel is enqueued on (NULL: the default stream). The
   * call returns without waiting for the kernel. Ignored on the CPU. */
  void* stream;
} attntune_run_options;

/* How a tuned configuration is checked against the device it is used on and against this
 * library. A mismatch is refused unless allowed; an allowed one is used with a warning
 * (attntune_config_warning, and "attntune: warning: ..." on stderr unless quiet). */
typedef struct attntune_config_options {
  int api_version;
  attntune_device device;  /* the device the configuration will run on */
  int allow_other_device;  /* use an entry tuned on another device */
  int allow_other_version; /* use an entry written by another attntune version */
  int quiet;               /* no warning on stderr */
} attntune_config_options;

/* One entry of a generated attntune_config.h (attntune_config::Entry) with its header's
 * kSchema and kToolVersion. The C++ API fills it (attntune::FromEntry). */
typedef struct attntune_entry {
  int schema;
  const char* tool_version;
  const char* device;
  const char* variant;
  const char* phase;
  const char* params;   /* "sink=0,w=256" */
  const char* impl;
  const char* tunables; /* "Bc=64,Br=32" */
  int head_dim;
  int seq_len;
  double median_ms;
  double rel_err;
  double mass_recall;
} attntune_entry;

/* A configuration: variant, implementation, the variant's parameters and the tunables. */
typedef struct attntune_configuration attntune_configuration;
/* A loaded attntune_config.json. */
typedef struct attntune_config_file attntune_config_file;

static inline attntune_problem attntune_problem_init(void) {
  attntune_problem p = {ATTNTUNE_API_VERSION, 1, 1, 1, 1, 1, 64, 1, ATTNTUNE_FP32, {ATTNTUNE_CPU, 0}};
  return p;
}

static inline attntune_tensors attntune_tensors_init(void) {
  attntune_tensors t = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL};
  return t;
}

static inline attntune_run_options attntune_run_options_init(void) {
  attntune_run_options o = {ATTNTUNE_API_VERSION, 1, NULL};
  return o;
}

static inline attntune_config_options attntune_config_options_init(void) {
  attntune_config_options o = {ATTNTUNE_API_VERSION, {ATTNTUNE_CPU, 0}, 0, 0, 0};
  return o;
}

/* ATTNTUNE_API_VERSION of the library. */
int attntune_api_version(void);
/* The attntune version of the library ("0.1.0"). */
const char* attntune_version(void);

/* The name of `device` as tuned entries record it (the CPU model, the GPU's name), with
 * its terminating NUL, into `name`; ATTNTUNE_USER_ERROR when `bytes` cannot hold it all
 * (256 bytes always can). */
attntune_status attntune_device_name(attntune_device device, char* name, size_t bytes,
                                     attntune_error* error);

/* A configuration by hand: `params` and `tunables` as "w=256,sink=4" (NULL or "": none;
 * missing ones take their defaults at run time). The variant and implementation must be
 * known; values are checked against the problem when it runs. */
attntune_status attntune_config_create(const char* variant, const char* implementation,
                                       const char* params, const char* tunables,
                                       attntune_configuration** out, attntune_error* error);

/* The configuration of a generated header's entry, checked: the header's schema, its
 * attntune version and the entry's device against `options`. */
attntune_status attntune_config_from_entry(const attntune_entry* entry,
                                           const attntune_config_options* options,
                                           attntune_configuration** out, attntune_error* error);

/* Reads attntune_config.json (its schema checked on load; the attntune version and the
 * entry's device against `options` at each lookup); malformed or hostile files are
 * refused in one line. */
attntune_status attntune_config_file_load(const char* path, const attntune_config_options* options,
                                          attntune_config_file** out, attntune_error* error);

/* The file's entry for (variant, phase "prefill" or "decode", head_dim, seq_len) by the
 * generated header's rule (attntune_config::LookupOnDevice): entries of the options'
 * device (others only when allowed), the smallest tuned seq_len >= seq_len (else the
 * largest), the fastest there. ATTNTUNE_USER_ERROR naming what the file holds when none. */
attntune_status attntune_config_file_lookup(const attntune_config_file* file, const char* variant,
                                            const char* phase, int head_dim, int seq_len,
                                            double min_mass_recall, attntune_configuration** out,
                                            attntune_error* error);

void attntune_config_free(attntune_configuration* config);
void attntune_config_file_free(attntune_config_file* file);

/* What a configuration holds; strings live as long as the handle. */
const char* attntune_config_variant(const attntune_configuration* config);
const char* attntune_config_implementation(const attntune_configuration* config);
const char* attntune_config_params(const attntune_configuration* config);   /* "sink=0,w=256" */
const char* attntune_config_tunables(const attntune_configuration* config); /* "Bc=64,Br=32" */
/* The device it was tuned on ("" for a configuration by hand). */
const char* attntune_config_device(const attntune_configuration* config);
/* "" or the warning of a mismatch that the options allowed. */
const char* attntune_config_warning(const attntune_configuration* config);

/* Runs `config` on `problem` with the caller's `tensors` (o written). `options` may be
 * NULL (the defaults). On the CPU the call returns when o is written; on CUDA once the
 * kernel is enqueued on options->stream. */
attntune_status attntune_run(const attntune_configuration* config, const attntune_problem* problem,
                             const attntune_tensors* tensors, const attntune_run_options* options,
                             attntune_error* error);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ATTNTUNE_C_H_ */
