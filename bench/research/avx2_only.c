/* Run a process as if its x86 CPU had AVX2 but none of AVX-512, VNNI, AVX-VNNI, AMX or BF16.
 * With CPUID_HIDE=zen4 in the environment it hides only what AMD Zen 4 lacks of this Xeon: AMX,
 * AVX512-FP16, AVX10 and the VEX-encoded AVX-VNNI/IFMA/NE-CONVERT; AVX-512 with VNNI and BF16
 * stays (the `avx512-bf16` class), as `bench/embed_throughput.py --emulate avx512-bf16` runs.
 * With CPUID_HIDE=vnni it also hides AVX512-BF16: AVX-512 with VNNI and no BF16 (the
 * `avx512-vnni` class of Intel Ice Lake, Cascade Lake and Tiger Lake; `--emulate avx512-vnni`).
 *
 * bench/embed_throughput.py --emulate-avx2 preloads this (LD_PRELOAD) so that every engine
 * measured -- torch, ONNX Runtime, OpenVINO -- picks the kernels it would pick on an AVX2-only
 * CPU (most laptops, AMD before Zen 4). Those libraries read the CPUID instruction, not a
 * setting, so the library turns on Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID, on CPUs
 * that list `cpuid_fault` in /proc/cpuinfo) and answers each CPUID itself with those feature
 * bits cleared. It is a benchmark tool: the instructions run are the AVX2 ones an AVX2 machine
 * runs, on this machine's cores (their caches and clocks stay this CPU's).
 *
 * Faulting is per thread, inherited by new threads and cleared by execve; child processes get
 * it back through LD_PRELOAD. glibc picks its own string functions before this runs: the bench
 * also sets GLIBC_TUNABLES to hide AVX-512 from it.
 *
 *   gcc -O2 -shared -fPIC -o avx2_only.so avx2_only.c
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define BIT(n) (1u << (n))

static int cpuid_faults(int on) { return (int)syscall(SYS_arch_prctl, ARCH_SET_CPUID, !on); }

static int zen4; /* CPUID_HIDE=zen4: keep AVX-512 with VNNI and BF16, hide AMX and later */
static int vnni; /* CPUID_HIDE=vnni: as zen4, and hide AVX512-BF16 too */

/* Clear what Zen 4 lacks: AMX-BF16, AVX512-FP16, AMX-TILE, AMX-INT8 (leaf 7 EDX); AVX-VNNI,
   AMX-FP16, AVX-IFMA (7.1 EAX); AVX-VNNI-INT8, AVX-NE-CONVERT, AMX-COMPLEX, AVX10 (7.1 EDX);
   the tile states (0xD EAX) and the AMX and AVX10 leaves (0x1D, 0x1E, 0x24). */
static void hide_for_zen4(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
  if (leaf == 7 && sub == 0) {
    r[3] &= ~(BIT(22) | BIT(23) | BIT(24) | BIT(25));
  } else if (leaf == 7 && sub == 1) {
    r[0] &= ~(BIT(4) | BIT(21) | BIT(23));
    r[3] &= ~(BIT(4) | BIT(5) | BIT(8) | BIT(19));
  } else if (leaf == 0xd && sub == 0) {
    r[0] &= ~(BIT(17) | BIT(18));
  } else if (leaf == 0x1d || leaf == 0x1e || leaf == 0x24) {
    r[0] = r[1] = r[2] = r[3] = 0;
  }
}

/* Clear what an AVX2-only CPU lacks: Intel SDM vol. 2A, CPUID leaves 7 and 0xD. */
static void hide(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
  if (leaf == 7 && sub == 0) {
    /* EBX: AVX512 F, DQ, IFMA, PF, ER, CD, BW, VL */
    r[1] &= ~(BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31));
    /* ECX: AVX512 VBMI, VBMI2, VNNI, BITALG, VPOPCNTDQ */
    r[2] &= ~(BIT(1) | BIT(6) | BIT(11) | BIT(12) | BIT(14));
    /* EDX: AVX512 4VNNIW, 4FMAPS, VP2INTERSECT, AMX-BF16, AVX512-FP16, AMX-TILE, AMX-INT8 */
    r[3] &= ~(BIT(2) | BIT(3) | BIT(8) | BIT(22) | BIT(23) | BIT(24) | BIT(25));
  } else if (leaf == 7 && sub == 1) {
    /* EAX: AVX-VNNI, AVX512-BF16, AMX-FP16, AVX-IFMA; EDX: AVX-VNNI-INT8, AVX-NE-CONVERT,
       AMX-COMPLEX, AVX10 */
    r[0] &= ~(BIT(4) | BIT(5) | BIT(21) | BIT(23));
    r[3] &= ~(BIT(4) | BIT(5) | BIT(8) | BIT(19));
  } else if (leaf == 0xd && sub == 0) {
    /* EAX: the opmask, ZMM and AMX tile states the OS would save */
    r[0] &= ~(BIT(5) | BIT(6) | BIT(7) | BIT(17) | BIT(18));
  }
}

static void on_fault(int sig, siginfo_t *info, void *raw) {
  (void)info;
  greg_t *reg = ((ucontext_t *)raw)->uc_mcontext.gregs;
  const unsigned char *ip = (const unsigned char *)reg[REG_RIP];
  if (ip[0] != 0x0f || ip[1] != 0xa2) { /* a real crash: let it happen as it would */
    signal(sig, SIG_DFL);
    return;
  }
  uint32_t r[4], leaf = (uint32_t)reg[REG_RAX], sub = (uint32_t)reg[REG_RCX];
  cpuid_faults(0);
  __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
  cpuid_faults(1);
  if (zen4 || vnni)
    hide_for_zen4(leaf, sub, r);
  else
    hide(leaf, sub, r);
  if (vnni && leaf == 7 && sub == 1)
    r[0] &= ~BIT(5); /* EAX: AVX512-BF16 */
  reg[REG_RAX] = r[0];
  reg[REG_RBX] = r[1];
  reg[REG_RCX] = r[2];
  reg[REG_RDX] = r[3];
  reg[REG_RIP] += 2; /* past the 2-byte CPUID */
}

__attribute__((constructor)) static void start(void) {
  const char *mode = getenv("CPUID_HIDE");
  zen4 = mode != NULL && strcmp(mode, "zen4") == 0;
  vnni = mode != NULL && strcmp(mode, "vnni") == 0;
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_sigaction = on_fault;
  act.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigaction(SIGSEGV, &act, NULL);
  if (cpuid_faults(1) != 0) {
    static const char why[] = "avx2_only: this CPU or kernel has no CPUID faulting\n";
    if (write(2, why, sizeof why - 1) < 0) _exit(3);
    _exit(3);
  }
}
