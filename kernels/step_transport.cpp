#include "kernels/step_transport.hpp"

namespace dionsim::kernels {

void NcclStepTransport::all_gather(const std::vector<const void*>& send, const std::vector<void*>& recv,
                                   std::size_t count, WireType t) {
  GroupGuard group;  // one process driving several GPUs issues all ranks' calls in one group
  for (std::size_t i = 0; i < comms_.size(); ++i) comms_[i].all_gather(send[i], recv[i], count, t);
}
void NcclStepTransport::all_to_all(const std::vector<const void*>& send, const std::vector<void*>& recv,
                                   std::size_t count, WireType t) {
  GroupGuard group;
  for (std::size_t i = 0; i < comms_.size(); ++i) comms_[i].all_to_all(send[i], recv[i], count, t);
}

LoopbackTransport::LoopbackTransport(int world, int device) : world_(world), device_(device) {
  require_devices(device + 1);
  set_device(device);
  stream_ = create_stream();
}
LoopbackTransport::~LoopbackTransport() { destroy_stream(stream_); }

void LoopbackTransport::all_gather(const std::vector<const void*>& send, const std::vector<void*>& recv,
                                   std::size_t count, WireType t) {
  const std::size_t bytes = count * wire_bytes(t);
  for (int r = 0; r < world_; ++r)
    for (int s = 0; s < world_; ++s)
      copy_device(static_cast<char*>(recv[static_cast<std::size_t>(r)]) + static_cast<std::size_t>(s) * bytes,
                  send[static_cast<std::size_t>(s)], bytes, stream_);
}
void LoopbackTransport::all_to_all(const std::vector<const void*>& send, const std::vector<void*>& recv,
                                   std::size_t count, WireType t) {
  const std::size_t bytes = count * wire_bytes(t);
  for (int d = 0; d < world_; ++d)
    for (int s = 0; s < world_; ++s)
      copy_device(static_cast<char*>(recv[static_cast<std::size_t>(d)]) + static_cast<std::size_t>(s) * bytes,
                  static_cast<const char*>(send[static_cast<std::size_t>(s)]) + static_cast<std::size_t>(d) * bytes,
                  bytes, stream_);
}

}  // namespace dionsim::kernels
