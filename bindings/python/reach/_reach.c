/*
 * reach._reach: the C API (include/reach.h) as Python types, one method per C call.
 *
 * Written against Python's own C API, limited to the stable ABI of 3.11 (Py_LIMITED_API, set by
 * meson.build): one wheel serves every CPython from 3.11 on and the build needs nothing beyond the
 * Python headers.  The Python side (reach/__init__.py) builds generate / chat / streaming on these.
 *
 * Every call that may touch the device (create, load, prefill, decode, sample, step) releases the
 * GIL, so threads with sessions of their own run at once (the C API serializes calls on one device,
 * so for parallel work each thread's model has its own Device).
 */
#include "_reach_shared.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static PyObject* ReachError;   /* reach.Error: .status (int), .status_name, .message */
static PyTypeObject* DeviceType;
PyTypeObject* ModelType;
PyTypeObject* KvPoolType;
static PyTypeObject* SessionType;
static PyTypeObject* ReplyType;
static PyTypeObject* LogitsType;

/* Raises reach.Error for a failed call (reach_last_error is the calling thread's). */
PyObject* raise_status(reach_status st) {
  const char* message = reach_last_error();
  PyObject* exc = PyObject_CallFunction(ReachError, "s", message);
  if (!exc) return NULL;
  PyObject* status = PyLong_FromLong((long)st);
  PyObject* name = PyUnicode_FromString(reach_status_name(st));
  PyObject* msg = PyUnicode_FromString(message);
  if (status && name && msg && PyObject_SetAttrString(exc, "status", status) == 0 &&
      PyObject_SetAttrString(exc, "status_name", name) == 0 && PyObject_SetAttrString(exc, "message", msg) == 0)
    PyErr_SetObject(ReachError, exc);
  Py_XDECREF(status);
  Py_XDECREF(name);
  Py_XDECREF(msg);
  Py_DECREF(exc);
  return NULL;
}

#define CHECK(call)                     \
  do {                                  \
    reach_status st_ = (call);          \
    if (st_ != REACH_OK) return raise_status(st_); \
  } while (0)

/* A call with the GIL released. */
#define CHECK_NOGIL(call)                \
  do {                                   \
    reach_status st_;                    \
    Py_BEGIN_ALLOW_THREADS st_ = (call); \
    Py_END_ALLOW_THREADS if (st_ != REACH_OK) return raise_status(st_); \
  } while (0)

void dealloc_object(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  tp_free(self);
  Py_DECREF(tp);
}

/* A sequence of ints as a malloc'd int32 array (*n items); NULL with an exception set. */
static int32_t* ids_from(PyObject* seq, size_t* n) {
  Py_ssize_t len = PySequence_Size(seq);
  if (len < 0) return NULL;
  int32_t* ids = (int32_t*)malloc(sizeof(int32_t) * (size_t)(len ? len : 1));
  if (!ids) {
    PyErr_NoMemory();
    return NULL;
  }
  for (Py_ssize_t i = 0; i < len; ++i) {
    PyObject* item = PySequence_GetItem(seq, i);
    if (!item) goto fail;
    long v = PyLong_AsLong(item);
    Py_DECREF(item);
    if (v == -1 && PyErr_Occurred()) goto fail;
    if (v < INT32_MIN || v > INT32_MAX) {
      PyErr_Format(PyExc_OverflowError, "token id %ld at index %zd does not fit in 32 bits", v, i);
      goto fail;
    }
    ids[i] = (int32_t)v;
  }
  *n = (size_t)len;
  return ids;
fail:
  free(ids);
  return NULL;
}

static PyObject* list_from(const int32_t* ids, size_t n) {
  PyObject* list = PyList_New((Py_ssize_t)n);
  if (!list) return NULL;
  for (size_t i = 0; i < n; ++i) {
    PyObject* v = PyLong_FromLong(ids[i]);
    if (!v) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SetItem(list, (Py_ssize_t)i, v);
  }
  return list;
}

/* ------------------------------------------------------------------ module functions */

