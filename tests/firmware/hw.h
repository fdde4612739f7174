/* The few hardware pieces the test firmware uses. */
#ifndef HWFARM_FIRMWARE_HW_H
#define HWFARM_FIRMWARE_HW_H

#include <stdint.h>

void uart_init(void);
void uart_putc(char c);
void uart_puts(const char* s);
void uart_put_uint(uint32_t v);
void uart_put_int(int v);
/* Prints `HWFARM END status=<status>` and idles forever. */
__attribute__((noreturn)) void firmware_end(int status);

#endif
