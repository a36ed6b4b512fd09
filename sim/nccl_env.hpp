#pragma once
// The NCCL environment variables that change what the collective model prices, read as NCCL
// reads them — from a published row's env text (validate-collectives) or from the variables an
// NCCL_DEBUG=INFO log reports (calibrate --nccl-tests). One reader, so both take them alike.
#include <cstdint>
#include <functional>
#include <string>

#include "sim/collective_model.hpp"
#include "topologies/topology.hpp"

namespace dionsim::sim {

struct NcclEnv {
  NcclChoice forced;                                   // NCCL_ALGO / NCCL_PROTO
  bool nvls = true;                                    // NCCL_NVLS_ENABLE=0: no NVLS / NVLS Tree (transport/nvls.cc)
  bool mnnvl = true;                                   // NCCL_MNNVL_ENABLE=0: a tray is its own node (init.cc)
  bool tuner_plugin = true;                            // NCCL_TUNER_PLUGIN=none: no tuner plugin (plugin/tuner.cc)
  std::int64_t buffsize = std::int64_t{4} << 20;       // NCCL_BUFFSIZE: Simple's buffer
  bool pxn = true;                                     // NCCL_PXN_DISABLE=1: all-to-all out of the sender's NIC

  // `value(VAR)` is the variable's value, empty when unset. InputError naming `where` and the
  // variable for a value NCCL could not run with (an algorithm NCCL_ALGO cannot name, an integer
  // parameter that is no integer, a NCCL_BUFFSIZE that is no byte count in [64 KiB, 1 GiB]).
  [[nodiscard]] static NcclEnv read(const std::function<std::string(const std::string&)>& value,
                                    const std::string& where);
  // The fabric as this NCCL sees it (NVLS, the NVLink domain, the tuner plugin), and the model's
  // options (the Simple buffer, PXN).
  [[nodiscard]] topo::FabricSpec applied(topo::FabricSpec fabric) const;
  void apply(ModelOptions& options) const;
  // Equal for two environments whose fabric and options are alike (a model cache's key part;
  // `forced` is an argument of each call, not of the model).
  [[nodiscard]] std::string key() const;
};

}  // namespace dionsim::sim