static PyObject* device_info_dict(const reach_device_info* d) {
  return Py_BuildValue("{s:I,s:s,s:s,s:i,s:I,s:I,s:I,s:K,s:O,s:O,s:I,s:O}", "index", d->index, "name", d->name,
                       "driver", d->driver, "type", d->type, "vendor_id", d->vendor_id, "device_id", d->device_id,
                       "api_version", d->api_version, "vram_bytes", (unsigned long long)d->vram_bytes,
                       "fp16_storage", d->fp16_storage ? Py_True : Py_False, "fp16_arithmetic",
                       d->fp16_arithmetic ? Py_True : Py_False, "subgroup_size", d->subgroup_size,
                       "subgroup_arithmetic", d->subgroup_arithmetic ? Py_True : Py_False);
}

static PyObject* mod_version(PyObject* m, PyObject* unused) { return PyUnicode_FromString(reach_version()); }

static PyObject* mod_devices(PyObject* m, PyObject* unused) {
  uint32_t count = 0;
  CHECK_NOGIL(reach_device_count(&count));
  PyObject* list = PyList_New(0);
  if (!list) return NULL;
  for (uint32_t i = 0; i < count; ++i) {
    reach_device_info info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    reach_status st = reach_device_get_info(i, &info);
    if (st != REACH_OK) {
      Py_DECREF(list);
      return raise_status(st);
    }
    PyObject* d = device_info_dict(&info);
    if (!d || PyList_Append(list, d) < 0) {
      Py_XDECREF(d);
      Py_DECREF(list);
      return NULL;
    }
    Py_DECREF(d);
  }
  return list;
}

/* ------------------------------------------------------------------ Device */

typedef struct {
  PyObject_HEAD
  reach_device* device;
} DeviceObject;

static int Device_init(DeviceObject* self, PyObject* args, PyObject* kw) {
  static char* names[] = {"index", "name", "validation", "use_environment", "device_profile", "pipeline_cache_dir",
                          NULL};
  reach_device_params p = reach_device_default_params();
  int index = -1, validation = 0, use_environment = 0;
  const char *name = NULL, *profile = NULL, *cache = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|izppzz", names, &index, &name, &validation, &use_environment,
                                   &profile, &cache))
    return -1;
  if (self->device) {
    PyErr_SetString(PyExc_RuntimeError, "reach.Device: already initialised");
    return -1;
  }
  p.index = index;
  p.name = name;
  p.validation = validation;
  p.use_environment = use_environment;
  p.device_profile = profile;
  p.pipeline_cache_dir = cache;
  reach_status st;
  Py_BEGIN_ALLOW_THREADS st = reach_device_create(&p, &self->device);
  Py_END_ALLOW_THREADS if (st != REACH_OK) {
    raise_status(st);
    return -1;
  }
  return 0;
}

static void Device_dealloc(DeviceObject* self) {
  if (self->device) {
    Py_BEGIN_ALLOW_THREADS reach_device_free(self->device);
    Py_END_ALLOW_THREADS
  }
  dealloc_object((PyObject*)self);
}

static PyObject* Device_info(DeviceObject* self, PyObject* unused) {
  reach_device_info info;
  memset(&info, 0, sizeof info);
  info.size = sizeof info;
  CHECK(reach_device_describe(self->device, &info));
  return device_info_dict(&info);
}

static PyMethodDef Device_methods[] = {
    {"info", (PyCFunction)Device_info, METH_NOARGS, "The device's description (reach_device_describe)."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot Device_slots[] = {{Py_tp_init, Device_init},
                                     {Py_tp_dealloc, Device_dealloc},
                                     {Py_tp_methods, Device_methods},
                                     {Py_tp_doc, "A Vulkan device reach owns (reach_device_create)."},
                                     {0, NULL}};
static PyType_Spec Device_spec = {"reach._reach.Device", sizeof(DeviceObject), 0, Py_TPFLAGS_DEFAULT, Device_slots};

/* ------------------------------------------------------------------ Model */

static int Model_init(ModelObject* self, PyObject* args, PyObject* kw) {
  static char* names[] = {"device", "path", "require_tokenizer", "quantize", NULL};
  PyObject* device;
  PyObject* path_obj;
  int require_tokenizer = 1, quantize = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O&|pi", names, DeviceType, &device, PyUnicode_FSConverter,
                                   &path_obj, &require_tokenizer, &quantize))
    return -1;
  if (self->model) {
    Py_DECREF(path_obj);
    PyErr_SetString(PyExc_RuntimeError, "reach.Model: already initialised");
    return -1;
  }
  char* path = NULL;
  Py_ssize_t path_len = 0;
  if (PyBytes_AsStringAndSize(path_obj, &path, &path_len) < 0) {
    Py_DECREF(path_obj);
    return -1;
  }
  reach_model_params p = reach_model_default_params();
  p.require_tokenizer = require_tokenizer;
  p.quantize = quantize;
  reach_status st;
  reach_device* d = ((DeviceObject*)device)->device;
  Py_BEGIN_ALLOW_THREADS st = reach_model_load(d, path, &p, &self->model);
  Py_END_ALLOW_THREADS Py_DECREF(path_obj);
  if (st != REACH_OK) {
    raise_status(st);
    return -1;
  }
  Py_INCREF(device);
  self->device = device;
  return 0;
}

