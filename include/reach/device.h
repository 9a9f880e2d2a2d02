/* reach/device.h - Vulkan devices: listing, creating, adopting the host's.
 * Part of the C API: include <reach.h> (this file is included by it and
 * can be included alone). */
#ifndef REACH_DEVICE_H
#define REACH_DEVICE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ devices */

/* Same values as VkPhysicalDeviceType. */
typedef enum reach_device_type {
  REACH_DEVICE_OTHER = 0,
  REACH_DEVICE_INTEGRATED_GPU = 1,
  REACH_DEVICE_DISCRETE_GPU = 2,
  REACH_DEVICE_VIRTUAL_GPU = 3,
  REACH_DEVICE_CPU = 4
} reach_device_type;

typedef struct reach_device_info {
  uint32_t size;              /* set by the caller: sizeof(reach_device_info) */
  uint32_t index;             /* loader order, as reach_device_params.index */
  char name[256];             /* "AMD Radeon RX 7900 XTX", "llvmpipe (LLVM 15.0.6, 256 bits)" */
  char driver[256];           /* driver name and version info */
  int32_t type;               /* reach_device_type */
  uint32_t vendor_id, device_id;
  uint32_t api_version;       /* VK_MAKE_API_VERSION encoding */
  uint64_t vram_bytes;        /* device-local heap bytes */
  int32_t fp16_storage;       /* storageBuffer16BitAccess (f16 weights read natively) */
  int32_t fp16_arithmetic;    /* shaderFloat16 */
  uint32_t subgroup_size;     /* default subgroup size */
  int32_t subgroup_arithmetic;/* subgroup add/max used by reductions */
  uint32_t reserved[16];
} reach_device_info;

/* Number of Vulkan physical devices the loader reports (re-enumerates).  reach links no Vulkan library:
 * it opens the system's loader when first needed (libvulkan.so.1; vulkan-1.dll on Windows;
 * libvulkan.1.dylib, then libMoltenVK.dylib, on macOS) and keeps it open until exit.  Without one,
 * calls that need Vulkan fail with REACH_ERROR_UNSUPPORTED naming the libraries tried. */
REACH_API reach_status reach_device_count(uint32_t* count);
/* Describes device `index` (0 <= index < count); info->size must be set. */
REACH_API reach_status reach_device_get_info(uint32_t index, reach_device_info* info);

typedef struct reach_device_params {
  uint32_t size;
  int32_t index;              /* -1 (default): the best type (discrete > integrated > ... > CPU), or REACH_DEVICE
                                 with use_environment; other negative values are INVALID_ARGUMENT */
  const char* name;           /* case-insensitive substring of the device name; overrides index; NULL = unused */
  int32_t low_priority;       /* 1: lowest queue priority (share the GPU with a renderer) */
  int32_t validation;         /* 1: Khronos validation layer (also REACH_VALIDATION=1 with use_environment); each
                                 message goes to the log (REACH_LOG_WARN / _ERROR, "vulkan: ..."): stderr without
                                 a callback */
  const char* pipeline_cache_dir; /* NULL: no disk cache, or with use_environment REACH_CACHE_DIR, else
                                     $XDG_CACHE_HOME/reach, else ~/.cache/reach; "-" disables the disk cache */
  /* ---- settings from the environment (took reserved[0]: the struct's size and layout are unchanged, and
   * a caller built against an older header passes 0) ---- */
  /* 0 (default): reach reads no environment variable; the device is what these fields say.
   * 1: the REACH_* variables apply as they do to the reach CLI (README, "Environment"): REACH_DEVICE and
   * REACH_VALIDATION (for the fields left at their defaults), REACH_CACHE_DIR (pipeline_cache_dir NULL),
   * REACH_PIPELINE_LOG, the kernel shapes and variants (REACH_MATVEC_*, REACH_GEMM_*, REACH_COOPMAT,
   * REACH_COOPMAT_XSPLIT), REACH_TUNING_FILE (the choices of `reach tune`, which sessions of this device's
   * models then follow; without it they run exact activations) and REACH_VULKAN_LIBRARY (the Vulkan loader
   * to open instead of the system's).  Read once, when the device is made; a value
   * reach does not take is reported to the log (REACH_LOG_WARN) with the reason. */
  int32_t use_environment;
  /* ---- device profile (took reserved[0..]: reserved0 keeps the pointer aligned alike on 32- and 64-bit
   * targets, and reserved shrinks by what the pointer takes, so the struct's size is unchanged; a caller
   * built against an older header passes zeros) ---- */
  uint32_t reserved0;
  /* A Vulkan Profiles JSON file (README, "Device profiles"): the device uses only what both the profile and
   * the real device allow.  NULL: none, or with use_environment REACH_DEVICE_PROFILE.  A file that cannot be
   * read or is malformed fails reach_device_create (REACH_ERROR_IO / REACH_ERROR_FORMAT, naming the key). */
  const char* device_profile;
  uint32_t reserved[(56 - sizeof(const char*)) / 4];
} reach_device_params;

