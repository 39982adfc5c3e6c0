/* Chips on a real CUDA device (label "gpu"). Without a device the whole
 * executable exits 77, which ctest reports as SKIPPED, never as passed.
 *
 * The kernels are host functions that use the driver API in the chip
 * process (the test itself never initializes CUDA: its device probe runs
 * in a forked child), on the chip's stream from strata_chip_cuda_stream;
 * device code comes as PTX (gpu_ptx.h). Checked: work on the stream
 * completes before the task does; the chip waits for it asleep; a fault on
 * the device fails the task with the CUDA error; two chips share one GPU;
 * an ordinal out of range fails strata_worker_init with STRATA_EINVAL. */
#include "fdpass.h"
#include "gpu_ptx.h"
#include "testutil.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <strata/cuda.h>
#include <strata/strata.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define EXIT_SKIPPED 77
#define SPIN_NS 1000000000ull /* the device-side wait: 1 s */

static int device_count; /* from the probe */

/* ---------------------------------------------------------------- */
/* The driver API, in chip processes                                 */
/* ---------------------------------------------------------------- */

#define STR2(x) #x
#define STR(x) STR2(x)
#define GPU_FNS(X)                                                             \
    X(cuInit)                                                                  \
    X(cuDeviceGetCount)                                                        \
    X(cuCtxGetCurrent)                                                         \
    X(cuMemAlloc)                                                              \
    X(cuMemFree)                                                               \
    X(cuMemsetD32Async)                                                        \
    X(cuMemcpyDtoHAsync)                                                       \
    X(cuMemHostRegister)                                                       \
    X(cuCtxGetDevice)                                                          \
    X(cuStreamSynchronize)                                                     \
    X(cuMemGetAllocationGranularity)                                           \
    X(cuMemCreate)                                                             \
    X(cuMemAddressReserve)                                                     \
    X(cuMemMap)                                                                \
    X(cuMemSetAccess)                                                          \
    X(cuMemExportToShareableHandle)                                            \
    X(cuMemImportFromShareableHandle)                                          \
    X(cuModuleLoadData)                                                        \
    X(cuModuleGetFunction)                                                     \
    X(cuLaunchKernel)

static struct {
    bool loaded;
#define GPU_FIELD(fn) __typeof__(fn) *fn;
    GPU_FNS(GPU_FIELD)
#undef GPU_FIELD
    CUmodule mod;
} cu;

static bool load_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *sym;

    if (!h)
        return false;
#define GPU_LOAD(fn)                                                           \
    sym = dlsym(h, STR(fn));                                                   \
    if (!sym)                                                                  \
        return false;                                                          \
    memcpy(&cu.fn, &sym, sizeof(sym));
    GPU_FNS(GPU_LOAD)
#undef GPU_LOAD
    cu.loaded = true;
    return true;
}

static strata_err cu_check(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS)
        return STRATA_OK;
    strata_errmsg_set("%s: CUresult %d", what, (int)r);
    return STRATA_EIO;
}

/* The chip's stream, with the driver and the PTX module ready. */
static strata_err chip_prepare(strata_chip *chip, CUstream *s_out)
{
    CUcontext ctx = NULL;
    CUstream s = strata_chip_cuda_stream(chip);

    if (!s) {
        strata_errmsg_set("strata_chip_cuda_stream is NULL on chip %d",
                          strata_chip_id(chip));
        return STRATA_EINVAL;
    }
    if (!cu.loaded && !load_driver()) {
        strata_errmsg_set("chip process cannot dlopen libcuda.so.1");
        return STRATA_EIO;
    }
    if (cu.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) {
        strata_errmsg_set("no CUDA context is current in the kernel");
        return STRATA_ESTATE;
    }
    if (!cu.mod && cu_check(cu.cuModuleLoadData(&cu.mod, gpu_ptx),
                            "cuModuleLoadData (the tests' PTX)"))
        return STRATA_EIO;
    *s_out = s;
    return STRATA_OK;
}