static void Model_dealloc(ModelObject* self) {
  if (self->model) reach_model_free(self->model);
  Py_XDECREF(self->device);
  dealloc_object((PyObject*)self);
}

static PyObject* Model_info(ModelObject* self, PyObject* unused) {
  reach_model_info i;
  memset(&i, 0, sizeof i);
  i.size = sizeof i;
  CHECK(reach_model_get_info(self->model, &i));
  return Py_BuildValue("{s:i,s:i,s:i,s:i,s:i,s:i,s:L,s:K,s:K,s:i,s:i,s:O}", "vocab_size", i.vocab_size, "n_layers",
                       i.n_layers, "hidden_size", i.hidden_size, "n_heads", i.n_heads, "n_kv_heads", i.n_kv_heads,
                       "head_dim", i.head_dim, "max_position_embeddings", (long long)i.max_position_embeddings,
                       "n_params", (unsigned long long)i.n_params, "weight_bytes", (unsigned long long)i.weight_bytes,
                       "bos_id", i.bos_id, "eos_id", i.eos_id, "has_tokenizer", i.has_tokenizer ? Py_True : Py_False);
}

static PyObject* Model_tokenize(ModelObject* self, PyObject* args, PyObject* kw) {
  static char* names[] = {"text", "add_special", NULL};
  const char* text;
  Py_ssize_t len;
  int add_special = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "s#|p", names, &text, &len, &add_special)) return NULL;
  size_t n = 0;
  CHECK_NOGIL(reach_tokenize(self->model, text, (size_t)len, add_special, NULL, 0, &n));
  int32_t* ids = (int32_t*)malloc(sizeof(int32_t) * (n ? n : 1));
  if (!ids) return PyErr_NoMemory();
  reach_status st;
  Py_BEGIN_ALLOW_THREADS st = reach_tokenize(self->model, text, (size_t)len, add_special, ids, n, &n);
  Py_END_ALLOW_THREADS if (st != REACH_OK) {
    free(ids);
    return raise_status(st);
  }
  PyObject* list = list_from(ids, n);
  free(ids);
  return list;
}

static PyObject* Model_detokenize(ModelObject* self, PyObject* args, PyObject* kw) {
  static char* names[] = {"ids", "skip_special", NULL};
  PyObject* seq;
  int skip_special = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p", names, &seq, &skip_special)) return NULL;
  size_t n = 0, len = 0;
  int32_t* ids = ids_from(seq, &n);
  if (!ids) return NULL;
  reach_status st = reach_detokenize(self->model, ids, n, skip_special, NULL, 0, &len);
  char* text = st == REACH_OK ? (char*)malloc(len + 1) : NULL;
  if (st == REACH_OK && !text) {
    free(ids);
    return PyErr_NoMemory();
  }
  if (st == REACH_OK) st = reach_detokenize(self->model, ids, n, skip_special, text, len + 1, &len);
  free(ids);
  if (st != REACH_OK) {
    free(text);
    return raise_status(st);
  }
  PyObject* s = PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "replace");
  free(text);
  return s;
}

static PyObject* Model_is_eos(ModelObject* self, PyObject* arg) {
  long token = PyLong_AsLong(arg);
  if (token == -1 && PyErr_Occurred()) return NULL;
  int eos = 0;
  CHECK(reach_model_is_eos(self->model, (int32_t)token, &eos));
  return PyBool_FromLong(eos);
}

