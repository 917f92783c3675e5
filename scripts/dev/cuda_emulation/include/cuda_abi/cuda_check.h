#pragma once
// Launches cannot fail in the host emulation (run.sh).
#define TRAINCTL_CUDA_CHECK_LAUNCH(kernel) static_cast<void>(0)
