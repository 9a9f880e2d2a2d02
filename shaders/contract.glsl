// Turns the contract lists of shaders/spec/*.h into GLSL declarations (the host
// turns the same lists into typed structs: kernels/spec.hpp).
#define SPEC_WG(cpp) layout(local_size_x_id = 0) in;
#define SPEC_UINT(id, NAME, cpp, def) layout(constant_id = id) const uint NAME = def;
#define SPEC_BOOL(id, NAME, cpp, def) layout(constant_id = id) const bool NAME = def;
#define PUSH_UINT(name) uint name;
#define PUSH_INT(name) int name;
#define PUSH_FLOAT(name) float name;
#define BINDING(n, NAME) const uint B_##NAME = n;
#define CONST_UINT(NAME, value) const uint NAME = value;