/* chat_encode([(role, content), ...]) -> (prompt ids, stop ids) */
static PyObject* Model_chat_encode(ModelObject* self, PyObject* seq) {
  Py_ssize_t n = PySequence_Size(seq);
  if (n < 0) return NULL;
  reach_chat_message* msgs = (reach_chat_message*)calloc((size_t)(n ? n : 1), sizeof *msgs);
  PyObject** keep = (PyObject**)calloc((size_t)(n ? n : 1), sizeof *keep);
  PyObject* result = NULL;
  int32_t* ids = NULL;
  if (!msgs || !keep) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    keep[i] = PySequence_GetItem(seq, i);
    if (!keep[i]) goto done;
    if (!PyArg_ParseTuple(keep[i], "ss", &msgs[i].role, &msgs[i].content)) goto done;
  }
  size_t n_ids = 0, n_stop = 0;
  int32_t stops[16];
  reach_status st = reach_chat_tokenize(self->model, msgs, (size_t)n, NULL, 0, &n_ids);
  if (st == REACH_OK) st = reach_chat_end_tokens(self->model, stops, 16, &n_stop);
  if (st == REACH_OK) {
    ids = (int32_t*)malloc(sizeof(int32_t) * (n_ids ? n_ids : 1));
    if (!ids) {
      PyErr_NoMemory();
      goto done;
    }
    st = reach_chat_tokenize(self->model, msgs, (size_t)n, ids, n_ids, &n_ids);
  }
  if (st != REACH_OK) {
    raise_status(st);
    goto done;
  }
  PyObject* a = list_from(ids, n_ids);
  PyObject* b = list_from(stops, n_stop);
  if (a && b) result = PyTuple_Pack(2, a, b);
  Py_XDECREF(a);
  Py_XDECREF(b);
done:
  if (keep)
    for (Py_ssize_t i = 0; i < n; ++i) Py_XDECREF(keep[i]);
  free(keep);
  free(msgs);
  free(ids);
  return result;
}

