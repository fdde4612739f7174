/* hwfarm test firmware. Speaks the result protocol (docs/protocol.md) on
   UART0. The variant is chosen at build time with -DVARIANT_<NAME>:
     PASS    two passing tests with outputs, exit 0
     FAIL    one test fails (firmware-reported), exit 1
     DRIFT   passes, but its outputs drift 1% from the reference
     HANG    begins, then never ends (a stuck board)
     GARBAGE prints non-protocol noise, then a valid run
     HEALTH  prints the health banner and exits 0 */
#include "hw.h"

static void put_uint(uint32_t v) {
  char digits[11];
  int n = 0;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) uart_putc(digits[--n]);
}

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
  put_uint(whole);
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

int main(void) {
  uart_init();
  uart_puts("hwfarm test firmware booting\n");
#if defined(VARIANT_HEALTH)
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
  uart_puts("HWFARM END\n");
  return 1;
#else
  uart_puts("HWFARM TEST ramp PASS\n");
  output_ramp();
  uart_puts("HWFARM END\n");
  return 0;
#endif
#endif
}
