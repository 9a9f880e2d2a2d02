// A lost device and a failed allocation, made on purpose with the fault hook (engine/fault_injection.hpp)
// on devices of their own (a lost device stays lost; the shared fixture must not be): the Nth submission,
// wait or allocation fails, the device then refuses every later submission and wait without calling
// Vulkan, and everything made on it is destroyed cleanly (this suite runs under ASan/LSan too).
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/command.hpp"
#include "engine/device.hpp"
#include "engine/memory.hpp"
#include "runtime/session/generation.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;

namespace {

std::unique_ptr<Device> fresh_device() {
  DeviceOptions opt;
  opt.validation = test::validation_wanted();
  opt.on_validation = test::on_validation_message;
  opt.pipeline_cache_dir = "-";
  return Device::create(opt);
}

// A list that fills `b` with `word`, recorded once.
void record_fill(CommandList& cl, const Buffer& b, uint32_t word) {
  cl.begin();
  cl.fill(b.range(), word);
  cl.end();
}

}  // namespace

TEST_CASE("device lost: the Nth submission fails, then every submission and wait throws without Vulkan") {
  auto dev = fresh_device();
  {
    Allocator alloc(*dev);
    Buffer b = alloc.allocate(Arena::readback, 256, "fill");
    CommandList cl(*dev);
    record_fill(cl, b, 7);
    dev->faults().arm(FaultPoint::submit, 2, VK_ERROR_DEVICE_LOST);
    cl.run();   // the first submission runs
    CHECK(static_cast<const uint32_t*>(b.mapped())[63] == 7);
    CHECK_FALSE(dev->lost());
    const std::string msg = test::error_of([&] { cl.run(); }, ErrorCode::device_lost);
    CHECK_HAS(msg, "vkQueueSubmit");
    CHECK_HAS(msg, "load the model again");
    CHECK(dev->lost());
    CHECK_FALSE(cl.pending());
    const uint64_t submits = dev->faults().calls(FaultPoint::submit);
    CHECK(submits == 2);
    // Later calls throw the same error, and the submission hook (before vkQueueSubmit) is not reached.
    CHECK_HAS(test::error_of([&] { cl.run(); }, ErrorCode::device_lost), "vkQueueSubmit");
    CHECK_HAS(test::error_of([&] { dev->wait_idle(); }, ErrorCode::device_lost), "vkQueueSubmit");
    CHECK(dev->faults().calls(FaultPoint::submit) == submits);
    // An allocation on a lost device is refused as well.
    test::error_of([&] { alloc.allocate(Arena::weights, 1 << 20, "after"); }, ErrorCode::device_lost);
  }
  dev.reset();   // destroying the lists, buffers and device of a lost device neither throws nor leaks
}

TEST_CASE("device lost: a failed fence wait ends the submission; a list still in flight is waited for on destruction") {
  auto dev = fresh_device();
  Allocator alloc(*dev);
  Buffer a = alloc.allocate(Arena::readback, 256, "a");
  Buffer b = alloc.allocate(Arena::readback, 256, "b");
  auto first = std::make_unique<CommandList>(*dev);
  CommandList second(*dev);
  record_fill(*first, a, 1);
  record_fill(second, b, 2);
  first->submit();   // in flight when the device is lost
  CHECK(first->pending());
  dev->faults().arm(FaultPoint::wait, 1, VK_ERROR_DEVICE_LOST);
  second.submit();
  CHECK_HAS(test::error_of([&] { second.wait(); }, ErrorCode::device_lost), "vkWaitForFences");
  CHECK(dev->lost());
  CHECK_FALSE(second.pending());
  // The first list's wait is refused (the device is lost) but the submission stays pending, so that its
  // destructor waits for the real work before its command buffer and descriptor sets go.
  test::error_of([&] { first->wait(); }, ErrorCode::device_lost);
  test::error_of([&] { first->poll(); }, ErrorCode::device_lost);
  CHECK(first->pending());
  first.reset();
}

TEST_CASE("allocation faults: out of memory is an error naming the buffer; device lost marks the device") {
  auto dev = fresh_device();
  Allocator alloc(*dev);
  dev->faults().arm(FaultPoint::alloc, 1, VK_ERROR_OUT_OF_DEVICE_MEMORY);
  const std::string msg =
      test::error_of([&] { alloc.allocate(Arena::weights, 1 << 20, "layer.0.wq"); }, ErrorCode::out_of_memory);
  CHECK_HAS(msg, "layer.0.wq");
  CHECK_HAS(msg, "smaller");
  CHECK_FALSE(dev->lost());   // out of memory is not a lost device: the next allocation works
  Buffer ok = alloc.allocate(Arena::weights, 1 << 20, "layer.0.wk");
  CHECK(bool(ok));
  dev->faults().arm(FaultPoint::alloc, 1, VK_ERROR_DEVICE_LOST);
  CHECK_HAS(test::error_of([&] { alloc.allocate(Arena::cache, 1 << 20, "kv"); }, ErrorCode::device_lost),
            "vkAllocateMemory");
  CHECK(dev->lost());
  CHECK(alloc.stats(Arena::cache).blocks == 0);   // nothing half-made is kept
}

TEST_CASE("REACH_FAULT arms the first device of the process only") {
  Settings s;
  s.fault = {"submit", 3, "device_lost"};
  FaultInjector a, b;
  a.arm_from(s.fault);
  b.arm_from(s.fault);   // a second device (the server's rebuilt one) runs clean
  CHECK(a.next(FaultPoint::submit) == VK_SUCCESS);
  CHECK(a.next(FaultPoint::wait) == VK_SUCCESS);
  CHECK(a.next(FaultPoint::submit) == VK_SUCCESS);
  CHECK(a.next(FaultPoint::submit) == VK_ERROR_DEVICE_LOST);
  CHECK(a.next(FaultPoint::submit) == VK_SUCCESS);   // one fault, then disarmed
  for (int i = 0; i < 5; ++i) CHECK(b.next(FaultPoint::submit) == VK_SUCCESS);
}

TEST_CASE("device lost mid-generation: the session throws device_lost; a new device generates the same tokens") {
  const auto dir = test::tiny_model("");
  const std::vector<int32_t> prompt = {1, 5, 9, 14, 3};
  GenerationOptions go;
  go.session.context = 32;
  go.sampling.temperature = 0;
  auto greedy = [&](Generation& gen, int n) {
    gen.session().prefill(prompt);
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(gen.next().id);
      gen.session().decode(out.back());
    }
    return out;
  };
  auto load = [&](Device& d, Allocator& a) {
    return Model::load(d, a, dir, LoadOptions{});
  };
  std::vector<int32_t> before;
  {
    auto dev = fresh_device();
    Allocator alloc(*dev);
    auto model = load(*dev, alloc);
    Generation gen(*model, go);
    before = greedy(gen, 6);
    gen.restart(go.sampling, {});
    // A few submissions into the prefill and decodes of the second run.
    dev->faults().arm(FaultPoint::submit, 3, VK_ERROR_DEVICE_LOST);
    test::error_of([&] { greedy(gen, 6); }, ErrorCode::device_lost);
    CHECK(dev->lost());
    test::error_of([&] { gen.session().decode(before[0]); }, ErrorCode::device_lost);
    // Destroyed in the usual order: the generation, the model, the allocator, the device.
  }
  auto dev = fresh_device();
  Allocator alloc(*dev);
  auto model = load(*dev, alloc);
  Generation gen(*model, go);
  CHECK(greedy(gen, 6) == before);
}
