#pragma once
// Device discovery, device memory and streams behind a plain C++ interface (no CUDA headers here:
// the optimizer and the CLI include this without nvcc). Every CUDA/NCCL/cuBLASLt failure becomes a
// dionsim::DeviceError whose message names the call, the rank and the operation.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dionsim::kernels {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  int multiprocessors = 0;
  std::size_t memory_bytes = 0;
};

// All visible CUDA devices; empty when there is no driver or no device (never throws for that).
std::vector<DeviceInfo> list_devices();
// Throws NoDeviceError ("no CUDA device: ...") when fewer than `count` devices are visible.
std::vector<DeviceInfo> require_devices(int count);

// The rank the current thread works for; it is named in every DeviceError (-1 = not set).
void set_error_rank(int rank);
int error_rank();

// Opaque stream / event handles (cudaStream_t / cudaEvent_t underneath).
using StreamHandle = void*;

void set_device(int device);
StreamHandle create_stream();
// A non-blocking stream with the given priority: 0 = default, > 0 = the device's highest
// (scheduled first when both have blocks ready), < 0 = its lowest.
StreamHandle create_stream(int priority);
void destroy_stream(StreamHandle s);
void synchronize(StreamHandle s);  // host waits for the stream (tests and benchmarks only)
void device_synchronize();

void* device_alloc(std::size_t bytes, const char* what);
void device_free(void* p) noexcept;
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);
void memset_device(void* dst, int value, std::size_t bytes, StreamHandle s);
void copy_device(void* dst, const void* src, std::size_t bytes, StreamHandle s);

// Owning device array of trivially copyable T (element count fixed at construction).
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t n, const char* what = "DeviceArray")
      : n_(n), p_(static_cast<T*>(device_alloc(n * sizeof(T), what))) {}
  explicit DeviceArray(const std::vector<T>& host, const char* what = "DeviceArray") : DeviceArray(host.size(), what) {
    upload(host);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept : n_(o.n_), p_(o.p_) { o.n_ = 0; o.p_ = nullptr; }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) { device_free(p_); n_ = o.n_; p_ = o.p_; o.n_ = 0; o.p_ = nullptr; }
    return *this;
  }
  ~DeviceArray() { device_free(p_); }

  void upload(const std::vector<T>& host) { copy_to_device(p_, host.data(), std::min(host.size(), n_) * sizeof(T)); }
  [[nodiscard]] std::vector<T> download() const {
    std::vector<T> host(n_);
    copy_to_host(host.data(), p_, n_ * sizeof(T));
    return host;
  }
  T* data() { return p_; }
  const T* data() const { return p_; }
  [[nodiscard]] std::size_t size() const { return n_; }
  [[nodiscard]] std::size_t bytes() const { return n_ * sizeof(T); }

 private:
  std::size_t n_ = 0;
  T* p_ = nullptr;
};

// CUDA-event stopwatch on a stream: start(), stop(), then elapsed_ms() (which synchronizes on the
// stop event; call it only after the timed region has been issued).
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start(StreamHandle s);
  void stop(StreamHandle s);
  [[nodiscard]] float elapsed_ms() const;

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

// A timing-free event for cross-stream ordering: record() on one stream, then wait() makes another
// stream wait for the work recorded (device-side, no host block).
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(StreamHandle s);
  void wait(StreamHandle s) const;

 private:
  void* event_ = nullptr;
};

// Records timing events on a stream and reports elapsed times between consecutive marks after the
// work has finished (the reads synchronize; issue everything first).
class TimingEvent {
 public:
  TimingEvent();
  ~TimingEvent();
  TimingEvent(const TimingEvent&) = delete;
  TimingEvent& operator=(const TimingEvent&) = delete;
  void record(StreamHandle s);
  [[nodiscard]] float ms_since(const TimingEvent& earlier) const;

 private:
  void* event_ = nullptr;
};

// A CUDA graph of the work issued on one stream between begin_capture() and end_capture()
// (cudaStreamCaptureModeThreadLocal: work forked to other streams through events is captured
// too, and must join back). Capturing runs nothing; launch() replays the whole graph on a stream
// with one API call. A new capture replaces the old graph.
class StreamGraph {
 public:
  StreamGraph() = default;
  ~StreamGraph();
  StreamGraph(const StreamGraph&) = delete;
  StreamGraph& operator=(const StreamGraph&) = delete;
  void begin_capture(StreamHandle s);
  void end_capture(StreamHandle s);   // instantiates the graph
  void launch(StreamHandle s) const;  // asynchronous
  [[nodiscard]] bool ready() const { return exec_ != nullptr; }
  [[nodiscard]] std::size_t nodes() const { return nodes_; }

 private:
  void reset() noexcept;
  void* graph_ = nullptr;
  void* exec_ = nullptr;
  std::size_t nodes_ = 0;
};

}  // namespace dionsim::kernels