static PyMethodDef Model_methods[] = {
    {"info", (PyCFunction)Model_info, METH_NOARGS, "Shapes and special ids (reach_model_get_info)."},
    {"tokenize", (PyCFunction)(void (*)(void))Model_tokenize, METH_VARARGS | METH_KEYWORDS, "reach_tokenize."},
    {"detokenize", (PyCFunction)(void (*)(void))Model_detokenize, METH_VARARGS | METH_KEYWORDS, "reach_detokenize."},
    {"is_eos", (PyCFunction)Model_is_eos, METH_O, "reach_model_is_eos."},
    {"chat_encode", (PyCFunction)Model_chat_encode, METH_O, "reach_chat_tokenize and reach_chat_end_tokens: (prompt ids, stop ids)."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot Model_slots[] = {{Py_tp_init, Model_init},
                                    {Py_tp_dealloc, Model_dealloc},
                                    {Py_tp_methods, Model_methods},
                                    {Py_tp_doc, "A model loaded onto a Device (reach_model_load)."},
                                    {0, NULL}};
static PyType_Spec Model_spec = {"reach._reach.Model", sizeof(ModelObject), 0, Py_TPFLAGS_DEFAULT, Model_slots};

/* ------------------------------------------------------------------ Session */

typedef struct {
  PyObject_HEAD
  reach_session* session;
  PyObject* model;   /* the ModelObject: freed after the session */
  PyObject* pool;    /* the KvPoolObject its cache is in, or NULL: freed after the session */
} SessionObject;

/* A KV cache type by its command-line name (-ctk / -ctv): "f16", "f32", "q8_0" or "q4_0". */
int kv_type_of(const char* name, const char* field, int32_t* out) {
  static const struct {
    const char* name;
    int32_t type;
  } types[] = {{"f32", REACH_KV_F32}, {"f16", REACH_KV_F16}, {"q8_0", REACH_KV_Q8_0}, {"q4_0", REACH_KV_Q4_0}};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i)
    if (strcmp(name, types[i].name) == 0) {
      *out = types[i].type;
      return 0;
    }
  PyErr_Format(PyExc_ValueError, "reach: %s is '%s': use 'f16' (the default), 'f32', 'q8_0' or 'q4_0'", field,
               name);
  return -1;
}

static int Session_init(SessionObject* self, PyObject* args, PyObject* kw) {
  static char* names[] = {"model", "context", "chunk", "l_test", "rope_scaling", "rope_factor", "original_ctx",
                          "rerope_window", "leaky_k", "self_extend_group", "self_extend_window", "logn", "qk_norm",
                          "cos_n", "attn_window", "attn_sinks", "scheme_flags", "full_kv", "profile",
                          "cache_type_k", "cache_type_v", "pool", NULL};
  reach_session_params p = reach_session_default_params();
  PyObject* model;
  long long l_test = p.l_test, original_ctx = p.original_ctx, rerope_window = p.rerope_window,
            seg = p.self_extend_group, sew = p.self_extend_window, logn = p.logn, attn_window = p.attn_window,
            attn_sinks = p.attn_sinks;
  unsigned int context = p.context, chunk = p.chunk;
  int full_kv = p.full_kv, profile = p.profile;
  const char *cache_k = NULL, *cache_v = NULL;
  PyObject* pool = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|$IILzdLLdLLLzdLLzppzzO", names, ModelType, &model, &context, &chunk,
                                   &l_test, &p.rope_scaling, &p.rope_factor, &original_ctx, &rerope_window,
                                   &p.leaky_k, &seg, &sew, &logn, &p.qk_norm, &p.cos_n, &attn_window, &attn_sinks,
                                   &p.scheme_flags, &full_kv, &profile, &cache_k, &cache_v, &pool))
    return -1;
  if (pool != Py_None) {
    if (!PyObject_TypeCheck(pool, KvPoolType)) {
      PyErr_SetString(PyExc_TypeError, "reach.Session: pool is not a KvPool: pass a reach.KvPool or None");
      return -1;
    }
    if (((KvPoolObject*)pool)->model != model) {
      PyErr_SetString(PyExc_ValueError, "reach.Session: the pool belongs to another model: make a KvPool of this one");
      return -1;
    }
    if (cache_k || cache_v) {
      PyErr_SetString(PyExc_ValueError,
                      "reach.Session: a session in a pool stores K and V as the pool does: give cache_type_k / "
                      "cache_type_v to the KvPool instead");
      return -1;
    }
  }
  if ((cache_k && kv_type_of(cache_k, "cache_type_k", &p.cache_type_k) < 0) ||
      (cache_v && kv_type_of(cache_v, "cache_type_v", &p.cache_type_v) < 0))
    return -1;
  if (self->session) {
    PyErr_SetString(PyExc_RuntimeError, "reach.Session: already initialised");
    return -1;
  }
  p.context = context;
  p.chunk = chunk;
  p.l_test = l_test;
  p.original_ctx = original_ctx;
  p.rerope_window = rerope_window;
  p.self_extend_group = seg;
  p.self_extend_window = sew;
  p.logn = logn;
  p.attn_window = attn_window;
  p.attn_sinks = attn_sinks;
  p.full_kv = full_kv;
  p.profile = profile;
  reach_status st;
  reach_model* m = ((ModelObject*)model)->model;
  reach_kv_pool* kp = pool != Py_None ? ((KvPoolObject*)pool)->pool : NULL;
  Py_BEGIN_ALLOW_THREADS st = kp ? reach_session_create_in_pool(kp, &p, &self->session)
                                 : reach_session_create(m, &p, &self->session);
  Py_END_ALLOW_THREADS if (st != REACH_OK) {
    raise_status(st);
    return -1;
  }
  Py_INCREF(model);
  self->model = model;
  if (kp) {
    Py_INCREF(pool);
    self->pool = pool;
  }
  return 0;
}

static void Session_dealloc(SessionObject* self) {
  if (self->session) {
    Py_BEGIN_ALLOW_THREADS reach_session_free(self->session);
    Py_END_ALLOW_THREADS
  }
  Py_XDECREF(self->pool);
  Py_XDECREF(self->model);
  dealloc_object((PyObject*)self);
}

static PyObject* Session_prefill(SessionObject* self, PyObject* seq) {
  size_t n = 0;
  int32_t* ids = ids_from(seq, &n);
  if (!ids) return NULL;
  reach_status st;
  Py_BEGIN_ALLOW_THREADS st = reach_session_prefill(self->session, ids, n);
  Py_END_ALLOW_THREADS free(ids);
  if (st != REACH_OK) return raise_status(st);
  Py_RETURN_NONE;
}

