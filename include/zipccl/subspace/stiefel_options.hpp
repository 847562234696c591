// zipccl: the settings of the Stiefel optimizer, shared by the host (stiefel.hpp) and the device
// (cuda/stiefel.cuh) executors.
#pragma once

namespace zipccl::subspace {

enum class retraction { polar, qr };

struct stiefel_options {
  double lr = 1e-2;
  double momentum = 0.9;
  retraction retract = retraction::polar;
  int direction_iters = 30;  // Newton-Schulz iterations for the step direction's polar factor
  // The device optimizer (cuda/stiefel.cuh) runs this many Newton-Schulz iterations for the polar
  // retraction (it does not stop the stream to test convergence; the host stops at 2e-6 in fp32).
  // A step moves A off the manifold by O(lr^2), and each iteration squares that distance.
  int retract_iters = 5;
};

}  // namespace zipccl::subspace
