/* qhx.h compiles alone as strict C11 (-std=c11 -pedantic -Werror): built, not run. */
#include "qhx.h"

int qhx_header_c_check(void);
int qhx_header_c_check(void) {
    qhx_model_params p = qhx_model_default_params();
    qhx_error err;
    err.code = QHX_OK;
    return (int)p.n_threads + (int)err.code + (int)sizeof(qhx_session_params);
}
