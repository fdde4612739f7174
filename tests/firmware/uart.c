/* CMSDK APB UART0 of the MPS2 boards, transmit only. */
#include "hw.h"

#define UART0_BASE 0x40004000u
#define UART_DATA (*(volatile uint32_t*)(UART0_BASE + 0x00))
#define UART_STATE (*(volatile uint32_t*)(UART0_BASE + 0x04))
#define UART_CTRL (*(volatile uint32_t*)(UART0_BASE + 0x08))
#define UART_BAUDDIV (*(volatile uint32_t*)(UART0_BASE + 0x10))
#define STATE_TX_FULL 1u
#define CTRL_TX_EN 1u

void uart_init(void) {
  UART_BAUDDIV = 16; /* the smallest valid divider */
  UART_CTRL = CTRL_TX_EN;
}

void uart_putc(char c) {
  while (UART_STATE & STATE_TX_FULL) {
  }
  UART_DATA = (uint32_t)(unsigned char)c;
}

void uart_flush(void) {
  /* The UART holds the last byte until its line takes it (in QEMU: until
     the console's socket does); a reset before that loses it. */
  while (UART_STATE & STATE_TX_FULL) {
  }
}

void uart_puts(const char* s) {
  while (*s) uart_putc(*s++);
}

void uart_put_uint(uint32_t v) {
  char digits[11];
  int n = 0;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) uart_putc(digits[--n]);
}

void uart_put_int(int v) {
  if (v < 0) {
    uart_putc('-');
    uart_put_uint(0u - (uint32_t)v);
  } else {
    uart_put_uint((uint32_t)v);
  }
}
