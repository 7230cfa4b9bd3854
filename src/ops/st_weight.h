/* ops/st_weight: view a stored matrix, plain or quantized, as a qhx_weight for the kernels.
 *
 * How a quantized matrix is stored (docs/formats.md, "Naming"): the matrix keeps its checkpoint
 * name, and its scales sit beside it under "<name>.qscale":
 *   F32 / F16 / BF16  <name> [rows, cols]                                   plain
 *   Q8                <name> I8 [rows, cols]     + <name>.qscale F32 [rows]
 *   Q4                <name> U8 [rows, cols/2]   + <name>.qscale F16 [rows, cols/group]
 *   Q6                <name> U8 [rows, cols/2]   + <name>.qscale F16 [rows, cols/group]
 *                                                + <name>.qhigh U8 [rows, cols/4]
 *   Q4A               <name> U8 [rows, cols/2]   + <name>.qsuper F16 [rows, ceil(cols/256)]
 *                                                + <name>.qsub U8 [rows, cols/16]
 *   (no ".qscale": readers older than Q4A refuse such a matrix for the missing tensor)
 * (".qmin" is reserved for a zero-point variant and refused here.) The dtype of <name> says
 * which: I8 means Q8, U8 means Q4, Q6 when "<name>.qhigh" exists, Q4A when "<name>.qsub" exists.
 * Tensors whose names end in ".qscale"/".qhigh"/".qmin"/".qsuper"/".qsub" are never weights of
 * their own. */
#ifndef QHX_OPS_ST_WEIGHT_H
#define QHX_OPS_ST_WEIGHT_H

#include "io/safetensors.h"
#include "kernels/kernels.h"

#define QHX_QSCALE_SUFFIX ".qscale"
#define QHX_QMIN_SUFFIX ".qmin"
#define QHX_QHIGH_SUFFIX ".qhigh"
#define QHX_QSUPER_SUFFIX ".qsuper"
#define QHX_QSUB_SUFFIX ".qsub"

/* Fill *out with a view of matrix `name` (pointers into the set's mapping, valid while the set
 * lives). rows / cols: expected logical shape, -1 = any. Fails, naming the tensor and file,
 * when the tensor or its scales are missing, mistyped or misshapen, when a pointer would not be
 * aligned to its element size (QHX_E_UNSUPPORTED: copy the tensor to aligned memory instead), or
 * when the scales hold a NaN or an infinity. */
qhx_status qhx_st_get_weight(const qhx_st_set *set, const char *name, int64_t rows, int64_t cols,
                             qhx_weight *out /* OUT */, qhx_error *err);

/* Whether a tensor name is a quantization side tensor (".qscale" / ".qhigh" / ".qmin" / ".qsuper" /
 * ".qsub" suffix). */
int qhx_st_is_side_tensor(const char *name);

#endif
