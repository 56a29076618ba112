/*
 * inference_session.cpp (C++17) - a preallocated inference session the way
 * CANN services are written: pinned host buffers and device buffers are
 * allocated once; every request is a chain of async operations on one stream
 *     H2D input -> "compute" (output = bias + input via aclrtReduceAsync)
 *     -> D2H output -> event -> host callback
 * with double-buffered host memory guarded by events, and the host callback
 * (aclrtLaunchCallback) served by a report thread subscribed to the stream
 * (aclrtSubscribeReport + aclrtProcessReport loop). The callback verifies the
 * result of its request.
 *
 * Written against the public AscendCL headers only.
 */
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"

#define CHECK(expr)                                                                                     \
    do {                                                                                                \
        aclError check_rc_ = (expr);                                                                    \
        if (check_rc_ != ACL_SUCCESS) {                                                                 \
            const char *check_msg_ = aclGetRecentErrMsg();                                              \
            throw std::runtime_error(std::string(#expr) + " failed with " + std::to_string(check_rc_) + \
                                     ": " + (check_msg_ != nullptr ? check_msg_ : "(no message)"));     \
        }                                                                                               \
    } while (0)

namespace {

constexpr size_t kElems = 16 * 1024;
constexpr size_t kBytes = kElems * sizeof(float);
constexpr int kRequests = 64;
constexpr int kSlots = 2;

float input_value(int request, size_t i) { return static_cast<float>(request) * 0.5f + static_cast<float>(i % 97); }
float bias_value(size_t i) { return static_cast<float>(i % 13) - 6.0f; }

struct Request {
    int id = 0;
    const float *host_out = nullptr;
    std::atomic<int> *verified = nullptr;
    std::atomic<int> *errors = nullptr;
};

void on_request_done(void *user_data)
{
    auto *req = static_cast<Request *>(user_data);
    int bad = 0;
    for (size_t i = 0; i < kElems; ++i) {
        float want = input_value(req->id, i) + bias_value(i);
        if (req->host_out[i] != want) {
            if (bad++ == 0) {
                std::fprintf(stderr, "request %d element %zu: got %g want %g\n", req->id, i,
                             static_cast<double>(req->host_out[i]), static_cast<double>(want));
            }
        }
    }
    if (bad != 0) {
        req->errors->fetch_add(1);
    } else {
        req->verified->fetch_add(1);
    }
}

class Session {
public:
    explicit Session(int32_t device) : device_(device)
    {
        CHECK(aclrtSetDevice(device_));
        CHECK(aclrtGetCurrentContext(&context_));
        CHECK(aclrtCreateStream(&stream_));
        for (int s = 0; s < kSlots; ++s) {
            CHECK(aclrtMallocHost(&host_in_[s], kBytes));
            CHECK(aclrtMallocHost(&host_out_[s], kBytes));
            CHECK(aclrtCreateEventWithFlag(&slot_free_[s], ACL_EVENT_SYNC));
        }
        CHECK(aclrtMalloc(&dev_in_, kBytes, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMalloc(&dev_bias_, kBytes, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMalloc(&dev_out_, kBytes, ACL_MEM_MALLOC_HUGE_FIRST));
        std::vector<float> bias(kElems);
        for (size_t i = 0; i < kElems; ++i) {
            bias[i] = bias_value(i);
        }
        CHECK(aclrtMemcpy(dev_bias_, kBytes, bias.data(), kBytes, ACL_MEMCPY_HOST_TO_DEVICE));

        reporter_ = std::thread([this] { report_loop(); });
        CHECK(aclrtSubscribeReport(static_cast<uint64_t>(reporter_.native_handle()), stream_));
    }

    Session(const Session &) = delete;
    Session &operator=(const Session &) = delete;

    ~Session()
    {
        (void)aclrtSynchronizeStream(stream_);
        (void)aclrtUnSubscribeReport(static_cast<uint64_t>(reporter_.native_handle()), stream_);
        stop_.store(true);
        reporter_.join();
        (void)aclrtFree(dev_in_);
        (void)aclrtFree(dev_bias_);
        (void)aclrtFree(dev_out_);
        for (int s = 0; s < kSlots; ++s) {
            (void)aclrtFreeHost(host_in_[s]);
            (void)aclrtFreeHost(host_out_[s]);
            (void)aclrtDestroyEvent(slot_free_[s]);
        }
        (void)aclrtDestroyStream(stream_);
        (void)aclrtResetDevice(device_);
    }

    void submit(Request &req)
    {
        const int slot = req.id % kSlots;
        if (req.id >= kSlots) {
            /* the previous request using this slot must have finished with its buffers */
            CHECK(aclrtSynchronizeEvent(slot_free_[slot]));
        }
        auto *in = static_cast<float *>(host_in_[slot]);
        for (size_t i = 0; i < kElems; ++i) {
            in[i] = input_value(req.id, i);
        }
        req.host_out = static_cast<const float *>(host_out_[slot]);
        CHECK(aclrtMemcpyAsync(dev_in_, kBytes, in, kBytes, ACL_MEMCPY_HOST_TO_DEVICE, stream_));
        CHECK(aclrtMemcpyAsync(dev_out_, kBytes, dev_bias_, kBytes, ACL_MEMCPY_DEVICE_TO_DEVICE, stream_));
        CHECK(aclrtReduceAsync(dev_out_, dev_in_, kBytes, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, stream_,
                               nullptr));
        CHECK(aclrtMemcpyAsync(host_out_[slot], kBytes, dev_out_, kBytes, ACL_MEMCPY_DEVICE_TO_HOST, stream_));
        /* blocking callback: the stream waits until the result has been checked */
        CHECK(aclrtLaunchCallback(on_request_done, &req, ACL_CALLBACK_BLOCK, stream_));
        CHECK(aclrtRecordEvent(slot_free_[slot], stream_));
    }

    void drain() { CHECK(aclrtSynchronizeStream(stream_)); }

private:
    void report_loop()
    {
        if (aclrtSetCurrentContext(context_) != ACL_SUCCESS) {
            std::fprintf(stderr, "report thread: cannot set context\n");
            return;
        }
        while (!stop_.load()) {
            aclError rc = aclrtProcessReport(100);
            if (rc == ACL_ERROR_RT_THREAD_SUBSCRIBE) {
                /* not subscribed yet (or any more): do not spin */
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            } else if (rc != ACL_SUCCESS && rc != ACL_ERROR_RT_REPORT_TIMEOUT) {
                std::fprintf(stderr, "aclrtProcessReport: %d\n", rc);
            }
        }
    }

    int32_t device_;
    aclrtContext context_ = nullptr;
    aclrtStream stream_ = nullptr;
    std::array<void *, kSlots> host_in_{};
    std::array<void *, kSlots> host_out_{};
    std::array<aclrtEvent, kSlots> slot_free_{};
    void *dev_in_ = nullptr;
    void *dev_bias_ = nullptr;
    void *dev_out_ = nullptr;
    std::atomic<bool> stop_{false};
    std::thread reporter_;
};

} // namespace

int main()
{
    try {
        CHECK(aclInit(nullptr));
        std::atomic<int> verified{0};
        std::atomic<int> errors{0};
        std::vector<Request> requests(kRequests);
        {
            Session session(0);
            for (int r = 0; r < kRequests; ++r) {
                requests[r].id = r;
                requests[r].verified = &verified;
                requests[r].errors = &errors;
                session.submit(requests[r]);
            }
            session.drain();
        }
        CHECK(aclFinalize());
        if (verified.load() != kRequests || errors.load() != 0) {
            std::fprintf(stderr, "verified %d of %d requests, %d wrong\n", verified.load(), kRequests,
                         errors.load());
            return 1;
        }
        std::printf("inference_session: %d requests of %zu floats verified in host callbacks\n", kRequests, kElems);
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "inference_session: %s\n", e.what());
        return 1;
    }
}