static PyObject* Session_decode(SessionObject* self, PyObject* arg) {
  long token = PyLong_AsLong(arg);
  if (token == -1 && PyErr_Occurred()) return NULL;
  CHECK_NOGIL(reach_session_decode(self->session, (int32_t)token));
  Py_RETURN_NONE;
}

static PyObject* Session_sample(SessionObject* self, PyObject* unused) {
  int32_t token = 0;
  int eos = 0;
  CHECK_NOGIL(reach_session_sample(self->session, &token, &eos));
  return Py_BuildValue("(iO)", token, eos ? Py_True : Py_False);
}

static PyObject* Session_step(SessionObject* self, PyObject* arg) {
  long token = PyLong_AsLong(arg);
  if (token == -1 && PyErr_Occurred()) return NULL;
  int32_t next = 0;
  int eos = 0;
  CHECK_NOGIL(reach_session_step(self->session, (int32_t)token, &next, &eos));
  return Py_BuildValue("(iO)", next, eos ? Py_True : Py_False);
}

static PyObject* Session_set_sampling(SessionObject* self, PyObject* args, PyObject* kw) {
  static char* names[] = {"temperature", "top_k", "top_p", "seed", NULL};
  reach_sampling_params p = reach_sampling_default_params();
  unsigned long long seed = p.seed;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|fifK", names, &p.temperature, &p.top_k, &p.top_p, &seed)) return NULL;
  p.seed = seed;
  CHECK(reach_session_set_sampling(self->session, &p));
  Py_RETURN_NONE;
}

static PyObject* Session_set_json_schema(SessionObject* self, PyObject* arg) {
  const char* schema = NULL;
  if (arg != Py_None) {
    schema = PyUnicode_AsUTF8AndSize(arg, NULL);
    if (!schema) return NULL;
  }
  CHECK_NOGIL(reach_session_set_json_schema(self->session, schema));
  Py_RETURN_NONE;
}

static PyObject* Session_position(SessionObject* self, PyObject* unused) {
  uint32_t pos = 0, cap = 0;
  CHECK(reach_session_position(self->session, &pos, &cap));
  return Py_BuildValue("(II)", pos, cap);
}

static PyObject* Session_rewind(SessionObject* self, PyObject* arg) {
  unsigned long pos = PyLong_AsUnsignedLong(arg);
  if (PyErr_Occurred()) return NULL;
  CHECK_NOGIL(reach_session_rewind(self->session, (uint32_t)pos));
  Py_RETURN_NONE;
}

static PyObject* Session_reset(SessionObject* self, PyObject* unused) {
  CHECK_NOGIL(reach_session_reset(self->session));
  Py_RETURN_NONE;
}

/* Logits: a read-only buffer of float32 over the session's own logits, holding the session. */
typedef struct {
  PyObject_HEAD
  PyObject* session;
  const float* data;
  Py_ssize_t count;
} LogitsObject;

static PyObject* Session_logits(SessionObject* self, PyObject* unused) {
  const float* data = NULL;
  size_t count = 0;
  CHECK(reach_session_logits(self->session, &data, &count));
  LogitsObject* l = PyObject_New(LogitsObject, LogitsType);
  if (!l) return NULL;
  Py_INCREF((PyObject*)self);
  l->session = (PyObject*)self;
  l->data = data;
  l->count = (Py_ssize_t)count;
  return (PyObject*)l;
}

static int Logits_getbuffer(LogitsObject* self, Py_buffer* view, int flags) {
  if (flags & PyBUF_WRITABLE) {
    PyErr_SetString(PyExc_BufferError, "reach logits are read-only (copy them to change them)");
    return -1;
  }
  if (PyBuffer_FillInfo(view, (PyObject*)self, (void*)self->data, self->count * (Py_ssize_t)sizeof(float), 1, flags) <
      0)
    return -1;
  static char format[] = "f";
  view->itemsize = sizeof(float);
  view->format = (flags & PyBUF_FORMAT) ? format : NULL;
  if (flags & PyBUF_ND) {
    view->ndim = 1;
    view->shape = &self->count;
  }
  return 0;
}

static void Logits_dealloc(LogitsObject* self) {
  Py_XDECREF(self->session);
  PyTypeObject* tp = Py_TYPE((PyObject*)self);
  PyObject_Free(self);
  Py_DECREF(tp);
}

