/* What the extension's files share (_reach.c: the module, Device, Model, Session, Reply; _reach_pool.c:
 * KvPool).  Their non-static names stay inside the module (hidden visibility, meson.build). */
#ifndef REACH_PY_SHARED_H
#define REACH_PY_SHARED_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "reach.h"

typedef struct {
  PyObject_HEAD
  reach_model* model;
  PyObject* device;   /* the DeviceObject: freed after the model */
} ModelObject;

typedef struct {
  PyObject_HEAD
  reach_kv_pool* pool;
  PyObject* model;   /* the ModelObject: freed after the pool (its sessions hold the pool) */
} KvPoolObject;

extern PyTypeObject* ModelType;
extern PyTypeObject* KvPoolType;
extern PyType_Spec KvPool_spec;

/* Raises reach.Error for a failed call; returns NULL. */
PyObject* raise_status(reach_status st);
/* A KV cache type by its command-line name ("f16", "f32", "q8_0", "q4_0"); -1 with ValueError naming `field`. */
int kv_type_of(const char* name, const char* field, int32_t* out);
/* tp_dealloc's tail for the heap types: tp_free, then the type's reference. */
void dealloc_object(PyObject* self);

#endif
