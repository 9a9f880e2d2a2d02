// Linked into the test programs of sanitizer builds only (tests/meson.build).
// LeakSanitizer checks at exit, after vkDestroyInstance has made the Vulkan
// loader unload the driver and the validation layer: allocations those
// libraries keep for the process lifetime would then show as "<unknown module>"
// and slip past the library-name suppressions of tests/lsan.supp.  So nothing
// is unloaded: this definition takes the place of libc's dlclose for every
// library in the process (the usual advice for LeakSanitizer with plugins).
int dlclose(void* handle);

int dlclose(void* handle) {
  (void)handle;
  return 0;
}
