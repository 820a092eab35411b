// What the tests that drive GPT<BK> op by op share (the trainer runs whole steps,
// GPT::train_step): an AdamW step with scalars from the host, and the gradient's norm.
#pragma once
#include <cmath>

#include "model.h"

// One AdamW step of g with the scalars given here (t is 1-based, gscale the clip factor).
// decay_all: every tensor decays, else only matrices.
template <class BK>
void adamw_step(GPT<BK>& g, float lr, double beta1, double beta2, float eps, float wd, bool decay_all, int t,
                float gscale) {
    BK::copy_scalars_from_host(g.scalars, adamw_scalars(lr, beta1, beta2, t, gscale));
    g.adamw({beta1, beta2, eps, wd, decay_all, 0});
}

// The norm of g's gradient buffer (this rank's), on the host (waits for the device).
template <class BK>
double gradient_norm(const GPT<BK>& g) {
    return std::sqrt(BK::sum_squares(g.grads, g.num_params));
}
