/* hwfarm test firmware. Speaks the result protocol (docs/protocol.md) on
   UART0 through the emitter firmware authors get (firmware/hwfarm_report.h).
   The variant is chosen at build time with -DVARIANT_<NAME>:
     PASS     three passing tests with outputs, status 0 (protocol version 1)
     FAIL     one test fails (firmware-reported), status 1
     SLIGHT   passes; as a run's target (identity word 1) its square.y is
              perturbed a little (PCC about 0.995 against the reference)
     BAD      the same, perturbed a lot (PCC about 0.5)
     HANG     begins, then never ends (a stuck board)
     GARBAGE  prints non-protocol noise, then a valid run
     MANYOUTPUTS the pass run plus case wide with 30 i32 outputs y00 ... y29
     NOISE    prints non-protocol noise only, then loops: never a record
              (silent on the protocol by its own doing, on any console)
     CRCOK    the pass run, every record with its CRC-32 suffix (version 1)
     CRC      the same, but one record is corrupted after its CRC was taken
     LARGE    the pass run plus a 1000-value output in pieces of 100
     HEALTH   prints the health banner, status 0
     SEMIHOST tries to reach the host through semihosting (open, read and
              write host files, run host commands) and prints what it got,
              status 0
     LOCKUP   begins, then exits the old way, with a semihosting call: without
              semihosting that is a HardFault, and the core locks up
   Protocol version 2 and the ways a console can go wrong:
     V2       the pass run in version 2: CRCs on every record, END counts them
     V2COUNT  the same, but END counts one record more than were printed
     V2LOST   the fail run in version 2, the FAIL record's tag damaged on the
              wire (HWFARO): lost, and the count says so
     STAR     the fail run, the FAIL message ending in " *20003f00"
              (version 1, no CRCs)
     V2STAR   the same in version 2
     AFTEREND the pass run in version 2, then a FAIL record after END
     CUT      the pass run until ramp.y's last value, 37, of which only the
              3 is printed: the board dies inside the line (no END)
     CTRLEND  the pass run, a control byte (0x01) before its END record; it
              idles after END instead of resetting
     IDLE     the pass run, then idles after END instead of resetting (a
              simulator runs on until hwfarmd stops it)
     RESETMID the pass run until ramp's case, then a system reset before
              END (the simulator stops mid-run, by the firmware's doing)
     LONGLINE the pass run, with a FAIL record after 65,536 bytes of junk on
              one line
     LONGNAME the pass run plus a passing case and an output whose names
              are 250 bytes long, near the protocol's limit
     XSS      the pass run plus a failing case and an output whose names,
              message and console lines are HTML and script (the dashboard
              must show them as text: tests/dashboard)
     OFFBYONE passes; as a run's target its ramp.y (i32) is one more in
              every element (PCC 1.0 against the reference, but not equal)
     REFFAIL  passes as a run's target; on the reference simulator its ramp
              case fails
     REFONLY  the pass run; on the reference simulator it also prints boot.z
              (i32) before its first case, outside any TEST record
     MANYCASES 10,000 one-line cases and nothing else, case00000 to
              case09999: every tenth passes, the one after it is skipped,
              the other 8,000 fail with one word (a record that must stay
              bounded), status 1
   Every variant prints the board's identity word (hw.h) after its boot line.
   main's return value is the status of the `HWFARM END status=<n>` record
   that startup.c prints; it then resets the core, which stops a simulator
   (AFTEREND, CTRLEND and IDLE idle instead: the drain window sees
   AFTEREND's late record, and hwfarmd stops a board that idles). */
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

#if defined(VARIANT_V2) || defined(VARIANT_V2COUNT) || defined(VARIANT_V2LOST) || defined(VARIANT_V2STAR) || \
    defined(VARIANT_AFTEREND)
#define REPORT_MODE HWFARM_V2
#elif defined(VARIANT_CRC) || defined(VARIANT_CRCOK)
#define REPORT_MODE HWFARM_V1_CRC
#else
#define REPORT_MODE HWFARM_V1
#endif

hwfarm_report report;

/* The wire between the report and the UART. A variant that shows what a
   line can do to a record arms it: the next `from` byte arrives as `to`, or
   (`to` 0) the board dies before sending it. The report took its CRC over
   the byte it meant. */
static char wire_from, wire_to;
static int wire_armed;

static void wire(void* user, char c) {
  (void)user;
  if (wire_armed && c == wire_from) {
    wire_armed = 0;
    if (!wire_to)
      for (;;) __asm__ volatile("wfi");
    c = wire_to;
  }
  uart_putc(c);
}

__attribute__((unused)) static void damage_next(char from, char to) {
  wire_from = from;
  wire_to = to;
  wire_armed = 1;
}