/* Tensor 0 (OUT, u32[n]) gets scalar 0 in every element, through device
 * memory, all enqueued on the stream; scalar 1 is the device ordinal the
 * chip must be on. */
static strata_err k_fill(strata_chip *chip, const strata_args *args)
{
    size_t bytes = strata_args_tensor_nbytes(args, 0);
    uint32_t value = (uint32_t)strata_args_scalar(args, 0);
    CUdeviceptr d;
    CUstream s;
    strata_err err = chip_prepare(chip, &s);

    if (err)
        return err;
    if (strata_chip_cuda_device(chip) != (int)strata_args_scalar(args, 1)) {
        strata_errmsg_set("chip %d is on device %d, not %d",
                          strata_chip_id(chip), strata_chip_cuda_device(chip),
                          (int)strata_args_scalar(args, 1));
        return STRATA_EINVAL;
    }
    err = cu_check(cu.cuMemAlloc(&d, bytes), "cuMemAlloc");
    if (err)
        return err;
    err = cu_check(cu.cuMemsetD32Async(d, value, bytes / 4, s),
                   "cuMemsetD32Async");
    if (!err)
        err = cu_check(
            cu.cuMemcpyDtoHAsync(strata_args_tensor_data(args, 0), d, bytes, s),
            "cuMemcpyDtoHAsync");
    /* Not freed here: cuMemFree would wait for the stream and hide a chip
     * that does not. The chip's context goes with its process. */
    return err;
}

static strata_err launch(const char *name, void **params, CUstream s)
{
    CUfunction f;
    strata_err err = cu_check(cu.cuModuleGetFunction(&f, cu.mod, name),
                              "cuModuleGetFunction");

    if (!err)
        err =
            cu_check(cu.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL),
                     "cuLaunchKernel");
    return err;
}

/* Busy-waits scalar 0 ns on the device; returns at once on the host. */
static strata_err k_spin(strata_chip *chip, const strata_args *args)
{
    uint64_t ns = (uint64_t)strata_args_scalar(args, 0);
    void *params[] = {&ns};
    CUstream s;
    strata_err err = chip_prepare(chip, &s);

    return err ? err : launch("strata_spin", params, s);
}

/* Spins, then fills tensor 0 like k_fill: the copy lands only after the
 * spin, so a task that completed before its stream would leave zeros.
 * The tensor is pinned first: a copy to pageable memory would make the
 * kernel itself wait, and hide a chip that does not. */
static strata_err k_spin_fill(strata_chip *chip, const strata_args *args)
{
    uint64_t ns = SPIN_NS / 4;
    void *params[] = {&ns};
    CUstream s;
    CUresult r;
    strata_err err = chip_prepare(chip, &s);

    if (err)
        return err;
    r = cu.cuMemHostRegister(strata_args_tensor_data(args, 0),
                             strata_args_tensor_nbytes(args, 0), 0);
    if (r != CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED &&
        cu_check(r, "cuMemHostRegister"))
        return STRATA_EIO;
    err = launch("strata_spin", params, s);
    return err ? err : k_fill(chip, args);
}

/* Stores to address 0 on the device: the error shows at the wait. */
static strata_err k_fault(strata_chip *chip, const strata_args *args)
{
    CUstream s;
    strata_err err = chip_prepare(chip, &s);

    (void)args;
    return err ? err : launch("strata_fault", NULL, s);
}

/* ---------------------------------------------------------------- */
/* Device memory shared between chip processes (cuda-ipc's plumbing)  */
/* ---------------------------------------------------------------- */

/* Properties of an exportable allocation on the current device, and its
 * granularity. */
