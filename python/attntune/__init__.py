"""attntune's tuned attention kernels from Python.

    import numpy as np, attntune
    o = attntune.attention(q, k, v, variant="swa", params={"w": 256})
    cfg = attntune.load_config("attntune_out/attntune_config.json").lookup("swa", head_dim=128, seq_len=4096)
    o = attntune.attention(q, k, v, config=cfg)

q [B,Hq,Lq,d], k and v [B,Hkv,Lk,d] are numpy arrays or any tensor with __dlpack__
(PyTorch, JAX, CuPy): C-contiguous, float32 on the CPU (float16 or bfloat16 on CUDA). They
reach the library as pointers, without a copy. The result is written into `out` when given
(any writable array or tensor of q's shape and dtype), else into a new numpy array.

Errors raise attntune.UserError (the caller's mistake; also a ValueError) or attntune.Error,
with the attntune CLI's one-line text ("attntune: error: ...").
"""
from . import _attntune
from ._attntune import Config, ConfigFile, Error, UserError, api_version, device_name, version

__all__ = ["attention", "load_config", "Config", "ConfigFile", "Error", "UserError",
           "api_version", "device_name", "version"]


def load_config(path, device="cpu", allow_other_device=False, allow_other_version=False,
                quiet=False):
    """attntune_config.json (path: a str or os.PathLike) read at run time:
    ConfigFile.lookup(variant, phase="prefill", head_dim=..., seq_len=...) gives the tuned
    Config, checked against the device ("cpu" or "cuda:N") and this attntune's version (a
    mismatch is refused unless allowed)."""
    return ConfigFile(path, device, allow_other_device, allow_other_version, quiet)


def _type_name(x):
    return type(x).__name__


def _params_text(params, what):
    if params is None:
        return ""
    if isinstance(params, str):
        return params
    if not hasattr(params, "items"):
        raise UserError(f"attntune: error: {what}: a dict or 'name=value,...' text is expected, "
                        f"not {_type_name(params)}")
    for name, value in params.items():
        if any(c in str(name) + str(value) for c in ",="):
            raise UserError(f"attntune: error: {what}: {name}={value} holds ',' or '=' (a "
                            "parameter's name and value are integers or words)")
    return ",".join(f"{name}={value}" for name, value in sorted(params.items()))


def _as_config(variant, config, implementation, params, tunables):
    if isinstance(config, Config):
        if variant is not None and variant != config.variant:
            raise UserError(f"attntune: error: variant: '{variant}' is not the configuration's "
                            f"variant '{config.variant}'")
        if params is not None or implementation is not None or tunables is not None:
            raise UserError("attntune: error: config: a Config carries its own params, "
                            "implementation and tunables")
        return config
    if config is not None:  # an attntune_config.json entry, or the same keys by hand
        if not isinstance(config, dict):
            raise UserError("attntune: error: config: a Config or a dict with 'implementation', "
                            f"'params' and 'tunables' is expected, not {type(config).__name__}")
        # A value given both ways must agree: the dict's silently replaced the argument's
        # (variant="dense" with config={"variant": "swa", ...} ran swa).
        given = {"variant": variant, "implementation": implementation, "params": params,
                 "tunables": tunables}
        for key, value in given.items():
            if key in config and value is not None and value != config[key]:
                raise UserError(f"attntune: error: {key}: {value!r} is not the config's "
                                f"{config[key]!r} (give it one way)")
        variant = config.get("variant", variant)
        implementation = config.get("implementation", implementation)
        params = config.get("params", params)
        tunables = config.get("tunables", tunables)
    if variant is None:
        raise UserError("attntune: error: variant: none given (e.g. variant=\"swa\")")
    for what, value in (("variant", variant), ("implementation", implementation)):
        if value is not None and not isinstance(value, str):
            raise UserError(f"attntune: error: {what}: a str is expected, not {_type_name(value)}")
    return Config(variant, implementation or "", _params_text(params, "params"),
                  _params_text(tunables, "tunables"))


def attention(q, k, v, variant=None, config=None, *, params=None, implementation=None,
              tunables=None, causal=True, out=None, scores=None, delta=None, a=None, mu=None,
              proj=None, windows=None, check_inputs=True, stream=None):
    """Attention of DESIGN.md s1's `variant` on q, k, v by `config`.

    config: a Config (attntune.load_config(...).lookup(...), attntune.Config(...)), a dict
    in attntune_config.json's entry form ({"implementation": "tiled", "params": {"w": 256},
    "tunables": {"Br": 32, "Bc": 64}}), or None (params= and implementation= by hand; the
    implementation defaults to the first that runs the problem). The optional tensors
    (scores, delta, a, mu, proj, windows) replace the variant's seeded defaults. stream: a
    CUDA stream handle (int) for tensors on a GPU (refused for tensors on the CPU). Returns
    out.
    """
    cfg = _as_config(variant, config, implementation, params, tunables)
    for what, value in (("causal", causal), ("check_inputs", check_inputs)):
        numpy_bool = type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool")
        if not isinstance(value, bool) and not numpy_bool:
            raise UserError(f"attntune: error: {what}: True or False is expected, not "
                            f"{_type_name(value)}")
    if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int)):
        raise UserError("attntune: error: stream: a CUDA stream handle (int, e.g. "
                        f"torch.cuda.current_stream().cuda_stream) is expected, not {_type_name(stream)}")
    if stream is not None and not 0 <= stream < 2 ** 64:
        raise UserError(f"attntune: error: stream: {stream} is not a CUDA stream handle "
                        "(0 to 2^64 - 1)")
    if stream is not None and hasattr(q, "__dlpack_device__") and q.__dlpack_device__()[0] == 1:
        # kDLCPU, asked before the tensors are exported (torch's own refusal of a stream
        # for a CPU tensor was the message)
        raise UserError("attntune: error: stream: given for tensors on the CPU (a CUDA "
                        "stream orders work on a GPU; leave it out)")
    if out is None:
        import numpy as np
        if not isinstance(q, np.ndarray):
            raise UserError("attntune: error: out: give out= for tensors that are not numpy "
                            "arrays (attntune allocates numpy arrays only)")
        out = np.empty_like(q)
    _attntune.run(cfg, q, k, v, out, causal=causal, scores=scores, delta=delta, a=a, mu=mu,
                  proj=proj, windows=windows, check_inputs=check_inputs, stream=stream)
    return out