/* A tiny "model": y[i] = x[i]^2 / 8 - 1 over x = 0..7, perturbed on a target. */
__attribute__((unused)) static void output_square(int target) {
  float delta = target ? TARGET_PERTURBATION : 0.0f;
  hwfarm_output_start(&report, "square", "y", HWFARM_F32, 8);
  for (int i = 0; i < 8; ++i) {
    float y = (float)(i * i) / 8.0f - 1.0f;
    if (delta != 0.0f) y += (i & 1) ? -delta : delta;
    hwfarm_value_f32(&report, y);
  }
}

__attribute__((unused)) static void output_ramp(int target) {
#if defined(VARIANT_OFFBYONE)
  int shift = target ? 1 : 0;
#else
  int shift = 0;
  (void)target;
#endif
  hwfarm_output_start(&report, "ramp", "y", HWFARM_I32, 4);
  for (int i = 0; i < 3; ++i) hwfarm_value_int(&report, i + shift);
#if defined(VARIANT_CRC)
  damage_next('3', '7'); /* one flipped bit (0x33 -> 0x37) */
#endif
#if defined(VARIANT_CUT)
  damage_next('7', 0); /* the board dies inside the line: "... 2 3" */
  hwfarm_value_int(&report, 37);
#else
  hwfarm_value_int(&report, 3 + shift);
#endif
}

/* Values that six fixed decimals would lose: a third, 0.1, 1e-7, the largest
   float, the smallest denormal, minus zero. */
__attribute__((unused)) static void output_precision(void) {
  static const float values[] = {1.0f / 3.0f,    -2.0f / 3.0f,    0.1f,           1e-7f,
                                 6.02214076e23f, 3.40282347e+38f, 1.40129846e-45f, -0.0f};
  hwfarm_output_f32(&report, "precision", "y", values, 8);
}

#if defined(VARIANT_LARGE)
/* large.y[i] = i / 7 for i = 0..999, as f32x in records of 100 values, each
   at its @offset. */
static void output_large(void) {
  report.values_per_record = 100;
  hwfarm_output_start(&report, "large", "y", HWFARM_F32X, 1000);
  for (int i = 0; i < 1000; ++i) hwfarm_value_f32(&report, (float)i / 7.0f);
}
#endif

/* The ramp case's verdict: passes, or fails with a message. */
__attribute__((unused)) static void test_ramp(int target) {
  (void)target;
#if defined(VARIANT_FAIL)
  hwfarm_test(&report, "ramp", HWFARM_FAIL, "expected 3 got 4");
#elif defined(VARIANT_V2LOST)
  damage_next('M', 'O'); /* HWFARM -> HWFARO: the record is lost */
  hwfarm_test(&report, "ramp", HWFARM_FAIL, "expected 3 got 4");
#elif defined(VARIANT_STAR) || defined(VARIANT_V2STAR)
  hwfarm_test(&report, "ramp", HWFARM_FAIL, "bad word at *20003f00");
#elif defined(VARIANT_REFFAIL)
  hwfarm_test(&report, "ramp", target ? HWFARM_PASS : HWFARM_FAIL, target ? 0 : "expected 3 got 4");
#else
  hwfarm_test(&report, "ramp", HWFARM_PASS, 0);
#endif
}

