/* reach._reach.KvPool: a paged KV cache that Sessions of one Model share (reach_kv_pool_*, reach.h). */
#include "_reach_shared.h"

#include <string.h>

static int KvPool_init(KvPoolObject* self, PyObject* args, PyObject* kw) {
  static char* names[] = {"model", "tokens", "bytes", "block_rows", "cache_type_k", "cache_type_v", "rotated_keys", NULL};
  reach_kv_pool_params p = reach_kv_pool_default_params();
  PyObject* model;
  unsigned int tokens = 0, block_rows = 0;
  unsigned long long bytes = 0;
  const char *cache_k = NULL, *cache_v = NULL;
  int rotated = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|$IKIzzp", names, ModelType, &model, &tokens, &bytes, &block_rows,
                                   &cache_k, &cache_v, &rotated))
    return -1;
  if ((cache_k && kv_type_of(cache_k, "cache_type_k", &p.cache_type_k) < 0) ||
      (cache_v && kv_type_of(cache_v, "cache_type_v", &p.cache_type_v) < 0))
    return -1;
  if (self->pool) {
    PyErr_SetString(PyExc_RuntimeError, "reach.KvPool: already initialised");
    return -1;
  }
  p.tokens = tokens;
  p.bytes = bytes;
  p.block_rows = block_rows;
  p.rotated_keys = rotated;
  reach_status st;
  reach_model* m = ((ModelObject*)model)->model;
  Py_BEGIN_ALLOW_THREADS st = reach_kv_pool_create(m, &p, &self->pool);
  Py_END_ALLOW_THREADS if (st != REACH_OK) {
    raise_status(st);
    return -1;
  }
  Py_INCREF(model);
  self->model = model;
  return 0;
}

/* Runs only once no Session holds the pool (each keeps a reference), so the free cannot be refused. */
static void KvPool_dealloc(KvPoolObject* self) {
  if (self->pool) {
    Py_BEGIN_ALLOW_THREADS reach_kv_pool_free(self->pool);
    Py_END_ALLOW_THREADS
  }
  Py_XDECREF(self->model);
  dealloc_object((PyObject*)self);
}

static PyObject* KvPool_info(KvPoolObject* self, PyObject* unused) {
  reach_kv_pool_info i;
  memset(&i, 0, sizeof i);
  i.size = sizeof i;
  reach_status st = reach_kv_pool_get_info(self->pool, &i);
  if (st != REACH_OK) return raise_status(st);
  return Py_BuildValue("{s:I,s:I,s:I,s:I,s:I,s:K,s:K,s:K,s:K}", "block_rows", i.block_rows, "blocks", i.blocks,
                       "blocks_used", i.blocks_used, "blocks_cached", i.blocks_cached, "sessions", i.sessions,
                       "bytes", (unsigned long long)i.bytes, "bytes_per_token", (unsigned long long)i.bytes_per_token,
                       "prefix_hits", (unsigned long long)i.prefix_hits, "prefix_hit_tokens",
                       (unsigned long long)i.prefix_hit_tokens);
}

static PyMethodDef KvPool_methods[] = {
    {"info", (PyCFunction)KvPool_info, METH_NOARGS, "reach_kv_pool_get_info, as a dict."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot KvPool_slots[] = {{Py_tp_init, KvPool_init},
                                     {Py_tp_dealloc, KvPool_dealloc},
                                     {Py_tp_methods, KvPool_methods},
                                     {Py_tp_doc, "A KV cache Sessions of one Model share (reach_kv_pool_create)."},
                                     {0, NULL}};
PyType_Spec KvPool_spec = {"reach._reach.KvPool", sizeof(KvPoolObject), 0, Py_TPFLAGS_DEFAULT, KvPool_slots};
