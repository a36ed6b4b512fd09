#pragma once
// The collectives the GPU step issues, over the ranks this process drives. Two implementations:
//   * NcclStepTransport: one rank per GPU through NCCL (Communicator::init_local in one process,
//     or init_from_env with one process per GPU); the optimizer's dedicated communication stream;
//   * LoopbackTransport: a simulated world of W ranks on ONE GPU (like the CPU reference's
//     SimTransport): collectives are device-to-device copies on one stream. Used to run the spec's
//     fixtures at their own world size on a single GPU.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kernels/transport.hpp"

namespace dionsim::kernels {

class StepTransport {
 public:
  virtual ~StepTransport() = default;
  [[nodiscard]] virtual int world() const = 0;
  [[nodiscard]] virtual int local_ranks() const = 0;
  [[nodiscard]] virtual int rank(int local) const = 0;
  [[nodiscard]] virtual int device(int local) const = 0;
  [[nodiscard]] virtual StreamHandle comm_stream(int local) const = 0;
  [[nodiscard]] virtual std::string name() const = 0;
  // send[local] has `count` elements; recv[local] gets world * count (rank-major).
  virtual void all_gather(const std::vector<const void*>& send, const std::vector<void*>& recv, std::size_t count,
                          WireType t) = 0;
  // send[local] = world chunks of `count` elements (chunk d to rank d); recv[local] chunk s from rank s.
  virtual void all_to_all(const std::vector<const void*>& send, const std::vector<void*>& recv, std::size_t count,
                          WireType t) = 0;
};

class NcclStepTransport final : public StepTransport {
 public:
  explicit NcclStepTransport(std::vector<Communicator>& comms) : comms_(comms) {}
  int world() const override { return comms_.front().world(); }
  int local_ranks() const override { return static_cast<int>(comms_.size()); }
  int rank(int local) const override { return comms_[static_cast<std::size_t>(local)].rank(); }
  int device(int local) const override { return comms_[static_cast<std::size_t>(local)].device(); }
  StreamHandle comm_stream(int local) const override { return comms_[static_cast<std::size_t>(local)].stream(); }
  std::string name() const override { return "nccl"; }
  void all_gather(const std::vector<const void*>& send, const std::vector<void*>& recv, std::size_t count,
                  WireType t) override;
  void all_to_all(const std::vector<const void*>& send, const std::vector<void*>& recv, std::size_t count,
                  WireType t) override;

 private:
  std::vector<Communicator>& comms_;
};

class LoopbackTransport final : public StepTransport {
 public:
  LoopbackTransport(int world, int device);
  ~LoopbackTransport() override;
  int world() const override { return world_; }
  int local_ranks() const override { return world_; }
  int rank(int local) const override { return local; }
  int device(int) const override { return device_; }
  StreamHandle comm_stream(int) const override { return stream_; }
  std::string name() const override { return "loopback"; }
  void all_gather(const std::vector<const void*>& send, const std::vector<void*>& recv, std::size_t count,
                  WireType t) override;
  void all_to_all(const std::vector<const void*>& send, const std::vector<void*>& recv, std::size_t count,
                  WireType t) override;

 private:
  int world_, device_;
  StreamHandle stream_ = nullptr;
};

}  // namespace dionsim::kernels