static PyType_Slot Logits_slots[] = {{Py_bf_getbuffer, Logits_getbuffer},
                                     {Py_tp_dealloc, Logits_dealloc},
                                     {Py_tp_doc, "float32 logits owned by a Session (buffer protocol, read-only)."},
                                     {0, NULL}};
static PyType_Spec Logits_spec = {"reach._reach.Logits", sizeof(LogitsObject), 0, Py_TPFLAGS_DEFAULT, Logits_slots};

static PyMethodDef Session_methods[] = {
    {"prefill", (PyCFunction)Session_prefill, METH_O, "reach_session_prefill."},
    {"decode", (PyCFunction)Session_decode, METH_O, "reach_session_decode."},
    {"sample", (PyCFunction)Session_sample, METH_NOARGS, "reach_session_sample: (token, is_eos)."},
    {"step", (PyCFunction)Session_step, METH_O, "reach_session_step: (next token, is_eos)."},
    {"set_sampling", (PyCFunction)(void (*)(void))Session_set_sampling, METH_VARARGS | METH_KEYWORDS,
     "reach_session_set_sampling."},
    {"set_json_schema", (PyCFunction)Session_set_json_schema, METH_O, "reach_session_set_json_schema."},
    {"position", (PyCFunction)Session_position, METH_NOARGS, "reach_session_position: (position, capacity)."},
    {"rewind", (PyCFunction)Session_rewind, METH_O, "reach_session_rewind."},
    {"reset", (PyCFunction)Session_reset, METH_NOARGS, "reach_session_reset."},
    {"logits", (PyCFunction)Session_logits, METH_NOARGS, "reach_session_logits, as a Logits buffer."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot Session_slots[] = {{Py_tp_init, Session_init},
                                      {Py_tp_dealloc, Session_dealloc},
                                      {Py_tp_methods, Session_methods},
                                      {Py_tp_doc, "A sequence on a Model (reach_session_create)."},
                                      {0, NULL}};
static PyType_Spec Session_spec = {"reach._reach.Session", sizeof(SessionObject), 0, Py_TPFLAGS_DEFAULT,
                                   Session_slots};

/* ------------------------------------------------------------------ Reply */

typedef struct {
  PyObject_HEAD
  reach_reply* reply;
} ReplyObject;

static int Reply_init(ReplyObject* self, PyObject* args, PyObject* kw) {
  static char* names[] = {"model", "stop", "channels", NULL};
  PyObject* model;
  PyObject* stop = NULL;
  int channels = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|Oi", names, ModelType, &model, &stop, &channels)) return -1;
  const char* stops[REACH_REPLY_MAX_STOP + 1];
  Py_ssize_t n = stop && stop != Py_None ? PySequence_Size(stop) : 0;
  if (n < 0) return -1;
  PyObject* items[REACH_REPLY_MAX_STOP + 1];
  Py_ssize_t kept = 0;
  int ok = 1;
  for (Py_ssize_t i = 0; i < n && i <= REACH_REPLY_MAX_STOP; ++i) {
    items[kept] = PySequence_GetItem(stop, i);
    if (!items[kept]) {
      ok = 0;
      break;
    }
    stops[kept] = PyUnicode_AsUTF8AndSize(items[kept], NULL);
    ++kept;
    if (!stops[kept - 1]) {
      ok = 0;
      break;
    }
  }
  if (ok) {
    reach_reply_params p = reach_reply_default_params();
    p.stop = n ? stops : NULL;
    p.n_stop = (size_t)n;   /* over the limit: the C API's message says so */
    p.channels = channels;
    reach_status st = reach_reply_create(((ModelObject*)model)->model, &p, &self->reply);
    if (st != REACH_OK) {
      raise_status(st);
      ok = 0;
    }
  }
  for (Py_ssize_t i = 0; i < kept; ++i) Py_DECREF(items[i]);
  return ok ? 0 : -1;
}

static void Reply_dealloc(ReplyObject* self) {
  if (self->reply) reach_reply_free(self->reply);
  dealloc_object((PyObject*)self);
}

static PyObject* reply_tuple(const reach_reply_text* t) {
  PyObject* content = PyUnicode_DecodeUTF8(t->content, (Py_ssize_t)t->content_len, "replace");
  PyObject* reasoning = PyUnicode_DecodeUTF8(t->reasoning, (Py_ssize_t)t->reasoning_len, "replace");
  PyObject* r = content && reasoning ? Py_BuildValue("(OOO)", content, reasoning, t->stopped ? Py_True : Py_False)
                                     : NULL;
  Py_XDECREF(content);
  Py_XDECREF(reasoning);
  return r;
}

static PyObject* Reply_push(ReplyObject* self, PyObject* arg) {
  long token = PyLong_AsLong(arg);
  if (token == -1 && PyErr_Occurred()) return NULL;
  reach_reply_text t;
  memset(&t, 0, sizeof t);
  t.size = sizeof t;
  CHECK(reach_reply_push(self->reply, (int32_t)token, &t));
  return reply_tuple(&t);
}

static PyObject* Reply_finish(ReplyObject* self, PyObject* unused) {
  reach_reply_text t;
  memset(&t, 0, sizeof t);
  t.size = sizeof t;
  CHECK(reach_reply_finish(self->reply, &t));
  return reply_tuple(&t);
}

static PyObject* Reply_reset(ReplyObject* self, PyObject* unused) {
  CHECK(reach_reply_reset(self->reply));
  Py_RETURN_NONE;
}

static PyMethodDef Reply_methods[] = {
    {"push", (PyCFunction)Reply_push, METH_O, "reach_reply_push: (content, reasoning, stopped)."},
    {"finish", (PyCFunction)Reply_finish, METH_NOARGS, "reach_reply_finish: (content, reasoning, stopped)."},
    {"reset", (PyCFunction)Reply_reset, METH_NOARGS, "reach_reply_reset."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot Reply_slots[] = {{Py_tp_init, Reply_init},
                                    {Py_tp_dealloc, Reply_dealloc},
                                    {Py_tp_methods, Reply_methods},
                                    {Py_tp_doc, "A reply's text with stop strings and channels (reach_reply_create)."},
                                    {0, NULL}};
static PyType_Spec Reply_spec = {"reach._reach.Reply", sizeof(ReplyObject), 0, Py_TPFLAGS_DEFAULT, Reply_slots};

/* ------------------------------------------------------------------ module */

static PyMethodDef module_methods[] = {
    {"version", mod_version, METH_NOARGS, "reach_version()."},
    {"devices", mod_devices, METH_NOARGS, "Every Vulkan device (reach_device_count, reach_device_get_info)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "reach._reach",
                                        "The C API of reach (include/reach.h) as Python types.", -1, module_methods};

static int add_type(PyObject* m, PyType_Spec* spec, PyTypeObject** out) {
  *out = (PyTypeObject*)PyType_FromSpec(spec);
  if (!*out) return -1;
  const char* dot = strrchr(spec->name, '.');
  Py_INCREF((PyObject*)*out);
  if (PyModule_AddObject(m, dot + 1, (PyObject*)*out) < 0) {
    Py_DECREF(*out);
    return -1;
  }
  return 0;
}

PyMODINIT_FUNC PyInit__reach(void) {
  PyObject* m = PyModule_Create(&module_def);
  if (!m) return NULL;
  ReachError = PyErr_NewExceptionWithDoc(
      "reach.Error",
      "A reach C API call failed: .status (the reach_status value), .status_name (\"REACH_ERROR_IO\"), "
      ".message (what failed and what to do).",
      PyExc_RuntimeError, NULL);
  if (!ReachError) goto fail;
  Py_INCREF(ReachError);
  if (PyModule_AddObject(m, "Error", ReachError) < 0) goto fail;
  if (add_type(m, &Device_spec, &DeviceType) < 0 || add_type(m, &Model_spec, &ModelType) < 0 ||
      add_type(m, &Session_spec, &SessionType) < 0 || add_type(m, &Reply_spec, &ReplyType) < 0 ||
      add_type(m, &Logits_spec, &LogitsType) < 0 || add_type(m, &KvPool_spec, &KvPoolType) < 0)
    goto fail;
  if (PyModule_AddIntConstant(m, "REPLY_CHANNELS_AUTO", REACH_REPLY_CHANNELS_AUTO) < 0 ||
      PyModule_AddIntConstant(m, "KV_POOL_FULL", REACH_ERROR_KV_POOL_FULL) < 0 ||
      PyModule_AddIntConstant(m, "REPLY_MAX_STOP", REACH_REPLY_MAX_STOP) < 0)
    goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
