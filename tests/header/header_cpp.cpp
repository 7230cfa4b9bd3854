// qhx.h compiles alone as C++ (extern "C", no C-only constructs): built, not run.
#include "qhx.h"

int qhx_header_cpp_check();
int qhx_header_cpp_check() {
    qhx_model_params p = qhx_model_default_params();
    qhx_generate_params g = {};
    g.max_tokens = 1;
    return p.n_threads + static_cast<int>(g.max_tokens) + static_cast<int>(QHX_STOP_TOKEN);
}
