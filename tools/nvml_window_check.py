# tools/nvml_window_check.py — run from the repository root on a GPU machine with PyTorch and
# gcc: cuda/nvml.c itself (built here as a shared library with a small wrapper) measures
# epochs of known shape in this process — busy, idle (a loader wait), too short,
# launch-bound — so issue 27's figures (utilisation cut to the epoch, GPM SM activity, this
# process's memory) are checked on a card.
# usage: python3 tools/nvml_window_check.py [prebuilt.so]
import ctypes, os, subprocess, sys, tempfile, time
import torch
WRAPPER = r"""
#include <stdio.h>
#include "cuda/gpu.h"
void *p_create(const char *bus) { return gpu_monitor_create(bus, NULL, 50); }
void p_start(void *m) { gpu_monitor_start(m); }
double p_now(void) { return now_sec(); }
void p_stop(void *m, double t0, double t1, char *buf, int len)
{
    device_util u;
    gpu_monitor_stop_window(m, t0, t1, &u);
    snprintf(buf, (size_t)len, "util avail=%d windowed=%d n=%d avg=%.1f max=%.0f why='%s' | "
             "sm avail=%d sm=%.2f occ=%.2f why='%s' | proc=%.1f MiB why='%s' dev=%.1f MiB",
             u.available, u.windowed, u.samples, u.util_avg, u.util_max, u.why, u.sm_available,
             u.sm_util, u.sm_occ, u.sm_why, u.proc_mem / 1048576.0, u.proc_why,
             u.mem_used / 1048576.0);
}
"""
if len(sys.argv) > 1:
    so = sys.argv[1]
else:
    d = tempfile.mkdtemp()
    src, so = os.path.join(d, "probe.c"), os.path.join(d, "libnvmlprobe.so")
    open(src, "w").write(WRAPPER)
    subprocess.run(["gcc", "-std=c11", "-O1", "-fPIC", "-shared", "-I.", "-o", so, src,
                    "cuda/nvml.c", "common/util.c", "-ldl", "-lpthread", "-lm"], check=True)
lib = ctypes.CDLL(so)
lib.p_create.restype = ctypes.c_void_p
lib.p_create.argtypes = [ctypes.c_char_p]
lib.p_start.argtypes = [ctypes.c_void_p]
lib.p_now.restype = ctypes.c_double
lib.p_stop.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_char_p, ctypes.c_int]
x = torch.randn(8192, 8192, device="cuda")
s = torch.randn(64, device="cuda")
torch.cuda.synchronize()
bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", "0"],
                     capture_output=True, text=True).stdout.strip()
print("bus", bus, "torch reserved MiB", torch.cuda.memory_reserved() / 2**20)
m = lib.p_create(bus.encode())
def big(sec):
    t = time.time()
    while time.time() - t < sec:
        y = x @ x
    torch.cuda.synchronize()
def tiny(sec):  # launch-bound: one small kernel at a time, all the time
    t = time.time()
    while time.time() - t < sec:
        s.add_(1.0)
    torch.cuda.synchronize()
def idle(sec):
    time.sleep(sec)
buf = ctypes.create_string_buffer(1024)
for name, fn, sec in [("busy 1.0 s", big, 1.0), ("idle 1.0 s after busy", idle, 1.0),
                      ("busy 1.0 s", big, 1.0), ("busy 0.15 s (short)", big, 0.15),
                      ("idle 0.6 s", idle, 0.6), ("tiny kernels 1.5 s", tiny, 1.5),
                      ("busy 0.5 s then idle 0.5 s", lambda _: (big(0.5), idle(0.5)), 1.0)]:
    t0 = lib.p_now()
    lib.p_start(m)
    fn(sec)
    t1 = lib.p_now()
    lib.p_stop(m, t0, t1, buf, len(buf))
    print(f"{name:30s} {t1 - t0:5.2f} s: {buf.value.decode()}")
try:
    import pynvml as N
    N.nvmlInit()
    h = N.nvmlDeviceGetHandleByIndex(0)
    _, samples = N.nvmlDeviceGetSamples(h, N.NVML_GPU_UTILIZATION_SAMPLES, 0)
    newest = max(sm.timeStamp for sm in samples)
    print("newest sample stamp - CLOCK_REALTIME now: %.3f s; - CLOCK_MONOTONIC now: %.1f s" % (
        newest / 1e6 - time.clock_gettime(time.CLOCK_REALTIME),
        newest / 1e6 - time.clock_gettime(time.CLOCK_MONOTONIC)))
except Exception as e:
    print("pynvml:", e)
print("torch reserved MiB at the end", torch.cuda.memory_reserved() / 2**20)