REACH_API reach_device_params reach_device_default_params(void);

/* Creates a Vulkan instance and device owned by reach. */
REACH_API reach_status reach_device_create(const reach_device_params* params, reach_device** out);

/* queue_lock(user, 1) is called before and queue_lock(user, 0) after every
 * use of the adopted VkQueue by reach (vkQueueSubmit, vkQueueWaitIdle), so the
 * host can hold its own queue mutex. */
typedef void (*reach_queue_lock_callback)(void* user, int lock);

typedef struct reach_adopt_params {
  uint32_t size;
  void* instance;             /* VkInstance (Vulkan 1.2+) */
  void* physical_device;      /* VkPhysicalDevice */
  void* device;               /* VkDevice */
  uint32_t queue_family;      /* must support compute */
  void* queue;                /* VkQueue of that family */
  reach_queue_lock_callback queue_lock;  /* NULL: reach serializes only its own submits */
  void* queue_lock_user;
  /* Features the host enabled on its VkDevice (reach cannot query them);
   * kernels needing one that is off fall back to f32. */
  int32_t storage_16bit_enabled;          /* storageBuffer16BitAccess */
  int32_t fp16_arithmetic_enabled;        /* shaderFloat16 */
  int32_t subgroup_size_control_enabled;  /* subgroupSizeControl + computeFullSubgroups */
  const char* pipeline_cache_dir;         /* as in reach_device_params */
  /* 1: the host enabled VK_EXT_debug_utils on its VkInstance; reach then
   * registers a messenger there and sends validation messages to the log as
   * reach_device_params.validation does.  The messenger sees the whole
   * instance, so the host's own validation messages arrive too.  0: reach
   * receives none (the host's own messenger, if any, still does). */
  int32_t debug_utils_enabled;
  /* 1: the host enabled VK_KHR_cooperative_matrix and its cooperativeMatrix
   * feature (and shaderFloat16, vulkanMemoryModel and vulkanMemoryModelDeviceScope: with the memory
   * model on, reach's Device-scope atomics need the latter): prefill GEMMs may then use cooperative
   * matrices (`reach info` lists the variant). */
  int32_t cooperative_matrix_enabled;
  /* ---- settings from the environment (took reserved[0]; size and layout unchanged) ---- */
  /* As reach_device_params.use_environment, without REACH_DEVICE and REACH_VALIDATION (the host chose
   * the device and its layers): 0 (default) reads no environment variable. */
  int32_t use_environment;
  uint32_t reserved[13];
  /* ---- appended after reserved (the struct grew; a caller built against an older header passes a
   * smaller size, and reach reads this field as NULL) ---- */
  /* The host's vkGetInstanceProcAddr (PFN_vkGetInstanceProcAddr cast to void*): the one of its loader,
   * of volk, or of its own dispatch.  reach then takes every instance function from it (for `instance`)
   * and every device function through the vkGetDeviceProcAddr it returns (for `device`), and opens no
   * Vulkan library of its own.  NULL (default): reach opens the system's Vulkan loader (libvulkan.so.1,
   * vulkan-1.dll, libvulkan.1.dylib then libMoltenVK.dylib; REACH_VULKAN_LIBRARY with use_environment),
   * which must be the loader the host's handles came from. */
  void* get_instance_proc_addr;
} reach_adopt_params;

REACH_API reach_adopt_params reach_adopt_default_params(void);

/* Wraps the host's instance / device / queue.  reach never destroys them; free
 * the reach_device (after its models) before destroying the VkDevice.
 * reach_device_free waits for the device to be idle (vkDeviceWaitIdle). */
REACH_API reach_status reach_device_adopt(const reach_adopt_params* params, reach_device** out);

/* The chosen / adopted device's description (info->size must be set). */
REACH_API reach_status reach_device_describe(const reach_device* device, reach_device_info* info);

/* Frees the device (and the VkDevice / VkInstance when reach created them).
 * NULL is a no-op (REACH_OK); INVALID_STATE while models are alive. */
REACH_API reach_status reach_device_free(reach_device* device);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* REACH_DEVICE_H */
