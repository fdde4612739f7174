/* hwfarm test firmware. Speaks the result protocol (docs/protocol.md) on
   UART0. The variant is chosen at build time with -DVARIANT_<NAME>:
     PASS     two passing tests with outputs, status 0
     FAIL     one test fails (firmware-reported), status 1
     DRIFT    passes, but its outputs drift 1% from the reference
     HANG     begins, then never ends (a stuck board)
     GARBAGE  prints non-protocol noise, then a valid run
     HEALTH   prints the health banner, status 0
     SEMIHOST tries to reach the host through semihosting (open, read and
              write host files, run host commands) and prints what it got,
              status 0
     LOCKUP   begins, then exits the old way, with a semihosting call: without
              semihosting that is a HardFault, and the core locks up
   main's return value is the status of the `HWFARM END status=<n>` record
   that startup.c prints. */
#include "hw.h"

/* Fixed-point printing with 6 decimals: enough for the comparisons. */
static void put_float(float f) {
  if (f < 0) {
    uart_putc('-');
    f = -f;
  }
  uint32_t whole = (uint32_t)f;
  uint32_t frac = (uint32_t)((f - (float)whole) * 1000000.0f + 0.5f);
  if (frac >= 1000000u) {
    whole += 1;
    frac -= 1000000u;
  }
  uart_put_uint(whole);
  uart_putc('.');
  for (uint32_t div = 100000u; div; div /= 10) uart_putc((char)('0' + (frac / div) % 10));
}

#if defined(VARIANT_DRIFT)
#define SCALE 1.01f
#else
#define SCALE 1.0f
#endif

/* A tiny "model": y[i] = scale * (x[i]^2 / 8 - 1) over x = 0..7. */
__attribute__((unused)) static void output_square(void) {
  uart_puts("HWFARM OUTPUT square.y f32 8");
  for (int i = 0; i < 8; ++i) {
    uart_putc(' ');
    put_float(SCALE * ((float)(i * i) / 8.0f - 1.0f));
  }
  uart_puts("\n");
}

__attribute__((unused)) static void output_ramp(void) {
  uart_puts("HWFARM OUTPUT ramp.y i32 4 0 1 2 3\n");
}

#if defined(VARIANT_SEMIHOST)
/* The host paths the semihosting probe tries (tests/drivers_qemu_test.cpp
   prepares the directory and its secret file). */
#define PROBE_DIR "/tmp/hwfarm-semihost-probe"

static const char* strend(const char* s) {
  while (*s) ++s;
  return s;
}

/* One semihosting call: r0 = operation, r1 = its parameter block. */
static int32_t semihost(uint32_t op, const void* block) {
  register uint32_t r0 __asm__("r0") = op;
  register const void* r1 __asm__("r1") = block;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return (int32_t)r0;
}

enum { SYS_OPEN = 0x01, SYS_CLOSE = 0x02, SYS_WRITE = 0x05, SYS_READ = 0x06, SYS_SYSTEM = 0x12 };

static int32_t host_open(const char* path, uint32_t mode) { /* mode 0: "r", 4: "w" */
  uint32_t block[3] = {(uint32_t)path, mode, (uint32_t)(strend(path) - path)};
  return semihost(SYS_OPEN, block);
}

static void report(const char* what, int32_t result) {
  uart_puts("SEMIHOST ");
  uart_puts(what);
  uart_puts(" -> ");
  uart_put_int(result);
  uart_puts("\n");
}

static void probe_host(void) {
  static char buf[128];
  int32_t in = host_open(PROBE_DIR "/secret", 0);
  report("open " PROBE_DIR "/secret", in);
  if (in >= 0) {
    uint32_t block[3] = {(uint32_t)in, (uint32_t)buf, sizeof buf - 1};
    int32_t left = semihost(SYS_READ, block);
    report("read", left);
    if (left >= 0 && left < (int32_t)sizeof buf) {
      buf[sizeof buf - 1 - left] = 0;
      uart_puts("SEMIHOST read: ");
      uart_puts(buf);
      uart_puts("\n");
    }
    uint32_t close_block[1] = {(uint32_t)in};
    semihost(SYS_CLOSE, close_block);
  }
  int32_t out = host_open(PROBE_DIR "/written", 4);
  report("open " PROBE_DIR "/written", out);
  if (out >= 0) {
    static const char text[] = "written by firmware\n";
    uint32_t block[3] = {(uint32_t)out, (uint32_t)text, sizeof text - 1};
    report("write", semihost(SYS_WRITE, block));
    uint32_t close_block[1] = {(uint32_t)out};
    semihost(SYS_CLOSE, close_block);
  }
  static const char* const commands[] = {"touch " PROBE_DIR "/touched", "id > " PROBE_DIR "/id"};
  for (unsigned i = 0; i < sizeof commands / sizeof commands[0]; ++i) {
    uint32_t block[2] = {(uint32_t)commands[i], (uint32_t)(strend(commands[i]) - commands[i])};
    int32_t rc = semihost(SYS_SYSTEM, block);
    uart_puts("SEMIHOST system ");
    uart_puts(commands[i]);
    uart_puts(" -> ");
    uart_put_int(rc);
    uart_puts("\n");
  }
}
#endif

int main(void) {
  uart_init();
  uart_puts("hwfarm test firmware booting\n");
#if defined(VARIANT_LOCKUP)
  uart_puts("HWFARM BEGIN suite=hwfarm-selftest\n");
  /* SYS_EXIT_EXTENDED {ADP_Stopped_ApplicationExit, 0} */
  static const uint32_t block[2] = {0x20026u, 0u};
  register uint32_t r0 __asm__("r0") = 0x20;
  register const uint32_t* r1 __asm__("r1") = block;
  __asm__ volatile("bkpt 0xAB" : : "r"(r0), "r"(r1) : "memory");
  uart_puts("HWFARM END status=99 (after the semihosting call: never printed)\n");
  for (;;) {
  }
#elif defined(VARIANT_SEMIHOST)
  probe_host();
  return 0;
#elif defined(VARIANT_HEALTH)
  uart_puts("HWFARM HEALTH OK\n");
  return 0;
#else
#if defined(VARIANT_GARBAGE)
  for (int i = 0; i < 64; ++i) uart_putc((char)(0x80 + (i * 37) % 120));
  uart_puts("\n\x01\x02 not a protocol line\n");
#endif
  uart_puts("HWFARM BEGIN suite=hwfarm-selftest\n");
  uart_puts("HWFARM TEST square PASS\n");
  output_square();
#if defined(VARIANT_HANG)
  for (;;) {
  }
#endif
#if defined(VARIANT_FAIL)
  uart_puts("HWFARM TEST ramp FAIL expected 3 got 4\n");
  output_ramp();
  return 1;
#else
  uart_puts("HWFARM TEST ramp PASS\n");
  output_ramp();
  return 0;
#endif
#endif
}
