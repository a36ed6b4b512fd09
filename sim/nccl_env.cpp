#include "sim/nccl_env.hpp"

#include <cctype>
#include <cmath>
#include <optional>

#include "common/error.hpp"
#include "common/parse.hpp"

namespace dionsim::sim {

NcclEnv NcclEnv::read(const std::function<std::string(const std::string&)>& value, const std::string& where) {
  NcclEnv env;
  try {
    env.forced = NcclChoice::parse(value("NCCL_ALGO"), value("NCCL_PROTO"), where + ": NCCL_ALGO", where + ": NCCL_PROTO");
  } catch (const UsageError& e) {
    throw InputError(e.what());  // a value from a file, not a flag: a bad input (exit 3)
  }
  // NCCL's integer parameters (param.cc): unset keeps NCCL's default, anything but an integer is
  // no value NCCL would run with.
  const auto integer = [&](const char* var, std::int64_t unset) {
    const std::string v = value(var);
    if (v.empty()) return unset;
    const std::optional<double> n = to_number(v);
    if (!n || *n != std::floor(*n)) throw_bad_input(where, "env", std::string(var) + "=" + v, std::string(var) + " an integer");
    return static_cast<std::int64_t>(*n);
  };
  env.nvls = integer("NCCL_NVLS_ENABLE", 2) != 0;
  env.mnnvl = integer("NCCL_MNNVL_ENABLE", 2) != 0;
  env.pxn = integer("NCCL_PXN_DISABLE", 0) != 1;
  env.tuner_plugin = lower(value("NCCL_TUNER_PLUGIN")) != "none";
  if (const std::string v = value("NCCL_BUFFSIZE"); !v.empty()) {
    const std::optional<double> bytes = to_number(v);
    if (!bytes || *bytes != std::floor(*bytes) || *bytes < 65536 || *bytes > 1073741824) {
      throw_bad_input(where, "env", "NCCL_BUFFSIZE=" + v, "NCCL_BUFFSIZE a number of bytes in [65536, 1073741824]");
    }
    env.buffsize = static_cast<std::int64_t>(*bytes);
  }
  return env;
}

topo::FabricSpec NcclEnv::applied(topo::FabricSpec fabric) const {
  if (!nvls) fabric.nvls_multicast = false;
  if (!mnnvl) fabric.gpus_per_nvlink_domain = fabric.gpus_per_host;  // the tray's NICs reach the others
  if (!tuner_plugin) fabric.tuner_plugin = topo::TunerPlugin::none;
  return fabric;
}

void NcclEnv::apply(ModelOptions& options) const {
  options.simple_buff_bytes = buffsize;
  if (!pxn) options.pxn = false;
}

std::string NcclEnv::key() const {
  return std::string(nvls ? "" : "/no-nvls") + (mnnvl ? "" : "/no-mnnvl") + (tuner_plugin ? "" : "/no-tuner") +
         (pxn ? "" : "/no-pxn") + "/buff" + std::to_string(buffsize);
}

}  // namespace dionsim::sim
