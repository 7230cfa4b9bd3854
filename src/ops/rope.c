/* ops/rope.c: rotary tables (ops/rope.h). */
#include "ops/rope.h"

#include <math.h>

void qhx_rope_inv_freq(double theta, int64_t rot, float *inv_freq) {
    for (int64_t j = 0; j < rot / 2; j++) inv_freq[j] = 1.0f / powf((float)theta, (float)(2 * j) / (float)rot);
}

void qhx_rope_mrope_axes(const int64_t section[3], bool interleaved, int64_t half, unsigned char *axis) {
    for (int64_t j = 0; j < half; j++) {
        if (interleaved)
            axis[j] = j % 3 == 1 && j < 3 * section[1] ? 1 : j % 3 == 2 && j < 3 * section[2] ? 2 : 0;
        else
            axis[j] = j < section[0] ? 0 : j < section[0] + section[1] ? 1 : 2;
    }
}

void qhx_rope_angles(const int64_t pos[3], const unsigned char *axis, const float *inv_freq, int64_t half,
                     float *cos_out, float *sin_out) {
    for (int64_t j = 0; j < half; j++) {
        float a = (float)pos[axis ? axis[j] : 0] * inv_freq[j];
        cos_out[j] = cosf(a);
        sin_out[j] = sinf(a);
    }
}
