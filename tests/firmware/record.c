/* The record writer: bytes go to UART0 as they come, the CRC-32 follows
   them. */
#include "hw.h"

#if defined(VARIANT_CRC) || defined(VARIANT_CRCOK)
#define WITH_CRC 1
#else
#define WITH_CRC 0
#endif

static uint32_t crc;

/* CRC-32 (IEEE 802.3, zlib's crc32()), bit by bit: no table. */
static void crc_add(char c) {
  crc ^= (unsigned char)c;
  for (int k = 0; k < 8; ++k) crc = (crc & 1u) ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
}

void rec_begin(void) {
  crc = 0xFFFFFFFFu;
  rec_puts("HWFARM ");
}

void rec_putc_corrupted(char meant, char sent) {
  crc_add(meant);
  uart_putc(sent);
}

void rec_putc(char c) { rec_putc_corrupted(c, c); }

void rec_puts(const char* s) {
  while (*s) rec_putc(*s++);
}

void rec_put_int(int v) {
  char digits[12];
  int n = 0;
  uint32_t u = v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
  do {
    digits[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) rec_putc('-');
  while (n) rec_putc(digits[--n]);
}

void rec_put_f32(float f) {
  char text[16];
  format_f32(f, text);
  rec_puts(text);
}

void rec_put_f32x(float f) {
  char text[16];
  format_f32x(f, text);
  rec_puts(text);
}

void rec_end(void) {
  if (WITH_CRC) {
    char hex[9];
    format_hex32(~crc, hex);
    uart_puts(" *");
    uart_puts(hex);
  }
  uart_putc('\n');
}