static strata_err vmm_prop(CUmemAllocationProp *prop, size_t *gran_out)
{
    CUdevice dev;
    strata_err err = cu_check(cu.cuCtxGetDevice(&dev), "cuCtxGetDevice");

    if (err)
        return err;
    memset(prop, 0, sizeof(*prop));
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = dev;
    return cu_check(cu.cuMemGetAllocationGranularity(
                        gran_out, prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                    "cuMemGetAllocationGranularity");
}

/* Maps handle h of size bytes at a fresh address, read-write for the
 * current device. */
static strata_err vmm_map(CUmemGenericAllocationHandle h, size_t size,
                          size_t gran, const CUmemAllocationProp *prop,
                          CUdeviceptr *ptr_out)
{
    CUmemAccessDesc acc = {.location = prop->location,
                           .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    strata_err err = cu_check(cu.cuMemAddressReserve(ptr_out, size, gran, 0, 0),
                              "cuMemAddressReserve");

    if (!err)
        err = cu_check(cu.cuMemMap(*ptr_out, size, 0, h, 0), "cuMemMap");
    if (!err)
        err = cu_check(cu.cuMemSetAccess(*ptr_out, size, &acc, 1),
                       "cuMemSetAccess");
    return err;
}

/* Scalars: the socket (inherited from the test process), a u32 value,
 * bytes. Makes an exportable allocation, fills it with the value (before
 * export: a peer may use it as soon as it has the fd), and sends its fd.
 * The allocation stays until the chip ends. */
static strata_err k_vmm_export(strata_chip *chip, const strata_args *args)
{
    int sock = (int)strata_args_scalar(args, 0);
    uint32_t value = (uint32_t)strata_args_scalar(args, 1);
    size_t bytes = (size_t)strata_args_scalar(args, 2), gran, size;
    CUmemAllocationProp prop;
    CUmemGenericAllocationHandle h;
    CUdeviceptr ptr;
    CUstream s;
    char why[256];
    int fd = -1;
    strata_err err = chip_prepare(chip, &s);

    if (!err)
        err = vmm_prop(&prop, &gran);
    if (err)
        return err;
    size = (bytes + gran - 1) / gran * gran;
    err = cu_check(cu.cuMemCreate(&h, size, &prop, 0), "cuMemCreate");
    if (!err)
        err = vmm_map(h, size, gran, &prop, &ptr);
    if (!err)
        err = cu_check(cu.cuMemsetD32Async(ptr, value, size / 4, s),
                       "cuMemsetD32Async");
    if (!err)
        err = cu_check(cu.cuStreamSynchronize(s), "cuStreamSynchronize");
    if (!err)
        err = cu_check(cu.cuMemExportToShareableHandle(
                           &fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                       "cuMemExportToShareableHandle (POSIX fd)");
    if (err)
        return err;
    err = cuda_fd_send(sock, size, &fd, 1, cuda_fdpass_deadline(30), why,
                       sizeof(why));
    close(fd); /* the peer has its own */
    if (err)
        strata_errmsg_set("%s", why);
    return err;
}

/* Tensor 0 (OUT, u32); scalar 0: the socket. Receives an allocation's fd,
 * imports and maps it, and copies the start of it into tensor 0. */
static strata_err k_vmm_import(strata_chip *chip, const strata_args *args)
{
    int sock = (int)strata_args_scalar(args, 0), fd = -1;
    size_t bytes = strata_args_tensor_nbytes(args, 0), gran, got = 0;
    uint64_t size = 0;
    CUmemAllocationProp prop;
    CUmemGenericAllocationHandle h;
    CUdeviceptr ptr;
    CUstream s;
    char why[256];
    strata_err err = chip_prepare(chip, &s);

    if (!err)
        err = vmm_prop(&prop, &gran);
    if (err)
        return err;
    err = cuda_fd_recv(sock, &size, &fd, 1, &got, cuda_fdpass_deadline(30), why,
                       sizeof(why));
    if (err) {
        strata_errmsg_set("%s", why);
        return err;
    }
    err = cu_check(cu.cuMemImportFromShareableHandle(
                       &h, (void *)(uintptr_t)fd,
                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                   "cuMemImportFromShareableHandle (POSIX fd)");
    close(fd);
    if (!err && bytes > size) {
        strata_errmsg_set("tensor of %zu bytes > allocation of %llu", bytes,
                          (unsigned long long)size);
        err = STRATA_EINVAL;
    }
    if (!err)
        err = vmm_map(h, (size_t)size, gran, &prop, &ptr);
    if (!err)
        err = cu_check(cu.cuMemcpyDtoHAsync(strata_args_tensor_data(args, 0),
                                            ptr, bytes, s),
                       "cuMemcpyDtoHAsync");
    return err;
}

/* ---------------------------------------------------------------- */
/* The worker side                                                   */
/* ---------------------------------------------------------------- */

struct fixture {
    strata_worker *w;
    strata_callable fill, spin, spin_fill, fault, vmm_export, vmm_import;
    testutil_snapshot before;
};

static struct fixture fx;

static void start(const int *ids, size_t n, const char *device_map)
{
    strata_worker_config cfg;

    testutil_snapshot_take(&fx.before);
    if (device_map)
        setenv("STRATA_CUDA_DEVICES", device_map, 1);
    else
        unsetenv("STRATA_CUDA_DEVICES");
    strata_worker_config_init(&cfg, 3);
    cfg.platform = "cuda";
    cfg.chip_ids = ids;
    cfg.num_chips = n;
    assert_int_equal(strata_worker_create(&cfg, &fx.w), STRATA_OK);
    if (strata_worker_init(fx.w) != STRATA_OK)
        fail_msg("strata_worker_init: %s", strata_errmsg());
}

static void stop(void)
{
    assert_int_equal(strata_worker_destroy(fx.w), STRATA_OK);
    fx.w = NULL;
    unsetenv("STRATA_CUDA_DEVICES");
    testutil_assert_clean(&fx.before);
}

struct call {
    strata_callable fn;
    strata_buffer *buf; /* tensor 0, u32, OUT; NULL: none */
    size_t count;
    uint64_t scalars[2];
    int nscalars;
    const int *chips;
    size_t nchips; /* > 1: a group, one task per chip */
};

static strata_err submit(strata_orch *o, const strata_args *unused, void *user)
{
    const struct call *c = user;
    strata_args *a = NULL;
    strata_err err = strata_args_create(&a);
    const size_t shape[1] = {c->count};

    (void)unused;
    if (!err && c->buf)
        err = strata_args_add_tensor(a, c->buf, 0, STRATA_U32, 1, shape,
                                     STRATA_NO_DEP);
    for (int i = 0; !err && i < c->nscalars; i++)
        err = strata_args_add_scalar(a, c->scalars[i]);
    if (!err)
        err = strata_orch_submit_next_level(o, c->fn, a, c->chips[0]);
    strata_args_destroy(a);
    return err;
}

/* One run of one task; its result and message. */
static strata_err run_call(struct call *c, char *msg, size_t cap)
{
    strata_err err = strata_worker_run(fx.w, submit, NULL, c);

    snprintf(msg, cap, "%s", err ? strata_errmsg() : "");
    return err;
}

static void assert_filled(strata_buffer *b, size_t count, uint32_t v)
{
    const uint32_t *p = strata_buffer_data(b);

    for (size_t i = 0; i < count; i++)
        if (p[i] != v)
            fail_msg("element %zu is %u, not %u", i, p[i], v);
}

static void test_cuda_gpu_stream_work_completes_with_task(void **state)
{
    static const int ids[] = {0};
    const size_t count = 1u << 22; /* 16 MiB */
    strata_buffer *b;
    char msg[STRATA_ERRMSG_MAX];

    (void)state;
    start(ids, 1, NULL);
    assert_int_equal(strata_worker_create_buffer(fx.w, count * 4, &b),
                     STRATA_OK);
    {
        struct call c = {fx.spin_fill, b, count, {0x5eed, 0}, 2, ids, 1};

        if (run_call(&c, msg, sizeof(msg)))
            fail_msg("run: %s", msg);
    }
    assert_filled(b, count, 0x5eed);
    stop();
}

/* Chip CPU time in seconds (utime + stime of /proc/pid/stat). */
static double cpu_seconds(pid_t pid)
{
    char path[64], buf[1024];
    unsigned long ut = 0, st = 0;
    FILE *f;
    char *p;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    p = strrchr(buf, ')'); /* the name may hold spaces */
    assert_non_null(p);
    assert_int_equal(sscanf(p + 2,
                            "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
                            "%*u %lu %lu",
                            &ut, &st),
                     2);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void test_cuda_gpu_task_waits_asleep(void **state)
{
    static const int ids[] = {0};
    char msg[STRATA_ERRMSG_MAX];
    struct call c = {fx.spin, NULL, 0, {SPIN_NS, 0}, 1, ids, 1};
    double t0, wall, cpu0, cpu;
    pid_t pid;

    (void)state;
    start(ids, 1, NULL);
    /* A first run loads the PTX (JIT compile, CPU) outside the window. */
    c.scalars[0] = 1000;
    if (run_call(&c, msg, sizeof(msg)))
        fail_msg("warm-up: %s", msg);
    c.scalars[0] = SPIN_NS;
    pid = strata_worker_chip_pid(fx.w, 0);
    cpu0 = cpu_seconds(pid);
    t0 = testutil_now();
    if (run_call(&c, msg, sizeof(msg)))
        fail_msg("run: %s", msg);
    wall = testutil_now() - t0;
    cpu = cpu_seconds(pid) - cpu0;
    print_message("1 s on the device: task took %.3f s, chip CPU %.3f s\n",
                  wall, cpu);
    assert_true(wall >= 0.9 * (double)SPIN_NS / 1e9); /* waited for it */
    assert_true(cpu < 0.3 * wall);                    /* asleep */
    stop();
}

static void test_cuda_gpu_device_fault_fails_task_with_cuda_error(void **s)
{
    static const int ids[] = {0};
    char msg[STRATA_ERRMSG_MAX];
    struct call c = {fx.fault, NULL, 0, {0, 0}, 0, ids, 1};

    (void)s;
    start(ids, 1, NULL);
    assert_int_equal(run_call(&c, msg, sizeof(msg)), STRATA_ETASK);
    print_message("fault: %s\n", msg);
    assert_non_null(strstr(msg, "CUDA_ERROR_ILLEGAL_ADDRESS"));
    assert_non_null(strstr(msg, "stream"));
    stop();
}

static void test_cuda_gpu_two_chips_share_device(void **state)
{
    static const int ids[] = {0, 1};
    const size_t count = 1u << 16;
    strata_buffer *b[2];
    char msg[STRATA_ERRMSG_MAX];

    (void)state;
    start(ids, 2, "0=0,1=0");
    for (int i = 0; i < 2; i++) {
        struct call c = {fx.fill, NULL, count, {0, 0}, 2, &ids[i], 1};

        assert_int_equal(strata_worker_create_buffer(fx.w, count * 4, &b[i]),
                         STRATA_OK);
        c.buf = b[i];
        c.scalars[0] = 100u + (unsigned)i;
        if (run_call(&c, msg, sizeof(msg)))
            fail_msg("chip %d: %s", i, msg);
        assert_filled(b[i], count, 100u + (unsigned)i);
    }
    stop();
}

static void test_cuda_gpu_ordinal_out_of_range_einval(void **state)
{
    static const int ids[] = {0};
    testutil_snapshot before;
    strata_worker_config cfg;
    strata_worker *w = NULL;
    char map[32];

    (void)state;
    testutil_snapshot_take(&before);
    snprintf(map, sizeof(map), "0=%d", device_count);
    setenv("STRATA_CUDA_DEVICES", map, 1);
    strata_worker_config_init(&cfg, 3);
    cfg.platform = "cuda";
    cfg.chip_ids = ids;
    cfg.num_chips = 1;
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_OK);
    assert_int_equal(strata_worker_init(w), STRATA_EINVAL);
    print_message("out of range: %s\n", strata_errmsg());
    assert_non_null(strstr(strata_errmsg(), "chip 0 failed to start"));
    assert_non_null(strstr(strata_errmsg(), "out of range"));
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    unsetenv("STRATA_CUDA_DEVICES");
    testutil_assert_clean(&before);
}

/* The same through the config's device_ordinals: chip 1 is named. */
static void test_cuda_gpu_config_ordinal_out_of_range_einval(void **state)
{
    static const int ids[] = {0, 1};
    int ordinals[2] = {0, device_count};
    testutil_snapshot before;
    strata_worker_config cfg;
    strata_worker *w = NULL;

    (void)state;
    testutil_snapshot_take(&before);
    unsetenv("STRATA_CUDA_DEVICES");
    strata_worker_config_init(&cfg, 3);
    cfg.platform = "cuda";
    cfg.chip_ids = ids;
    cfg.num_chips = 2;
    cfg.device_ordinals = ordinals;
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_OK);
    assert_int_equal(strata_worker_init(w), STRATA_EINVAL);
    print_message("out of range: %s\n", strata_errmsg());
    assert_non_null(strstr(strata_errmsg(), "chip 1 failed to start"));
    assert_non_null(strstr(strata_errmsg(), "from device_ordinals"));
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    testutil_assert_clean(&before);
}

struct vmm_job {
    int sock[2];
    strata_buffer *out;
    size_t count;
};

/* Chip 0 exports, chip 1 imports: one run, two independent tasks that
 * meet through the socket (the importer waits for the fd). */
static strata_err vmm_orch(strata_orch *o, const strata_args *unused,
                           void *user)
{
    const struct vmm_job *j = user;
    const size_t shape[1] = {j->count};
    strata_args *a = NULL;
    strata_err err = strata_args_create(&a);

    (void)unused;
    if (!err)
        err = strata_args_add_scalar(a, (uint64_t)j->sock[0]);
    if (!err)
        err = strata_args_add_scalar(a, 0xc0ffee);
    if (!err)
        err = strata_args_add_scalar(a, j->count * 4);
    if (!err)
        err = strata_orch_submit_next_level(o, fx.vmm_export, a, 0);
    strata_args_clear(a);
    if (!err)
        err = strata_args_add_tensor(a, j->out, 0, STRATA_U32, 1, shape,
                                     STRATA_OUT);
    if (!err)
        err = strata_args_add_scalar(a, (uint64_t)j->sock[1]);
    if (!err)
        err = strata_orch_submit_next_level(o, fx.vmm_import, a, 1);
    strata_args_destroy(a);
    return err;
}

/* What device windows (cuda-ipc) will rest on: cuMemCreate with a POSIX
 * fd handle, the fd passed to another chip process with SCM_RIGHTS over a
 * socket made before the fork, imported and mapped there. */
static void test_cuda_gpu_vmm_fd_crosses_chip_processes(void **state)
{
    static const int ids[] = {0, 1};
    struct vmm_job j = {.count = 1u << 16};
    char msg[STRATA_ERRMSG_MAX];
    testutil_snapshot outer;
    strata_err err;

    (void)state;
    testutil_snapshot_take(&outer);
    /* Before the fork, and inherited: no SOCK_CLOEXEC. */
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, j.sock), 0);
    start(ids, 2, "0=0,1=0");
    assert_int_equal(strata_worker_create_buffer(fx.w, j.count * 4, &j.out),
                     STRATA_OK);
    err = strata_worker_run(fx.w, vmm_orch, NULL, &j);
    snprintf(msg, sizeof(msg), "%s", err ? strata_errmsg() : "");
    if (err)
        fail_msg("run: %s", msg);
    assert_filled(j.out, j.count, 0xc0ffee);
    stop();
    close(j.sock[0]);
    close(j.sock[1]);
    testutil_assert_clean(&outer);
}

/* CUDA_VISIBLE_DEVICES is honoured: with none visible, no chip starts. */
static void test_cuda_gpu_no_visible_device_enotsup(void **state)
{
    static const int ids[] = {0};
    testutil_snapshot before;
    strata_worker_config cfg;
    strata_worker *w = NULL;
    const char *msg, *was = getenv("CUDA_VISIBLE_DEVICES");
    char saved[256];

    (void)state;
    snprintf(saved, sizeof(saved), "%s", was ? was : "");
    testutil_snapshot_take(&before);
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    strata_worker_config_init(&cfg, 3);
    cfg.platform = "cuda";
    cfg.chip_ids = ids;
    cfg.num_chips = 1;
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_OK);
    assert_int_equal(strata_worker_init(w), STRATA_ENOTSUP);
    msg = strata_errmsg();
    print_message("none visible: %s\n", msg);
    assert_true(strstr(msg, "CUDA_ERROR_NO_DEVICE") ||
                strstr(msg, "no CUDA device is visible"));
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
    if (was)
        setenv("CUDA_VISIBLE_DEVICES", saved, 1);
    else
        unsetenv("CUDA_VISIBLE_DEVICES");
    testutil_assert_clean(&before);
}

