/* hwfarm test firmware. Speaks the result protocol (docs/protocol.md) on
   UART0. The variant is chosen at build time with -DVARIANT_<NAME>:
     PASS     three passing tests with outputs, status 0
     FAIL     one test fails (firmware-reported), status 1
     SLIGHT   passes; as a run's target (identity word 1) its square.y is
              perturbed a little (PCC about 0.995 against the reference)
     BAD      the same, perturbed a lot (PCC about 0.5)
     HANG     begins, then never ends (a stuck board)
     GARBAGE  prints non-protocol noise, then a valid run
     CRCOK    the pass run, every record with its CRC-32 suffix
     CRC      the same, but one record is corrupted after its CRC was taken
     LARGE    the pass run plus a 1000-value output in pieces of 100
     HEALTH   prints the health banner, status 0
     SEMIHOST tries to reach the host through semihosting (open, read and
              write host files, run host commands) and prints what it got,
              status 0
     LOCKUP   begins, then exits the old way, with a semihosting call: without
              semihosting that is a HardFault, and the core locks up
     XSS      the pass run plus a failing case and an output whose names,
              message and console lines are HTML and script (the dashboard
              must show them as text: tests/dashboard)
   Every variant prints the board's identity word (hw.h) after its boot line.
   main's return value is the status of the `HWFARM END status=<n>` record
   that startup.c prints. */
#include "hw.h"

/* How far a target moves square.y from the reference's values: every even
   element up, every odd one down. */
#if defined(VARIANT_SLIGHT)
#define TARGET_PERTURBATION 0.21f
#elif defined(VARIANT_BAD)
#define TARGET_PERTURBATION 2.7f
#else
#define TARGET_PERTURBATION 0.0f
#endif

__attribute__((unused)) static void test_record(const char* name, const char* verdict) {
  rec_begin();
  rec_puts("TEST ");
  rec_puts(name);
  rec_putc(' ');
  rec_puts(verdict);
  rec_end();
}

/* Starts "HWFARM OUTPUT <key> <dtype> <count>"; the values follow. */
__attribute__((unused)) static void output_begin(const char* key, const char* dtype, int count) {
  rec_begin();
  rec_puts("OUTPUT ");
  rec_puts(key);
  rec_putc(' ');
  rec_puts(dtype);
  rec_putc(' ');
  rec_put_int(count);
}

/* A tiny "model": y[i] = x[i]^2 / 8 - 1 over x = 0..7, perturbed on a target. */
__attribute__((unused)) static void output_square(int target) {
  float delta = target ? TARGET_PERTURBATION : 0.0f;
  output_begin("square.y", "f32", 8);
  for (int i = 0; i < 8; ++i) {
    float y = (float)(i * i) / 8.0f - 1.0f;
    if (delta != 0.0f) y += (i & 1) ? -delta : delta;
    rec_putc(' ');
    rec_put_f32(y);
  }
  rec_end();
}

__attribute__((unused)) static void output_ramp(void) {
  output_begin("ramp.y", "i32", 4);
  rec_puts(" 0 1 2 ");
#if defined(VARIANT_CRC)
  rec_putc_corrupted('3', '7'); /* one flipped bit (0x33 -> 0x37) */
#else
  rec_putc('3');
#endif
  rec_end();
}

/* Values that six fixed decimals would lose: a third, 0.1, 1e-7, the largest
   float, the smallest denormal, minus zero. */
__attribute__((unused)) static void output_precision(void) {
  static const float values[] = {1.0f / 3.0f,    -2.0f / 3.0f,    0.1f,           1e-7f,
                                 6.02214076e23f, 3.40282347e+38f, 1.40129846e-45f, -0.0f};
  output_begin("precision.y", "f32", 8);
  for (int i = 0; i < 8; ++i) {
    rec_putc(' ');
    rec_put_f32(values[i]);
  }
  rec_end();
}

#if defined(VARIANT_LARGE)
/* large.y[i] = i / 7 for i = 0..999, as f32x in records of 100 values, each
   at its @offset. */
static void output_large(void) {
  enum { count = 1000, piece = 100 };
  for (int at = 0; at < count; at += piece) {
    output_begin("large.y", "f32x", count);
    rec_puts(" @");
    rec_put_int(at);
    for (int i = at; i < at + piece; ++i) {
      rec_putc(' ');
      rec_put_f32x((float)i / 7.0f);
    }
    rec_end();
  }
}
#endif

static void print_identity(uint32_t id) {
  uart_puts("hwfarm board identity ");
  uart_put_uint(id);
  uart_puts(id == HWFARM_IDENTITY_TARGET ? ": target\n" : id == 0 ? ": reference\n" : ": unknown\n");
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
  uint32_t identity = board_identity();
  print_identity(identity);
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
  rec_begin();
  rec_puts("BEGIN suite=hwfarm-selftest");
  rec_end();
  test_record("square", "PASS");
  output_square(identity == HWFARM_IDENTITY_TARGET);
#if defined(VARIANT_HANG)
  for (;;) {
  }
#endif
#if defined(VARIANT_FAIL)
  test_record("ramp", "FAIL expected 3 got 4");
#else
  test_record("ramp", "PASS");
#endif
  output_ramp();
  test_record("precision", "PASS");
  output_precision();
#if defined(VARIANT_LARGE)
  test_record("large", "PASS");
  output_large();
#endif
#if defined(VARIANT_XSS)
  uart_puts("<script>window.__xss='trace'</script><img src=x onerror=\"window.__xss='trace-img'\">\n");
  test_record("<img/src=x/onerror=window.__xss='case'>",
              "FAIL <img src=x onerror=\"window.__xss='message'\"><script>window.__xss='msg'</script>");
  output_begin("<svg/onload=window.__xss='output'>.y", "f32", 2);
  rec_puts(" 1 2");
  rec_end();
#endif
#if defined(VARIANT_FAIL) || defined(VARIANT_XSS)
  return 1;
#else
  return 0;
#endif
#endif
}