#if defined(VARIANT_MANYCASES)
static void many_cases(void) {
  char name[] = "case00000";
  for (int i = 0; i < 10000; ++i) {
    int n = i;
    for (int d = 8; d >= 4; --d) {
      name[d] = (char)('0' + n % 10);
      n /= 10;
    }
    hwfarm_verdict v = i % 10 == 0 ? HWFARM_PASS : i % 10 == 1 ? HWFARM_SKIP : HWFARM_FAIL;
    hwfarm_test(&report, name, v, v == HWFARM_FAIL ? "boom" : 0);
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

static void report_call(const char* what, int32_t result) {
  uart_puts("SEMIHOST ");
  uart_puts(what);
  uart_puts(" -> ");
  uart_put_int(result);
  uart_puts("\n");
}

static void probe_host(void) {
  static char buf[128];
  int32_t in = host_open(PROBE_DIR "/secret", 0);
  report_call("open " PROBE_DIR "/secret", in);
  if (in >= 0) {
    uint32_t block[3] = {(uint32_t)in, (uint32_t)buf, sizeof buf - 1};
    int32_t left = semihost(SYS_READ, block);
    report_call("read", left);
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
  report_call("open " PROBE_DIR "/written", out);
  if (out >= 0) {
    static const char text[] = "written by firmware\n";
    uint32_t block[3] = {(uint32_t)out, (uint32_t)text, sizeof text - 1};
    report_call("write", semihost(SYS_WRITE, block));
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
  hwfarm_init(&report, wire, 0, REPORT_MODE);
  uart_puts("hwfarm test firmware booting\n");
  uint32_t identity = board_identity();
  print_identity(identity);
#if defined(VARIANT_LOCKUP)
  hwfarm_begin(&report, "hwfarm-selftest");
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
#if defined(VARIANT_GARBAGE) || defined(VARIANT_NOISE)
  for (int i = 0; i < 64; ++i) uart_putc((char)(0x80 + (i * 37) % 120));
  uart_puts("\n\x01\x02 not a protocol line\n");
#endif
#if defined(VARIANT_NOISE)
  for (;;) {
  }
#endif
  hwfarm_begin(&report, "hwfarm-selftest");
#if defined(VARIANT_MANYCASES)
  many_cases();
  return hwfarm_failed(&report);
#endif
#if defined(VARIANT_LONGLINE)
  /* One line: 64 KiB of junk, then a record. */
  for (int i = 0; i < 65536; ++i) uart_putc('x');
  hwfarm_test(&report, "hidden", HWFARM_FAIL, 0);
#endif
#if defined(VARIANT_REFONLY)
  if (identity != HWFARM_IDENTITY_TARGET) {
    hwfarm_output_start(&report, "boot", "z", HWFARM_I32, 2);
    hwfarm_value_int(&report, 5);
    hwfarm_value_int(&report, 6);
  }
#endif
  hwfarm_test(&report, "square", HWFARM_PASS, 0);
  output_square(identity == HWFARM_IDENTITY_TARGET);
#if defined(VARIANT_HANG)
  for (;;) {
  }
#endif
#if defined(VARIANT_RESETMID)
  system_reset();
#endif
  test_ramp(identity == HWFARM_IDENTITY_TARGET);
  output_ramp(identity == HWFARM_IDENTITY_TARGET);
  hwfarm_test(&report, "precision", HWFARM_PASS, 0);
  output_precision();
#if defined(VARIANT_LARGE)
  hwfarm_test(&report, "large", HWFARM_PASS, 0);
  output_large();
#endif
#if defined(VARIANT_HUGE)
  /* huge.y[i] = i for i = 0..29999: a 120 KB .npy, ~280 KB of console. */
  hwfarm_test(&report, "huge", HWFARM_PASS, 0);
  report.values_per_record = 100;
  hwfarm_output_start(&report, "huge", "y", HWFARM_F32X, 30000);
  for (int i = 0; i < 30000; ++i) hwfarm_value_f32(&report, (float)i);
#endif
#if defined(VARIANT_MANYOUTPUTS)
  /* One case, 30 outputs: more than a run's record lists per case. */
  hwfarm_test(&report, "wide", HWFARM_PASS, 0);
  for (int k = 0; k < 30; ++k) {
    char name[] = "y00";
    name[1] = (char)('0' + k / 10);
    name[2] = (char)('0' + k % 10);
    hwfarm_output_start(&report, "wide", name, HWFARM_I32, 2);
    hwfarm_value_int(&report, k);
    hwfarm_value_int(&report, k + 1);
  }
#endif
#if defined(VARIANT_V2COUNT)
  report.records += 1; /* a miscount on purpose */
#endif
#if defined(VARIANT_LONGNAME)
  {
#define NAME10 "abcdefghij"
#define NAME50 NAME10 NAME10 NAME10 NAME10 NAME10
    static const float long_values[2] = {1.0f, 2.0f};
    hwfarm_test(&report, "case_" NAME50 NAME50 NAME50 NAME50 NAME10 NAME10 NAME10 NAME10 "abcde", HWFARM_PASS, 0);
    hwfarm_output_f32(&report, "case_" NAME50 NAME50 NAME50 NAME50 NAME10 NAME10 NAME10 NAME10 "abcde",
                      "out_" NAME50 NAME50 NAME50 NAME50 NAME10 NAME10 NAME10 NAME10 "abcdef", long_values, 2);
  }
#endif
#if defined(VARIANT_XSS)
  uart_puts("<script>window.__xss='trace'</script><img src=x onerror=\"window.__xss='trace-img'\">\n");
  hwfarm_test(&report, "<img/src=x/onerror=window.__xss='case'>", HWFARM_FAIL,
              "<img src=x onerror=\"window.__xss='message'\"><script>window.__xss='msg'</script>");
  {
    static const float xss_values[2] = {1.0f, 2.0f};
    hwfarm_output_f32(&report, "<svg/onload=window.__xss='output'>", "y", xss_values, 2);
  }
#endif
#if defined(VARIANT_CTRLEND)
  uart_putc('\x01'); /* a control byte before END, as after a break */
#endif
#if defined(VARIANT_AFTEREND)
  hwfarm_end(&report, 0);
  hwfarm_test(&report, "late", HWFARM_FAIL, "printed after END");
  for (;;) __asm__ volatile("wfi");
#endif
  return hwfarm_failed(&report);
#endif
}