/* In a child, so this process never initializes CUDA: the number of
 * devices, or -1 with why. */
static int probe_devices(char *why, size_t cap)
{
    int fds[2], n = -1;
    char buf[256] = "";
    pid_t pid;

    if (pipe(fds) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        int count = 0;
        CUresult r;

        close(fds[0]);
        if (!load_driver()) {
            dprintf(fds[1], "-1 no libcuda.so.1 (%s)", dlerror());
            _exit(0);
        }
        r = cu.cuInit(0);
        if (r == CUDA_SUCCESS)
            r = cu.cuDeviceGetCount(&count);
        if (r != CUDA_SUCCESS)
            dprintf(fds[1], "-1 cuInit/cuDeviceGetCount: CUresult %d", (int)r);
        else
            dprintf(fds[1], "%d", count);
        _exit(0);
    }
    close(fds[1]);
    if (pid > 0) {
        ssize_t got = read(fds[0], buf, sizeof(buf) - 1);

        buf[got > 0 ? got : 0] = '\0';
        waitpid(pid, NULL, 0);
        n = atoi(buf);
    }
    close(fds[0]);
    snprintf(why, cap, "%s", buf);
    return n;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_gpu_stream_work_completes_with_task),
        cmocka_unit_test(test_cuda_gpu_task_waits_asleep),
        cmocka_unit_test(test_cuda_gpu_device_fault_fails_task_with_cuda_error),
        cmocka_unit_test(test_cuda_gpu_two_chips_share_device),
        cmocka_unit_test(test_cuda_gpu_vmm_fd_crosses_chip_processes),
        cmocka_unit_test(test_cuda_gpu_ordinal_out_of_range_einval),
        cmocka_unit_test(test_cuda_gpu_config_ordinal_out_of_range_einval),
        cmocka_unit_test(test_cuda_gpu_no_visible_device_enotsup),
    };
    char why[256];

    device_count = probe_devices(why, sizeof(why));
    if (device_count <= 0) {
        printf("SKIPPED: no CUDA device (%s)\n",
               device_count == 0 ? "0 devices" : why);
        return EXIT_SKIPPED;
    }
    if (strata_register_kernel("fill", k_fill, &fx.fill) ||
        strata_register_kernel("spin", k_spin, &fx.spin) ||
        strata_register_kernel("spin_fill", k_spin_fill, &fx.spin_fill) ||
        strata_register_kernel("fault", k_fault, &fx.fault) ||
        strata_register_kernel("vmm_export", k_vmm_export, &fx.vmm_export) ||
        strata_register_kernel("vmm_import", k_vmm_import, &fx.vmm_import)) {
        fprintf(stderr, "register: %s\n", strata_errmsg());
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
