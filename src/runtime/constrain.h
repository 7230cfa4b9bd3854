/* runtime/constrain.h: grammar constraints over a model's vocabulary (qhx.h, "Constrained
 * output"), for the generate loop. */
#ifndef QHX_RUNTIME_CONSTRAIN_H
#define QHX_RUNTIME_CONSTRAIN_H

#include "runtime/sample.h"

/* The next token from logits under c with sampler smp. -1: error (err set: non-finite logits,
 * a grammar cap); -2: nothing can come next. allow_end: end tokens may be picked. */
qhx_token qhx_constraint_sample(qhx_constraint *c, qhx_sampler *smp, const float *logits, int allow_end,
                                qhx_error *err);

#endif
