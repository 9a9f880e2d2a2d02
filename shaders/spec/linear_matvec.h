// linear_matvec.comp: y = W · x per row of X.
#include "linear_matvec_shape.h"
#include "linear_bindings.h"
