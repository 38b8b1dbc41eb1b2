// Smallest program on an installed megatron_cpp: who am I, log it, and touch LibTorch.
#include <ATen/ops/ones.h>
#include <megatron/comm/launcher_env.h>
#include <megatron/logging.h>
#include <megatron/version.h>

#include <exception>
#include <iostream>
#include <string>

int main() {
  try {
    auto env = megatron::comm::LauncherEnv::from_environment();
    megatron::init_logging({env.rank, env.world_size, ""});
    megatron::log_info(std::string("megatron_cpp ") + MEGATRON_CPP_VERSION + " on torch " + MEGATRON_CPP_TORCH_VERSION +
                       ", launcher: " + to_string(env.launcher));
    auto total = at::ones({3, 4}).sum().item<float>();
    megatron::log_info("sum of ones(3, 4) = " + std::to_string(static_cast<int>(total)));
  } catch (const std::exception& e) {
    std::cerr << "downstream: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
