/* runtime/backend_cpu.c: the CPU backend: "prefill" and "decode" run the family's forward pass
 * (batched projections + chunked delta rule, or the recurrent decode step), with the lm-head
 * fused into both; the model graphs live in src/models. */
#include "runtime/backend.h"

#include <string.h>

static bool cpu_has_graph(const qhx_model *m, qhx_graph g) {
    (void)m;
    return g == QHX_GRAPH_PREFILL || g == QHX_GRAPH_DECODE;
}

static qhx_status cpu_run(const qhx_model *m, qhx_model_state *st, qhx_graph g, const qhx_graph_io *io,
                          qhx_error *err) {
    if (!cpu_has_graph(m, g)) return qhx_fail(err, QHX_E_UNSUPPORTED, "cpu backend: graph %d is fused, not run alone", (int)g);
    if (g == QHX_GRAPH_DECODE && io->n != 1) return qhx_fail(err, QHX_E_ARG, "decode graph: one token per call, got %lld", (long long)io->n);
    qhx_forward_opts o = {.flags = (io->logits_all ? QHX_FWD_LOGITS_ALL : 0u) | (io->sequential ? QHX_FWD_SEQUENTIAL : 0u),
                          .logits = io->logits, .abort_cb = io->abort_cb, .abort_cb_user = io->abort_user};
    return qhx_model_forward(m, st, io->ids, io->n, &o, err);
}

static const qhx_backend BACKEND_CPU = {"cpu", cpu_has_graph, cpu_run};

qhx_status qhx_backend_find(const char *name, const qhx_backend **out, qhx_error *err) {
    *out = NULL;
    if (!name || !*name || !strcmp(name, "cpu") || !strcmp(name, "-")) {
        *out = &BACKEND_CPU;
        return QHX_OK;
    }
    if (strstr(name, "Qnn") || strstr(name, "qnn") || strstr(name, "QNN"))
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: this build has no QNN backend (docs/backends.md); use cpu", name);
    return qhx_fail(err, QHX_E_UNSUPPORTED, "backend '%s' is not available in this build (available: cpu)", name);
}
