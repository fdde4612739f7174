/* The few hardware pieces the test firmware uses. */
#ifndef HWFARM_FIRMWARE_HW_H
#define HWFARM_FIRMWARE_HW_H

#include <stdint.h>

void uart_init(void);
void uart_putc(char c);
void uart_puts(const char* s);
void semihosting_exit(int status);

#endif
